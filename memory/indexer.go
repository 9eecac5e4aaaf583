package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"citizen/events"
)

// StreamReader is the part of events.Store the indexer reads.
type StreamReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error)
}

// InteractionsCollection is the collection the indexer fills.
const InteractionsCollection = "interactions"

// Indexer keeps the interactions collection in step with the event store:
// for each interaction.recorded, interaction.evaluated or
// feedback.interpreted it folds the interaction's stream into its latest
// state and upserts one point (id PointID(interaction id)) whose vector
// embeds the prompt and answer and whose payload carries tenant, type,
// version, reward, feedback polarity, the correction and the time.
// Handling is idempotent: the same stream gives the same point.
type Indexer struct {
	ix       Index
	emb      Embedder
	store    StreamReader
	mu       sync.Mutex
	lag      time.Duration
	failures *FailureLog
	// folded caches, per stream, the view folded through a revision and
	// its vector, so a later event of the stream reads only the events
	// after that revision and is not embedded again (the vector depends
	// only on the recorded prompt and answer). Bounded by maxFolded.
	folded map[string]*foldedStream
}

type foldedStream struct {
	through uint64 // revision of the last event folded
	view    InteractionView
	vec     []float32
}

// maxFolded bounds the indexer's per-stream cache.
const maxFolded = 50000

// NewIndexer ensures the collection exists and returns the indexer. fl,
// if not nil, receives every low-reward interaction for failure mining.
func NewIndexer(ctx context.Context, ix Index, emb Embedder, store StreamReader, fl *FailureLog) (*Indexer, error) {
	if err := ix.EnsureCollection(ctx, InteractionsCollection, InteractionSchema(emb.Dim())); err != nil {
		return nil, err
	}
	return &Indexer{ix: ix, emb: emb, store: store, failures: fl, folded: map[string]*foldedStream{}}, nil
}

// Lag is the age of the last event handled when it was handled (the
// indexer's lag metric).
func (in *Indexer) Lag() time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lag
}

// InteractionView is the indexer's fold of one interaction's stream.
type InteractionView struct {
	ID, Tenant, Type, LabelSource, Version string
	Prompt, Answer                         string
	Time                                   time.Time
	Reward                                 *float64
	Polarity                               *float64
	Correction, Hint                       string
	Aspects                                []string
	// Deleted: an interaction.deleted withdrew it; it has no point.
	Deleted bool
}

// IndexedTypes are the event types the indexer folds: what the memory
// worker subscribes to.
var IndexedTypes = []string{events.TypeInteractionRecorded, events.TypeInteractionEvaluated, events.TypeFeedbackInterpreted,
	events.TypeInteractionDeleted}

// Text is what gets embedded: the last user turn and the answer.
func (v InteractionView) Text() string { return v.Prompt + "\n" + v.Answer }

// Fold reads an interaction stream into its latest view.
func Fold(evs []events.Event) (InteractionView, error) {
	var v InteractionView
	if err := foldInto(&v, evs); err != nil {
		return v, err
	}
	if v.ID == "" {
		return v, errors.New("memory: stream has no interaction.recorded")
	}
	return v, nil
}

// recordedView is what the fold reads of an interaction.recorded: its
// token ids, logprobs, tools and parameters are skipped (events.DecodeView).
type recordedView struct {
	InteractionID string            `json:"interaction_id"`
	Tenant        string            `json:"tenant"`
	TaskType      string            `json:"task_type"`
	ModelVersion  string            `json:"model_version"`
	Messages      []recordedMessage `json:"messages"`
	Choices       []recordedChoice  `json:"choices"`
}

type recordedMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type recordedChoice struct {
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
}

// foldInto applies evs, the next events of a stream in order, to v.
func foldInto(v *InteractionView, evs []events.Event) error {
	for i := range evs {
		if evs[i].Type == events.TypeInteractionRecorded {
			var x recordedView
			if err := events.DecodeView(&evs[i], &x); err != nil {
				return err
			}
			v.ID, v.Tenant, v.Version, v.Time = x.InteractionID, x.Tenant, x.ModelVersion, evs[i].Time
			v.Type, v.LabelSource = x.TaskType, "given"
			if v.Type == "" {
				v.Type, v.LabelSource = Unknown, "none"
			}
			for _, m := range x.Messages {
				if m.Role == "user" {
					v.Prompt = m.Content
				}
			}
			if len(x.Choices) > 0 {
				v.Answer = x.Choices[0].Message.Content
			}
			continue
		}
		p, err := events.Decode(&evs[i])
		if err != nil {
			return err
		}
		switch x := p.(type) {
		case *events.InteractionEvaluated:
			r := x.Reward
			v.Reward = &r
			if v.LabelSource != "given" && x.TaskType != "" {
				v.Type, v.LabelSource = x.TaskType, "inferred"
			}
		case *events.FeedbackInterpreted:
			pol := x.Polarity
			v.Polarity = &pol
			if x.Correction != "" && !x.Uncertain { // an uncertain correction is recorded, never used
				v.Correction = x.Correction
			}
			if x.Hint != "" && !x.Uncertain {
				v.Hint = x.Hint
			}
			v.Aspects = append(v.Aspects, x.Aspects...)
		case *events.InteractionDeleted:
			v.Deleted = true
		}
	}
	return nil
}

// Handle is a bus.HandlerFunc; it derives no events. It folds the
// interaction's stream through the event (reading only what its cache has
// not folded yet) and upserts the point; an event already folded (a
// redelivery) changes nothing.
func (in *Indexer) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	if !slices.Contains(IndexedTypes, ev.Type) {
		return nil, nil
	}
	in.mu.Lock()
	c := in.folded[ev.Stream]
	in.mu.Unlock()
	if c != nil && c.through >= ev.Revision {
		return nil, nil
	}
	var from uint64
	var view InteractionView
	var vec []float32
	if c != nil {
		from, view, vec = c.through+1, c.view, c.vec
		view.Aspects = slices.Clone(view.Aspects)
	}
	var evs []events.Event
	if ev.Revision == from && (c != nil || ev.Type == events.TypeInteractionRecorded) {
		// ev is the next event of the fold (the recording that opens its
		// stream, or the event after the cached view): no need to read
		// the stream for it. A later event is folded when it is handled.
		evs = []events.Event{ev}
	} else {
		var err error
		if evs, err = in.store.ReadStream(ctx, ev.Stream, from, events.Forward, 10000); err != nil {
			return nil, fmt.Errorf("memory: indexer reading %s: %w", ev.Stream, err)
		}
	}
	if len(evs) == 0 {
		return nil, nil
	}
	if err := foldInto(&view, evs); err != nil {
		return nil, err
	}
	if view.ID == "" {
		return nil, errors.New("memory: stream has no interaction.recorded")
	}
	if view.Deleted {
		// Withdrawn: its point goes, and later events of the stream
		// (an evaluation, feedback) find the cached view deleted.
		if err := in.ix.Delete(ctx, InteractionsCollection, []string{PointID(view.ID)}); err != nil {
			return nil, err
		}
		in.mu.Lock()
		in.folded[ev.Stream] = &foldedStream{through: evs[len(evs)-1].Revision, view: view}
		in.mu.Unlock()
		return nil, nil
	}
	if vec == nil {
		vecs, err := in.emb.Embed(ctx, []string{view.Text()})
		if err != nil {
			return nil, err
		}
		vec = vecs[0]
	}
	if err := in.index(ctx, view, vec); err != nil {
		return nil, err
	}
	in.mu.Lock()
	if len(in.folded) >= maxFolded {
		for k := range in.folded { // drop an arbitrary tenth
			delete(in.folded, k)
			if len(in.folded) < maxFolded*9/10 {
				break
			}
		}
	}
	in.folded[ev.Stream] = &foldedStream{through: evs[len(evs)-1].Revision, view: view, vec: vec}
	in.lag = time.Since(ev.Time)
	in.mu.Unlock()
	return nil, nil
}

// Index upserts the point of one interaction view.
func (in *Indexer) Index(ctx context.Context, v InteractionView) error {
	vecs, err := in.emb.Embed(ctx, []string{v.Text()})
	if err != nil {
		return err
	}
	return in.index(ctx, v, vecs[0])
}

func (in *Indexer) index(ctx context.Context, v InteractionView, vec []float32) error {
	pl := Payload{
		"tenant": v.Tenant, "type": v.Type, "version": v.Version, "label_source": v.LabelSource,
		"time": float64(v.Time.Unix()), "_interaction": v.ID, "_prompt": truncateText(v.Prompt, 2000),
		"_answer": truncateText(v.Answer, 2000),
	}
	if v.Reward != nil && !math.IsNaN(*v.Reward) {
		pl["reward"] = *v.Reward
	}
	if v.Polarity != nil {
		pl["polarity"] = *v.Polarity
	}
	if v.Correction != "" {
		pl["_correction"] = truncateText(v.Correction, 2000)
	}
	if v.Hint != "" {
		pl["_hint"] = truncateText(v.Hint, 2000)
	}
	if len(v.Aspects) > 0 {
		pl["_aspects"] = strings.Join(v.Aspects, ",")
	}
	if err := in.ix.Upsert(ctx, InteractionsCollection, []Point{{ID: PointID(v.ID), Vector: vec, Payload: pl}}); err != nil {
		return err
	}
	if in.failures != nil && v.Reward != nil {
		in.failures.Observe(v, vec)
	}
	return nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

// AllReader is the part of events.Store Rebuild reads.
type AllReader interface {
	ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error)
}

// Rebuild indexes every interaction with an event after position after
// (0: every interaction in the store), folding each one's whole stream as
// the live indexer would, and returns how many it indexed and the last
// position read. The embedded index lives in memory (and in a snapshot
// under the data directory that reflects the store up to some position),
// so services calls this at start: the event store, not the index, is the
// system of record.
func (in *Indexer) Rebuild(ctx context.Context, store AllReader, after uint64) (int, uint64, error) {
	f := events.Filter{Types: IndexedTypes}
	seen := map[string]bool{}
	var order []string
	pos := after
	for {
		batch, err := store.ReadAll(ctx, pos, f, 4096)
		if err != nil {
			return 0, pos, err
		}
		if len(batch) == 0 {
			break
		}
		for _, ev := range batch {
			if !seen[ev.Stream] {
				seen[ev.Stream] = true
				order = append(order, ev.Stream)
			}
		}
		pos = batch[len(batch)-1].Position
	}
	n := 0
	for _, s := range order {
		evs, err := in.store.ReadStream(ctx, s, 0, events.Forward, 10000)
		if err != nil {
			return n, pos, err
		}
		v, err := Fold(evs)
		if err != nil {
			continue // a stream without its interaction.recorded is not indexable
		}
		if v.Deleted {
			// A snapshot taken before the deletion may hold its point.
			if err := in.ix.Delete(ctx, InteractionsCollection, []string{PointID(v.ID)}); err != nil {
				return n, pos, err
			}
			continue
		}
		if err := in.Index(ctx, v); err != nil {
			return n, pos, err
		}
		n++
	}
	return n, pos, nil
}
