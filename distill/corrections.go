package distill

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"

	"citizen/events"
	"citizen/internal/parallel"
	"citizen/internal/statement"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
)

// teacherParallel is how many of a cycle's own completions (the
// teacher's revisions, lesson answers and checks) are decoded at once.
const teacherParallel = 16

// completeAll runs the requests teacherParallel at a time: the engine
// batches concurrent requests, and a greedy answer does not depend on its
// batch. errs[i] is request i's error; err is the context's.
func (d *Distiller) completeAll(ctx context.Context, reqs []chat.Request) (out []*chat.Completion, errs []error, err error) {
	out, errs = make([]*chat.Completion, len(reqs)), make([]error, len(reqs))
	err = parallel.Each(ctx, len(reqs), teacherParallel, func(ctx context.Context, i int) error {
		out[i], errs[i] = d.cfg.Chat.Complete(ctx, reqs[i])
		return nil
	})
	if err == nil {
		err = ctx.Err()
	}
	return out, errs, err
}

// maxCarried bounds the corrected examples carried into one cycle.
const maxCarried = 200

// carryCorrections adds to ds's training set the corrected (or hinted)
// examples recorded after the parent's data window and before this
// cycle's: a correction that no promoted version has learnt is still
// owed, and each cycle trains on top of the stable version from its own
// window only, so without this a correction counts once, in one
// candidate, and is lost when that candidate is not promoted. The most
// recent maxCarried are kept; examples already in ds are skipped; the
// pipeline's hold-out split is kept (held-out corrections stay out).
func (d *Distiller) carryCorrections(ctx context.Context, log *slog.Logger, ds *Dataset, parent string, from uint64) {
	var since uint64
	if parent != "" {
		vi, ok := d.proj.Version(parent)
		if !ok {
			return
		}
		since = vi.Trained.WindowTo
	}
	if since >= from {
		return
	}
	old, err := BuildDataset(ctx, d.proj.Snapshot(), since, from, d.pipeline(ctx))
	if err != nil {
		log.Info("no corrections carried", "from", since, "to", from, "err", err)
		return
	}
	have := map[string]bool{}
	for _, list := range [][]Example{ds.Train, ds.HoldOut} {
		for _, ex := range list {
			have[ex.Interaction] = true
		}
	}
	var carried []Example
	for _, ex := range old.Train {
		if (ex.Correction != "" || ex.Hint != "") && ex.Kind == KindPolicy && !have[ex.Interaction] {
			have[ex.Interaction] = true
			carried = append(carried, ex)
			if ex.Lesson != "" {
				ds.noteLessons(ex.Type, ex.Lesson)
			}
		}
	}
	sort.SliceStable(carried, func(i, j int) bool { return carried[i].Interaction > carried[j].Interaction })
	carried = carried[:min(len(carried), maxCarried)]
	ds.Train = append(ds.Train, carried...)
	ds.Manifest.Stats.Carried = len(carried)
}

// corrections renders corrections as target answers (in the hold-out,
// only those Config.Revise does not reject) and, with
// self-distillation on, asks the teacher (the parent with the correction
// or hint in its context) for revised answers: of at most limit corrected
// examples (limit <= 0: all), the newest first, taken round-robin over
// task types (toRevise), since the cycle's budget keeps no more.
func (d *Distiller) corrections(ctx context.Context, log *slog.Logger, ds *Dataset, parent *model.Adapter, limit int) error {
	cfg := d.cfg
	tok := cfg.Chat.Tok
	for h, list := range [][]Example{ds.Train, ds.HoldOut} {
		for i := range list {
			ex := &list[i]
			if ex.Correction == "" {
				continue
			}
			content := d.correctedAnswer(ex)
			if h == 1 && d.rejects(ex, content) {
				// The gate does not score a candidate on an answer a
				// check rejects.
				continue
			}
			if ids, err := answerTokens(tok, ex.Messages, content); err == nil && len(ex.PromptTokens)+len(ids) <= cfg.Pipeline.MaxSeqLen {
				ex.TargetTokens = ids
			}
		}
	}
	if !cfg.Objective.SelfDistill {
		return nil
	}
	adapter, remove, err := d.teacher(parent)
	if err != nil {
		return err
	}
	defer remove()
	var revised []Example
	kept, fallback, dropped := 0, 0, 0
	// A hint's revision is made where it is checked: Revise checks the
	// recorded answer (a check that applies to it applies to a revision
	// of the same shape).
	hints := func(ex *Example) bool {
		if cfg.UncheckedHints {
			return true
		}
		if cfg.Revise == nil {
			return false
		}
		_, checked := cfg.Revise(*ex, ex.Answer.Content)
		return checked
	}
	unchecked := 0
	for i := range ds.Train {
		if ex := &ds.Train[i]; ex.Kind == KindPolicy && ex.Correction == "" && ex.Hint != "" && !hints(ex) {
			unchecked++
		}
	}
	// The teacher's revisions are decoded together (completeAll), then
	// taken in order.
	todo := toRevise(ds.Train, limit, hints)
	reqs := make([]chat.Request, len(todo))
	withExemplars := make([]bool, len(todo))
	for i := range todo {
		ex := &todo[i]
		var exs []Exemplar
		if cfg.Exemplars != nil && ex.Correction == "" {
			// Exemplars help a teacher that has only a hint; a correction
			// says what is right, and exemplars from before a change
			// contradict it (the teacher copies them).
			var err error
			if exs, err = cfg.Exemplars(ctx, *ex); err != nil {
				log.Warn("exemplars", "interaction", ex.Interaction, "err", err)
			}
		}
		withExemplars[i] = len(exs) > 0
		reqs[i] = chat.Request{Messages: teacherMessages(ex, exs), MaxTokens: cfg.TeacherMaxTokens, Adapter: adapter}
	}
	answers, errs, err := d.completeAll(ctx, reqs)
	if err != nil {
		return err
	}
	// Exemplars made a prompt too long: those are asked again without.
	var again []int
	for i, err := range errs {
		if errors.Is(err, chat.ErrPromptTooLong) && withExemplars[i] {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		retry := make([]chat.Request, len(again))
		for k, i := range again {
			retry[k] = reqs[i]
			retry[k].Messages = teacherMessages(&todo[i], nil)
		}
		ra, re, err := d.completeAll(ctx, retry)
		if err != nil {
			return err
		}
		for k, i := range again {
			answers[i], errs[i] = ra[k], re[k]
		}
	}
	oneOffs := 0
	for i, ex := range todo {
		// A one-off correction (no promoted lesson's value: Example.Lesson)
		// is learnt at Objective.OneOffWeight, as a revision or a
		// fallback.
		oneOff := ex.Correction != "" && ex.Lesson == ""
		if oneOff {
			oneOffs++
		}
		weigh := func(r *Example, w float64) {
			if oneOff {
				w = cfg.Objective.OneOffWeight
			}
			// The objective multiplies by SelfDistillWeight.
			r.Weight = w / cfg.Objective.SelfDistillWeight
		}
		c, err := answers[i], errs[i]
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("teacher failed", "interaction", ex.Interaction, "err", err)
		}
		ok := err == nil && c.FinishReason == model.FinishStop
		if ok && ex.Correction != "" {
			ok = containsFold(c.Message.Content, ex.Correction)
		}
		if ok && cfg.Revise != nil {
			// A hint's revision must be checked; a correction's is
			// vetted where it can be.
			pass, checked := cfg.Revise(ex, c.Message.Content)
			ok = pass && (checked || ex.Correction != "" || cfg.UncheckedHints)
		}
		if ok && sameText(c.Message.Content, ex.Answer.Content) && len(c.Message.ToolCalls) == 0 {
			// The teacher repeated the answer that drew the feedback (a
			// vague hint taught it nothing): learning it would reinforce
			// the mistake.
			ok = false
		}
		r := ex
		r.Kind, r.Advantage, r.BehaviourLogprobs = KindRevised, 0, nil
		weigh(&r, cfg.Objective.SelfDistillWeight)
		if ok && len(ex.PromptTokens)+len(c.Tokens) > cfg.Pipeline.MaxSeqLen {
			ok = false
		}
		switch {
		case ok:
			r.Answer = fromTok(c.Message)
			r.CompletionTokens = c.IDs()
			kept++
		case cfg.Objective.CorrectionFallback && len(ex.TargetTokens) > 0:
			content := d.correctedAnswer(&ex)
			r.Answer = events.ChatMessage{Role: "assistant", Content: content}
			r.CompletionTokens = ex.TargetTokens
			weigh(&r, cfg.Objective.FallbackWeight)
			fallback++
		default:
			dropped++
			continue
		}
		revised = append(revised, r)
	}
	ds.Train = append(ds.Train, revised...)
	sd := ds.selfDistill()
	sd["revised"], sd["correction_fallback"], sd["dropped"], sd["hints_unchecked"], sd["one_off"] = kept, fallback, dropped, unchecked, oneOffs
	log.Info("self-distillation", "revised", kept, "correction_fallback", fallback, "dropped", dropped, "hints_unchecked", unchecked, "one_off", oneOffs)
	return nil
}

// teacher registers parent as the teacher's adapter: its name for
// chat.Request.Adapter ("": the base, parent nil) and remove, which
// unregisters it.
func (d *Distiller) teacher(parent *model.Adapter) (adapter string, remove func(), err error) {
	if parent == nil {
		return "", func() {}, nil
	}
	adapter = "distill-teacher-" + parent.Name
	if err := d.cfg.Chat.Engine.RegisterAdapter(adapter, parent); err != nil {
		return "", nil, err
	}
	return adapter, func() { d.cfg.Chat.Engine.RemoveAdapter(adapter) }, nil
}

// rejects reports whether Config.Revise checked answer, written for ex's
// question, and found it wrong.
func (d *Distiller) rejects(ex *Example, answer string) bool {
	if d.cfg.Revise == nil {
		return false
	}
	pass, checked := d.cfg.Revise(*ex, answer)
	return checked && !pass
}

// correctedAnswer renders ex's correction as an answer
// (CorrectionTemplate).
func (d *Distiller) correctedAnswer(ex *Example) string {
	return strings.ReplaceAll(d.cfg.CorrectionTemplate, "{correction}", ex.Correction)
}

// toRevise returns the recorded answers in train that drew a correction
// (or, with hints, a hint), at most limit of them (limit <= 0: all): the
// newest first (by the position of their interaction.recorded), taken
// round-robin over task types (roundRobin), so that no type's corrections
// crowd out another's and the newest (after a drift, the ones about the
// world as it is) are revised first.
func toRevise(train []Example, limit int, hints func(*Example) bool) []Example {
	var out []Example
	for i := range train {
		if ex := &train[i]; ex.Kind == KindPolicy && (ex.Correction != "" || ex.Hint != "" && hints(ex)) {
			out = append(out, *ex)
		}
	}
	newestFirst(out)
	if limit <= 0 || len(out) <= limit {
		return out
	}
	return roundRobin(out, limit)
}

// newestFirst sorts exs by recordedAt, newest first, keeping the order of
// equal ones.
func newestFirst(exs []Example) {
	sort.SliceStable(exs, func(i, j int) bool { return recordedAt(&exs[i]) > recordedAt(&exs[j]) })
}

// recordedAt is the store position of ex's first source (its
// interaction.recorded): its recency.
func recordedAt(ex *Example) uint64 {
	if len(ex.Sources) == 0 {
		return 0
	}
	return ex.Sources[0].Position
}

// teacherMessages is the teacher's context for revising ex: the feedback
// in a system note ("The correct answer is 9am."), the exemplars as
// earlier user/assistant turns, then the conversation.
func teacherMessages(ex *Example, exemplars []Exemplar) []tokenizer.Message {
	note := "Note: " + ex.Hint
	if ex.Correction != "" {
		note = "The correct answer is " + ex.Correction + "."
		if ex.Hint != "" {
			note += " Note: " + ex.Hint
		}
	}
	msgs := []tokenizer.Message{{Role: "system", Content: note}}
	for _, e := range exemplars {
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: e.Prompt}, tokenizer.Message{Role: "assistant", Content: e.Answer})
	}
	return append(msgs, toTok(ex.Messages)...)
}

// answerTokens renders content as the assistant's answer to msgs and
// returns the answer's token ids (what follows the generation prompt).
func answerTokens(tok chat.Format, msgs []events.ChatMessage, content string) ([]int, error) {
	tm := toTok(msgs)
	prompt, _, err := tok.RenderChat(tm, true)
	if err != nil {
		return nil, err
	}
	full, _, err := tok.RenderChat(append(tm, tokenizer.Message{Role: "assistant", Content: content}), false)
	if err != nil {
		return nil, err
	}
	if len(full) <= len(prompt) {
		return nil, errors.New("distill: empty rendered answer")
	}
	return full[len(prompt):], nil
}

func toTok(msgs []events.ChatMessage) []tokenizer.Message {
	out := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm := tokenizer.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		out[i] = tm
	}
	return out
}

func fromTok(m tokenizer.Message) events.ChatMessage {
	out := events.ChatMessage{Role: m.Role, Content: m.Content}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, events.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}

func sameText(a, b string) bool { return statement.Normalize(a) == statement.Normalize(b) }

func containsFold(s, sub string) bool {
	return strings.Contains(statement.Normalize(s), statement.Normalize(sub))
}
