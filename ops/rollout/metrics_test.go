package rollout

import (
	"testing"

	"citizen/events"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetrics(t *testing.T) {
	h := newHarness(t, Config{}, "v1", 9)
	reg := prometheus.NewRegistry()
	if err := h.ctrl.Register(reg); err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) (float64, bool) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				m := mf.GetMetric()[0]
				if m.GetGauge() != nil {
					return m.GetGauge().GetValue(), true
				}
				return m.GetCounter().GetValue(), true
			}
		}
		return 0, false
	}
	if v, _ := gauge("citizen_rollout_active"); v != 0 {
		t.Fatalf("active %v before any rollout", v)
	}
	h.train("v2", "v1", base)
	h.serve(100, nil)
	for name, want := range map[string]float64{"citizen_rollout_active": 1, "citizen_rollout_weight": 0.05,
		"citizen_rollout_decisions_total": 1, "citizen_rollout_step": 0} {
		if v, ok := gauge(name); !ok || v != want {
			t.Fatalf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if ds := h.decisions(); len(ds) != 1 || ds[0].typ != events.TypeRolloutStarted {
		t.Fatalf("decisions %v", types(ds))
	}
}
