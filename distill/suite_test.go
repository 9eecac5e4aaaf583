package distill

import (
	"bytes"
	"context"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
)

func TestParseSuite(t *testing.T) {
	in := `{"type":"unit_conversion","messages":[{"role":"user","content":"Convert 2 km to m."}],"expected":"2000 m"}

{"type":"policy","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Refund window?"}],"expected":"30 days"}
`
	got, err := ParseSuite(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "unit_conversion" || got[1].Expected != "30 days" || len(got[1].Messages) != 2 {
		t.Fatalf("parsed %+v", got)
	}
	var b bytes.Buffer
	if err := WriteSuite(&b, got); err != nil {
		t.Fatal(err)
	}
	again, err := ParseSuite(&b)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("round trip: %v %+v", err, again)
	}

	ok := `{"type":"a","messages":[{"role":"user","content":"q"}],"expected":"x"}` + "\n"
	for _, c := range []struct{ in, want string }{
		{ok + `{"type":"a","messages":[{"role":"user","content":"q"}],"expectd":"x"}`, `line 2: json: unknown field "expectd"`},
		{ok + `{"type":"a","messages":[{"role":"user","content":"q"}]}`, `line 2: no "expected"`},
		{`{"messages":[{"role":"user","content":"q"}],"expected":"x"}`, `line 1: no "type"`},
		{`{"type":"a","messages":[],"expected":"x"}`, `line 1: no "messages"`},
		{`{"type":"a","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"x"}],"expected":"x"}`, "line 1: the last message is the assistant's"},
		{`{"type":"a","messages":[{"role":"tool","content":"q"},{"role":"user","content":"q"}],"expected":"x"}`, `line 1: message 0: role "tool"`},
		{ok + ok + `{"type":"a"} {"type":"b"}`, "line 3: more than one JSON value"},
		{`{"type":`, "line 1: unexpected EOF"},
		{`[1,2]`, "line 1: json: cannot unmarshal array"},
		{ok + `{"type":"a","messages":[{"role":"user","content":"` + strings.Repeat("q", maxLine) + `"}],"expected":"x"}`, "longer than"},
	} {
		s, err := ParseSuite(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) || s != nil {
			t.Errorf("%.80q: got %v, %d cases; want an error with %q and no cases", c.in, err, len(s), c.want)
		}
	}
}

func FuzzParseSuite(f *testing.F) {
	f.Add(`{"type":"a","messages":[{"role":"user","content":"q"}],"expected":"x"}`)
	f.Add(`{"type":"a","messages":[{"role":"system","content":""},{"role":"user","content":"q"}],"expected":"x"}` + "\n\n" + `{"type":"b"}`)
	f.Add("\n \n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSuite(strings.NewReader(in))
		if err != nil {
			if s != nil {
				t.Fatalf("cases returned with error %v", err)
			}
			return
		}
		for _, c := range s {
			if err := c.validate(); err != nil {
				t.Fatalf("accepted an invalid case %+v: %v", c, err)
			}
		}
		var b bytes.Buffer
		if err := WriteSuite(&b, s); err != nil {
			t.Fatal(err)
		}
		again, err := ParseSuite(&b)
		if err != nil || len(again) != len(s) {
			t.Fatalf("round trip of %d cases: %v (%d)", len(s), err, len(again))
		}
	})
}

func TestSuiteReasons(t *testing.T) {
	counts := func(right int) map[string]events.SuiteCount {
		return map[string]events.SuiteCount{"unit_conversion": {N: 100, Right: right}, "classify": {N: 50, Right: 50}}
	}
	g := GateConfig{MaxSuiteLoss: 0.01}
	for _, c := range []struct {
		name              string
		cand, parent, bse int
		parentIsBase      bool
		want              []string
	}{
		{name: "equal", cand: 60, parent: 60, bse: 60},
		{name: "one question in 100 lost", cand: 59, parent: 60, bse: 60},
		{name: "two lost to the parent", cand: 58, parent: 60, bse: 55, want: []string{"suite/unit_conversion: 58 of 100 right, parent 60 (max loss 1)"}},
		{name: "the parent lost one, the candidate one more", cand: 58, parent: 59, bse: 60, want: []string{"suite/unit_conversion: 58 of 100 right, base 60 (max loss 1)"}},
		{name: "better than both", cand: 70, parent: 60, bse: 65},
		{name: "parent is the base", cand: 57, bse: 60, parentIsBase: true, want: []string{"suite/unit_conversion: 57 of 100 right, base 60 (max loss 1)"}},
	} {
		s := &events.SuiteCheck{Candidate: counts(c.cand), Base: counts(c.bse)}
		if !c.parentIsBase {
			s.Parent = counts(c.parent)
		}
		if got := g.SuiteReasons(s); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: reasons %q, want %q", c.name, got, c.want)
		}
	}
	// The default allows two questions in 100.
	s2 := &events.SuiteCheck{Candidate: counts(58), Base: counts(60)}
	if got := (GateConfig{}).SuiteReasons(s2); got != nil {
		t.Fatalf("2 of 100 lost with the default: %q", got)
	}
	s2.Candidate = counts(57)
	if got := (GateConfig{}).SuiteReasons(s2); len(got) != 1 {
		t.Fatalf("3 of 100 lost with the default: %q", got)
	}
	if got := g.SuiteReasons(nil); got != nil {
		t.Fatalf("no suite: %q", got)
	}
	// A larger allowance, and a type the candidate was judged on fewer
	// questions of (a prompt too long for it, a grader that could not
	// judge): not comparable, so a reason.
	s := &events.SuiteCheck{Candidate: counts(57), Base: counts(60)}
	if got := (GateConfig{MaxSuiteLoss: 0.05}).SuiteReasons(s); got != nil {
		t.Fatalf("3 of 100 lost with 5%% allowed: %q", got)
	}
	s.Candidate["classify"] = events.SuiteCount{N: 49, Right: 49}
	if got := g.SuiteReasons(s); len(got) != 2 || !strings.Contains(got[0], "suite/classify: candidate judged on 49 questions, base on 50") {
		t.Fatalf("reasons %q", got)
	}
	if ok, why := g.Verdict(g.SuiteReasons(s)); ok || !strings.HasPrefix(why, "gate: suite/classify") {
		t.Fatalf("verdict %v %q", ok, why)
	}
}

// TestCycleRejectsCandidateLosingSuite runs the cycle of
// TestCycleLearnsCorrectionWithoutRegressing (accepted on the hold-out)
// with a regression suite of questions whose expected answers are the
// base's own greedy answers: the trained candidate answers some of them
// differently, so with the default allowance the gate rejects it on the
// suite, and with a large one accepts it; the counts travel with the
// version.
func TestCycleRejectsCandidateLosingSuite(t *testing.T) {
	tok, base := tinyBase(t)
	cm := newChat(tok, base)
	defer cm.Close()
	var suite []SuiteCase
	for i := range 24 {
		q := oldWorld(200 + i)
		msgs := []events.ChatMessage{{Role: "user", Content: q.user}}
		c, err := cm.Complete(context.Background(), chat.Request{Messages: toTok(msgs), MaxTokens: 16})
		if err != nil {
			t.Fatal(err)
		}
		suite = append(suite, SuiteCase{Type: q.typ, Messages: msgs, Expected: c.Message.Content})
	}
	var graded atomic.Int64 // the grade is called concurrently
	same := func(c SuiteCase, answer string) (bool, bool) { graded.Add(1); return answer == c.Expected, true }
	for _, allow := range []float64{0, 0.99} {
		w := newWorld(t)
		newWorldData(w, tok, base, 192, 0)
		d := newDistiller(t, w, func(c *Config) {
			c.Pipeline.HoldOutFraction = 0.3
			// Every question asked: the tiny base wins its answers by
			// several nats, and the ones this fix flips are the refund
			// window's, which the stable margin assumes a suite leaves
			// out (the world changed them).
			c.Suite, c.SuiteGrade, c.SuiteMaxTokens, c.Gate.MaxSuiteLoss, c.SuiteStableMargin = suite, same, 16, allow, -1
		})
		catchUp(t, d, w.store)
		graded.Store(0)
		wt, err := d.RunCycle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s := stored(t, w.store, wt.Version).Suite
		// The base answers every case; the candidate only those where it
		// may not give the base's answer (suiteScreen), which include
		// every answer it lost.
		if s == nil || s.Parent != nil || graded.Load() <= int64(len(suite)) || graded.Load() >= int64(2*len(suite)) {
			t.Fatalf("suite check %+v after %d grades (want the base's %d and some of the candidate's)", s, graded.Load(), len(suite))
		}
		lost := 0
		for typ, b := range s.Base {
			if b.Right != b.N {
				t.Fatalf("base answered %d of its own %d %s answers", b.Right, b.N, typ)
			}
			lost += b.Right - s.Candidate[typ].Right
		}
		t.Logf("allowance %v: accepted=%v reason=%q lost %d; candidate %v", allow, wt.Accepted, wt.Reason, lost, s.Candidate)
		if lost < 2 || graded.Load()-int64(len(suite)) < int64(lost) {
			t.Fatalf("the candidate changed %d suite answers; the test needs one that changes some", lost)
		}
		if allow == 0 && (wt.Accepted || !strings.Contains(wt.Reason, "gate: suite/")) {
			t.Fatalf("default allowance: accepted=%v reason %q", wt.Accepted, wt.Reason)
		}
		if allow > 0.5 && !wt.Accepted {
			t.Fatalf("allowance %v: rejected: %s", allow, wt.Reason)
		}
	}

}

// TestSuiteScreenMatchesDecoding checks suiteScore's shortcuts against
// their definition, for adapters that change none, some and most of the
// base's answers. With SuiteStableMargin negative, the answers
// suiteScreen returns (the base's where the teacher-forced pass says the
// adapter keeps them, decoded elsewhere) are token for token those of
// decoding every case with the adapter, and so are the verdicts. With a
// stable margin at the base's median, the cases above it keep the base's
// answer except every SuiteStableSample-th of them (the default 4), which
// with the others are again exact.
func TestSuiteScreenMatchesDecoding(t *testing.T) {
	_, base := tinyBase(t)
	var suite []SuiteCase
	for i := range 64 {
		q := oldWorld(300 + i)
		suite = append(suite, SuiteCase{Type: q.typ, Messages: []events.ChatMessage{{Role: "user", Content: q.user}}, Expected: q.answer})
	}
	var graded atomic.Int64
	grade := func(c SuiteCase, answer string) (bool, bool) {
		graded.Add(1)
		return answer == c.Expected, c.Type != "order_status" // one type the grader cannot judge
	}
	ctx := context.Background()
	all := make([]int, len(suite))
	for i := range all {
		all[i] = i
	}
	ew := newWorld(t)
	exact := newDistiller(t, ew, func(c *Config) {
		c.Suite, c.SuiteGrade, c.SuiteMaxTokens, c.SuiteStableMargin = suite, grade, 16, -1
	})
	// Status says when the base's answers are there (the warm-up that
	// bench learn waits for); a distiller without a suite has none.
	// No cycle is due before that, whatever has arrived.
	if exact.Status().SuiteReady || !newDistiller(t, newWorld(t), nil).Status().SuiteReady {
		t.Fatal("SuiteReady before the base answered the suite, or not without a suite")
	}
	tok, _ := tinyBase(t)
	newWorldData(ew, tok, base, 12, 0)
	catchUp(t, exact, ew.store)
	if exact.Due() {
		t.Fatal("a cycle is due before the base answered the suite")
	}
	baseAns, err := exact.suiteBase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !exact.Status().SuiteReady || !exact.Due() {
		t.Fatal("not SuiteReady, or no cycle due at the count, after the base answered the suite")
	}
	_, exs := suiteExamples(baseAns, false)
	if len(exs) != len(suite) {
		t.Fatalf("%d of %d cases asked of the base", len(exs), len(suite))
	}
	margins, err := answerMargins(ctx, base, nil, exs)
	if err != nil {
		t.Fatal(err)
	}
	median := slices.Sorted(slices.Values(margins))[len(margins)/2]
	shortcut := newDistiller(t, newWorld(t), func(c *Config) {
		c.Suite, c.SuiteGrade, c.SuiteMaxTokens, c.SuiteStableMargin = suite, grade, 16, median
	})
	for _, d := range []*Distiller{exact, shortcut} {
		th := d.cfg.SuiteStableMargin
		baseAns, err := d.suiteBase(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stable, sampled := 0, 0
		perType := map[string]int{} // stable cases per type
		for i, b := range baseAns {
			if b.stable {
				perType[suite[i].Type]++
			}
			if b.stable != (th >= 0 && margins[i] >= th) {
				t.Fatalf("stable margin %v: case %d (base margin %v) stable=%v", th, i, margins[i], b.stable)
			}
			if b.stable && !b.sampled {
				stable++
			}
			if b.sampled {
				sampled++
			}
		}
		want := 0
		for _, n := range perType {
			want += (n + 3) / 4
		}
		if th >= 0 && (sampled == 0 || sampled != want) {
			t.Fatalf("stable margin %v: %d of %d stable cases sampled; want every 4th of each type, %d", th, sampled, stable+sampled, want)
		}
		if th >= 0 && (stable == 0 || stable == len(suite)) {
			t.Fatalf("stable margin %v: %d of %d cases stable; the test needs some of each", th, stable, len(suite))
		}
		some := false
		for _, scale := range []float32{0, 0.03, 0.06, 0.1, 0.5} {
			a, err := model.NewAdapter("screen", base.Config, model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: model.LoRAModules}, 3)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, 6)) // one direction, scaled
			for i := range a.Params {        // A and B alike: every module's B moves off zero
				a.Params[i] += scale * float32(r.NormFloat64())
			}
			graded.Store(0)
			screened, err := d.suiteScreen(ctx, a, baseAns)
			if err != nil {
				t.Fatal(err)
			}
			decodedCases := graded.Load()
			if err := d.cfg.Chat.Engine.RegisterAdapter("full", a); err != nil {
				t.Fatal(err)
			}
			full := make([]suiteAnswer, len(suite))
			err = d.suiteAsk(ctx, "full", all, nil, full)
			d.cfg.Chat.Engine.RemoveAdapter("full")
			if err != nil {
				t.Fatal(err)
			}
			changed := 0
			answer := func(a suiteAnswer) suiteAnswer { a.stable, a.sampled, a.kept = false, false, false; return a }
			for i := range suite {
				kept := baseAns[i].kept
				want := full[i]
				if kept {
					want = baseAns[i]
				}
				if !reflect.DeepEqual(answer(screened[i]), answer(want)) {
					t.Fatalf("stable margin %v, scale %v, case %d: screened %+v, want %+v", th, scale, i, screened[i], want)
				}
				if !kept && !reflect.DeepEqual(full[i].answer, baseAns[i].answer) {
					changed++
				}
			}
			// The counts: the screened answers' verdicts, shifted by what
			// the sample lost or won, scaled to the stable cases.
			counts, err := d.suiteScore(ctx, a, "", nil)
			if err != nil {
				t.Fatal(err)
			}
			shift := suiteSampleShift(suite, baseAns, screened, nil)
			for typ, c := range counts {
				right := 0
				for i := range suite {
					if suite[i].Type == typ && screened[i].judged && screened[i].right {
						right++
					}
				}
				if c.Right != min(c.N, max(0, right+shift[typ])) {
					t.Fatalf("stable margin %v, scale %v, %s: %d right counted; screened %d, sample shift %d", th, scale, typ, c.Right, right, shift[typ])
				}
			}
			t.Logf("stable margin %.3g, scale %v: %d of %d asked answers differ from the base's; %d decoded", th, scale, changed, len(suite)-stable, decodedCases)
			if decodedCases < int64(changed) || decodedCases > int64(len(suite)-stable) {
				t.Fatalf("%d answers changed, %d asked, but %d were decoded", changed, len(suite)-stable, decodedCases)
			}
			switch {
			case scale == 0 && decodedCases != 0:
				t.Fatalf("the zero adapter is the base, yet %d cases were decoded", decodedCases)
			case changed > 0 && changed < len(suite)-stable:
				some = true
			}
		}
		if !some {
			t.Fatalf("stable margin %v: no adapter changed some but not all answers; the test needs one that does", th)
		}
	}
}

// When the warm-up fails (the base cannot answer the suite), Status says
// why and cycles are due again: each gate then asks the base itself.
func TestSuiteWarmUpFailureLetsCyclesRun(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	suite := []SuiteCase{{Type: "policy", Messages: []events.ChatMessage{{Role: "user", Content: "What is the refund window?"}}, Expected: "30 days"}}
	d := newDistiller(t, w, func(c *Config) {
		c.Suite, c.SuiteGrade = suite, func(SuiteCase, string) (bool, bool) { return true, true }
	})
	newWorldData(w, tok, base, 12, 0)
	catchUp(t, d, w.store)
	if d.Due() {
		t.Fatal("a cycle is due before the warm-up")
	}
	d.cfg.Chat.Close() // nothing can be answered
	d.warmUp(context.Background())
	if st := d.Status(); st.SuiteReady || !strings.Contains(st.SuiteError, "closed") {
		t.Fatalf("after a failed warm-up: SuiteReady %v, SuiteError %q", st.SuiteReady, st.SuiteError)
	}
	if !d.Due() {
		t.Fatal("no cycle due after the warm-up failed")
	}
}

// suiteSampleShift scales what the sampled stable cases lost or won to
// the stable cases that were not sampled, per type.
func TestSuiteSampleShift(t *testing.T) {
	suite := []SuiteCase{{Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "a"}, {Type: "b"}, {Type: "b"}, {Type: "b"}}
	right := suiteAnswer{asked: true, judged: true, right: true}
	wrong := suiteAnswer{asked: true, judged: true}
	stable := func(a suiteAnswer, sampled bool) suiteAnswer {
		a.stable, a.sampled, a.kept = true, sampled, !sampled
		return a
	}
	base := []suiteAnswer{
		stable(right, true), stable(right, false), stable(right, false), stable(right, false), // a: 2 sampled, 6 not
		stable(right, true), stable(right, false), stable(right, false), right, // the last is a near-tie
		stable(wrong, true), stable(right, false), stable(wrong, false), // b: 1 sampled, 2 not
	}
	answers := slices.Clone(base)
	answers[0] = wrong // a: a sampled case lost
	answers[7] = wrong // a near-tie lost: counted as it is, not scaled
	answers[8] = right // b: a sampled case won
	answers[1] = wrong // an unsampled stable case (never asked in the screen) is not part of the sample
	got := suiteSampleShift(suite, base, answers, nil)
	if want := map[string]int{"a": -3, "b": 2}; !maps.Equal(got, want) {
		t.Fatalf("shift %v, want %v (a: -1 of 2 sampled, 6 not; b: +1 of 1, 2 not)", got, want)
	}
	if got := suiteSampleShift(suite, base, base, nil); len(got) != 0 {
		t.Fatalf("the base's own answers shift %v", got)
	}
	// Sampled near-ties are a stratum of their own: b's three near-ties,
	// one sampled, which won; a's stable shift is unchanged.
	near := func(a suiteAnswer, sampled bool) suiteAnswer { a.sampled, a.kept = sampled, !sampled; return a }
	suite = append(suite, SuiteCase{Type: "b"}, SuiteCase{Type: "b"}, SuiteCase{Type: "b"})
	base = append(base, near(wrong, true), near(wrong, false), near(right, false))
	answers = append(answers, right, wrong, right)
	got = suiteSampleShift(suite, base, answers, nil)
	if want := map[string]int{"a": -3, "b": 4}; !maps.Equal(got, want) {
		t.Fatalf("shift %v, want %v (b: +2 stable, +2 near-ties: +1 of 1 sampled, 2 not)", got, want)
	}
}

// Over the token budget every k-th near-tie of a type is screened, k the
// smallest that fits; the stable sample counts against the budget, and
// the stable cases it stands for do not.
func TestSuiteNearTieSample(t *testing.T) {
	var suite []SuiteCase
	var base []suiteAnswer
	for i := 0; i < 12; i++ {
		suite = append(suite, SuiteCase{Type: []string{"a", "b"}[i%2]})
		base = append(base, suiteAnswer{prompt: make([]int, 6), answer: make([]int, 4), asked: true, judged: true})
	}
	base[0].stable, base[0].kept = true, true    // stands in the stable stratum: free
	base[1].stable, base[1].sampled = true, true // the stable sample: 10 tokens
	base[11].asked = false                       // never asked: free
	for _, c := range []struct {
		budget float64
		k      int
	}{{0, 1}, {-1, 1}, {100, 1}, {99, 2}, {60, 2}, {59, 3}, {30, 5}, {20, 12}} {
		b := slices.Clone(base)
		if k := markNearTieSample(suite, b, c.budget); k != c.k {
			t.Fatalf("budget %v: every %d-th near-tie, want %d", c.budget, k, c.k)
		}
		screened, seen := 0, map[string]int{}
		for i, x := range b {
			if i < 2 || !x.asked {
				if !reflect.DeepEqual(x, base[i]) {
					t.Fatalf("budget %v: case %d changed: %+v", c.budget, i, x)
				}
				continue
			}
			if c.k == 1 && (x.sampled || x.kept) || c.k > 1 && (x.sampled == x.kept || x.sampled != (seen[suite[i].Type]%c.k == 0)) {
				t.Fatalf("budget %v: case %d sampled=%v kept=%v", c.budget, i, x.sampled, x.kept)
			}
			seen[suite[i].Type]++
			if !x.kept {
				screened++
			}
		}
		// Within the budget, or down to one near-tie per type.
		if c.budget > 0 && float64(screened*10+10) > c.budget && screened > 2 {
			t.Fatalf("budget %v: %d near-ties screened", c.budget, screened)
		}
	}
}

// SuiteAside: a question a promoted lesson contradicts is left out of
// every version's count and recorded; the others still count.
func TestSuiteAsideLeavesQuestionsOut(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	suite := []SuiteCase{
		{Type: "policy", Messages: []events.ChatMessage{{Role: "user", Content: "What is the refund window?"}}, Expected: "30 days"},
		{Type: "policy", Messages: []events.ChatMessage{{Role: "user", Content: "What is the shipping fee?"}}, Expected: "$4.99"},
	}
	aside := false
	d := newDistiller(t, w, func(c *Config) {
		c.Suite, c.SuiteGrade = suite, func(SuiteCase, string) (bool, bool) { return true, true }
		c.SuiteAside = func(_ context.Context, c SuiteCase) (string, bool) {
			return "l1", aside && strings.Contains(c.Messages[0].Content, "refund")
		}
	})
	newWorldData(w, tok, base, 12, 0)
	ctx := context.Background()
	check := func() *events.SuiteCheck {
		t.Helper()
		s, err := d.suiteCheck(ctx, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := check(); s.Base["policy"].N != 2 || len(s.SetAside) != 0 {
		t.Fatalf("nothing aside: %+v", s)
	}
	aside = true
	s := check()
	if s.Base["policy"].N != 1 || s.Candidate["policy"].N != 1 || len(s.SetAside) != 1 || s.SetAside[0].Lesson != "l1" || s.SetAside[0].Expected != "30 days" {
		t.Fatalf("one aside: %+v", s)
	}
}
