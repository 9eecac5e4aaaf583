package rollout

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"citizen/events"
)

func TestWorseCandidateRolledBackInFirstStep(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 1)
	worse := base
	worse.reward = 0.1
	h.train("v2", "v1", worse)
	h.serve(5000, h.ended)
	ds := h.decisions()
	if got := types(ds); !reflect.DeepEqual(got, []string{events.TypeRolloutStarted, events.TypeRolloutRolledBack}) {
		t.Fatalf("decisions %v, want started, rolled_back", got)
	}
	rb := ds[1]
	if rb.Step != 0 || rb.Weight != 0.05 || !strings.HasPrefix(rb.Reason, ReasonRegression) || rb.Actor != ActorController {
		t.Fatalf("rollback %+v", rb.RolloutChange)
	}
	ev := rb.Evidence
	if ev == nil || ev.Intervals["reward.hi"] >= 0 || ev.Counts["candidate"] < 20 || !strings.Contains(ev.Test, "sequential") {
		t.Fatalf("evidence %+v", ev)
	}
	total := h.served["v1"] + h.served["v2"]
	share := float64(h.served["v2"]) / float64(total)
	t.Logf("rolled back after %d requests, candidate served %d (%.1f%%); reward interval [%.3f, %.3f]",
		total, h.served["v2"], 100*share, ev.Intervals["reward.lo"], ev.Intervals["reward.hi"])
	if share > 0.05+0.02 { // sticky hashing: 5% in expectation; 2 points of sampling slack
		t.Fatalf("candidate served %.1f%% of traffic before its rollback, want about 5%%", 100*share)
	}
	// stable keeps serving everything afterwards
	if r := h.router.Rollout(); r.Stable != "v1" || r.Candidate != "" {
		t.Fatalf("router after rollback: %+v", r)
	}
	st := h.ctrl.Status()
	if st.Active != nil || st.Stable != "v1" || len(st.History) != 1 || st.History[0].Outcome != "rolled_back" {
		t.Fatalf("status %+v", st)
	}
}

func TestBetterCandidatePromotedAfterAllSteps(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 2)
	better := base
	better.reward = 0.75
	h.train("v2", "v1", better)
	h.serve(20000, h.ended)
	ds := h.decisions()
	want := []string{events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutAdvanced, events.TypeRolloutPromoted}
	if got := types(ds); !reflect.DeepEqual(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	for i, w := range []float64{0.05, 0.25, 0.5, 1} {
		if ds[i].Weight != w || ds[i].Step != i {
			t.Fatalf("decision %d: step %d weight %v, want step %d weight %v", i, ds[i].Step, ds[i].Weight, i, w)
		}
	}
	for _, d := range ds[1:] {
		if d.Evidence == nil || d.Evidence.Counts["candidate.step"] < 50 || d.Evidence.Counts["stable.step"] < 50 {
			t.Fatalf("%s without its step evidence: %+v", d.typ, d.Evidence)
		}
	}
	if !strings.HasPrefix(ds[3].Reason, ReasonWin) || ds[3].Evidence.Intervals["reward.lo"] <= 0 {
		t.Fatalf("promotion %+v evidence %+v", ds[3].RolloutChange, ds[3].Evidence)
	}
	if r := h.router.Rollout(); r.Stable != "v2" || r.Candidate != "" {
		t.Fatalf("router after promotion: %+v", r)
	}
	if st := h.ctrl.Status(); st.Stable != "v2" || st.Active != nil {
		t.Fatalf("status %+v", st)
	}
	vs := h.ctrl.Versions()
	if len(vs) != 1 || vs[0].Status != "stable" || vs[0].Parent != "v1" {
		t.Fatalf("versions %+v", vs)
	}
}

func TestGuardrailsRollBackAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*profile)
		inject bool // an anomaly for the candidate
		reason string
	}{
		{name: "answer length -40%", mutate: func(p *profile) { p.length *= 0.6 }, reason: ReasonGuardrail + ": answer_length"},
		{name: "tool-call spam", mutate: func(p *profile) { p.tools = 1; p.length *= 1 }, reason: ReasonGuardrail + ": tool_calls"},
		{name: "error rate", mutate: func(p *profile) { p.errRate = 0.7 }, reason: ReasonGuardrail + ": error_rate"},
		{name: "drop rate", mutate: func(p *profile) { p.dropRate = 0.7 }, reason: ReasonGuardrail + ": drop_rate"},
		{name: "latency x3", mutate: func(p *profile) { p.latency *= 3 }, reason: ReasonGuardrail + ": latency_ms"},
		{name: "anomaly", mutate: func(*profile) {}, inject: true, reason: ReasonAnomaly + ": length_drift"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Guardrails: Guardrails{ToolsAbs: 0.3}}
			h := newHarness(t, cfg, "v1", 3)
			cand := base
			cand.reward = 0.55 // slightly better: only the guardrail can stop it
			tc.mutate(&cand)
			h.train("v2", "v1", cand)
			if tc.inject {
				h.serve(30, nil)
				h.append(events.VersionStream("v1"), &events.AnomalyDetected{Kind: "length_drift", Version: "v1", Detector: "d1"}, "")
				h.catchUp()
				if h.ended() {
					t.Fatal("an anomaly of the stable version rolled the candidate back")
				}
				h.append(events.VersionStream("v2"), &events.AnomalyDetected{Kind: "length_drift", Version: "v2", Window: 50,
					Value: 0.5, Baseline: 1, Detector: "d1"}, "")
				h.catchUp() // no further traffic: at once
			} else {
				h.serve(5000, h.ended)
			}
			ds := h.decisions()
			last := ds[len(ds)-1]
			if last.typ != events.TypeRolloutRolledBack || last.Reason != tc.reason || last.Step != 0 {
				t.Fatalf("decisions %v, last %+v", types(ds), last.RolloutChange)
			}
			if last.Evidence == nil || last.Evidence.Detail == "" {
				t.Fatalf("no evidence on %+v", last.RolloutChange)
			}
			t.Logf("%s after %d requests: %s", last.Reason, h.n, last.Evidence.Detail)
		})
	}
}

func TestOneRolloutAtATimeAndWaiting(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 4)
	better := base
	better.reward = 0.8
	h.train("v2", "v1", better)
	h.train("v3", "v1", better) // arrives while v2 runs: waits
	h.append(events.VersionStream("v4"), &events.WeightsTrained{Version: "v4", Parent: "v1", Accepted: false, Reason: "offline gate"}, "")
	h.catchUp()
	st := h.ctrl.Status()
	if st.Active == nil || st.Active.Candidate != "v2" || !reflect.DeepEqual(st.Waiting, []string{"v3"}) {
		t.Fatalf("status %+v", st)
	}
	h.serve(20000, func() bool { s := h.ctrl.Status(); return s.Active != nil && s.Active.Candidate == "v3" })
	st = h.ctrl.Status()
	if st.Stable != "v2" || st.Active == nil || st.Active.Stable != "v2" || len(st.Waiting) != 0 {
		t.Fatalf("after v2: %+v", st)
	}
	status := map[string]string{}
	for _, v := range h.ctrl.Versions() {
		status[v.Version] = v.Status
	}
	if want := map[string]string{"v2": "stable", "v3": "canary", "v4": "rejected"}; !reflect.DeepEqual(status, want) {
		t.Fatalf("versions %v, want %v", status, want)
	}
}

func TestOperatorActions(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{}, "v1", 5)
	if _, err := Pause(ctx, h.store, ""); !errors.Is(err, ErrNoRollout) {
		t.Fatalf("pause without rollout: %v", err)
	}
	better := base
	better.reward = 0.8
	h.train("v2", "v1", better)
	h.catchUp()
	ev, err := Pause(ctx, h.store, "looking at it")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != events.TypeRolloutPaused || ev.Position == 0 {
		t.Fatalf("pause event %+v", ev)
	}
	if _, err := Pause(ctx, h.store, ""); !errors.Is(err, ErrPaused) {
		t.Fatalf("second pause: %v", err)
	}
	// paused: enough evidence for several steps, yet no step decision
	h.serve(3000, nil)
	ds := h.decisions()
	if got := types(ds); !reflect.DeepEqual(got, []string{events.TypeRolloutStarted, events.TypeRolloutPaused}) {
		t.Fatalf("while paused: %v", got)
	}
	if ds[1].Actor != ActorOperator || ds[1].Reason != "looking at it" || ds[1].Weight != 0.05 {
		t.Fatalf("paused event %+v", ds[1].RolloutChange)
	}
	if r := h.router.Rollout(); r.Candidate != "v2" || r.Weight != 0.05 {
		t.Fatalf("router while paused %+v", r)
	}
	if st := h.ctrl.Status(); st.Active == nil || !st.Active.Paused {
		t.Fatalf("status %+v", st)
	}
	if _, err := Resume(ctx, h.store, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := Resume(ctx, h.store, ""); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("second resume: %v", err)
	}
	h.catchUp() // the evidence is there: it advances at once
	ds = h.decisions()
	if ds[len(ds)-1].typ != events.TypeRolloutAdvanced || ds[len(ds)-2].typ != events.TypeRolloutResumed {
		t.Fatalf("after resume: %v", types(ds))
	}
	if _, err := Promote(ctx, h.store, "ship it"); err != nil {
		t.Fatal(err)
	}
	h.catchUp()
	if st := h.ctrl.Status(); st.Stable != "v2" || st.Active != nil || st.History[0].Actor != ActorOperator {
		t.Fatalf("after promote: %+v", st)
	}
	if r := h.router.Rollout(); r.Stable != "v2" || r.Candidate != "" {
		t.Fatalf("router after promote %+v", r)
	}
	// abort the next one
	h.train("v3", "v2", better)
	h.catchUp()
	if _, err := Abort(ctx, h.store, "bad vibes"); err != nil {
		t.Fatal(err)
	}
	h.catchUp()
	ds = h.decisions()
	last := ds[len(ds)-1]
	if last.typ != events.TypeRolloutRolledBack || last.Actor != ActorOperator || last.Reason != "bad vibes" || last.Candidate != "v3" || last.Stable != "v2" {
		t.Fatalf("abort: %+v", last.RolloutChange)
	}
	if r := h.router.Rollout(); r.Stable != "v2" || r.Candidate != "" {
		t.Fatalf("router after abort %+v", r)
	}
	if _, err := Abort(ctx, h.store, ""); !errors.Is(err, ErrNoRollout) {
		t.Fatalf("abort without rollout: %v", err)
	}
}

func TestReplayEqualsLive(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 6)
	better := base
	better.reward = 0.8
	h.train("v2", "v1", better)
	h.serve(20000, h.ended)
	worse := base
	worse.reward = 0.2
	h.train("v3", "v2", worse)
	h.train("v4", "v2", better)
	h.serve(5000, func() bool { s := h.ctrl.Status(); return s.Active != nil && s.Active.Candidate == "v4" })
	h.serve(300, nil)
	// evaluations revised after feedback (Seq 2) are part of the history
	for i := 1; i <= 5; i++ {
		h.append(events.InteractionStream("i0000001"), &events.InteractionEvaluated{InteractionID: "i0000001", Seq: 2,
			ModelVersion: "v2", Reward: -1, Outcome: "timeout", RubricVersion: "r", EvaluatorVersion: "e"}, "")
	}
	h.catchUp()
	if _, err := Pause(h.ctx, h.store, "x"); err != nil && !errors.Is(err, ErrNoRollout) {
		t.Fatal(err)
	}
	h.catchUp()

	replayed := NewState(h.ctrl.cfg)
	evs, err := h.store.ReadAll(h.ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := replayed.Apply(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	h.ctrl.mu.Lock()
	live := h.ctrl.st
	h.ctrl.mu.Unlock()
	if !reflect.DeepEqual(live, replayed) {
		t.Fatalf("replayed state differs from live:\nlive %+v\nreplayed %+v", live.Status(), replayed.Status())
	}
	if len(live.history) < 2 {
		t.Fatalf("scenario too short: history %+v", live.history)
	}
	// a restarted controller (Run's replay) rebuilds the same state and
	// decides nothing new
	c2, err := New(h.ctrl.cfg, h.store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	head, _ := h.store.LastPosition(h.ctx)
	if err := c2.replay(h.ctx, head); err != nil {
		t.Fatal(err)
	}
	if err := c2.step(h.ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := h.store.LastPosition(h.ctx); after != head {
		t.Fatalf("a restarted controller appended %d events", after-head)
	}
	if !reflect.DeepEqual(c2.st, replayed) {
		t.Fatal("restarted controller's state differs")
	}
}

// Two controllers that disagree (one tolerates the length change, the
// other does not) decide on the same state at once: exactly one decision
// lands at that revision; the loser sees it and carries on from there.
func TestRacingControllersOneDecision(t *testing.T) {
	for iter := 0; iter < 10; iter++ {
		// Holding off: the premise is that the lenient controller advances.
		h := newHarness(t, Config{MinPerArm: 20, HoldMargin: -1}, "v1", uint64(100+iter))
		cand := base
		cand.length *= 0.8
		h.train("v2", "v1", cand)
		h.catchUp()
		for i := 0; i < 1500; i++ {
			h.one()
		}
		strict, err := New(Config{Stable: "v1", MinPerArm: 20, HoldMargin: -1, Guardrails: Guardrails{LengthDrop: 0.05}}, h.store, nil)
		if err != nil {
			t.Fatal(err)
		}
		lenient := h.ctrl
		head, _ := h.store.LastPosition(h.ctx)
		for _, c := range []*Controller{strict, lenient} {
			if err := c.replay(h.ctx, head); err != nil {
				t.Fatal(err)
			}
		}
		// the premise: they disagree
		sd, ld := strict.st.decide(), lenient.st.decide()
		if sd == nil || ld == nil || sd.payload.EventType() != events.TypeRolloutRolledBack || ld.payload.EventType() != events.TypeRolloutAdvanced {
			t.Fatalf("iteration %d: the controllers do not disagree: strict %v, lenient %v", iter, sd, ld)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*Controller{strict, lenient} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = c.step(h.ctx) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		ds := h.decisions()
		if len(ds) != 2 || ds[1].ev.Revision != 1 {
			t.Fatalf("iteration %d: %d events after the race: %v", iter, len(ds), types(ds))
		}
		// both carry on from the winner's decision; the stream stays one
		// sequence with exactly one terminal event at its end
		for _, c := range []*Controller{strict, lenient} {
			if err := c.CatchUp(h.ctx); err != nil {
				t.Fatal(err)
			}
		}
		h.serve(1000, h.ended)
		for _, c := range []*Controller{strict, lenient} {
			if err := c.CatchUp(h.ctx); err != nil {
				t.Fatal(err)
			}
		}
		ds = h.decisions()
		terminal := 0
		for i, d := range ds {
			if d.ev.Revision != uint64(i) {
				t.Fatalf("revisions %v", ds)
			}
			if d.typ == events.TypeRolloutRolledBack || d.typ == events.TypeRolloutPromoted {
				terminal++
				if i != len(ds)-1 {
					t.Fatalf("a decision after the terminal one: %v", types(ds))
				}
			}
		}
		if terminal != 1 {
			t.Fatalf("iteration %d: %d terminal decisions: %v", iter, terminal, types(ds))
		}
		if !reflect.DeepEqual(strict.Status().History, lenient.Status().History) {
			t.Fatal("the controllers disagree about what happened")
		}
	}
}

// Run: the service loop follows the store live and decides.
func TestRunFollowsLive(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 7)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.ctrl.Run(ctx) }()

	started := make(chan events.Event, 1)
	go func() {
		_ = h.store.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeRolloutStarted}}, func(_ context.Context, ev events.Event) error {
			started <- ev
			return errors.New("done")
		})
	}()
	h.train("v2", "v1", base)
	select {
	case ev := <-started:
		if !strings.HasPrefix(ev.Stream, "rollout-") {
			t.Fatalf("started on %s", ev.Stream)
		}
	case err := <-done:
		t.Fatalf("Run returned %v", err)
	case <-ctx.Done():
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
}
