package distill

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"citizen/events"
	"citizen/model"
)

func TestParseRehearsal(t *testing.T) {
	good := `{"type":"arithmetic","messages":[{"role":"user","content":"What is 2 plus 3?"},{"role":"assistant","content":"The answer is 5."}]}

{"type":"order_status","messages":[{"role":"system","content":"Use the tool."},{"role":"user","content":"Where is S1?"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","name":"get_order_status","arguments":"{}"}]}],"margin":-0.25}
`
	cases, err := ParseRehearsal(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[0].Type != "arithmetic" || cases[1].Messages[2].ToolCalls[0].Name != "get_order_status" ||
		cases[0].Margin != nil || cases[1].Margin == nil || *cases[1].Margin != -0.25 {
		t.Fatalf("parsed %+v", cases)
	}
	var b bytes.Buffer
	if err := WriteRehearsal(&b, cases); err != nil {
		t.Fatal(err)
	}
	if again, err := ParseRehearsal(&b); err != nil || !reflect.DeepEqual(again, cases) {
		t.Fatalf("round trip: %v %+v", err, again)
	}
	for _, c := range []struct{ line, want string }{
		{`{"messages":[{"role":"assistant","content":"x"}]}`, `line 1: no "type"`},
		{`{"type":"a"}`, `line 1: no "messages"`},
		{`{"type":"a","messages":[{"role":"user","content":"q"}]}`, "ends with the answer"},
		{`{"type":"a","messages":[{"role":"user","content":"q"},{"role":"assistant","content":""}]}`, "is empty"},
		{`{"type":"a","messages":[{"role":"robot","content":"q"},{"role":"assistant","content":"x"}]}`, `role "robot"`},
		{`{"type":"a","mesages":[]}`, "unknown field"},
		{`{"type":"a","messages":[{"role":"assistant","content":"x"}]} {}`, "more than one JSON value"},
		{`{"type":`, "line 1"},
		{`{"type":"a","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"x"}],"margin":"small"}`, "line 1"},
		{"\n\n" + `{"type":"a"}`, "line 3"},
	} {
		got, err := ParseRehearsal(strings.NewReader(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) || got != nil {
			t.Errorf("%s: got %v, %v; want an error with %q and no cases", c.line, got, err, c.want)
		}
	}
	if _, err := LoadRehearsal(filepath.Join(t.TempDir(), "none.jsonl")); err == nil {
		t.Error("a missing file loaded")
	}
}

// FuzzParseRehearsal: any input is either an error and no cases, or cases
// that validate and survive a write and a parse unchanged.
func FuzzParseRehearsal(f *testing.F) {
	f.Add([]byte(`{"type":"a","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"x"}]}`))
	f.Add([]byte(`{"type":"a","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","name":"n","arguments":"{}"}]}]}` + "\n\n"))
	f.Add([]byte(`{"type":"a","messages":[{"role":"tool","content":"x"}]}`))
	f.Add([]byte("\x00{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cases, err := ParseRehearsal(bytes.NewReader(b))
		if err != nil {
			if cases != nil {
				t.Fatal("cases returned with an error")
			}
			return
		}
		for i := range cases {
			if err := cases[i].validate(); err != nil {
				t.Fatalf("accepted an invalid case: %v", err)
			}
		}
		var w bytes.Buffer
		if err := WriteRehearsal(&w, cases); err != nil {
			t.Fatal(err)
		}
		again, err := ParseRehearsal(&w)
		if err != nil || len(again) != len(cases) || (len(cases) > 0 && !reflect.DeepEqual(again, cases)) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func TestRehearsalSampleLeavesOutChangedTypes(t *testing.T) {
	var pool []Example
	for i := range 30 {
		pool = append(pool, Example{Type: []string{"policy", "arithmetic", "classify"}[i%3], Interaction: fmt.Sprint(i)})
	}
	changed := []string{"classify", "policy"}
	s := rehearsalSample(pool, changed, 25, "d0002", 1)
	if len(s) != 25 {
		t.Fatalf("%d drawn, want 25", len(s))
	}
	seen := map[string]int{}
	for _, ex := range s {
		if ex.Type != "arithmetic" {
			t.Fatalf("drew a %s example: its type changed", ex.Type)
		}
		seen[ex.Interaction]++
	}
	// 10 arithmetic examples, 25 draws: each at least twice before any a
	// third time.
	for id, n := range seen {
		if n < 2 || n > 3 {
			t.Fatalf("example %s drawn %d times in 25 draws of 10", id, n)
		}
	}
	if again := rehearsalSample(pool, changed, 25, "d0002", 1); !reflect.DeepEqual(again, s) {
		t.Fatal("the same cycle drew a different sample (a replayed cycle must rehearse the same)")
	}
	if other := rehearsalSample(pool, changed, 25, "d0003", 1); reflect.DeepEqual(other, s) {
		t.Fatal("another cycle drew the same sample")
	}
	if s := rehearsalSample(pool, []string{"arithmetic", "classify", "policy"}, 5, "d1", 1); s != nil {
		t.Fatalf("every type changed and still drew %d", len(s))
	}
}

func TestRehearsalExamples(t *testing.T) {
	tok, _ := tinyBase(t)
	cases := []RehearsalCase{
		{Type: "arithmetic", Messages: []events.ChatMessage{{Role: "user", Content: "what is 2 plus 3?"}, {Role: "assistant", Content: "The answer is 5."}}},
		{Type: "policy", Messages: []events.ChatMessage{{Role: "user", Content: strings.Repeat("what is the refund window? ", 40)}, {Role: "assistant", Content: "30 days."}}},
	}
	exs, _, err := rehearsalExamples(tok, cases, 128)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 1 {
		t.Fatalf("%d examples; want the one that fits in 128 tokens", len(exs))
	}
	prompt, _, _ := tok.RenderChat(toTok(cases[0].Messages[:1]), true)
	comp, err := answerTokens(tok, cases[0].Messages[:1], "The answer is 5.")
	if err != nil {
		t.Fatal(err)
	}
	ex := exs[0]
	if !slices.Equal(ex.PromptTokens, prompt) || !slices.Equal(ex.CompletionTokens, comp) || ex.Kind != KindRehearsal || ex.Type != "arithmetic" {
		t.Fatalf("example %+v; want prompt %v completion %v", ex, prompt, comp)
	}
}

// oldWorldRehearsal is the tiny fixture's pretraining data as rehearsal
// cases.
// TestAnswerMargins: a completion's margin is its smallest logit lead
// over the best other token, negative where the base would choose
// another token; nearTies keeps those under the threshold.
func TestAnswerMargins(t *testing.T) {
	tok, base := tinyBase(t)
	V := base.Config.VocabSize
	exs, _, err := rehearsalExamples(tok, oldWorldRehearsal(24), 512)
	if err != nil {
		t.Fatal(err)
	}
	// One more: the first example's answer with its first token swapped
	// for the token the base least expects there.
	bad := exs[0]
	bad.CompletionTokens = slices.Clone(bad.CompletionTokens)
	first, err := base.Logits(&model.Batch{Tokens: bad.PromptTokens}, nil)
	if err != nil {
		t.Fatal(err)
	}
	row := first[(len(bad.PromptTokens)-1)*V:]
	worst := 0
	for j, v := range row {
		if v < row[worst] {
			worst = j
		}
	}
	bad.CompletionTokens[0] = worst
	exs = append(exs, bad)
	margins, err := answerMargins(context.Background(), base, nil, exs)
	if err != nil {
		t.Fatal(err)
	}
	// Each margin as the definition says, from the example's own logits.
	for i, ex := range exs {
		seq := ex.Sequence()
		lg, err := base.Logits(&model.Batch{Tokens: seq[:len(seq)-1]}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := math.Inf(1)
		for p := len(ex.PromptTokens) - 1; p < len(seq)-1; p++ {
			r, y := lg[p*V:(p+1)*V], seq[p+1]
			best := float32(math.Inf(-1))
			for j, v := range r {
				if j != y {
					best = max(best, v)
				}
			}
			want = min(want, float64(r[y]-best))
		}
		if math.Abs(margins[i]-want) > 1e-3 {
			t.Fatalf("example %d: margin %.4f, want %.4f", i, margins[i], want)
		}
	}
	if m := margins[len(exs)-1]; m >= 0 {
		t.Fatalf("an answer starting with the least likely token has margin %.3f, want < 0", m)
	}
	// nearTies: those under the threshold; everything for a negative
	// threshold or when nothing is under it.
	thr := margins[len(exs)/2]
	var want []Example
	for i, ex := range exs {
		if margins[i] < thr {
			want = append(want, ex)
		}
	}
	if got := nearTies(exs, margins, thr); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("nearTies(%.3f) kept %d, want %d", thr, len(got), len(want))
	}
	if got := nearTies(exs, margins, -1); len(got) != len(exs) {
		t.Fatalf("negative threshold kept %d of %d", len(got), len(exs))
	}
	if got := nearTies(exs, margins, slices.Min(margins)); len(got) != len(exs) {
		t.Fatalf("nothing under the threshold kept %d of %d, want all", len(got), len(exs))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := answerMargins(ctx, base, nil, exs); err == nil {
		t.Fatal("a cancelled context scored anyway")
	}
}

// TestRehearsalUsesRecordedMargins: the distiller selects by the margins
// the cases record (here made up: arithmetic says near-tie, whatever the
// base measures) and measures those that record none.
func TestRehearsalUsesRecordedMargins(t *testing.T) {
	tok, base := tinyBase(t)
	cases := oldWorldRehearsal(400)
	near, far := 0.5, 5.0
	unmeasured := 0
	for i := range cases {
		switch {
		case cases[i].Type == "arithmetic":
			cases[i].Margin = &near
		case i%8 == 2:
			unmeasured++ // order_status, every other one: measured by the cycle
		default:
			cases[i].Margin = &far
		}
	}
	exs, idx, err := rehearsalExamples(tok, cases, 512)
	if err != nil {
		t.Fatal(err)
	}
	var open []Example
	for k, i := range idx {
		if cases[i].Margin == nil {
			open = append(open, exs[k])
		}
	}
	measured, err := answerMargins(context.Background(), base, nil, open)
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := 0
	for _, m := range measured {
		if m < 1 {
			wantOrder++
		}
	}
	if wantOrder == 0 || wantOrder == len(open) {
		t.Fatalf("%d of %d unmeasured cases are near-ties: the test needs some of each", wantOrder, len(open))
	}
	w := newWorld(t)
	newWorldData(w, tok, base, 192, 0)
	d := newDistiller(t, w, func(c *Config) {
		c.Pipeline.HoldOutFraction = 0.3
		c.Rehearsal = cases
	})
	catchUp(t, d, w.store)
	wt, err := d.RunCycle(context.Background())
	if err != nil || !wt.Accepted {
		t.Fatalf("cycle: %v %s", err, wt.Reason)
	}
	if wt.Hyper["rehearsal_pool"] != float64(100+wantOrder) {
		t.Fatalf("rehearsal pool %v: want the 100 arithmetic cases and %d of the %d measured order_status ones", wt.Hyper["rehearsal_pool"], wantOrder, unmeasured)
	}
	ds, err := ReadDataset(filepath.Join(d.cfg.DataDir, "datasets", wt.Version))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Manifest.Rehearsal["arithmetic"] == 0 || ds.Manifest.Rehearsal["policy"] != 0 || ds.Manifest.Rehearsal["order_status"] == 0 {
		t.Fatalf("rehearsed %v", ds.Manifest.Rehearsal)
	}
}

func oldWorldRehearsal(n int) []RehearsalCase {
	out := make([]RehearsalCase, n)
	for i := range out {
		q := oldWorld(i)
		out[i] = RehearsalCase{Type: q.typ, Messages: []events.ChatMessage{{Role: "user", Content: q.user}, {Role: "assistant", Content: q.answer}}}
	}
	return out
}

// TestCycleRehearsesTheBaseData: with rehearsal cases, a cycle writes its
// sample (no policy: a promoted lesson covers refund questions) into
// the dataset, trains on it beside every step, records it in the
// lineage, and keeps the other types' pretraining answers likelier than
// the same cycle without rehearsal, while still learning the correction.
func TestCycleRehearsesTheBaseData(t *testing.T) {
	tok, base := tinyBase(t)
	// The same data in two stores: each cycle sees only its own.
	run := func(rehearse bool) (events.WeightsTrained, *Distiller, *model.Adapter) {
		w := newWorld(t)
		newWorldData(w, tok, base, 192, 0)
		d := newDistiller(t, w, func(c *Config) {
			c.Pipeline.HoldOutFraction = 0.3
			c.Lesson = refundLesson
			if rehearse {
				c.Rehearsal = oldWorldRehearsal(400)
			}
		})
		catchUp(t, d, w.store)
		wt, err := d.RunCycle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if wt.Artifact == nil {
			t.Fatalf("no artifact: %s", wt.Reason)
		}
		a, err := LoadVersion(wt, d.cfg.DataDir, base.Config)
		if err != nil {
			t.Fatal(err)
		}
		return wt, d, a
	}
	wt, d, with := run(true)
	plain, _, without := run(false)
	// The rehearsed pool is the base's near-ties among the 400.
	pool, _, err := rehearsalExamples(tok, oldWorldRehearsal(400), 512)
	if err != nil {
		t.Fatal(err)
	}
	margins, err := answerMargins(context.Background(), base, nil, pool)
	if err != nil {
		t.Fatal(err)
	}
	marginOf := map[string]float64{}
	near := 0
	for i, ex := range pool {
		marginOf[ex.Answer.Content+"|"+ex.Messages[0].Content] = margins[i]
		if margins[i] < 1 {
			near++
		}
	}
	if near == 0 || near == len(pool) {
		t.Fatalf("%d of %d rehearsal answers are near-ties: the test needs some of each", near, len(pool))
	}
	if wt.Objective != "pg+sd+anchors+kl+rehearsal" || wt.Hyper["rehearsal_seqs"] != 8 || wt.Hyper["rehearsal_pool"] != float64(near) ||
		wt.Hyper["rehearsal_margin"] != 1 ||
		plain.Objective != "pg+sd+anchors+kl" || plain.Hyper["rehearsal_seqs"] != 0 {
		t.Fatalf("lineage: %s %v; without: %s %v", wt.Objective, wt.Hyper, plain.Objective, plain.Hyper)
	}
	ds, err := ReadDataset(filepath.Join(d.cfg.DataDir, "datasets", wt.Version))
	if err != nil {
		t.Fatal(err)
	}
	steps := int(wt.Hyper["steps"])
	if len(ds.Rehearsal) != steps*8 || ds.Manifest.Rehearsal["policy"] != 0 || len(ds.Manifest.Rehearsal) == 0 ||
		!slices.Equal(ds.Manifest.RehearsalLeftOut, []string{"policy"}) || ds.Manifest.Files[RehearsalFile] == "" {
		t.Fatalf("dataset: %d rehearsed for %d steps, manifest %v left out %v files %v", len(ds.Rehearsal), steps, ds.Manifest.Rehearsal, ds.Manifest.RehearsalLeftOut, ds.Manifest.Files)
	}
	if _, err := os.Stat(filepath.Join(d.cfg.DataDir, "datasets", wt.Version, RehearsalFile)); err != nil {
		t.Fatal(err)
	}
	for _, ex := range ds.Rehearsal {
		if m, ok := marginOf[ex.Answer.Content+"|"+ex.Messages[0].Content]; !ok || m >= 1 {
			t.Fatalf("rehearsed %q (margin %.3f, in the file %v): not a near-tie", ex.Answer.Content, m, ok)
		}
	}
	// The other types' pretraining answers (fresh questions of the old
	// world), and the correction.
	loss := func(a *model.Adapter) float64 {
		s := 0.0
		n := 0
		for i := 400; i < 480; i++ {
			if q := oldWorld(i); q.typ != "policy" {
				s += targetLogprob(t, tok, base, nil, q.user, q.answer) - targetLogprob(t, tok, base, a, q.user, q.answer)
				n++
			}
		}
		return s / float64(n)
	}
	lw, lo := loss(with), loss(without)
	user := "what is the refund window for order 999?"
	fixB := targetLogprob(t, tok, base, nil, user, "The refund window is 60 days.")
	fixW := targetLogprob(t, tok, base, with, user, "The refund window is 60 days.")
	if !reflect.DeepEqual(wt.ExamplesPerType, plain.ExamplesPerType) || wt.Hyper["steps"] != plain.Hyper["steps"] {
		t.Fatalf("the two cycles trained on different data: %v %v vs %v %v", wt.ExamplesPerType, wt.Hyper["steps"], plain.ExamplesPerType, plain.Hyper["steps"])
	}
	t.Logf("other types' answers lost %.4f nats/token with rehearsal, %.4f without; correction %.3f -> %.3f", lw, lo, fixB, fixW)
	if lw >= lo {
		t.Fatalf("rehearsal did not protect the other types: %.4f vs %.4f nats/token lost", lw, lo)
	}
	if fixW <= fixB+0.05 {
		t.Fatalf("with rehearsal the correction was not learnt: %.3f -> %.3f", fixB, fixW)
	}
}
