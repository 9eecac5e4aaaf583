package distill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/model"
)

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return nil
}

func newDistiller(t *testing.T, w *world, mut func(*Config)) *Distiller {
	t.Helper()
	tok, base := tinyBase(t)
	cm := newChat(tok, base)
	t.Cleanup(cm.Close)
	cfg := Config{DataDir: t.TempDir(), Base: base, Chat: cm, TeacherMaxTokens: 16,
		CorrectionTemplate: "The refund window is {correction}.",
		Hyper:              Hyper{Steps: 40, BatchSeqs: 8, Seed: 1},
		MinNewGraded:       8}
	if mut != nil {
		mut(&cfg)
	}
	d, err := New(cfg, w.store, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// catchUp applies everything in the store to d.
func catchUp(t *testing.T, d *Distiller, s events.Store) {
	t.Helper()
	evs, err := s.ReadAll(context.Background(), d.Projection().Position(), d.Projection().Filter(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := d.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
}

// refundLesson is a Config.Lesson for the test world: a promoted lesson
// covers its refund questions.
func refundLesson(_ context.Context, it *Interaction) (LessonRef, bool) {
	if it.Type() != "policy" || !strings.Contains(lastUser(it.Messages), "refund") {
		return LessonRef{}, false
	}
	return LessonRef{ID: "l-refund", Statement: "The refund window is 60 days.", Value: "60 days", TaskType: "policy"}, true
}

// stored reads back the weights.trained of version v.
func stored(t *testing.T, s events.Store, v string) events.WeightsTrained {
	t.Helper()
	evs, err := s.ReadStream(context.Background(), events.VersionStream(v), 0, events.Forward, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("version stream %s: %v (%d events)", v, err, len(evs))
	}
	p, err := events.Decode(&evs[0])
	if err != nil {
		t.Fatal(err)
	}
	return *p.(*events.WeightsTrained)
}

func TestCycleLearnsCorrectionWithoutRegressing(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 192, 0)
	// One interaction longer than the model's context: left out, not fatal.
	long := w.record(chatRec{typ: "policy", user: "long", answer: "x", prompt: make([]int, 200), completion: []int{5, 6}})
	w.evaluate(long, "policy", 1, 1, true)
	// Refund answers no customer corrected keep their good grades.
	for i := range 4 {
		id := w.recordQA(tok, base, "policy", fmt.Sprintf("what is the refund window for order %d?", 1000+i), "The refund window is 30 days.")
		w.evaluate(id, "policy", 1, 1, true)
	}
	d := newDistiller(t, w, func(c *Config) {
		c.Pipeline.HoldOutFraction = 0.3
		c.Lesson = refundLesson
	})
	catchUp(t, d, w.store)
	if !d.Due() {
		t.Fatal("192 new graded interactions and no cycle due")
	}
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycle: accepted=%v reason=%q eval=%v parent=%v kl=%.4f examples=%v hyper=%v", wt.Accepted, wt.Reason, wt.OfflineEval, wt.ParentEval, wt.KLToParent, wt.ExamplesPerType, wt.Hyper)
	if !wt.Accepted || wt.Artifact == nil {
		t.Fatalf("candidate rejected: %s", wt.Reason)
	}
	if got := stored(t, w.store, wt.Version); got.Version != wt.Version || got.Artifact.SHA256 != wt.Artifact.SHA256 || got.Parent != "base" ||
		got.WindowTo == 0 || len(got.ExamplesPerType) != 3 || got.Objective != "pg+sd+anchors+kl" {
		t.Fatalf("lineage %+v", got)
	}
	cand, err := LoadVersion(wt, d.cfg.DataDir, base.Config)
	if err != nil {
		t.Fatal(err)
	}
	user := "what is the refund window for order 999?"
	before := targetLogprob(t, tok, base, nil, user, "The refund window is 60 days.")
	after := targetLogprob(t, tok, base, cand, user, "The refund window is 60 days.")
	t.Logf("corrected answer mean logprob: base %.3f candidate %.3f", before, after)
	if after <= before+0.05 {
		t.Fatalf("corrected answer's logprob did not rise: %.3f -> %.3f", before, after)
	}
	for typ, p := range wt.ParentEval {
		if wt.OfflineEval[typ] < p-0.05 {
			t.Fatalf("type %s regressed: %.3f -> %.3f", typ, p, wt.OfflineEval[typ])
		}
	}
	ds, err := ReadDataset(filepath.Join(d.cfg.DataDir, "datasets", wt.Version))
	if err != nil {
		t.Fatal(err)
	}
	// The promoted lesson covers the refund questions: the four answers
	// that do not state its value are stale (not positive examples), the
	// cycle consolidates it, and its check travels with the version
	// (the rollout and retirement read it there).
	if !slices.Equal(ds.Manifest.Lessons, []string{"l-refund"}) || !slices.Equal(ds.Manifest.LessonTypes, []string{"policy"}) || ds.Manifest.Stats.Stale == 0 {
		t.Fatalf("manifest lessons %q types %q stats %+v", ds.Manifest.Lessons, ds.Manifest.LessonTypes, ds.Manifest.Stats)
	}
	got := stored(t, w.store, wt.Version).Lessons
	if len(got) != 1 || got[0].Lesson != "l-refund" || got[0].Asked == 0 || got[0].Parent != 0 {
		t.Fatalf("lesson check %+v (the base never states 60 days)", got)
	}
	t.Logf("lesson check: %+v", got[0])
	if ds.Manifest.Stats.TooLong != 1 || ids(ds.Train, "")[long] || ds.Manifest.KindCounts[KindRevised] == 0 {
		t.Fatalf("manifest stats %+v kinds %v", ds.Manifest.Stats, ds.Manifest.KindCounts)
	}
	st := d.Status()
	if st.State != "idle" || st.LastCycle == nil || st.LastCycle.Version != wt.Version || st.Cycles != 0 && st.Cycles != 1 {
		t.Fatalf("status %+v", st)
	}
}

// The offline gate rejects a candidate trained to be bad: a trainer that
// negates every policy example's reward and advantage (and trains on
// nothing else, policy gradient only) makes a candidate that regresses
// on the hold-out, and the regression suite, asked only of candidates
// the hold-out passed, is not asked of it.
func TestGateRejectsInvertedRewards(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 192, 0)
	suite := []SuiteCase{{Type: "policy", Messages: []events.ChatMessage{{Role: "user", Content: "when is support open?"}}, Expected: "9 to 5"}}
	anyAnswer := func(SuiteCase, string) (bool, bool) { return true, true }
	inverted := TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
		ds := *job.Dataset
		ds.Train = nil
		for _, ex := range job.Dataset.Train {
			if ex.Kind == KindPolicy {
				ex.Reward, ex.Advantage = -ex.Reward, -ex.Advantage
				ds.Train = append(ds.Train, ex)
			}
		}
		j := *job
		j.Dataset, j.Objective = &ds, Objective{PolicyGradient: true}
		return EmbeddedTrainer{}.Train(ctx, &j)
	})
	d := newDistiller(t, w, func(c *Config) {
		c.Pipeline.HoldOutFraction, c.Suite, c.SuiteGrade, c.Trainer = 0.3, suite, anyAnswer, inverted
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wt.Suite != nil {
		t.Fatalf("suite asked of a candidate the hold-out rejected: %+v", wt.Suite)
	}
	t.Logf("inverted: accepted=%v reason=%q eval=%v parent=%v kl=%.4f", wt.Accepted, wt.Reason, wt.OfflineEval, wt.ParentEval, wt.KLToParent)
	if wt.Accepted || !strings.HasPrefix(wt.Reason, "gate: ") || !strings.Contains(wt.Reason, "regressed") || wt.Artifact == nil {
		t.Fatalf("inverted-reward candidate: accepted=%v reason=%q artifact %v", wt.Accepted, wt.Reason, wt.Artifact)
	}
}

// failingCycle runs a cycle with the given trainer and checks that it is
// recorded as failed with a reason containing want; then the next cycle,
// with the embedded trainer, is recorded and accepted.
func failingCycle(t *testing.T, tr Trainer, timeout time.Duration, want string) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 48, 0)
	calls := 0
	d := newDistiller(t, w, func(c *Config) {
		c.TrainTimeout = timeout
		c.Trainer = TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
			calls++
			if calls == 1 {
				return tr.Train(ctx, job)
			}
			return EmbeddedTrainer{}.Train(ctx, job)
		})
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wt.Accepted || !strings.Contains(wt.Reason, want) {
		t.Fatalf("failing cycle: accepted=%v reason=%q (want %q)", wt.Accepted, wt.Reason, want)
	}
	if got := stored(t, w.store, wt.Version); got.Accepted || got.Reason != wt.Reason {
		t.Fatalf("recorded %+v", got)
	}
	d.cfg.TrainTimeout = time.Minute
	newWorldData(w, tok, base, 48, 48)
	catchUp(t, d, w.store)
	if !d.Due() {
		t.Fatal("no cycle due after a failed one")
	}
	next, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if next.Version == wt.Version || next.WindowFrom != wt.WindowTo || next.Artifact == nil {
		t.Fatalf("next cycle %+v after %+v", next, wt)
	}
	stored(t, w.store, next.Version)
}

func TestCycleFailsOnFailingTrainerCommand(t *testing.T) {
	failingCycle(t, &CommandTrainer{Command: []string{"sh", "-c", "echo out of memory >&2; exit 3"}}, time.Minute, "out of memory")
}

func TestCycleFailsOnHangingTrainerCommand(t *testing.T) {
	start := time.Now()
	failingCycle(t, &CommandTrainer{Command: []string{"sh", "-c", "sleep 60; sleep 60"}, Timeout: 300 * time.Millisecond}, time.Minute, "timed out")
	if time.Since(start) > 30*time.Second {
		t.Fatal("the hanging trainer was not killed")
	}
}

func TestCycleFailsOnCorruptAdapter(t *testing.T) {
	// The command writes a config and a safetensors file that is not one.
	script := `printf '{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj"]}' > "$CITIZEN_OUTPUT/adapter_config.json"; ` +
		`printf 'not safetensors' > "$CITIZEN_OUTPUT/adapter_model.safetensors"; test -s "$CITIZEN_DATASET/train.jsonl"`
	failingCycle(t, &CommandTrainer{Command: []string{"sh", "-c", script}}, time.Minute, "artifact")
}

func TestCycleFailsOnEmbeddedTrainerTimeout(t *testing.T) {
	slow := TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
		<-ctx.Done() // a trainer that never finishes on its own
		return TrainResult{}, ctx.Err()
	})
	failingCycle(t, slow, 200*time.Millisecond, "timed out")
}

func TestCycleFailsOnMissingPositions(t *testing.T) {
	tok, base := tinyBase(t)
	// The distiller's projection is fed events that are not in its store
	// (as if the store had been truncated or swapped).
	other := newWorld(t)
	newWorldData(other, tok, base, 48, 0)
	w := newWorld(t)
	d := newDistiller(t, w, nil)
	catchUp(t, d, other.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wt.Accepted || !strings.Contains(wt.Reason, "manifest") || !strings.Contains(wt.Reason, "missing store position") {
		t.Fatalf("accepted=%v reason=%q", wt.Accepted, wt.Reason)
	}
	stored(t, w.store, wt.Version)
}

func TestCycleFailsOnCorruptParentArtifact(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 48, 0)
	d := newDistiller(t, w, nil)
	catchUp(t, d, w.store)
	first, err := d.RunCycle(context.Background())
	if err != nil || first.Artifact == nil {
		t.Fatalf("%v %+v", err, first)
	}
	// Promote it, then corrupt its file: the next cycle cannot use it as
	// the parent and says so.
	w.append(events.RolloutStream("r1"), &events.RolloutPromoted{RolloutChange: events.RolloutChange{RolloutID: "r1", Candidate: first.Version, Stable: "base", Weight: 1}})
	if err := os.WriteFile(filepath.Join(ArtifactDir(d.cfg.DataDir, first.Artifact.Path), "adapter_model.safetensors"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	newWorldData(w, tok, base, 48, 48)
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if wt.Accepted || wt.Parent != first.Version || !strings.Contains(wt.Reason, "parent") || !strings.Contains(wt.Reason, "sha256") {
		t.Fatalf("accepted=%v parent=%s reason=%q", wt.Accepted, wt.Parent, wt.Reason)
	}
}

func TestRunFollowsStoreAndTrains(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 40, 0) // replayed at start
	d := newDistiller(t, w, func(c *Config) { c.MinNewGraded = 60; c.Hyper.Steps = 10 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trained := make(chan events.WeightsTrained, 4)
	go w.store.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeWeightsTrained}}, func(_ context.Context, ev events.Event) error {
		p, err := events.Decode(&ev)
		if err == nil {
			trained <- *p.(*events.WeightsTrained)
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	newWorldData(w, tok, base, 40, 40) // arrive live; crosses the threshold
	wt := <-trained
	if wt.Version != "d0001" || wt.Artifact == nil || wt.WindowTo == 0 {
		t.Fatalf("first cycle %+v", wt)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A restarted distiller replays the store and does not retrain the same window.
	d2 := newDistiller(t, w, nil)
	catchUp(t, d2, w.store)
	if n, win := d2.Projection().Cycles(); n != 1 || win != wt.WindowTo {
		t.Fatalf("replayed cycles %d window %d", n, win)
	}
	if st := d2.Status(); st.NewGraded != d2.Projection().NewGraded(wt.WindowTo) {
		t.Fatalf("status %+v", st)
	}
}

func TestCycleCancelledRecordsNothing(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 24, 0)
	ctx, cancel := context.WithCancel(context.Background())
	d := newDistiller(t, w, func(c *Config) {
		c.Trainer = TrainerFunc(func(tctx context.Context, job *TrainJob) (TrainResult, error) {
			cancel() // the process is shutting down mid-training
			<-tctx.Done()
			return TrainResult{}, tctx.Err()
		})
	})
	catchUp(t, d, w.store)
	before, _ := w.store.LastPosition(context.Background())
	if _, err := d.RunCycle(ctx); err == nil {
		t.Fatal("cancelled cycle returned no error")
	}
	if after, _ := w.store.LastPosition(context.Background()); after != before {
		t.Fatal("a cancelled cycle appended an event")
	}
	if st := d.Status(); st.State != "idle" {
		t.Fatalf("state %q", st.State)
	}
}

func TestDueByCountOrInterval(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	d := newDistiller(t, w, func(c *Config) {
		c.MinNewGraded, c.Interval = 10, time.Hour
		c.Now = func() time.Time { return now }
	})
	if d.Due() {
		t.Fatal("due with nothing graded")
	}
	newWorldData(w, tok, base, 4, 0) // 4 graded: below the count
	catchUp(t, d, w.store)
	if d.Due() {
		t.Fatal("due below the count before the interval")
	}
	now = now.Add(61 * time.Minute)
	if !d.Due() {
		t.Fatal("not due after the interval with new graded interactions")
	}
	now = now.Add(-61 * time.Minute)
	newWorldData(w, tok, base, 6, 4)
	catchUp(t, d, w.store)
	if !d.Due() {
		t.Fatal("not due at the count")
	}
	if st := d.Status(); st.NewGraded != 10 {
		t.Fatalf("status new graded %d", st.NewGraded)
	}
}

// TestRunStopsWhenShutdownCutsACycle: Run must return once its context is
// cancelled during a cycle, not start the still-due cycle again.
// (Regression: Run spun restarting the abandoned cycle until killed.)
func TestRunStopsWhenShutdownCutsACycle(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 40, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var started int
	d := newDistiller(t, w, func(c *Config) {
		c.MinNewGraded = 10
		c.Trainer = TrainerFunc(func(tctx context.Context, job *TrainJob) (TrainResult, error) {
			started++
			cancel() // shutdown arrives mid-training
			<-tctx.Done()
			return TrainResult{}, tctx.Err()
		})
	})
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Fatalf("training started %d times after shutdown", started)
	}
}

// The lesson check counts, per lesson, the answers that state its value,
// asked of its held-out stale questions: here one lesson's value is what
// the model says anyway and the other's something it never says, and the
// candidate is a zero adapter (the base's answers), as is the parent.
func TestLessonCheckCounts(t *testing.T) {
	_, base := tinyBase(t)
	w := newWorld(t)
	d := newDistiller(t, w, nil)
	msgs := []events.ChatMessage{{Role: "user", Content: oldWorld(2).user}}
	c, err := d.cfg.Chat.Complete(context.Background(), chatRequest(msgs, 24))
	if err != nil {
		t.Fatal(err)
	}
	said := c.Message.Content
	zero, err := model.NewAdapter("zero", base.Config, DefaultLoRA(), 1)
	if err != nil {
		t.Fatal(err)
	}
	right := LessonRef{ID: "l-said", Statement: "The answer is " + said, Value: said}
	never := LessonRef{ID: "l-never", Statement: "The answer is zebra quartz.", Value: "zebra quartz"}
	q := func(l LessonRef) StaleQuestion {
		return StaleQuestion{Example: Example{Type: "policy", Messages: msgs, Answer: events.ChatMessage{Role: "assistant", Content: "something else"}}, Lesson: l}
	}
	ds := &Dataset{Stale: []StaleQuestion{q(right), q(right), q(right), q(never), q(never)}}
	ds.noteLessons("policy", right.ID, never.ID)
	learn, ask := lessonSplit(ds.Stale)
	if len(learn) != 2 || len(ask[right.ID]) != 2 || len(ask[never.ID]) != 1 {
		t.Fatalf("split: learn %d, ask %d and %d; want the newest half of each lesson's asked", len(learn), len(ask[right.ID]), len(ask[never.ID]))
	}
	got, err := d.lessonCheck(context.Background(), zero, nil, ds, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("lesson check %+v; want both lessons", got)
	}
	want := []events.LessonCarry{
		{Lesson: never.ID, Asked: 1},
		{Lesson: right.ID, Asked: 2, Without: 2, With: got[1].With, Parent: 2},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lesson check %+v for the answer %q; want %+v", got, said, want)
	}
	if got[1].Learnt() || got[0].Learnt() {
		t.Fatal("a lesson the parent states as often counts as learnt")
	}
}

// A cycle whose data does not know a fact lesson promoted while it trains
// is abandoned before anything is recorded, and the next cycle runs the
// same window, longer, under the same version, consolidating the lesson.
// Without AbandonForLessons (the default) the cycle runs to its end.
func TestCycleAbandonedForALessonItsDataDoesNotKnow(t *testing.T) {
	for _, finish := range []bool{false, true} {
		t.Run(fmt.Sprintf("abandon=%v", !finish), func(t *testing.T) {
			tok, base := tinyBase(t)
			w := newWorld(t)
			for i := range 12 {
				id := w.recordQA(tok, base, "policy", fmt.Sprintf("I bought lamp %d %d days ago. What is the refund window?", i, 20+i), "The refund window is 30 days.")
				w.evaluate(id, "policy", 1, 1, true)
			}
			for i := range 8 {
				// Half right, half wrong: the first cycle has something to learn.
				id := w.recordQA(tok, base, "arithmetic", fmt.Sprintf("what is %d plus 1?", i), fmt.Sprintf("The answer is %d.", i+1-i%2))
				w.evaluate(id, "arithmetic", 1, float64(1-2*(i%2)), true)
			}
			started, release := make(chan struct{}), make(chan struct{})
			calls := 0
			trainer := TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
				calls++
				if calls == 1 {
					close(started)
					<-release
					if err := ctx.Err(); err != nil {
						return TrainResult{}, err
					}
				}
				return EmbeddedTrainer{}.Train(ctx, job)
			})
			var promoted atomic.Bool
			d := newDistiller(t, w, func(c *Config) {
				c.Trainer = trainer
				c.AbandonForLessons = !finish
				c.Lesson = func(ctx context.Context, it *Interaction) (LessonRef, bool) {
					if !promoted.Load() {
						return LessonRef{}, false
					}
					return refundLesson(ctx, it)
				}
			})
			catchUp(t, d, w.store)
			type result struct {
				wt  events.WeightsTrained
				err error
			}
			done := make(chan result, 1)
			go func() {
				wt, err := d.RunCycle(context.Background())
				done <- result{wt, err}
			}()
			<-started
			promoted.Store(true)
			ch := events.LessonChange{LessonID: "l-refund", Kind: events.LessonFact, Statement: "The refund window is 60 days.", Value: "60 days"}
			w.append(events.LessonStream("l-refund"), &events.LessonPromoted{LessonChange: ch})
			catchUp(t, d, w.store) // the promotion reaches the distiller while it trains
			close(release)
			first := <-done
			if finish {
				if first.err != nil || len(first.wt.Lessons) != 0 || first.wt.Artifact == nil {
					t.Fatalf("without AbandonForLessons: %+v, %v; want the cycle recorded without the lesson", first.wt, first.err)
				}
				return
			}
			if !errors.Is(first.err, ErrCycleAbandoned) {
				t.Fatalf("RunCycle: %+v, %v; want ErrCycleAbandoned", first.wt, first.err)
			}
			if n, _ := d.Projection().Cycles(); n != 0 {
				t.Fatalf("%d weights.trained recorded for the abandoned cycle", n)
			}
			if st := d.Status(); st.Abandoned != 1 || st.State != "idle" || !d.Due() {
				t.Fatalf("status %+v, due %v; want idle, one abandoned, the window still due", st, d.Due())
			}
			wt, err := d.RunCycle(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if wt.Version != first.wt.Version || wt.WindowFrom != first.wt.WindowFrom || wt.WindowTo <= first.wt.WindowTo ||
				len(wt.Lessons) != 1 || wt.Lessons[0].Lesson != "l-refund" || wt.Artifact == nil {
				t.Fatalf("the cycle after: %s window (%d, %d] lessons %+v trained %v; want %s over (%d, more] checking l-refund",
					wt.Version, wt.WindowFrom, wt.WindowTo, wt.Lessons, wt.Artifact != nil, first.wt.Version, first.wt.WindowFrom)
			}
		})
	}
}

func TestCycleFailsOnStalledTrainer(t *testing.T) {
	// One step is reported, then nothing: the cycle fails once the stall
	// bound passes, long before the training timeout, and the next cycle
	// trains.
	stuck := TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
		job.Progress(1, 10, 0)
		<-ctx.Done()
		return TrainResult{}, ctx.Err()
	})
	start := time.Now()
	wt := stallBoundCycle(t, stuck)
	if wt.Accepted || !strings.Contains(wt.Reason, "stalled: no step for 200ms (distill.stall_timeout)") {
		t.Fatalf("stalled cycle: accepted=%v reason=%q", wt.Accepted, wt.Reason)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("the stalled trainer ran %s", took)
	}
}

func TestCycleTrainsPastTheStallBoundWhileStepsCome(t *testing.T) {
	// Steps every 50ms for 600ms in all: longer than the stall bound
	// (200ms) but never 200ms without a step, so the cycle trains.
	slow := TrainerFunc(func(ctx context.Context, job *TrainJob) (TrainResult, error) {
		for i := 1; i <= 12; i++ {
			select {
			case <-ctx.Done():
				return TrainResult{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			job.Progress(i, 12, 0)
		}
		return EmbeddedTrainer{}.Train(ctx, job)
	})
	if wt := stallBoundCycle(t, slow); wt.Artifact == nil || strings.Contains(wt.Reason, "stalled") {
		t.Fatalf("slow but steady trainer: accepted=%v reason=%q", wt.Accepted, wt.Reason)
	}
}

// stallBoundCycle runs one cycle with the trainer tr under a stall bound
// of 200ms and a training timeout of an hour.
func stallBoundCycle(t *testing.T, tr Trainer) events.WeightsTrained {
	tok, base := tinyBase(t)
	w := newWorld(t)
	newWorldData(w, tok, base, 48, 0)
	d := newDistiller(t, w, func(c *Config) {
		c.TrainTimeout, c.StallTimeout, c.Trainer = time.Hour, 200*time.Millisecond, tr
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

func TestCompletionLogprobsStopsWhenCancelled(t *testing.T) {
	_, base := tinyBase(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	exs := []*Example{{PromptTokens: []int{1, 2}, CompletionTokens: []int{3}}}
	if _, _, err := completionLogprobs(ctx, base, nil, exs, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
