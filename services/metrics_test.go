package services

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// A serving citizen exposes its workers' lag, the relay's position and
// the distiller's cycles; the evaluator's age histogram counts the
// completion it graded.
func TestWorkerAndDistillerMetrics(t *testing.T) {
	reg := servingRegistry(t)
	find := func() map[string]*dto.MetricFamily {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf
		}
		return out
	}
	evaluated := func(mfs map[string]*dto.MetricFamily) uint64 {
		for _, m := range mfs["citizen_worker_event_age_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == "evaluator" {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
		return 0
	}
	deadline := time.Now().Add(30 * time.Second)
	mfs := find()
	for evaluated(mfs) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		mfs = find()
	}
	if evaluated(mfs) == 0 {
		t.Fatal("the evaluator's event age counts no handled event")
	}
	for _, name := range []string{"citizen_distill_cycles_total", "citizen_distill_last_cycle_accepted", "citizen_distill_training",
		"citizen_gateway_record_duration_seconds", "citizen_relay_unpublished_events", "citizen_worker_backlog_messages"} {
		if mfs[name] == nil {
			t.Errorf("%s is not exposed", name)
		}
	}
	if h := mfs["citizen_gateway_record_duration_seconds"].GetMetric(); len(h) != 1 || h[0].GetHistogram().GetSampleCount() == 0 {
		t.Errorf("the recorded completion's append is not timed: %v", h)
	}
}
