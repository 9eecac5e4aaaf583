package lessons

import (
	"context"
	"fmt"
	"testing"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/memory"
)

// world is a store with recorded interactions and a learner and view fed
// by hand the way the bus would feed them.
type world struct {
	t       *testing.T
	ctx     context.Context
	store   *memstore.Store
	learner *Learner
	view    *View
	n       int
}

func newWorld(t *testing.T, cfg Config) *world {
	emb := memory.NewHashEmbedder(0)
	st := memstore.New(memstore.Config{})
	return &world{t: t, ctx: context.Background(), store: st, learner: NewLearner(cfg, st, emb, nil), view: NewView(cfg, emb)}
}

// ask records an interaction of tenant and user asking q, answered a.
func (w *world) ask(tenant, user, typ, q, a string) string {
	w.t.Helper()
	w.n++
	id := fmt.Sprintf("00000000-0000-7000-8000-%012d", w.n)
	rec := &events.InteractionRecorded{InteractionID: id, Tenant: tenant, User: user, TaskType: typ,
		Messages: []events.ChatMessage{{Role: "user", Content: q}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: a}}}}
	w.append(rec, events.InteractionStream(id), tenant)
	return id
}

func (w *world) append(p events.Payload, stream, tenant string) events.Event {
	w.t.Helper()
	ev, err := events.Encode(p, events.Meta{Stream: stream, Tenant: tenant})
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.store.Append(w.ctx, stream, events.Any, ev)
	if err != nil {
		w.t.Fatal(err)
	}
	ev.Position = res.LastPosition
	return ev
}

// feedback interprets a comment on interaction id and runs the learner on
// it; the derived events are stored and applied to the view.
func (w *world) feedback(id, tenant, user string, fi events.FeedbackInterpreted) []events.Event {
	w.t.Helper()
	w.n++
	fi.InteractionID, fi.FeedbackID = id, fmt.Sprintf("fb-%d", w.n)
	w.append(&events.FeedbackReceived{InteractionID: id, FeedbackID: fi.FeedbackID, Source: "customer", User: user}, events.InteractionStream(id), tenant)
	ev := w.append(&fi, events.InteractionStream(id), tenant)
	return w.handle(ev)
}

// handle runs the learner on a stored event; what it derives is stored
// and applied to the view, as the bus and the view's follower would.
func (w *world) handle(ev events.Event) []events.Event {
	w.t.Helper()
	out, err := w.learner.Handle(w.ctx, ev)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, e := range out {
		if err := w.view.Apply(w.ctx, w.append(mustDecode(w.t, e), e.Stream, e.Tenant)); err != nil {
			w.t.Fatal(err)
		}
	}
	return out
}

func mustDecode(t *testing.T, e events.Event) events.Payload {
	t.Helper()
	p, err := events.Decode(&e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (w *world) correct(tenant, user, q, wrong, value string) []events.Event {
	id := w.ask(tenant, user, "policy", q, wrong)
	return w.feedback(id, tenant, user, events.FeedbackInterpreted{Polarity: -1, Correction: value, Confidence: 0.95})
}

func (w *world) applicable(tenant, user, q string) []events.AppliedLesson {
	w.t.Helper()
	got, err := w.view.Applicable(w.ctx, Query{Tenant: tenant, User: user, TaskType: "policy", Question: q})
	if err != nil {
		w.t.Fatal(err)
	}
	return got
}

func types(evs []events.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestFactLessonLifecycle(t *testing.T) {
	w := newWorld(t, Config{})
	const q = "What is your refund window?"
	if got := types(w.correct("acme", "u1", q, "30 days", "60 days")); fmt.Sprint(got) != "[lesson.proposed]" {
		t.Fatalf("first claim: %v, want a proposal", got)
	}
	if got := w.applicable("acme", "u3", q); len(got) != 0 {
		t.Fatalf("a proposal applies: %v", got)
	}
	if got := types(w.correct("acme", "u2", "What is your refund window??", "30 days", "60 days")); fmt.Sprint(got) != "[lesson.promoted]" {
		t.Fatalf("second user: %v, want a promotion", got)
	}
	got := w.applicable("acme", "u3", q)
	if len(got) != 1 || got[0].Statement != `For "What is your refund window?": the right answer is 60 days.` {
		t.Fatalf("applicable = %+v", got)
	}
	// A dissimilar question is not in the cluster; nor another tenant.
	if got := w.applicable("acme", "u3", "What does standard shipping cost?"); len(got) != 0 {
		t.Fatalf("shipping question got %v", got)
	}
	if got := w.applicable("other", "u3", q); len(got) != 0 {
		t.Fatalf("other tenant got %v", got)
	}
	// A later change: two users correct the answer given with the lesson.
	w.correct("acme", "u4", q, "60 days", "90 days")
	evs := w.correct("acme", "u5", q, "60 days", "90 days")
	if fmt.Sprint(types(evs)) != "[lesson.promoted lesson.superseded]" {
		t.Fatalf("the change: %v", types(evs))
	}
	got = w.applicable("acme", "u3", q)
	if len(got) != 1 || got[0].Statement != `For "What is your refund window?": the right answer is 90 days.` {
		t.Fatalf("after the change: %+v", got)
	}
	if n := len(w.view.List("acme", "superseded")); n != 1 {
		t.Fatalf("superseded lessons: %d", n)
	}
}

func TestOneUserCannotPromote(t *testing.T) {
	w := newWorld(t, Config{})
	const q = "What is your refund window?"
	for i := 0; i < 50; i++ {
		w.correct("acme", "mallory", q, "30 days", "365 days")
	}
	if got := w.applicable("acme", "u1", q); len(got) != 0 {
		t.Fatalf("one user's 50 claims promoted %v", got)
	}
	if n := len(w.view.List("acme", "proposed")); n != 1 {
		t.Fatalf("proposals: %d, want 1", n)
	}
}

func TestDisagreementBlocksPromotion(t *testing.T) {
	w := newWorld(t, Config{})
	const q = "What are your support hours?"
	w.correct("acme", "u1", q, "9am to 5pm", "8am to 8pm")
	w.correct("acme", "u2", q, "9am to 5pm", "10am to 6pm")
	w.correct("acme", "u3", q, "9am to 5pm", "7am to 7pm")
	w.correct("acme", "u4", q, "9am to 5pm", "8am to 8pm")
	// 2 for 8am to 8pm, 2 against: less than 2× → still proposed.
	if got := w.applicable("acme", "u9", q); len(got) != 0 {
		t.Fatalf("promoted against the rule: %v", got)
	}
	w.correct("acme", "u5", q, "9am to 5pm", "8am to 8pm")
	w.correct("acme", "u6", q, "9am to 5pm", "8am to 8pm")
	if got := w.applicable("acme", "u9", q); len(got) != 1 {
		t.Fatalf("4 for, 2 against: %v", got)
	}
}

func TestNumbersBoundTheCluster(t *testing.T) {
	w := newWorld(t, Config{})
	w.correct("acme", "u1", "What is 17 + 25?", "41", "42")
	w.correct("acme", "u2", "What is 17 + 25?", "41", "42")
	if got := w.applicable("acme", "u3", "What is 17 + 25?"); len(got) != 1 {
		t.Fatalf("same question: %v", got)
	}
	if got := w.applicable("acme", "u3", "What is 19 + 23?"); len(got) != 0 {
		t.Fatalf("other numbers got %v", got)
	}
}

func TestGuidanceIsTheUsers(t *testing.T) {
	w := newWorld(t, Config{})
	hint := events.FeedbackInterpreted{Polarity: -0.6, Hint: "Be more concise.", Aspects: []string{"length"}, Confidence: 0.95}
	w.feedback(w.ask("acme", "u1", "policy", "What is your refund window?", "long answer"), "acme", "u1", hint)
	if got := w.applicable("acme", "u1", "anything"); len(got) != 0 {
		t.Fatalf("one hint promoted: %v", got)
	}
	w.feedback(w.ask("acme", "u1", "policy", "What is the shipping fee?", "long answer"), "acme", "u1", hint)
	if got := w.applicable("acme", "u1", "anything"); len(got) != 1 || got[0].Statement != "Be more concise." {
		t.Fatalf("u1's guidance: %v", got)
	}
	if got := w.applicable("acme", "u2", "anything"); len(got) != 0 {
		t.Fatalf("u2 got u1's guidance: %v", got)
	}
}

func TestUncertainIsNotEvidence(t *testing.T) {
	w := newWorld(t, Config{})
	for _, u := range []string{"u1", "u2", "u3"} {
		id := w.ask("acme", u, "policy", "What is your refund window?", "30 days")
		if evs := w.feedback(id, "acme", u, events.FeedbackInterpreted{Polarity: -1, Correction: "60 days", Confidence: 0.5, Uncertain: true}); len(evs) != 0 {
			t.Fatalf("uncertain feedback derived %v", types(evs))
		}
	}
}

func TestRebuildReproducesDecisions(t *testing.T) {
	w := newWorld(t, Config{})
	const q = "What is your refund window?"
	w.correct("acme", "u1", q, "30 days", "60 days")
	w.correct("acme", "u2", q, "30 days", "60 days")
	// An operator retires it.
	ls := w.view.List("acme", "promoted")
	if len(ls) != 1 {
		t.Fatalf("promoted: %d", len(ls))
	}
	ch := ls[0].LessonChange
	ch.Actor, ch.Reason = "operator", "wrong"
	w.append(&events.LessonRetired{LessonChange: ch}, events.LessonStream(ch.LessonID), "acme")

	fresh := NewLearner(Config{}, w.store, memory.NewHashEmbedder(0), nil)
	if _, err := fresh.Rebuild(w.ctx, w.store); err != nil {
		t.Fatal(err)
	}
	if st := fresh.lessons[ch.LessonID].state; st != "retired" {
		t.Fatalf("rebuilt state %q, want retired", st)
	}
	// Handling the same feedback again derives nothing new.
	evs, err := w.store.ReadAll(w.ctx, 0, events.Filter{Types: []string{events.TypeFeedbackInterpreted}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if out, err := fresh.Handle(w.ctx, ev); err != nil || len(out) != 0 {
			t.Fatalf("redelivery derived %v (%v)", types(out), err)
		}
	}
	v := NewView(Config{}, memory.NewHashEmbedder(0))
	all, _ := w.store.ReadAll(w.ctx, 0, events.Filter{Types: events.LessonTypes}, 100)
	for _, ev := range all {
		if err := v.Apply(w.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := v.Applicable(w.ctx, Query{Tenant: "acme", Question: q}); len(got) != 0 {
		t.Fatalf("a retired lesson applies: %v", got)
	}
}

func TestWithLessonsKeepsTheClientsMessages(t *testing.T) {
	msgs := []events.ChatMessage{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "hi"}}
	out := events.WithLessons(msgs, []events.AppliedLesson{{ID: "a", Statement: "X."}})
	if msgs[0].Content != "Be terse." {
		t.Fatal("WithLessons modified its input")
	}
	if len(out) != 2 || out[0].Content != "Be terse.\n\n"+events.LessonsHeading+"\n- X." {
		t.Fatalf("with a system message: %+v", out)
	}
	out = events.WithLessons(msgs[1:], []events.AppliedLesson{{ID: "a", Statement: "X."}})
	if len(out) != 2 || out[0].Role != "system" || out[1].Content != "hi" {
		t.Fatalf("without one: %+v", out)
	}
}

func TestComplaintIsNotGuidance(t *testing.T) {
	w := newWorld(t, Config{})
	hint := events.FeedbackInterpreted{Polarity: -1, Hint: "The previous answer was wrong; check the facts before answering.", Aspects: []string{"correctness"}, Confidence: 0.95}
	for i := 0; i < 3; i++ {
		if evs := w.feedback(w.ask("acme", "u1", "policy", "What is your refund window?", "x"), "acme", "u1", hint); len(evs) != 0 {
			t.Fatalf("a complaint derived %v", types(evs))
		}
	}
}

// evaluate appends an evaluation of interaction id and runs the learner.
func (w *world) evaluate(id, tenant, user string, reward float64, lessons ...string) []events.Event {
	w.t.Helper()
	ev := w.append(&events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "policy", User: user, Lessons: lessons,
		Reward: reward, RewardTerms: map[string]float64{"graders": reward}}, events.InteractionStream(id), tenant)
	return w.handle(ev)
}

func TestLessonThatHurtsIsRetired(t *testing.T) {
	for _, tc := range []struct {
		with    float64
		retired bool
	}{{0.2, true}, {0.75, false}} {
		w := newWorld(t, Config{TrialInteractions: 5})
		hint := events.FeedbackInterpreted{Polarity: -0.6, Hint: "Be more concise.", Aspects: []string{"length"}, Confidence: 0.95}
		for i := 0; i < 2; i++ {
			w.feedback(w.ask("acme", "u1", "policy", "q", "long answer"), "acme", "u1", hint)
		}
		got := w.applicable("acme", "u1", "anything")
		if len(got) != 1 {
			t.Fatalf("not promoted: %v", got)
		}
		for i := 0; i < 12; i++ {
			w.evaluate(w.ask("acme", "u1", "policy", "q", "a"), "acme", "u1", 0.8)
		}
		var evs []events.Event
		for i := 0; i < 5; i++ {
			evs = append(evs, w.evaluate(w.ask("acme", "u1", "policy", "q", "a"), "acme", "u1", tc.with, got[0].ID)...)
		}
		if tc.retired != (len(evs) == 1 && evs[0].Type == events.TypeLessonRetired) {
			t.Fatalf("with %.2f against 0.8: derived %v", tc.with, types(evs))
		}
		if still := len(w.applicable("acme", "u1", "anything")) == 1; still == tc.retired {
			t.Fatalf("with %.2f: still applies %v", tc.with, still)
		}
	}
}

// Paraphrases whose questions look nothing alike join one cluster through
// their answers; the promoted lesson then revises a third phrasing's
// answer that states what it corrects, and not an answer stating its
// value or another fact.
func TestAnswersJoinParaphrases(t *testing.T) {
	w := newWorld(t, Config{})
	w.correct("acme", "u1", "What is your refund window?", "The refund window is 30 days.", "60 days")
	if evs := w.correct("acme", "u2", "How many days do I have to return something?", "The refund window is 30 days.", "60 days"); fmt.Sprint(types(evs)) != "[lesson.promoted]" {
		t.Fatalf("second phrasing: %v", types(evs))
	}
	q := Query{Tenant: "acme", TaskType: "policy", Question: "What's the deadline for returns?"}
	got, err := w.view.Revise(w.ctx, q, "No, the refund window is 30 days.")
	if err != nil || len(got) != 1 {
		t.Fatalf("revise a stale answer: %v %v", got, err)
	}
	for _, a := range []string{"The refund window is 60 days.", "Standard shipping costs $4.99.", "The refund window is 14 days."} {
		if got, _ := w.view.Revise(w.ctx, q, a); len(got) != 0 {
			t.Fatalf("revised %q: %v", a, got)
		}
	}
	if l, ok, _ := w.view.Reference(w.ctx, q, "The refund window is 30 days."); !ok || l.Value != "60 days" {
		t.Fatalf("reference by answer: %+v %v", l, ok)
	}
}

// Praise of answers like the corrected one weighs against the correction:
// a label the model mostly gets right is not overturned by two users.
func TestPraiseWeighsAgainst(t *testing.T) {
	w := newWorld(t, Config{})
	praise := events.FeedbackInterpreted{Polarity: 1, Confidence: 0.95}
	for i, u := range []string{"u3", "u4", "u5", "u6"} {
		if i == 2 {
			w.correct("acme", "u1", "Classify: the food was cold", "positive", "negative")
		}
		id := w.ask("acme", u, "policy", fmt.Sprintf("Classify: great service %d", i), "positive")
		w.feedback(id, "acme", u, praise)
	}
	w.correct("acme", "u2", "Classify: the room was dirty", "positive", "negative")
	if n := len(w.view.List("acme", "promoted")); n != 0 {
		t.Fatalf("promoted against praise: %v", w.view.List("acme", "promoted"))
	}
}

// A correction that states the value of another agrees with it ("60 days"
// and "The refund window is 60 days.").
func TestContainingValuesAgree(t *testing.T) {
	w := newWorld(t, Config{})
	w.correct("acme", "u1", "What is your refund window?", "The refund window is 30 days.", "60 days")
	w.correct("acme", "u2", "What is your refund window?", "The refund window is 30 days.", "The refund window is 60 days.")
	if n := len(w.view.List("acme", "promoted")); n != 1 {
		t.Fatalf("promoted %d", n)
	}
	// Agreement goes both ways, case aside: the sentence's lesson counts
	// both users too.
	for _, l := range w.view.List("acme", "") {
		if l.Value == "The refund window is 60 days." && l.Users != 2 {
			t.Fatalf("the sentence's lesson has %d users", l.Users)
		}
	}
}

// A promoted version whose lesson check found it answers a lesson's
// questions as well without it as with it retires the lesson; one that
// does not, or a version that is only trained, leaves it.
func TestPromotedWeightsRetireTheLesson(t *testing.T) {
	for _, tc := range []struct {
		carry   events.LessonCarry
		retired bool
	}{{events.LessonCarry{Asked: 3, Without: 3, With: 3}, true}, {events.LessonCarry{Asked: 3, Without: 1, With: 3}, false}} {
		w := newWorld(t, Config{})
		const q = "What is your refund window?"
		w.correct("acme", "u1", q, "30 days", "60 days")
		w.correct("acme", "u2", q, "30 days", "60 days")
		id := w.view.List("acme", "promoted")[0].LessonID
		tc.carry.Lesson = id
		run := func(p events.Payload, stream string) []events.Event { return w.handle(w.append(p, stream, "")) }
		if out := run(&events.WeightsTrained{Version: "v1", Accepted: true, Lessons: []events.LessonCarry{tc.carry}}, events.VersionStream("v1")); len(out) != 0 {
			t.Fatalf("training alone derived %v", types(out))
		}
		out := run(&events.RolloutPromoted{RolloutChange: events.RolloutChange{Candidate: "v1"}}, events.RolloutStream("r1"))
		if got := len(out) == 1 && out[0].Type == events.TypeLessonRetired; got != tc.retired {
			t.Fatalf("carry %+v: derived %v", tc.carry, types(out))
		}
		if l, _ := w.view.Get(id); tc.retired && (l.State != "retired" || l.Retirement == nil || l.Retirement.Version != "v1") {
			t.Fatalf("retired lesson %+v", l)
		}
	}
}

// Agreeing values do not supersede each other; a contradicting one does.
func TestAgreeingLessonsCoexist(t *testing.T) {
	w := newWorld(t, Config{})
	const q = "What is your refund window?"
	w.correct("acme", "u1", q, "The refund window is 30 days.", "60 days")
	w.correct("acme", "u2", q, "The refund window is 30 days.", "60 days")
	w.correct("acme", "u3", "It's been 45 days since I got my lamp. Can I still send it back?", "No, the refund window is 30 days.", "Yes, the refund window is 60 days.")
	w.correct("acme", "u4", "It's been 45 days since I got my lamp. Can I still send it back?", "No, the refund window is 30 days.", "Yes, the refund window is 60 days.")
	if n := len(w.view.List("acme", "superseded")); n != 0 {
		t.Fatalf("agreeing lessons superseded: %+v", w.view.List("acme", "superseded"))
	}
	if ls := w.view.List("acme", "promoted"); len(ls) != 2 || len(ls[0].Scope.Answers) != 2 {
		t.Fatalf("want both promoted in one cluster (by their answers): %+v", ls)
	}
	for _, u := range []string{"u5", "u6", "u7", "u8", "u9"} {
		w.correct("acme", u, q, "The refund window is 60 days.", "90 days")
	}
	if n := len(w.view.List("acme", "superseded")); n == 0 {
		t.Fatalf("nothing superseded by 90 days: %+v", w.view.List("acme", ""))
	}
}

// A fact lesson's statement quotes the customer's words when they differ
// from the value's canonical form.
func TestStatementQuotesTheCustomer(t *testing.T) {
	if got := factStatement("When is support open?", "08:00-17:00", "no - it's 8am to 5pm now"); got != `For "When is support open?": the right answer is 08:00-17:00 (a customer wrote: "no - it's 8am to 5pm now").` {
		t.Fatalf("statement %q", got)
	}
	if got := factStatement("Q?", "60 days", "60 days."); got != `For "Q?": the right answer is 60 days.` {
		t.Fatalf("statement %q", got)
	}
}
