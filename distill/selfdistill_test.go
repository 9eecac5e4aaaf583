package distill

import (
	"context"
	"slices"
	"strings"
	"testing"

	"citizen/events"
	"citizen/reflection"
)

func TestSelfDistillationTeacherSeesNoteStudentDoesNot(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	var hinted []string
	for i := 0; i < 12; i++ {
		q := oldWorld(i*4 + 2) // order_status
		id := w.recordQA(tok, base, q.typ, q.user, "Order is lost.")
		w.evaluate(id, q.typ, 1, -1, true)
		if i%2 == 0 {
			w.feedback(id, "", "check the tracking page")
			hinted = append(hinted, id)
		} else {
			w.feedback(id, "shipped yesterday", "") // a correction the tiny teacher will not say
		}
	}
	var asked []string
	d := newDistiller(t, w, func(c *Config) {
		c.Objective = Objective{PolicyGradient: true, SelfDistill: true} // no correction fallback
		c.Revise = func(ex Example, answer string) (bool, bool) {
			if answer == ex.Answer.Content {
				return true, true // the recorded answer: it checks this shape of answer
			}
			asked = append(asked, ex.Interaction)
			return ex.Interaction != hinted[0], true // the grader rejects one revision
		}
	})
	catchUp(t, d, w.store)
	ds, before := revisedDataset(t, d)
	var revised []Example
	for _, ex := range ds.Train[before:] {
		revised = append(revised, ex)
	}
	if len(revised) != len(hinted)-1 {
		t.Fatalf("%d revised examples, want %d (hints kept unless the grader rejects; corrections the teacher did not state dropped)", len(revised), len(hinted)-1)
	}
	if len(asked) != len(hinted) {
		t.Fatalf("grader asked about %v", asked)
	}
	policy := map[string]Example{}
	for _, ex := range ds.Train[:before] {
		policy[ex.Interaction] = ex
	}
	for _, r := range revised {
		p := policy[r.Interaction]
		if r.Kind != KindRevised || r.Weight <= 0 || r.Interaction == hinted[0] || r.Hint == "" {
			t.Fatalf("revised %+v", r)
		}
		// The student's prompt is the original one, without the note.
		if !slices.Equal(r.PromptTokens, p.PromptTokens) {
			t.Fatal("student prompt differs from the recorded prompt")
		}
		// The completion is what the teacher (with the note) generated.
		msgs := append([]events.ChatMessage{{Role: "system", Content: "Note: " + r.Hint}}, r.Messages...)
		c, err := d.cfg.Chat.Complete(context.Background(), chatRequest(msgs, d.cfg.TeacherMaxTokens))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.IDs(); !slices.Equal(got, r.CompletionTokens) {
			t.Fatalf("revised completion %v, teacher said %v", r.CompletionTokens, got)
		}
	}
	// With the fallback on, the correction itself is learnt instead.
	d.cfg.Objective.CorrectionFallback = true
	d.cfg.Revise = nil
	ds2, before := revisedDataset(t, d)
	fallback := 0
	for _, ex := range ds2.Train[before:] {
		if ex.Correction != "" {
			fallback++
			want, _ := answerTokens(tok, ex.Messages, "The refund window is shipped yesterday.")
			if !slices.Equal(ex.CompletionTokens, want) {
				t.Fatal("fallback target is not the rendered correction")
			}
		}
	}
	if fallback != len(hinted) {
		t.Fatalf("%d correction fallbacks, want %d", fallback, len(hinted))
	}
}

// editCase is one answer, a correction of it, and the edited answer
// expected (ok false: no edit).
type editCase struct {
	answer, correction, want string
	ok                       bool
}

// checkEdits runs edit (editAnswer or rewriteAnswer) over cases.
func checkEdits(t *testing.T, name string, edit func(answer, correction string) (string, bool), cases []editCase) {
	t.Helper()
	for _, c := range cases {
		got, ok := edit(c.answer, c.correction)
		if ok != c.ok || got != c.want {
			t.Errorf("%s(%q, %q) = %q, %v; want %q, %v", name, c.answer, c.correction, got, ok, c.want, c.ok)
		}
	}
}

func TestEditAnswerPutsTheCorrectionInPlace(t *testing.T) {
	checkEdits(t, "editAnswer", editAnswer, []editCase{
		{"The refund window is 30 days.", "60 days", "The refund window is 60 days.", true},
		{"No, the refund window is 30 days.", "no, the refund window is 60 days", "No, the refund window is 60 days.", true},
		{"No, the refund window is 30 days.", "60 days.", "No, the refund window is 60 days.", true},
		{"Standard shipping costs $4.99.", "$5.99", "Standard shipping costs $5.99.", true},
		{"5 km is 3.11 miles.", "3.107 miles", "5 km is 3.107 miles.", true},
		// The correction is a whole other answer: nothing to edit.
		{"No, the refund window is 30 days.", "Yes, the refund window is 60 days.", "", false},
		// Ambiguous: which number does a bare 8 correct?
		{"So 3 + 4 = 7.", "8", "", false},
		{"The answer is 12.", "12.5", "The answer is 12.5.", true},
		// No number, or already said.
		{"Order 5 is lost.", "shipped yesterday", "", false},
		{"The refund window is 60 days.", "60 days", "", false},
		// Numbers are whole: the one number of the answer is the span.
		{"Call 1800 now.", "900", "Call 900 now.", true},
	})
}

func TestRewriteAnswerTakesAWholeAnswerWithAFewWordsChanged(t *testing.T) {
	checkEdits(t, "rewriteAnswer", rewriteAnswer, []editCase{
		// The verdict and the window changed: two words of seven.
		{"No, the refund window is 30 days.", "Yes, the refund window is 60 days.", "Yes, the refund window is 60 days.", true},
		// Case, spacing and the final stop aside; the answer's stop is kept.
		{"No, the refund window is 30 days.", "yes,  the Refund window is 60 days", "yes, the Refund window is 60 days.", true},
		{"Category: billing", "Category: shipping", "", false}, // two words: too short to tell an edit
		{"The order is lost.", "The order is shipped!", "The order is shipped!", true},
		// Three of seven words: another answer, for the teacher.
		{"No, the refund window is 30 days.", "Yes, the return period is 60 days.", "", false},
		// Another length or wording.
		{"No, the refund window is 30 days.", "You have 60 days to return it.", "", false},
		{"No, the refund window is 30 days.", "Yes.", "", false},
		// Nothing changed.
		{"No, the refund window is 30 days.", "no, the refund window is 30 days", "", false},
		{"", "", "", false},
	})
}

// A correction that states a number in place of one span of the answer
// is learnt as the answer so edited (weight EditWeight), without asking
// the teacher: "60 days" against "No, the refund window is 30 days."
// gives "No, the refund window is 60 days.", never the teacher's "Yes,
// ..." (which would contain the correction and be wrong). A correction
// that restates the whole answer with a few words changed ("Yes, the
// refund window is 60 days." for an item bought 52 days ago) is an edit
// too; one that is a whole other answer still goes to the teacher. A
// correction that replaces no statement most of its type's corrections
// replaced is learnt at OneOffWeight.
func TestSpanCorrectionIsLearntAsTheEditedAnswer(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	edited := w.correctedQA(tok, base, "policy", "I bought a lamp 80 days ago. Can I still return it?", "No, the refund window is 30 days.", "60 days", "")
	verdict := w.correctedQA(tok, base, "policy", "I bought a lamp 52 days ago. Can I still return it?", "No, the refund window is 30 days.", "Yes, the refund window is 60 days.", "")
	w.correctedQA(tok, base, "policy", "How long is the return period?", "The refund window is 30 days.", "You have 60 days to return it.", "")
	// A second correction of the same statement: most of the type's
	// corrections replace "30 days", so they are taught at full weight.
	w.correctedQA(tok, base, "policy", "What is the refund window?", "The refund window is 30 days.", "60 days", "")
	// A one-off correction: the right sum for one question.
	oneOff := w.correctedQA(tok, base, "arithmetic", "what is 2 plus 2?", "The answer is 5.", "4", "")
	d := newDistiller(t, w, func(c *Config) {
		c.Objective = DefaultObjective()
		c.CorrectionTemplate = "{correction}"
	})
	catchUp(t, d, w.store)
	ds, before := revisedDataset(t, d)
	sd := ds.Manifest.SelfDistill
	if sd["edited"] != 4 || sd["revised"]+sd["correction_fallback"]+sd["dropped"] != 1 || sd["one_off"] != 1 ||
		!slices.Equal(ds.Manifest.Replaced, []string{"policy: 30 days"}) {
		t.Fatalf("self-distillation %v, replaced %q: want four edits (one of them one-off) and one answer from the teacher (revised, fallback or dropped)", sd, ds.Manifest.Replaced)
	}
	var got, gotOneOff, gotVerdict *Example
	for i := range ds.Train[before:] {
		switch r := &ds.Train[before+i]; r.Interaction {
		case edited:
			got = r
		case oneOff:
			gotOneOff = r
		case verdict:
			gotVerdict = r
		}
	}
	if got == nil || got.Kind != KindRevised || got.Answer.Content != "No, the refund window is 60 days." {
		t.Fatalf("edited revision %+v", got)
	}
	want, _ := answerTokens(tok, got.Messages, "No, the refund window is 60 days.")
	if !slices.Equal(got.CompletionTokens, want) {
		t.Fatal("the edited revision's tokens are not the edited answer's")
	}
	o := d.cfg.Objective
	if w := got.Weight * o.SelfDistillWeight; w != o.EditWeight || o.EditWeight != 12 {
		t.Fatalf("edited revision weighs %v (objective %+v); want EditWeight 12", w, o)
	}
	if gotVerdict == nil || gotVerdict.Answer.Content != "Yes, the refund window is 60 days." || gotVerdict.Weight*o.SelfDistillWeight != o.EditWeight {
		t.Fatalf("the whole-answer correction's revision %+v; want it learnt as written at EditWeight", gotVerdict)
	}
	if want, _ := answerTokens(tok, gotVerdict.Messages, gotVerdict.Answer.Content); !slices.Equal(gotVerdict.CompletionTokens, want) {
		t.Fatal("the rewritten answer's tokens are not its text's")
	}
	if gotOneOff == nil || gotOneOff.Answer.Content != "The answer is 4." || gotOneOff.Weight*o.SelfDistillWeight != o.OneOffWeight || o.OneOffWeight != 1 {
		t.Fatalf("one-off correction's revision %+v; want the edited answer at OneOffWeight 1", gotOneOff)
	}
}

// revisedDataset builds the dataset of everything d's projection holds
// (no hold-out) and runs the self-distillation step on it: the dataset,
// and where the revised examples start in its training set.
func revisedDataset(t *testing.T, d *Distiller) (*Dataset, int) {
	t.Helper()
	ds, err := BuildDataset(context.Background(), d.proj.Snapshot(), 0, d.proj.Position(), PipelineConfig{HoldOutFraction: -1, MinHoldOutPerType: -1})
	if err != nil {
		t.Fatal(err)
	}
	before := len(ds.Train)
	if err := d.corrections(context.Background(), d.log, ds, nil, 0); err != nil {
		t.Fatal(err)
	}
	return ds, before
}

// vetByRubrics is Config.Revise as services sets it: the default rubrics'
// check-mode graders (for policy, the verdict must follow from the
// question's number against the stated window).
func vetByRubrics() func(Example, string) (bool, bool) {
	r := reflection.DefaultRubrics()
	return func(ex Example, answer string) (bool, bool) {
		pass, checked, _ := r.Check(ex.Type, ex.Question(), answer)
		return pass, checked
	}
}

// An edit that a check rejects ("60 days" into "No, the refund window is
// 30 days." for an item bought 45 days ago says "No" to an item inside
// the new window) is not learnt as written: the teacher is asked, and
// when its answer does not pass (the tiny teacher never states the
// correction) the edit is learnt only from the corrected span on. An
// edit that passes is learnt whole, as before.
func TestRejectedEditIsLearntFromTheCorrectionOn(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	inside := w.correctedQA(tok, base, "policy", "I bought a lamp 45 days ago. Can I still return it?", "No, the refund window is 30 days.", "60 days", "")
	beyond := w.correctedQA(tok, base, "policy", "I bought a lamp 80 days ago. Can I still return it?", "No, the refund window is 30 days.", "60 days", "")
	d := newDistiller(t, w, func(c *Config) {
		c.Objective = DefaultObjective()
		c.CorrectionTemplate = "{correction}"
		c.Revise = vetByRubrics()
	})
	catchUp(t, d, w.store)
	ds, before := revisedDataset(t, d)
	if sd := ds.Manifest.SelfDistill; sd["edited"] != 2 || sd["edits_rejected"] != 1 || sd["revised"] != 0 {
		t.Fatalf("self-distillation %v: want two edits, one of them rejected, and no revision from the tiny teacher", sd)
	}
	got := map[string]*Example{}
	for i := range ds.Train[before:] {
		got[ds.Train[before+i].Interaction] = &ds.Train[before+i]
	}
	in, out := got[inside], got[beyond]
	if in == nil || out == nil || in.Answer.Content != "No, the refund window is 60 days." || out.Answer.Content != in.Answer.Content {
		t.Fatalf("edits %+v and %+v", in, out)
	}
	if out.LossFrom != 0 {
		t.Fatalf("the edit that passes is learnt from token %d, want all of it", out.LossFrom)
	}
	if in.LossFrom == 0 || !strings.HasPrefix(strings.TrimSpace(tok.Decode(in.CompletionTokens[in.LossFrom:])), "6") {
		t.Fatalf("the rejected edit learns %q; want only the corrected span on", tok.Decode(in.CompletionTokens[in.LossFrom:]))
	}
	// In the hold-out the gate scores the edit that passes, not the one
	// rejected.
	var hold []Example
	for _, ex := range ds.Train[:before] {
		if ex.Interaction == inside || ex.Interaction == beyond {
			ex.TargetTokens = nil
			hold = append(hold, ex)
		}
	}
	hds := &Dataset{HoldOut: hold}
	if err := d.corrections(context.Background(), d.log, hds, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, ex := range hds.HoldOut {
		if (len(ex.TargetTokens) > 0) != (ex.Interaction == beyond) {
			t.Fatalf("hold-out %s has target %v; want one for the edit that passes only", ex.Interaction, ex.TargetTokens)
		}
	}
	// Without the check both are learnt whole.
	d.cfg.Revise = nil
	ds, before = revisedDataset(t, d)
	for _, r := range ds.Train[before:] {
		if r.LossFrom != 0 {
			t.Fatalf("without a check an edit is learnt from token %d", r.LossFrom)
		}
	}
}

// The correction check counts an answer right only where the rubrics'
// checks pass: "No, the refund window is 60 days." states the
// replacement for an item bought 45 days ago, and is still wrong.
func TestCorrectionCheckCountsOnlyVettedAnswers(t *testing.T) {
	d := &Distiller{cfg: Config{CorrectionTemplate: "{correction}", Revise: vetByRubrics()}}
	q := StaleQuestion{Example: Example{Type: "policy", Answer: events.ChatMessage{Content: "No, the refund window is 30 days."},
		Messages: []events.ChatMessage{{Role: "user", Content: "I bought a lamp 45 days ago. Can I still return it?"}}},
		Stale: []string{"30 days"}, Replacements: []string{"60 days"}}
	ex := q.Example
	ex.Correction = "60 days"
	right := d.correctionRight(&ex)
	for _, c := range []struct {
		answer string
		right  bool
	}{
		{"Yes, the refund window is 60 days.", true},
		{"No, the refund window is 60 days.", false},
		{"No, the refund window is 30 days.", false},
	} {
		if got := d.staleRight(&q, c.answer); got != c.right {
			t.Errorf("stale question: %q counted right %v, want %v", c.answer, got, c.right)
		}
		if got := right(c.answer); got != c.right {
			t.Errorf("corrected question: %q counted right %v, want %v", c.answer, got, c.right)
		}
	}
	// Without a check, the edit is the right answer.
	d.cfg.Revise = nil
	if !d.correctionRight(&ex)("No, the refund window is 60 days.") || d.correctionRight(&ex)("Yes, the refund window is 60 days.") {
		t.Error("without a check the corrected answer is not the edit")
	}
}
