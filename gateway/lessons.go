package gateway

import (
	"context"
	"strings"

	"citizen/events"
)

// LessonSource says which lessons apply to a request (fast memory). The
// gateway places them in the context it sends the engine, the same way for
// every engine, and records which they were (interaction.recorded
// lessons).
type LessonSource interface {
	Applicable(ctx context.Context, q LessonQuery) ([]events.AppliedLesson, error)
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
