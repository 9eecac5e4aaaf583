package gateway

import (
	"context"
	"slices"
	"strings"

	"citizen/events"
)

// LessonSource says which lessons apply to a request (fast memory). The
// gateway places them in the context it sends the engine, the same way for
// every engine, and records which they were (interaction.recorded
// lessons).
type LessonSource interface {
	Applicable(ctx context.Context, q LessonQuery) ([]events.AppliedLesson, error)
	// Revise returns the lessons an answer to q shows apply (the answer
	// states what they correct); the gateway then answers again with them
	// in the context. Non-streaming requests only: a streamed answer is
	// already sent.
	Revise(ctx context.Context, q LessonQuery, answer string) ([]events.AppliedLesson, error)
}

// LessonQuery is what a request offers to find its lessons.
type LessonQuery struct {
	Tenant   string
	User     string
	TaskType string // declared; empty when the request names none
	Question string // the last user message
}

// placeLessons asks Deps.Lessons for the request's lessons and, if there
// are any, puts them in the context the engine gets; the client's
// messages are kept for the record. A failing source costs the request its
// lessons, never its answer.
func (r *request) placeLessons(ctx context.Context) {
	src := r.s.deps.Lessons
	if src == nil {
		return
	}
	g := &r.dec.Gen
	q := LessonQuery{Tenant: r.key.Tenant, User: g.User, TaskType: DeclaredType(r.dec.Metadata), Question: lastUserMessage(g.Messages)}
	if q.Question == "" {
		return
	}
	ls, err := src.Applicable(ctx, q)
	if err != nil {
		r.s.log.Warn("lessons unavailable; answering without them", "interaction", r.iid, "err", err)
		return
	}
	if len(ls) == 0 {
		return
	}
	r.lessons = ls
	r.clientMessages = g.Messages
	g.Messages = withLessons(g.Messages, ls)
	r.s.metrics.lessonsPlaced.Add(float64(len(ls)))
}

// reviseWithLessons asks Deps.Lessons whether res's answer shows lessons
// apply that were not in its context; if so it answers again with them
// and returns that result (res when nothing applies or the second answer
// fails).
func (r *request) reviseWithLessons(ctx context.Context, res *Result) *Result {
	src := r.s.deps.Lessons
	if src == nil || len(res.Choices) == 0 {
		return res
	}
	g := &r.dec.Gen
	q := LessonQuery{Tenant: r.key.Tenant, User: g.User, TaskType: DeclaredType(r.dec.Metadata), Question: lastUserMessage(g.Messages)}
	ls, err := src.Revise(ctx, q, res.Choices[0].Content)
	if err != nil {
		r.s.log.Warn("lessons unavailable; the answer stands", "interaction", r.iid, "err", err)
		return res
	}
	var add []events.AppliedLesson
	for _, l := range ls {
		if !slices.ContainsFunc(r.lessons, func(x events.AppliedLesson) bool { return x.ID == l.ID }) {
			add = append(add, l)
		}
	}
	if len(add) == 0 {
		return res
	}
	client := g.Messages
	if r.lessons != nil {
		client = r.clientMessages
	}
	all := append(slices.Clone(r.lessons), add...)
	g.Messages = withLessons(client, all)
	again, err := r.s.engine.Generate(ctx, g, nil)
	if err != nil || r.check(again) != nil {
		g.Messages = withLessonsOrClient(client, r.lessons)
		return res
	}
	r.lessons, r.clientMessages = all, client
	r.s.metrics.lessonsPlaced.Add(float64(len(add)))
	r.s.metrics.lessonRevisions.Inc()
	return again
}

func withLessonsOrClient(client []Message, ls []events.AppliedLesson) []Message {
	if len(ls) == 0 {
		return client
	}
	return withLessons(client, ls)
}

func lastUserMessage(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return strings.TrimSpace(msgs[i].Content)
		}
	}
	return ""
}

// withLessons is events.WithLessons on the engine's message type: the
// lessons block appended to a leading system message, or a new leading
// system message. msgs is not modified.
func withLessons(msgs []Message, ls []events.AppliedLesson) []Message {
	block := events.LessonsBlock(ls)
	out := make([]Message, 0, len(msgs)+1)
	if len(msgs) > 0 && msgs[0].Role == "system" {
		first := msgs[0]
		first.Content = first.Content + "\n\n" + block
		out = append(out, first)
		return append(out, msgs[1:]...)
	}
	out = append(out, Message{Role: "system", Content: block})
	return append(out, msgs...)
}
