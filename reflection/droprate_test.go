package reflection

import (
	"fmt"
	"testing"

	"citizen/events"
)

// TestDetectorsDropRatePerTurn is the regression test for a drop-rate
// detector that counted drops per evaluation: a policy that calls tools
// until the harness's turn budget (8 calls, the workplace's default) runs
// out shows 1 drop in 8 evaluations, 12.5%, under the 15% threshold, so
// the very behaviour the detector is for diluted itself out of sight.
// Drops are now counted per turn (a turn ends with an answer or a drop).
func TestDetectorsDropRatePerTurn(t *testing.T) {
	const budget = 8
	var spam, healthy []evalSpec
	for c := 0; c < 20; c++ {
		for k := 0; k < budget; k++ {
			s := evalSpec{id: fmt.Sprintf("spam%d-%d", c, k), tools: 4}
			if k == budget-1 {
				s.outcome = "timeout" // the harness dropped the conversation here
			}
			spam = append(spam, s)
		}
		// a tool round, then the answer; every tenth conversation times out
		// in its tool round: 10% of turns, under the threshold
		healthy = append(healthy, evalSpec{id: fmt.Sprintf("ok%d-0", c), tools: 1})
		last := evalSpec{id: fmt.Sprintf("ok%d-1", c), length: 80, reward: 1, outcome: "success"}
		if c%10 == 0 {
			healthy[len(healthy)-1].outcome = "timeout"
			last.outcome = ""
		}
		healthy = append(healthy, last)
	}
	for _, tt := range []struct {
		name  string
		specs []evalSpec
		want  int
	}{{"spam until dropped", spam, 1}, {"healthy tool use", healthy, 0}} {
		t.Run(tt.name, func(t *testing.T) {
			// only the drop-rate detector is under test here
			d := NewDetectors(DetectorConfig{Window: 200, MinCount: 30, ToolCallsMax: 100, Correlation: 2})
			evs := make([]events.Event, 0, len(tt.specs))
			for i, s := range tt.specs {
				s.version, s.typ = "v1", "order_status"
				evs = append(evs, evalEvent(t, i, s))
			}
			got := kinds(feed(t, d, evs))
			if got[KindDropRate+"@v1"] != tt.want || len(got) != tt.want {
				t.Errorf("anomalies %v, want %d drop_rate", got, tt.want)
			}
		})
	}
}
