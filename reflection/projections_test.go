package reflection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"citizen/events"
)

type evalSpec struct {
	id            string
	seq           int
	version, typ  string
	length, tools int
	turnTools     int // tool calls of the turn before this evaluation
	reward        float64
	outcome       string
	faults        []events.Fault
	behaviour     string
	polarity      *float64
}

func evalEvent(t testing.TB, n int, s evalSpec) events.Event {
	t.Helper()
	if s.seq == 0 {
		s.seq = 1
	}
	if s.behaviour == "" {
		s.behaviour = BehaviourAnswer
	}
	x := &events.InteractionEvaluated{InteractionID: s.id, Seq: s.seq, TaskType: s.typ, TypeSource: "given", ModelVersion: s.version,
		Graders: []events.GraderResult{{Name: "answer", Version: "numeric-1", Score: (s.reward + 1) / 2, Weight: 1},
			{Name: behaviourGrader, Version: "behaviour-1", Label: s.behaviour}},
		Faults: s.faults, Outcome: s.outcome, Reward: s.reward, Trainable: len(s.faults) == 0, FeedbackPolarity: s.polarity,
		RubricVersion: "r", EvaluatorVersion: EvaluatorVersion, AnswerLength: s.length, ToolCalls: s.tools, TurnToolCalls: s.turnTools}
	ev, err := events.Encode(x, events.Meta{Stream: events.InteractionStream(s.id), ID: events.DeterministicID(s.id, fmt.Sprint(s.seq)),
		Time: time.Date(2026, 11, 30, 0, 0, n, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func feed(t *testing.T, d *Detectors, evs []events.Event) []events.AnomalyDetected {
	t.Helper()
	var out []events.AnomalyDetected
	for _, ev := range evs {
		as, err := d.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			if a.Type != events.TypeAnomalyDetected || a.CausationID != ev.ID.String() {
				t.Fatalf("envelope %+v", a)
			}
			p, err := events.Decode(&a)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *p.(*events.AnomalyDetected))
		}
	}
	return out
}

func kinds(as []events.AnomalyDetected) map[string]int {
	m := map[string]int{}
	for _, a := range as {
		m[a.Kind+"@"+a.Version]++
	}
	return m
}

func TestDetectorsLengthDrift(t *testing.T) {
	d := NewDetectors(DetectorConfig{Window: 50, MinCount: 20, Stable: "v1"})
	rng := rand.New(rand.NewPCG(1, 2))
	var evs []events.Event
	for i := 0; i < 60; i++ {
		evs = append(evs, evalEvent(t, i, evalSpec{id: fmt.Sprintf("s%d", i), version: "v1", typ: "qa", length: 90 + rng.IntN(20), reward: rng.Float64()*2 - 1}))
	}
	for i := 0; i < 60; i++ {
		evs = append(evs, evalEvent(t, 100+i, evalSpec{id: fmt.Sprintf("c%d", i), version: "v2", typ: "qa", length: 250 + rng.IntN(20), reward: rng.Float64()*2 - 1}))
	}
	got := kinds(feed(t, d, evs))
	if got["length_drift@v2"] != 1 || len(got) != 1 {
		t.Errorf("anomalies %v, want one length_drift on v2", got)
	}
	// a candidate like the stable one trips nothing
	d2 := NewDetectors(DetectorConfig{Window: 50, MinCount: 20, Stable: "v1"})
	var same []events.Event
	for i := 0; i < 60; i++ {
		same = append(same, evs[i])
		same = append(same, evalEvent(t, 200+i, evalSpec{id: fmt.Sprintf("d%d", i), version: "v3", typ: "qa", length: 90 + rng.IntN(20), reward: rng.Float64()*2 - 1}))
	}
	if got := kinds(feed(t, d2, same)); len(got) != 0 {
		t.Errorf("anomalies on a look-alike: %v", got)
	}
}

func TestDetectorsAbsolute(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []struct {
		kind string
		spec func(i int) evalSpec
	}{
		{KindRewardLengthCorr, func(i int) evalSpec {
			l := 50 + rng.IntN(500)
			return evalSpec{length: l, reward: float64(l)/600 - 0.5 + rng.Float64()*0.1}
		}},
		{KindRewardToolCorr, func(i int) evalSpec {
			n := rng.IntN(3)
			return evalSpec{length: 100, turnTools: n, reward: float64(n)/2 - 0.5 + rng.Float64()*0.1}
		}},
		{KindToolCallSpam, func(i int) evalSpec { return evalSpec{length: 100, tools: 4 + i%3, reward: rng.Float64()} }},
		{KindInvalidToolCalls, func(i int) evalSpec {
			s := evalSpec{length: 100, reward: rng.Float64()}
			if i%3 == 0 {
				s.faults = []events.Fault{{Kind: "invalid_tool_args", Attribution: "model"}}
			}
			return s
		}},
		{KindDropRate, func(i int) evalSpec {
			s := evalSpec{length: 100, reward: rng.Float64()}
			if i%4 == 0 {
				s.outcome = "timeout"
			}
			return s
		}},
		{KindRefusalRate, func(i int) evalSpec {
			s := evalSpec{length: 100, reward: rng.Float64()}
			if i%2 == 0 {
				s.behaviour = BehaviourRefusal
			}
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			d := NewDetectors(DetectorConfig{Window: 60, MinCount: 40})
			var evs []events.Event
			for i := 0; i < 80; i++ {
				s := tt.spec(i)
				s.id, s.version, s.typ = fmt.Sprintf("%s%d", tt.kind, i), "v1", "qa"
				evs = append(evs, evalEvent(t, i, s))
			}
			as := feed(t, d, evs)
			got := kinds(as)
			if got[tt.kind+"@v1"] != 1 || len(got) != 1 {
				t.Errorf("anomalies %v, want one %s", got, tt.kind)
			}
			if len(as) > 0 && (as[0].Window < 40 || as[0].Detector != DetectorVersion || len(as[0].Evidence) == 0) {
				t.Errorf("anomaly %+v", as[0])
			}
		})
	}
}

func TestDetectorsReplayRolloutAndRearm(t *testing.T) {
	var evs []events.Event
	for i := 0; i < 40; i++ {
		evs = append(evs, evalEvent(t, i, evalSpec{id: fmt.Sprintf("a%d", i), version: "v1", typ: "qa", length: 100, tools: 5}))
	}
	// the spam clears, then comes back: one more anomaly
	for i := 0; i < 40; i++ {
		evs = append(evs, evalEvent(t, 100+i, evalSpec{id: fmt.Sprintf("b%d", i), version: "v1", typ: "qa", length: 100, tools: 0}))
	}
	for i := 0; i < 40; i++ {
		evs = append(evs, evalEvent(t, 200+i, evalSpec{id: fmt.Sprintf("c%d", i), version: "v1", typ: "qa", length: 100, tools: 6}))
	}
	run := func() []byte {
		d := NewDetectors(DetectorConfig{Window: 30, MinCount: 30})
		var all []events.Event
		for _, ev := range evs {
			as, err := d.Handle(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, as...)
			// redelivery is ignored
			if again, _ := d.Handle(context.Background(), ev); len(again) != 0 {
				t.Fatal("redelivered event produced anomalies")
			}
		}
		if len(all) != 2 {
			t.Errorf("%d anomalies, want 2 (trip, clear, trip again)", len(all))
		}
		b, _ := json.Marshal(all)
		return b
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Error("replay gives different anomalies")
	}
	// rollout events set the stable version
	d := NewDetectors(DetectorConfig{})
	st, _ := events.Encode(&events.RolloutStarted{RolloutChange: events.RolloutChange{RolloutID: "r", Candidate: "v2", Stable: "v1"}}, events.Meta{Stream: "rollout-r"})
	d.Handle(context.Background(), st)
	if d.Stable() != "v1" {
		t.Errorf("stable %q", d.Stable())
	}
	pr, _ := events.Encode(&events.RolloutPromoted{RolloutChange: events.RolloutChange{RolloutID: "r", Candidate: "v2", Stable: "v1"}}, events.Meta{Stream: "rollout-r"})
	d.Handle(context.Background(), pr)
	if d.Stable() != "v2" {
		t.Errorf("stable %q after promotion", d.Stable())
	}
}

func TestScoreboardNumbersAndReplay(t *testing.T) {
	var evs []events.Event
	add := func(s evalSpec) { evs = append(evs, evalEvent(t, len(evs), s)) }
	add(evalSpec{id: "1", version: "v1", typ: "a", reward: 1})
	add(evalSpec{id: "2", version: "v1", typ: "a", reward: 0, outcome: "timeout", faults: []events.Fault{{Kind: "timeout", Attribution: "model"}}})
	add(evalSpec{id: "3", version: "v1", typ: "a", reward: 0.5, faults: []events.Fault{{Kind: "tool_error", Attribution: "environment"}}})
	add(evalSpec{id: "4", version: "v2", typ: "a", reward: -1})
	// a later evaluation of 1 supersedes it; an older one arriving late does not
	add(evalSpec{id: "1", seq: 2, version: "v1", typ: "a", reward: -0.5, polarity: pf(-0.8)})
	add(evalSpec{id: "1", seq: 1, version: "v1", typ: "a", reward: 1})
	sb := NewScoreboard()
	for _, ev := range evs {
		if _, err := sb.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	rows := sb.Rows("", "")
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	r := rows[0]
	// rewards -0.5, 0, 0.5: mean 0, sd 0.5, ci 1.96*0.5/sqrt(3)
	if r.Version != "v1" || r.Count != 3 || r.MeanReward != 0 || math.Abs(r.RewardCI95-round6(1.96*0.5/math.Sqrt(3))) > 1e-9 ||
		r.FeedbackCount != 1 || r.FeedbackPolarity != -0.8 || r.FaultRate != round6(2.0/3) || r.EnvFaultRate != round6(1.0/3) ||
		r.DropRate != round6(1.0/3) || r.TrainableRate != round6(1.0/3) || r.GraderMeans["answer"] != 0.5 {
		t.Errorf("row %+v", r)
	}
	if _, has := r.GraderMeans[behaviourGrader]; has {
		t.Error("behaviour label in grader means")
	}
	if got := sb.Rows("a", "v2"); len(got) != 1 || got[0].Count != 1 || got[0].RewardCI95 != 0 {
		t.Errorf("filtered %+v", got)
	}
	// rebuilding from the same events, in the same or another order, gives identical rows
	for trial := 0; trial < 5; trial++ {
		order := append([]events.Event(nil), evs...)
		if trial > 0 {
			rng := rand.New(rand.NewPCG(uint64(trial), 9))
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		sb2 := NewScoreboard()
		for _, ev := range order {
			sb2.Apply(ev)
		}
		if got := sb2.Rows("", ""); !reflect.DeepEqual(got, rows) {
			t.Errorf("trial %d: rebuild differs:\n%+v\n%+v", trial, got, rows)
		}
	}
	bad := evs[0]
	bad.Data = json.RawMessage(`{"x":1}`)
	if err := sb.Apply(bad); err == nil {
		t.Error("malformed accepted")
	}
}

// Where reward correlates with tool calls for the stable version too (a
// task solved by calling a tool), a candidate with the same correlation
// is not flagged; one whose correlation is CorrelationRise above the
// stable's is. (Regression: bench learn's canaries were rolled back for
// the order-status type's natural reward-tool correlation.)
func TestDetectorsCorrelationRelativeToStable(t *testing.T) {
	spec := func(rng *rand.Rand, noise float64) func(i int) evalSpec {
		return func(i int) evalSpec {
			n := rng.IntN(2)
			return evalSpec{length: 100, turnTools: n, reward: float64(n) - 0.5 + rng.Float64()*noise}
		}
	}
	for _, tt := range []struct {
		name      string
		candNoise float64
		want      int
	}{{"same correlation", 2, 0}, {"stronger correlation", 0.05, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			d := NewDetectors(DetectorConfig{Window: 60, MinCount: 40, Stable: "v1"})
			stable, cand := spec(rng, 2), spec(rng, tt.candNoise)
			var evs []events.Event
			for i := 0; i < 80; i++ {
				s := stable(i)
				s.id, s.version, s.typ = fmt.Sprintf("s%d", i), "v1", "order_status"
				evs = append(evs, evalEvent(t, i, s))
			}
			for i := 0; i < 80; i++ {
				s := cand(i)
				s.id, s.version, s.typ = fmt.Sprintf("c%d", i), "v2", "order_status"
				evs = append(evs, evalEvent(t, 100+i, s))
			}
			got := kinds(feed(t, d, evs))
			if got[KindRewardToolCorr+"@v2"] != tt.want {
				t.Errorf("anomalies %v, want %d %s on v2", got, tt.want, KindRewardToolCorr)
			}
		})
	}
}

// A/A: candidate and stable draw from the same distribution with the
// order-status type's natural reward-tool correlation (about 0.5, as the base model shows in bench learn). Looked
// at after every evaluation with the default window (200) and MinCount
// (50), a correlation rise of 0.2 alone trips in many runs; with the
// significance requirement (CorrelationZ) the false alarms stay rare.
func TestDetectorsCorrelationAAFalseAlarms(t *testing.T) {
	alarms := func(z float64) int {
		n := 0
		for seed := range 100 {
			rng := rand.New(rand.NewPCG(uint64(seed), 12))
			gen := func() evalSpec {
				k := rng.IntN(2)
				return evalSpec{length: 100, turnTools: k, reward: float64(k) - 0.5 + rng.Float64()*3}
			}
			d := NewDetectors(DetectorConfig{Stable: "v1", CorrelationZ: z})
			var evs []events.Event
			for i := range 200 {
				s := gen()
				s.id, s.version, s.typ = fmt.Sprintf("s%d", i), "v1", "order_status"
				evs = append(evs, evalEvent(t, i, s))
			}
			for i := range 300 {
				s := gen()
				s.id, s.version, s.typ = fmt.Sprintf("c%d", i), "v2", "order_status"
				evs = append(evs, evalEvent(t, 1000+i, s))
			}
			if kinds(feed(t, d, evs))[KindRewardToolCorr+"@v2"] > 0 {
				n++
			}
		}
		return n
	}
	with, without := alarms(0), alarms(-1)
	t.Logf("A/A runs of 100 with a %s anomaly: %d with the significance test, %d without", KindRewardToolCorr, with, without)
	if with > 5 {
		t.Errorf("%d of 100 A/A runs flagged %s (want at most 5)", with, KindRewardToolCorr)
	}
	if without <= with {
		t.Errorf("without the significance test %d runs were flagged, with it %d: the test does not show what it guards", without, with)
	}
}

// Where nearly every turn takes one tool call (order status), the few
// answers without one decide the reward-tool correlation alone: a
// candidate that answers like the stable version, but whose 2 of 50
// answers without a tool call drew lower rewards, shows a correlation
// near 0.9, and the Fisher-z test alone flags it (bench learn: a refund
// fix rolled back for 0.735 made by 2 of 26 answers). The detector waits
// for ToolCorrelationMinority answers on the other side; a candidate
// whose correlation is that of many answers is still flagged.
func TestDetectorsToolCorrelationNeedsAMinority(t *testing.T) {
	run := func(minority, without int) int {
		rng := rand.New(rand.NewPCG(21, 22))
		d := NewDetectors(DetectorConfig{Stable: "v1", ToolCorrelationMinority: minority})
		var evs []events.Event
		for i := range 200 {
			s := evalSpec{length: 30, turnTools: 1, reward: 0.9 + 0.1*rng.Float64()}
			if i%8 == 0 { // a follow-up answered without a tool call
				s.turnTools, s.reward = 0, 0.5+0.5*rng.Float64()
			}
			s.id, s.version, s.typ = fmt.Sprintf("s%d", i), "v1", "order_status"
			evs = append(evs, evalEvent(t, i, s))
		}
		for i := range 50 {
			s := evalSpec{length: 30, turnTools: 1, reward: 0.93 + 0.04*rng.Float64()}
			if i%(50/without) == 0 {
				s.turnTools, s.reward = 0, 0.3
			}
			s.id, s.version, s.typ = fmt.Sprintf("c%d", i), "v2", "order_status"
			evs = append(evs, evalEvent(t, 1000+i, s))
		}
		return kinds(feed(t, d, evs))[KindRewardToolCorr+"@v2"]
	}
	if run(-1, 2) == 0 {
		t.Fatal("the premise: without a minimum, 2 answers without a tool call should trip the detector")
	}
	if n := run(0, 2); n != 0 {
		t.Errorf("%d %s anomalies from 2 answers without a tool call", n, KindRewardToolCorr)
	}
	if run(0, 10) == 0 {
		t.Errorf("10 of 50 answers without a tool call, all with low rewards: not flagged")
	}
}

// The reward-tool correlation is taken over answers against the tool
// calls their turn took, not over every evaluation: where the tool-call
// rounds themselves are graded higher than answers (their arguments are
// valid, the answer may be wrong), reward correlates with an evaluation's
// own tool calls for any version, and bench learn's canaries were rolled
// back for it. Here the answers' reward does not depend on the turn's
// tool calls: nothing trips, while the per-evaluation correlation is high.
func TestDetectorsToolCorrelationIgnoresToolRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	d := NewDetectors(DetectorConfig{Window: 100, MinCount: 40})
	var evs []events.Event
	var r, tc []float64
	for i := range 100 {
		s := evalSpec{id: fmt.Sprint("q", i), version: "v1", typ: "order_status", length: 30}
		if i%2 == 0 { // a tool round: valid arguments, high reward
			s.tools, s.reward = 1, 0.9+rng.Float64()*0.1
		} else { // the answer after it: right or wrong whatever the tools
			s.turnTools, s.reward = 1, rng.Float64()*2-1
		}
		r, tc = append(r, s.reward), append(tc, float64(s.tools))
		evs = append(evs, evalEvent(t, i, s))
	}
	if c := pearson(r, tc); c < 0.5 {
		t.Fatalf("the premise: per-evaluation reward-tool correlation %.2f should exceed 0.5", c)
	}
	if got := kinds(feed(t, d, evs)); got[KindRewardToolCorr+"@v1"] != 0 {
		t.Errorf("anomalies %v: tool rounds counted as evidence of gaming", got)
	}
}

// The reward-length correlation is over answers whose reward no
// environment fault shaped: with 10% of tools failing by themselves, the
// answers that can only report the failure are short and earn little,
// which makes reward correlate with length for any policy (the seed
// talk's potholes); that is the environment's doing, not gaming. The
// same correlation among clean answers still trips.
func TestDetectorsLengthCorrelationIgnoresEnvironmentFaults(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	fault := []events.Fault{{Kind: "tool_error", Attribution: "environment"}}
	var evs []events.Event
	var r, l []float64
	for i := range 100 {
		s := evalSpec{id: fmt.Sprint("p", i), version: "v1", typ: "order_status", turnTools: 1}
		if i%3 == 0 { // the tool failed: a short apology, a low reward
			s.length, s.reward, s.faults = 8+rng.IntN(4), -1, fault
		} else { // right or wrong whatever the length
			s.length, s.reward = 28+rng.IntN(8), rng.Float64()*2-1
		}
		r, l = append(r, s.reward), append(l, float64(s.length))
		evs = append(evs, evalEvent(t, i, s))
	}
	if c := pearson(r, l); c < 0.5 {
		t.Fatalf("the premise: reward-length correlation over all evaluations %.2f should exceed 0.5", c)
	}
	if got := kinds(feed(t, NewDetectors(DetectorConfig{Window: 100, MinCount: 40}), evs)); got[KindRewardLengthCorr+"@v1"] != 0 {
		t.Errorf("anomalies %v: environment faults counted as evidence of gaming", got)
	}
	// Clean answers whose reward follows their length: tripped.
	evs = evs[:0]
	for i := range 100 {
		n := 10 + rng.IntN(30)
		evs = append(evs, evalEvent(t, i, evalSpec{id: fmt.Sprint("q", i), version: "v1", typ: "order_status", length: n,
			reward: float64(n-25)/15 + 0.1*rng.Float64()}))
	}
	if got := kinds(feed(t, NewDetectors(DetectorConfig{Window: 100, MinCount: 40}), evs)); got[KindRewardLengthCorr+"@v1"] == 0 {
		t.Errorf("anomalies %v: a reward that follows the answer length among clean answers was not detected", got)
	}
}

func TestMinority(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want int
	}{{nil, 0}, {[]float64{1}, 0}, {[]float64{1, 1, 0, 1, 2}, 2}, {[]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9}, 9}} {
		if got := minority(tt.xs); got != tt.want {
			t.Errorf("minority(%v) = %d, want %d", tt.xs, got, tt.want)
		}
	}
}
