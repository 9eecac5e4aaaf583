package rollout

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"citizen/events"
)

// rejected appends a weights.trained the offline gate rejected, with
// weights unless noWeights.
func (h *harness) rejected(version, parent string, p profile, noWeights bool) {
	h.profiles[version] = p
	wt := &events.WeightsTrained{Version: version, Parent: parent, Accepted: false, Reason: "gate: policy regressed", Objective: "test"}
	if !noWeights {
		wt.Artifact = &events.Artifact{Format: "peft-lora", Path: "weights/" + version, SHA256: "00"}
	}
	h.append(events.VersionStream(version), wt, "")
}

// An operator starts the canary of a version the offline gate rejected:
// rollout.started by the operator with the reason; the controller holds it
// in its first step and rolls it back there on the evidence.
func TestOperatorStartsRejectedCandidate(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{}, "v1", 7)
	cfg := h.ctrl.cfg
	if _, err := Start(ctx, h.store, cfg, "v2", ""); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("start of an unknown version: %v", err)
	}
	worse := base
	worse.reward = 0.1
	h.rejected("v0", "v1", worse, true)
	h.rejected("v2", "v1", worse, false)
	h.catchUp()
	if d := h.decisions(); len(d) != 0 {
		t.Fatalf("the controller started a rejected candidate: %v", types(d))
	}
	if _, err := Start(ctx, h.store, cfg, "v0", ""); !errors.Is(err, ErrNotServable) {
		t.Fatalf("start of a version without weights: %v", err)
	}
	ev, err := Start(ctx, h.store, cfg, "v2", "show the rollback")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != events.TypeRolloutStarted || ev.Position == 0 {
		t.Fatalf("start event %+v", ev)
	}
	if _, err := Start(ctx, h.store, cfg, "v2", ""); !errors.Is(err, ErrRunning) {
		t.Fatalf("second start: %v", err)
	}
	h.serve(5000, h.ended)
	ds := h.decisions()
	if got := types(ds); !reflect.DeepEqual(got, []string{events.TypeRolloutStarted, events.TypeRolloutRolledBack}) {
		t.Fatalf("decisions %v, want started, rolled_back", got)
	}
	st := ds[0]
	if st.Actor != ActorOperator || st.Reason != "show the rollback" || st.Candidate != "v2" || st.Stable != "v1" || st.Step != 0 ||
		st.Weight != cfg.Steps[0] || st.Evidence == nil || st.Evidence.Detail != "weights.trained v2 rejected by the offline gate: gate: policy regressed" {
		t.Fatalf("started %+v evidence %+v", st.RolloutChange, st.Evidence)
	}
	if rb := ds[1]; rb.Actor != ActorController || rb.Step != 0 || rb.Candidate != "v2" {
		t.Fatalf("rollback %+v", rb.RolloutChange)
	}
	status := map[string]string{}
	for _, v := range h.ctrl.Versions() {
		status[v.Version] = v.Status
	}
	if want := map[string]string{"v0": "rejected", "v2": "rolled_back"}; !reflect.DeepEqual(status, want) {
		t.Fatalf("versions %v, want %v", status, want)
	}
	// Started again (a new rollout of the same version), and the stable
	// version itself cannot be a canary.
	if _, err := Start(ctx, h.store, cfg, "v2", "again"); err != nil {
		t.Fatalf("second rollout of v2: %v", err)
	}
	h.catchUp()
	if s := h.ctrl.Status(); s.Active == nil || s.Active.Candidate != "v2" || s.Active.RolloutID == ds[0].RolloutID {
		t.Fatalf("status after the second start %+v", s)
	}
}

// A good candidate the gate rejected is held in its first step on any
// evidence: it never advances on its own, and an operator may promote it.
func TestOperatorStartedRejectedCandidateHeld(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, Config{}, "v1", 8)
	better := base
	better.reward = 0.8
	h.rejected("v2", "v1", better, false)
	h.catchUp()
	if _, err := Start(ctx, h.store, h.ctrl.cfg, "v2", ""); err != nil {
		t.Fatal(err)
	}
	h.serve(3000, h.ended)
	for _, d := range h.decisions() {
		if d.typ == events.TypeRolloutAdvanced || d.typ == events.TypeRolloutPromoted {
			t.Fatalf("a rejected candidate left its first step: %v", types(h.decisions()))
		}
	}
	// 3,000 requests at 5%: about 150 candidate evaluations, three times
	// MinPerArm and fewer than MaxHold.
	s := h.ctrl.Status()
	if s.Active == nil || s.Active.Step != 0 || s.Active.Evidence.Counts["candidate"] < 2*h.ctrl.cfg.MinPerArm {
		t.Fatalf("status %+v; want v2 held in its first step with its evidence", s)
	}
	if _, err := Promote(ctx, h.store, "the operator decides"); err != nil {
		t.Fatal(err)
	}
	h.catchUp()
	if s := h.ctrl.Status(); s.Stable != "v2" {
		t.Fatalf("after promote %+v", s)
	}
}
