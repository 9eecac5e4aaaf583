package services

import (
	"context"

	"citizen/distill"
	"citizen/events"
	"citizen/events/bus"
	"citizen/gateway"
	"citizen/internal/modules"
	"citizen/internal/statement"
	"citizen/memory"
	"citizen/memory/lessons"
)

// initLessons runs the lesson learner (feedback.interpreted and
// interaction.evaluated → lesson.*), its votes, trials and lifecycle
// rebuilt from the store first.
func (a *App) initLessons(ctx context.Context) (modules.Service, error) {
	log := a.logger("lessons")
	l := lessons.NewLearner(a.Config.Memory.Lessons, a.Store, a.lessonEmbedder(), log)
	pos, err := l.Rebuild(ctx, a.Store)
	if err != nil {
		return nil, err
	}
	log.Debug("lessons rebuilt from the store", "through", pos)
	return a.worker("lessons", bus.EventHandler{
		Name: "lessons", Topics: topicsOf(lessons.Topics), Subscriber: a.Bus.Subscriber("lessons"), Store: a.Store, Handle: l.Handle,
	})
}

// lessonEmbedder embeds questions for the lessons' clusters. It is the
// unfitted hashed n-gram embedder, so every process (the learner's, each
// gateway's and reflection's view) computes the same vectors without
// sharing state.
func (a *App) lessonEmbedder() memory.Embedder { return memory.NewHashEmbedder(a.Config.Memory.Dim) }

// lessonView returns the process's view of the lessons (nil with fast
// memory off), creating it on first use: it replays and then follows the
// store's lesson.* events until ctx ends.
func (a *App) lessonView(ctx context.Context) *lessons.View {
	if a.Config.Memory.Lessons.Off {
		return nil
	}
	a.lessonsOnce.Do(func() {
		v := lessons.NewView(a.Config.Memory.Lessons, a.lessonEmbedder())
		a.Lessons = v
		go func() {
			if err := v.Follow(ctx, a.Store); err != nil && ctx.Err() == nil {
				a.logger("lessons").Error("the lessons view stopped following the store", "err", err)
			}
		}()
	})
	return a.Lessons
}

// lessonSource is the gateway's fast memory (nil when off).
func (a *App) lessonSource(ctx context.Context) gateway.LessonSource {
	if v := a.lessonView(ctx); v != nil {
		return viewSource{v}
	}
	return nil
}

type viewSource struct{ v *lessons.View }

func (s viewSource) Applicable(ctx context.Context, q gateway.LessonQuery) ([]events.AppliedLesson, error) {
	return s.v.Applicable(ctx, lessons.Query{Tenant: q.Tenant, User: q.User, TaskType: q.TaskType, Question: q.Question})
}

func (s viewSource) Revise(ctx context.Context, q gateway.LessonQuery, answer string) ([]events.AppliedLesson, error) {
	return s.v.Revise(ctx, lessons.Query{Tenant: q.Tenant, User: q.User, TaskType: q.TaskType, Question: q.Question}, answer)
}

// Reference is reflection's References: the value of the promoted fact
// lesson whose scope holds the interaction's question.
func (s viewSource) Reference(ctx context.Context, rec *events.InteractionRecorded) (string, string, bool) {
	typ := gateway.DeclaredType(rec.Metadata)
	if rec.TaskType != "" {
		typ = rec.TaskType
	}
	l, ok, err := s.v.Reference(ctx, lessons.Query{Tenant: rec.Tenant, User: rec.User, TaskType: typ, Question: lessons.Question(rec.Messages)}, lessons.Answer(rec))
	if err != nil || !ok {
		return "", "", false
	}
	return l.Value, l.LessonID, true
}

// distillLesson is the distiller's Lesson: the promoted fact lesson of
// the interaction's tenant that covers its question or its answer (the
// view's Reference, as reflection grades against it).
func distillLesson(v *lessons.View) func(context.Context, *distill.Interaction) (distill.LessonRef, bool) {
	return func(ctx context.Context, it *distill.Interaction) (distill.LessonRef, bool) {
		q := lessons.Query{Tenant: it.Tenant, TaskType: it.Type(), Question: lessons.Question(it.Messages)}
		if it.Eval != nil {
			q.User = it.Eval.User
		}
		l, ok, err := v.Reference(ctx, q, it.Answer.Content)
		if err != nil || !ok || l.Kind != events.LessonFact {
			return distill.LessonRef{}, false
		}
		return distill.LessonRef{ID: l.LessonID, Statement: l.Statement, Value: l.Value, TaskType: l.Scope.TaskType}, true
	}
}

// suiteAside is the distiller's SuiteAside: a suite question is set aside
// while a promoted fact lesson (of any tenant: the suite is the
// operator's) covers it and its expected answer does not state the
// lesson's value.
func suiteAside(v *lessons.View) func(context.Context, distill.SuiteCase) (string, bool) {
	return func(ctx context.Context, c distill.SuiteCase) (string, bool) {
		l, ok, err := v.Reference(ctx, lessons.Query{TaskType: c.Type, Question: lessons.Question(c.Messages)}, c.Expected)
		if err != nil || !ok {
			return "", false
		}
		if statement.Contains(statement.Normalize(c.Expected), statement.Normalize(l.Value)) {
			return "", false
		}
		return l.LessonID, true
	}
}
