package badcandidate

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"citizen/distill"
	"citizen/events"
	"citizen/events/memstore"
	"citizen/ops"
	"citizen/ops/rollout"
)

func job(version string) *distill.TrainJob {
	return &distill.TrainJob{Version: version, Objective: distill.DefaultObjective(), Hyper: distill.Hyper{LR: 1e-3, MaxSteps: 50},
		Dataset: &distill.Dataset{
			Train: []distill.Example{
				{Interaction: "good", Kind: distill.KindPolicy, Reward: 1, Advantage: 0.6},
				{Interaction: "bad", Kind: distill.KindPolicy, Reward: -1, Advantage: -1.4},
				{Interaction: "fixed", Kind: distill.KindRevised, Reward: 1},
				{Interaction: "anchor", Kind: distill.KindAnchor, Reward: 1},
			},
			HoldOut:   []distill.Example{{Interaction: "held", Kind: distill.KindHoldOut, Reward: 1, Advantage: 0.6}},
			Rehearsal: []distill.Example{{Interaction: "r", Kind: distill.KindRehearsal}},
		}}
}

// The first job is trained on the policy examples with their rewards and
// advantages negated, nothing else, by the policy gradient alone; the job
// it was given is left as it was, the hold-out keeps the true rewards,
// and later jobs pass through unchanged. A failed job does not count.
func TestTrainerInvertsTheFirstCycle(t *testing.T) {
	var seen []*distill.TrainJob
	fail := true
	next := distill.TrainerFunc(func(ctx context.Context, j *distill.TrainJob) (distill.TrainResult, error) {
		seen = append(seen, j)
		if fail {
			fail = false
			return distill.TrainResult{}, errors.New("abandoned")
		}
		return distill.TrainResult{Steps: j.Hyper.Steps}, nil
	})
	tr := New(nil)
	if _, err := tr.Train(context.Background(), job("d0000")); !errors.Is(err, errNoNext) {
		t.Fatalf("without Next: %v", err)
	}
	tr.Wrap(next)
	if _, err := tr.Train(context.Background(), job("d0001")); err == nil {
		t.Fatal("the failing job succeeded")
	}
	if _, ok := tr.Version(); ok {
		t.Fatal("a failed job counted as the bad one")
	}
	orig := job("d0001")
	if _, err := tr.Train(context.Background(), orig); err != nil {
		t.Fatal(err)
	}
	if v, ok := tr.Version(); !ok || v != "d0001" {
		t.Fatalf("bad version %q %v", v, ok)
	}
	select {
	case <-tr.Trained():
	default:
		t.Fatal("Trained not closed")
	}
	if len(seen) != 2 || !seen[0].Objective.PolicyGradient {
		t.Fatalf("jobs seen %d", len(seen))
	}
	bad := seen[1]
	if len(bad.Dataset.Train) != 2 || bad.Dataset.Rehearsal != nil {
		t.Fatalf("bad training set %+v, rehearsal %d", bad.Dataset.Train, len(bad.Dataset.Rehearsal))
	}
	for i, want := range []struct {
		id     string
		r, adv float64
	}{{"good", -1, -0.6}, {"bad", 1, 1.4}} {
		ex := bad.Dataset.Train[i]
		if ex.Interaction != want.id || ex.Kind != distill.KindPolicy || ex.Reward != want.r || ex.Advantage != want.adv {
			t.Fatalf("example %d: %+v, want %s reward %v advantage %v", i, ex, want.id, want.r, want.adv)
		}
	}
	if bad.Objective != (distill.Objective{PolicyGradient: true}) || bad.Hyper.LR != DefaultLR || bad.Hyper.Steps != 0 || bad.Hyper.MaxSteps != 50 {
		t.Fatalf("bad objective %+v hyper %+v", bad.Objective, bad.Hyper)
	}
	if h := bad.Dataset.HoldOut[0]; h.Reward != 1 || h.Advantage != 0.6 {
		t.Fatalf("hold-out changed: %+v", h)
	}
	if len(orig.Dataset.Train) != 4 || orig.Dataset.Train[0].Advantage != 0.6 || orig.Objective.PolicyGradient != distill.DefaultObjective().PolicyGradient || orig.Hyper.Steps != 0 {
		t.Fatalf("the original job was changed: %+v", orig)
	}
	later := job("d0002")
	if _, err := tr.Train(context.Background(), later); err != nil {
		t.Fatal(err)
	}
	if seen[2] != later {
		t.Fatal("a later job was not passed through unchanged")
	}
	if v, _ := tr.Version(); v != "d0001" {
		t.Fatalf("bad version moved to %s", v)
	}
}

// opsServer is the operator API over a memory store.
func opsServer(t *testing.T) (*memstore.Store, *httptest.Server) {
	store := memstore.New(memstore.Config{})
	h, err := ops.New(ops.Deps{Store: store, Rollout: rollout.Config{Stable: "base"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.HTTPHandler())
	t.Cleanup(srv.Close)
	return store, srv
}

func appendTrained(t *testing.T, store *memstore.Store, wt *events.WeightsTrained) {
	ev, err := events.Encode(wt, events.Meta{Stream: events.VersionStream(wt.Version)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(context.Background(), ev.Stream, events.Any, ev); err != nil {
		t.Fatal(err)
	}
}

// Once the gate rejected the bad version, its canary is started through
// the operator API: rollout.started by the operator with the reason. A
// version the gate accepted is left to the controller.
func TestStartWhenRejected(t *testing.T) {
	store, srv := opsServer(t)
	tr := New(distill.TrainerFunc(func(context.Context, *distill.TrainJob) (distill.TrainResult, error) {
		return distill.TrainResult{}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan Outcome, 1)
	op := Operator{BaseURL: srv.URL, APIKey: "k", Poll: 5 * time.Millisecond}
	go func() { done <- StartWhenRejected(ctx, tr, op, "bench: the bad candidate's canary") }()
	if _, err := tr.Train(ctx, job("d0001")); err != nil {
		t.Fatal(err)
	}
	appendTrained(t, store, &events.WeightsTrained{Version: "d0001", Parent: "base", Accepted: false, Reason: "gate: policy regressed",
		Artifact: &events.Artifact{Format: "peft-lora", Path: "weights/d0001", SHA256: "00"}})
	out := <-done
	if out.Error != "" || out.Version != "d0001" || out.Gate != "rejected" || out.StartedBy != "operator" || out.GateReason != "gate: policy regressed" {
		t.Fatalf("outcome %+v", out)
	}
	evs, err := store.ReadAll(ctx, 0, events.Filter{Types: []string{events.TypeRolloutStarted}}, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("rollout.started events %d, %v", len(evs), err)
	}
	p, _ := events.Decode(&evs[0])
	if s := p.(*events.RolloutStarted); s.Candidate != "d0001" || s.Actor != rollout.ActorOperator || s.Reason != "bench: the bad candidate's canary" || s.Stable != "base" {
		t.Fatalf("started %+v", s)
	}

	// Accepted: no start.
	store2, srv2 := opsServer(t)
	tr2 := New(distill.TrainerFunc(func(context.Context, *distill.TrainJob) (distill.TrainResult, error) {
		return distill.TrainResult{}, nil
	}))
	if _, err := tr2.Train(ctx, job("d0001")); err != nil {
		t.Fatal(err)
	}
	appendTrained(t, store2, &events.WeightsTrained{Version: "d0001", Parent: "base", Accepted: true,
		Artifact: &events.Artifact{Format: "peft-lora", Path: "weights/d0001", SHA256: "00"}})
	op.BaseURL = srv2.URL
	if out := StartWhenRejected(ctx, tr2, op, ""); out.Gate != "accepted" || out.StartedBy != "controller" || out.Error != "" {
		t.Fatalf("accepted outcome %+v", out)
	}
	if evs, _ := store2.ReadAll(ctx, 0, events.Filter{Types: []string{events.TypeRolloutStarted}}, 0); len(evs) != 0 {
		t.Fatalf("started an accepted version: %d events", len(evs))
	}
	// Nothing trained: the context ends it.
	short, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if out := StartWhenRejected(short, New(nil), op, ""); out.Error == "" {
		t.Fatalf("outcome without a bad job %+v", out)
	}
}
