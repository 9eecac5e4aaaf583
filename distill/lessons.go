package distill

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"citizen/events"
	"citizen/internal/statement"
	"citizen/model"
	"citizen/model/chat"
)

// LessonRef is a promoted fact lesson as the distiller sees it: what it
// says (Statement, placed in a context as the gateway places it), the
// value an answer in its scope states, and the task type it is scoped to.
type LessonRef struct {
	ID        string
	Statement string
	Value     string
	TaskType  string
}

// staleLesson returns the promoted fact lesson whose value it's answer
// does not state although the lesson covers it (Config.Lesson): an answer
// given before the lesson, or without it, that the lesson contradicts.
// Interactions with feedback of their own, and answers that call tools,
// are never stale: their feedback says what to learn.
func staleLesson(it *Interaction, lesson func(*Interaction) (LessonRef, bool)) (LessonRef, bool) {
	if lesson == nil || it.Correction != "" || it.Hint != "" || len(it.Answer.ToolCalls) > 0 {
		return LessonRef{}, false
	}
	l, ok := lesson(it)
	if !ok || l.Value == "" || states(it.Answer.Content, l.Value) {
		return LessonRef{}, false
	}
	return l, true
}

// states reports whether answer states value, number-bounded, case and
// spacing aside (internal/statement).
func states(answer, value string) bool {
	return statement.Contains(statement.Normalize(answer), statement.Normalize(value))
}

// maxLessonChecks bounds the stale questions the lesson check asks per
// lesson; the rest of a lesson's stale questions are consolidated.
const maxLessonChecks = 8

// lessonSplit divides the stale questions (Dataset.Stale, store order)
// per lesson into the older ones, which the cycle consolidates
// (consolidateStale), and the newest half (rounded up), at most
// maxLessonChecks, which the lesson check asks (lessonCheck): questions
// the candidate was not trained on. The split point never falls as
// questions arrive, so no version was trained on a question a later
// cycle's check asks.
func lessonSplit(stale []StaleQuestion) (learn []StaleQuestion, ask map[string][]StaleQuestion) {
	by := map[string][]StaleQuestion{}
	for _, q := range stale {
		by[q.Lesson.ID] = append(by[q.Lesson.ID], q)
	}
	ask = map[string][]StaleQuestion{}
	for _, id := range slices.Sorted(maps.Keys(by)) {
		qs := by[id]
		n := len(qs) - min(maxLessonChecks, len(qs)-len(qs)/2)
		learn = append(learn, qs[:n]...)
		ask[id] = qs[n:]
	}
	return learn, ask
}

// consolidate adds, for each training answer given with lessons in its
// context and graded good, the same answer as the target for the prompt
// without them: on-policy context distillation, the teacher being the
// policy that answered with the lessons (its sample is the recorded
// answer) and the student learning to answer so without them. The
// recorded example stays, with its context and behaviour logprobs.
// Counted in the manifest as self_distill consolidated.
func consolidate(log *slog.Logger, ds *Dataset, tok chat.Format, good float64, maxSeq int, sdWeight float64) {
	var add []Example
	for i := range ds.Train {
		ex := &ds.Train[i]
		if ex.Kind != KindPolicy || len(ex.Lessons) == 0 || ex.Reward < good || len(ex.CompletionTokens) == 0 {
			continue
		}
		prompt, _, err := tok.RenderChat(toTok(ex.Messages), true)
		if err != nil || maxSeq > 0 && len(prompt)+len(ex.CompletionTokens) > maxSeq {
			continue
		}
		r := *ex
		r.Kind, r.Advantage, r.BehaviourLogprobs, r.PromptTokens = KindRevised, 0, nil, prompt
		r.Weight = 1 / sdWeight // the objective multiplies by SelfDistillWeight
		add = append(add, r)
		// The context's lessons may be guidance of any type: only fact
		// lessons (stale questions, agreeing corrections) name the
		// types whose base data states what changed.
		ds.noteLessons("", ex.Lessons...)
	}
	if len(add) == 0 {
		return
	}
	ds.Train = append(ds.Train, add...)
	ds.selfDistill()["consolidated"] = len(add)
	log.Info("consolidation", "examples", len(add), "lessons", len(ds.Manifest.Lessons))
}

// consolidateStale distils the promoted lessons into the answers of the
// questions they cover that were answered without them (Dataset.Stale,
// the older part: lessonSplit): the teacher is the parent (nil: the base)
// with the lesson in its context, placed as the gateway places it, and
// its greedy answer, when it finished, states the lesson's value and
// Config.Revise does not reject it, is learnt for the prompt without the
// lesson (KindRevised). At most limit questions are asked, the newest
// first, round-robin over lessons.
func (d *Distiller) consolidateStale(ctx context.Context, log *slog.Logger, ds *Dataset, parent *model.Adapter, learn []StaleQuestion, limit int) error {
	cfg := d.cfg
	if len(learn) == 0 || limit <= 0 {
		return nil
	}
	adapter, remove, err := d.teacher(parent)
	if err != nil {
		return err
	}
	defer remove()
	qs := slices.Clone(learn)
	slices.Reverse(qs) // newest first
	qs = roundRobinBy(qs, limit, func(q StaleQuestion) string { return q.Lesson.ID })
	kept, rejected := 0, 0
	reqs := make([]chat.Request, len(qs))
	for i, q := range qs {
		applied := []events.AppliedLesson{{ID: q.Lesson.ID, Statement: q.Lesson.Statement}}
		reqs[i] = chat.Request{Messages: toTok(events.WithLessons(q.Messages, applied)), MaxTokens: cfg.TeacherMaxTokens, Adapter: adapter}
	}
	answers, errs, err := d.completeAll(ctx, reqs)
	if err != nil {
		return err
	}
	for i, q := range qs {
		c, err := answers[i], errs[i]
		if err != nil {
			log.Warn("lesson teacher failed", "interaction", q.Interaction, "err", err)
			rejected++
			continue
		}
		ok := c.FinishReason == model.FinishStop && len(c.Message.ToolCalls) == 0 && states(c.Message.Content, q.Lesson.Value) &&
			!d.rejects(&q.Example, c.Message.Content)
		if ok && cfg.Pipeline.MaxSeqLen > 0 && len(q.PromptTokens)+len(c.Tokens) > cfg.Pipeline.MaxSeqLen {
			ok = false
		}
		if !ok {
			rejected++
			continue
		}
		r := q.Example
		r.Kind, r.Advantage, r.BehaviourLogprobs = KindRevised, 0, nil
		r.Answer = fromTok(c.Message)
		r.CompletionTokens = c.IDs()
		r.Lesson = q.Lesson.ID
		r.Weight = 1 / cfg.Objective.SelfDistillWeight
		ds.Train = append(ds.Train, r)
		ds.noteLessons(q.Type, q.Lesson.ID)
		kept++
	}
	sd := ds.selfDistill()
	sd["lesson_answers"], sd["lesson_answers_rejected"] = kept, rejected
	log.Info("lesson consolidation", "stale", len(learn), "asked", len(qs), "learnt", kept, "rejected", rejected)
	return nil
}

// roundRobinBy takes at most n of exs, keeping their order within each
// key and taking one per key in turn (keys in order of first appearance).
func roundRobinBy[T any](exs []T, n int, key func(T) string) []T {
	if len(exs) <= n {
		return exs
	}
	by := map[string][]T{}
	var keys []string
	for _, x := range exs {
		k := key(x)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], x)
	}
	out := make([]T, 0, n)
	for len(out) < n {
		for _, k := range keys {
			if len(by[k]) > 0 && len(out) < n {
				out = append(out, by[k][0])
				by[k] = by[k][1:]
			}
		}
	}
	return out
}

// lessonCheck asks the candidate and its parent (nil: the base), greedily
// and without the lesson in the context, each lesson's held-out stale
// questions (lessonSplit), or, for a lesson without any, its anchors
// (Config.LessonOf: the questions it was taught on), at most
// maxLessonChecks; and the candidate once more with the lesson in the
// context. It counts the answers that state the lesson's value. The
// rollout reads it (a candidate that carries a lesson its running rival
// lacks supersedes it); the lessons module reads it once a version is
// promoted (retirement).
func (d *Distiller) lessonCheck(ctx context.Context, cand, parent *model.Adapter, ds *Dataset, ask map[string][]StaleQuestion) ([]events.LessonCarry, error) {
	cfg := d.cfg
	if cfg.Chat == nil || len(ds.Manifest.Lessons) == 0 {
		return nil, nil
	}
	name := "distill-lessons-" + cand.Name
	if err := cfg.Chat.Engine.RegisterAdapter(name, cand); err != nil {
		return nil, err
	}
	defer cfg.Chat.Engine.RemoveAdapter(name)
	parentName, remove, err := d.teacher(parent)
	if err != nil {
		return nil, err
	}
	defer remove()
	refs := map[string]LessonRef{}
	for _, q := range ds.Stale {
		refs[q.Lesson.ID] = q.Lesson
	}
	var out []events.LessonCarry
	for _, id := range ds.Manifest.Lessons {
		ref, known := refs[id]
		var questions [][]events.ChatMessage
		for _, q := range ask[id] {
			questions = append(questions, q.Messages)
		}
		if cfg.LessonOf != nil {
			st, value, anchors, ok := cfg.LessonOf(id)
			if ok && !known {
				ref, known = LessonRef{ID: id, Statement: st, Value: value}, true
			}
			for _, a := range anchors {
				if len(questions) >= maxLessonChecks {
					break
				}
				if len(ask[id]) == 0 {
					questions = append(questions, []events.ChatMessage{{Role: "user", Content: a}})
				}
			}
		}
		if !known || ref.Value == "" || len(questions) == 0 {
			continue
		}
		c := events.LessonCarry{Lesson: id}
		applied := []events.AppliedLesson{{ID: id, Statement: ref.Statement}}
		// Per question: the candidate without the lesson, with it, and
		// the parent without it.
		var reqs []chat.Request
		for _, msgs := range questions[:min(len(questions), maxLessonChecks)] {
			reqs = append(reqs,
				chat.Request{Messages: toTok(msgs), MaxTokens: cfg.TeacherMaxTokens, Adapter: name},
				chat.Request{Messages: toTok(events.WithLessons(msgs, applied)), MaxTokens: cfg.TeacherMaxTokens, Adapter: name},
				chat.Request{Messages: toTok(msgs), MaxTokens: cfg.TeacherMaxTokens, Adapter: parentName})
		}
		answers, errs, err := d.completeAll(ctx, reqs)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			return nil, err
		}
		stated := func(i int) int { return b2i(states(answers[i].Message.Content, ref.Value)) }
		for i := 0; i < len(reqs); i += 3 {
			c.Asked++
			c.Without += stated(i)
			c.With += stated(i + 1)
			c.Parent += stated(i + 2)
		}
		out = append(out, c)
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// noteLessons records in the manifest that the cycle consolidates the
// lessons ids, of task type typ.
func (ds *Dataset) noteLessons(typ string, ids ...string) {
	m := &ds.Manifest
	for _, id := range ids {
		if !slices.Contains(m.Lessons, id) {
			m.Lessons = append(m.Lessons, id)
		}
	}
	slices.Sort(m.Lessons)
	if typ != "" && !slices.Contains(m.LessonTypes, typ) {
		m.LessonTypes = append(m.LessonTypes, typ)
		slices.Sort(m.LessonTypes)
	}
}

// selfDistill returns the manifest's self-distillation counts, made when
// absent.
func (ds *Dataset) selfDistill() map[string]int {
	if ds.Manifest.SelfDistill == nil {
		ds.Manifest.SelfDistill = map[string]int{}
	}
	return ds.Manifest.SelfDistill
}
