package services

import (
	"context"

	"citizen/events"
	"citizen/events/bus"
	"citizen/gateway"
	"citizen/memory"
	"citizen/memory/lessons"
)

// initLessons runs the lesson learner (feedback.interpreted → lesson.*),
// its votes and lifecycle rebuilt from the store first.
func (a *App) initLessons(ctx context.Context) (Service, error) {
	log := a.logger("lessons")
	l := lessons.NewLearner(a.Config.Memory.Lessons, a.Store, a.lessonEmbedder(), log)
	pos, err := l.Rebuild(ctx, a.Store)
	if err != nil {
		return nil, err
	}
	log.Debug("lessons rebuilt from the store", "through", pos)
	topics := make([]string, len(lessons.Topics))
	for i, t := range lessons.Topics {
		topics[i] = bus.Topic(t)
	}
	return a.worker("lessons", bus.EventHandler{
		Name: "lessons", Topics: topics, Subscriber: a.Bus.Subscriber("lessons"), Store: a.Store, Handle: l.Handle,
	})
}

// lessonEmbedder embeds questions for the lessons' clusters. It is the
// unfitted hashed n-gram embedder, so every process (the learner's and
// each gateway's view) computes the same vectors without sharing state.
func (a *App) lessonEmbedder() memory.Embedder { return memory.NewHashEmbedder(a.Config.Memory.Dim) }

// lessonView builds the gateway's view of the promoted lessons; follow
// keeps it current from the store.
func (a *App) lessonView() (src gateway.LessonSource, follow func(context.Context) error) {
	if a.Config.Memory.Lessons.Off {
		return nil, nil
	}
	v := lessons.NewView(a.Config.Memory.Lessons, a.lessonEmbedder())
	a.Lessons = v
	return viewSource{v}, func(ctx context.Context) error { return v.Follow(ctx, a.Store) }
}

type viewSource struct{ v *lessons.View }

func (s viewSource) Applicable(ctx context.Context, q gateway.LessonQuery) ([]events.AppliedLesson, error) {
	return s.v.Applicable(ctx, lessons.Query{Tenant: q.Tenant, User: q.User, TaskType: q.TaskType, Question: q.Question})
}
