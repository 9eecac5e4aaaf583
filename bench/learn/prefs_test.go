package learn

import (
	"testing"

	"citizen/workplace"
)

// A segment's satisfaction is its feedback verdicts that are positive; it
// recovers at the first window end where the trailing 300 conversations
// reach the level before the drift, and other segments' verdicts and
// conversations without feedback do not count.
func TestPreferenceChecks(t *testing.T) {
	var recs []workplace.Record
	for i := range 1400 {
		r := workplace.Record{Index: i, Segment: "a"}
		if i%2 == 1 {
			r.Segment = "b" // always unhappy: must not count
		}
		pol := workplace.Positive
		switch {
		case r.Segment == "b":
			pol = workplace.Negative
		case i >= 500 && i < 800 && i%4 != 0: // after the drift: mostly unhappy until 800
			pol = workplace.Mixed
		}
		if i%3 != 2 {
			r.Feedback = &workplace.Feedback{Verdict: workplace.Verdict{Polarity: pol}}
		}
		recs = append(recs, r)
	}
	drift := workplace.Drift{{At: 500, Set: map[string]string{"segment.a.verbosity": "detailed"}}, {At: 1300, Set: map[string]string{"refund_days": "60"}}}
	pcs := preferenceChecks(drift, recs, 100)
	if len(pcs) != 1 {
		t.Fatalf("%d checks, want one (the policy drift is none)", len(pcs))
	}
	p := pcs[0]
	if p.Segment != "a" || p.Change != "verbosity=detailed" || p.Before.Rate != 1 || p.Before.Total != 100 || len(p.Windows) != 8 {
		t.Fatalf("check %+v", p)
	}
	if p.RecoveredAt != 1100 {
		t.Fatalf("recovered at %d, want 1100 (the first window end whose trailing 300 are all after 800)", p.RecoveredAt)
	}
}
