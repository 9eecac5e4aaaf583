package services

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/gateway"
	"citizen/internal/modules"
	"citizen/reflection"
	"citizen/workplace"
)

// The two stories of the seed talk, told with the workplace against a real
// in-process citizen (every module of `citizen serve` on the durable store,
// the engine replaced by a scripted policy) over HTTP:
//
//   - flaky tools (10% failures) must not teach the model to answer
//     shorter: faulted interactions carry no training credit, so faults
//     put no correlation between reward and answer length into what is
//     trained on;
//   - a policy that spams tool calls until the harness gives up gets a
//     failure, not a dropped record, and the drop-rate and tool-call
//     detectors fire.

// scriptedEngine answers with a policy that is a pure function of the
// conversation so far (its randomness is seeded by a hash of the
// messages), so a workplace run is deterministic whatever the
// interleaving of its conversations.
type scriptedEngine struct {
	seed   uint64
	policy func(r *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult
}

func (e *scriptedEngine) Name() string { return "scripted" }

func (e *scriptedEngine) Versions(context.Context) ([]gateway.VersionInfo, error) {
	return []gateway.VersionInfo{{ID: "base"}}, nil
}

func (e *scriptedEngine) Generate(ctx context.Context, req *gateway.GenerateRequest, emit func(gateway.Delta) error) (*gateway.Result, error) {
	h := fnv.New64a()
	for _, m := range req.Messages {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", m.Role, m.Content, m.ToolCallID)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(h, "%s\x00%s\x00", tc.Name, tc.Arguments)
		}
	}
	ch := e.policy(rand.New(rand.NewPCG(e.seed, h.Sum64())), req.Messages)
	if ch.FinishReason == "" {
		ch.FinishReason = gateway.FinishStop
		if len(ch.ToolCalls) > 0 {
			ch.FinishReason = gateway.FinishToolCalls
		}
	}
	if req.Stream {
		if err := emit(gateway.Delta{Text: ch.Content}); err != nil {
			return nil, err
		}
		for i, tc := range ch.ToolCalls {
			if err := emit(gateway.Delta{ToolCall: &gateway.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}}); err != nil {
				return nil, err
			}
		}
	}
	n := len([]rune(ch.Content))
	return &gateway.Result{Version: "base", Tokenizer: "scripted@1", Choices: []gateway.ChoiceResult{ch},
		Usage: gateway.Usage{PromptTokens: 1, CompletionTokens: n, TotalTokens: n + 1}}, nil
}

var storyOrderID = regexp.MustCompile(`\b[A-Z]\d{5}\b`)

// lookup is the order_status tool call for the first order id the user
// gave.
func lookup(msgs []gateway.Message, i int) gateway.ToolCall {
	id := ""
	for _, m := range msgs {
		if m.Role == "user" {
			if id = storyOrderID.FindString(m.Content); id != "" {
				break
			}
		}
	}
	return gateway.ToolCall{ID: fmt.Sprintf("call_%d_%d", len(msgs), i), Name: "get_order_status", Arguments: fmt.Sprintf(`{"order_id":%q}`, id)}
}

// Courtesy sentences that pad an answer: they state no status, no date
// and no apology, so the workplace grades the answer on its content alone.
var padding = []string{
	" Thank you for contacting our support team today.",
	" We appreciate your patience with us.",
	" Have a wonderful rest of your week.",
	" It was a pleasure to help you with this.",
}

var statusPhrase = map[string]string{"processing": "is being processed", "shipped": "has shipped",
	"delivered": "was delivered", "cancelled": "was cancelled"}

// orderAnswerer is a tool-using policy for order_status: it looks the
// order up, then states the looked-up status (right with probability
// pRight, else another status), padded with 2 to 5 courtesy sentences
// drawn independently of everything else. After a failed lookup it
// apologises; shortAfterFault makes that apology bare (the habit flaky
// tools taught), otherwise it is padded like any answer.
func orderAnswerer(pRight float64, shortAfterFault bool) func(r *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult {
	pad := func(r *rand.Rand, s string) string {
		for k := 2 + r.IntN(4); k > 0; k-- {
			s += padding[r.IntN(len(padding))]
		}
		return s
	}
	return func(r *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult {
		last := msgs[len(msgs)-1]
		var result map[string]string
		for i := len(msgs) - 1; i >= 0 && result == nil; i-- {
			if msgs[i].Role == "tool" {
				json.Unmarshal([]byte(msgs[i].Content), &result)
				if result == nil {
					result = map[string]string{"error": "unreadable"}
				}
			}
		}
		right := r.Float64() < pRight
		switch {
		case last.Role == "user" && result == nil:
			return gateway.ChoiceResult{ToolCalls: []gateway.ToolCall{lookup(msgs, 0)}}
		case result["error"] != "":
			a := "Sorry, that lookup failed."
			if !shortAfterFault {
				a = pad(r, a)
			}
			return gateway.ChoiceResult{Content: a}
		case last.Role == "user": // the follow-up: when will it arrive?
			d, _ := time.Parse("2006-01-02", result["eta"])
			if !right {
				d = d.AddDate(0, 0, 3)
			}
			return gateway.ChoiceResult{Content: pad(r, "It should arrive on "+d.Format("2006-01-02")+".")}
		}
		st := result["status"]
		if !right {
			others := []string{}
			for s := range statusPhrase {
				if s != st {
					others = append(others, s)
				}
			}
			slices.Sort(others)
			st = others[r.IntN(len(others))]
		}
		a := "Order " + result["order_id"] + " " + statusPhrase[st] + "."
		return gateway.ChoiceResult{Content: pad(r, a)}
	}
}

// toolSpammer never answers: every completion calls the lookup `calls`
// times.
func toolSpammer(calls int) func(r *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult {
	return func(r *rand.Rand, msgs []gateway.Message) gateway.ChoiceResult {
		var ch gateway.ChoiceResult
		for i := 0; i < calls; i++ {
			ch.ToolCalls = append(ch.ToolCalls, lookup(msgs, i))
		}
		return ch
	}
}

// storyCitizen is citizen serving in this process with a scripted engine.
type storyCitizen struct {
	base  string
	store events.Store
	logs  *syncBuffer
	stop  func(t *testing.T)
}

// startStoryCitizen runs every module of `citizen serve` on a durable
// store in a temporary directory, with eng in place of the engine module.
func startStoryCitizen(t *testing.T, eng gateway.Engine) *storyCitizen {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Gateway.Listen = freeAddr(t)
	cfg.Model.Engine = "stub" // replaced below; the distiller stays idle
	logs := newSyncBuffer()
	app := &App{Config: cfg, Log: NewLogger(LogConfig{Level: "warn", Format: "text"}, logs)}
	stores := make(chan events.Store, 1)
	mods := app.Modules()
	for i := range mods {
		if mods[i].Name == "engine" {
			mods[i].Init = func(context.Context) (modules.Service, error) {
				app.Engine = eng
				stores <- app.Store // initialised before the engine (a dependency)
				return nil, nil
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- modules.New(app.Log, mods...).Run(ctx, []string{"all"}, 30*time.Second) }()
	c := &storyCitizen{base: "http://" + cfg.Gateway.Listen, logs: logs}
	c.stop = func(t *testing.T) {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("citizen stopped with %v; logs:\n%s", err, logs)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("citizen did not stop")
		}
	}
	t.Cleanup(func() { c.stop(t) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("citizen did not start: %v; logs:\n%s", err, logs)
		default:
		}
		if resp, err := http.Get(c.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("citizen not ready; logs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.store = <-stores
	return c
}

// readEvents returns every stored event of type typ, in position order.
func readEvents(t *testing.T, st events.Store, typ string) []events.Event {
	t.Helper()
	var out []events.Event
	var after uint64
	for {
		b, err := st.ReadAll(context.Background(), after, events.Filter{Types: []string{typ}}, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
		after = b[len(b)-1].Position
	}
}

// latestEvaluations is the latest evaluation (highest Seq) of each
// interaction.
func latestEvaluations(t *testing.T, st events.Store) map[string]events.InteractionEvaluated {
	t.Helper()
	out := map[string]events.InteractionEvaluated{}
	for _, ev := range readEvents(t, st, events.TypeInteractionEvaluated) {
		p, err := events.Decode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		x := *p.(*events.InteractionEvaluated)
		if old, ok := out[x.InteractionID]; !ok || x.Seq > old.Seq {
			out[x.InteractionID] = x
		}
	}
	return out
}

// awaitEvaluations polls the store until every interaction of recs has an
// evaluation and every conversation whose outcome was reported has it in
// the evaluation of the interaction it was reported on.
func awaitEvaluations(t *testing.T, c *storyCitizen, recs []workplace.Record) map[string]events.InteractionEvaluated {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		evals := latestEvaluations(t, c.store)
		missing := ""
		for _, r := range recs {
			for _, tr := range r.Turns {
				for _, id := range tr.InteractionIDs {
					if _, ok := evals[interactionOf(id)]; !ok && missing == "" {
						missing = "no evaluation of " + id + " (" + r.Conversation + ")"
					}
				}
			}
			if r.Outcome != "" && missing == "" {
				if ev := evals[lastInteraction(r)]; ev.Outcome != r.Outcome {
					missing = fmt.Sprintf("%s: outcome %q not evaluated yet", r.Conversation, r.Outcome)
				}
			}
		}
		if missing == "" {
			return evals
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s; logs:\n%s", missing, c.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// interactionOf maps a completion id to its interaction id.
func interactionOf(completion string) string {
	id, _ := gateway.InteractionID(completion)
	return id
}

// lastInteraction is the interaction id of the conversation's last
// completion (the one an outcome without free-text feedback is reported
// on).
func lastInteraction(r workplace.Record) string {
	for i := len(r.Turns) - 1; i >= 0; i-- {
		if ids := r.Turns[i].InteractionIDs; len(ids) > 0 {
			return interactionOf(ids[len(ids)-1])
		}
	}
	return ""
}

func runWorkplace(t *testing.T, c *storyCitizen, cfg workplace.Config) (workplace.Summary, []workplace.Record) {
	t.Helper()
	cfg.Target, cfg.APIKey = c.base, "sk-citizen-dev"
	cfg.LogPath = filepath.Join(t.TempDir(), "workplace.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	sum, err := workplace.Run(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workplace: %d conversations in %.1f s", sum.Total.Count, time.Since(start).Seconds())
	recs, err := workplace.ReadLog(cfg.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != cfg.Interactions {
		t.Fatalf("workplace logged %d conversations, want %d", len(recs), cfg.Interactions)
	}
	for _, r := range recs {
		if r.Error != "" {
			t.Fatalf("%s: %s; logs:\n%s", r.Conversation, r.Error, c.logs)
		}
	}
	return sum, recs
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i] / n
		my += y[i] / n
	}
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// replayDetectors feeds the stored evaluations, in store order, to fresh
// detectors with serve's configuration and returns the anomaly kinds they
// raise: what serve's detectors raise once they have caught up.
func replayDetectors(t *testing.T, st events.Store) map[string]events.AnomalyDetected {
	t.Helper()
	d := reflection.NewDetectors(reflection.DetectorConfig{})
	out := map[string]events.AnomalyDetected{}
	for _, ev := range readEvents(t, st, events.TypeInteractionEvaluated) {
		as, err := d.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			p, err := events.Decode(&a)
			if err != nil {
				t.Fatal(err)
			}
			x := *p.(*events.AnomalyDetected)
			out[x.Kind] = x
		}
	}
	return out
}

// TestStoryFlakyTools: tool failures at 10%, a model that is right 70% of
// the time and pads its answers to lengths that have nothing to do with
// being right. Every answer that followed a failed lookup is reported to
// citizen as a failure by the harness (the customer did not get what they
// came for). Citizen attributes the fault to the environment and gives
// those interactions no training credit, so the reward it trains on is
// uncorrelated with answer length; the naive reward (the same numbers, the
// faulted ones counted as failures) correlates with length as soon as the
// model answers differently after faults (here: bare apologies), a signal
// about the tools, not the answers, that a learner would follow.
func TestStoryFlakyTools(t *testing.T) {
	for _, tc := range []struct {
		name            string
		shortAfterFault bool
	}{
		{"length independent of faults", false},
		{"shorter after faults", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startStoryCitizen(t, &scriptedEngine{seed: 11, policy: orderAnswerer(0.7, tc.shortAfterFault)})
			_, recs := runWorkplace(t, c, workplace.Config{Interactions: 600, Concurrency: 4, Seed: 7,
				Families: []string{"order_status"}, ToolFailRate: 0.1, OutcomeRate: 1})
			evals := awaitEvaluations(t, c, recs)

			var faulted, answers int
			var trainR, trainL, naiveR, naiveL []float64
			for _, r := range recs {
				if r.Dropped || r.Outcome == "" {
					t.Fatalf("%s: dropped %v, outcome %q: every conversation should end with a reported outcome", r.Conversation, r.Dropped, r.Outcome)
				}
				ev := evals[lastInteraction(r)]
				if ev.AnswerLength == 0 || ev.ToolCalls != 0 {
					t.Fatalf("%s: the outcome landed on %+v, not on an answer", r.Conversation, ev)
				}
				answers++
				naiveR, naiveL = append(naiveR, ev.Reward), append(naiveL, float64(ev.AnswerLength))
				envFault := false
				for _, f := range ev.Faults {
					if f.Attribution == "environment" {
						envFault = f.Kind == "tool_error"
					}
				}
				afterFault := r.Turns[len(r.Turns)-1].AfterFault
				switch {
				case afterFault:
					faulted++
					if !envFault || ev.Trainable || !strings.Contains(ev.Policy, "environment fault (tool_error)") || ev.Outcome != workplace.OutcomeFailure {
						t.Errorf("%s: answer after a failed lookup evaluated %+v; want a tool_error attributed to the environment, the failure recorded, no training credit", r.Conversation, ev)
					}
				case envFault:
					t.Errorf("%s: environment fault found where none was injected: %+v", r.Conversation, ev.Faults)
				default:
					// The reward trained on says what the harness saw.
					if !ev.Trainable || (ev.Reward > 0) != r.Correct {
						t.Errorf("%s: correct=%v evaluated reward %v trainable %v (%s)", r.Conversation, r.Correct, ev.Reward, ev.Trainable, ev.Policy)
					}
					trainR, trainL = append(trainR, ev.Reward), append(trainL, float64(ev.AnswerLength))
				}
			}
			// Each conversation makes one valid lookup: about 10% fail.
			if f := float64(faulted) / float64(answers); f < 0.06 || f > 0.14 {
				t.Fatalf("%d of %d conversations hit a tool failure; want about 10%%", faulted, answers)
			}
			// Nothing but the lookups carries a fault.
			for id, ev := range evals {
				for _, f := range ev.Faults {
					if f.Attribution != "environment" || f.Kind != "tool_error" {
						t.Errorf("%s: unexpected fault %+v", id, f)
					}
				}
			}
			// What the reward-length detector correlates: every latest
			// evaluation, tool rounds (no reward signal) and faulted
			// answers included.
			var allR, allL []float64
			for _, ev := range evals {
				allR, allL = append(allR, ev.Reward), append(allL, float64(ev.AnswerLength))
			}
			t.Logf("corr(reward, length) over every evaluation, as the detector windows see them: %.3f over %d", pearson(allR, allL), len(allR))
			rTrain, rNaive := pearson(trainR, trainL), pearson(naiveR, naiveL)
			t.Logf("%d conversations, %d answers after a tool failure (excluded, policy recorded); corr(reward, length): trainable %.3f over %d, naive (faults as failures) %.3f over %d",
				len(recs), faulted, rTrain, len(trainR), rNaive, len(naiveR))
			if math.Abs(rTrain) > 0.12 {
				t.Errorf("reward trained on correlates with answer length: %.3f", rTrain)
			}
			if tc.shortAfterFault {
				if rNaive < 0.15 || rNaive-rTrain < 0.15 {
					t.Errorf("naive reward correlation %.3f: faults counted as failures should tie reward to length when the model answers shorter after them", rNaive)
				}
			} else if math.Abs(rNaive) > 0.12 {
				t.Errorf("naive reward correlates with length %.3f though length is independent of faults", rNaive)
			}
			// No drops, no tool spam: those detectors stay quiet.
			anomalies := replayDetectors(t, c.store)
			for kind, a := range anomalies {
				t.Logf("detector %s: value %.3f baseline %.3f over %d", kind, a.Value, a.Baseline, a.Window)
			}
			for kind := range anomalies {
				if kind == reflection.KindDropRate || kind == reflection.KindToolCallSpam {
					t.Errorf("detector %s fired on a run with no drops and one lookup per question", kind)
				}
			}
		})
	}
}

// TestStoryToolSpamTimeouts: a policy that calls the lookup four times per
// completion and never answers, until the harness's turn budget (its
// default, 8 model calls) runs out and it drops the conversation. Every
// conversation is in the store, its last interaction evaluated with
// outcome timeout counted as a failure (negative reward, trainable,
// attributed to the model), and the drop-rate and tool-call-spam detectors
// fire. (One drop in eight evaluations is 12.5%, under the 15% threshold:
// the drop rate must be counted per turn, not per evaluation, or the
// spammer dilutes its own drops.)
func TestStoryToolSpamTimeouts(t *testing.T) {
	const conversations, budget, calls = 40, 8, 4
	c := startStoryCitizen(t, &scriptedEngine{seed: 13, policy: toolSpammer(calls)})
	sum, recs := runWorkplace(t, c, workplace.Config{Interactions: conversations, Concurrency: 4, Seed: 5,
		Families: []string{"order_status"}}) // TurnBudget: the default, 8
	if sum.Total.Dropped != conversations {
		t.Fatalf("harness dropped %d of %d conversations", sum.Total.Dropped, conversations)
	}
	evals := awaitEvaluations(t, c, recs)

	// Every conversation is recorded, completion by completion.
	convs := map[string]int{}
	for _, ev := range readEvents(t, c.store, events.TypeInteractionRecorded) {
		p, err := events.Decode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		convs[p.(*events.InteractionRecorded).Conversation]++
	}
	for _, r := range recs {
		if n := convs[r.Conversation]; n != budget {
			t.Errorf("%s: %d interactions recorded, want %d", r.Conversation, n, budget)
		}
		if !r.Dropped || r.DropReason != "turn budget" || r.Outcome != workplace.OutcomeTimeout || !r.FeedbackSent {
			t.Fatalf("%s: dropped %v (%s), outcome %q sent %v", r.Conversation, r.Dropped, r.DropReason, r.Outcome, r.FeedbackSent)
		}
		ev := evals[lastInteraction(r)]
		modelTimeout := false
		for _, f := range ev.Faults {
			modelTimeout = modelTimeout || f.Kind == "timeout" && f.Attribution == "model"
		}
		if ev.Outcome != "timeout" || ev.Reward >= 0 || ev.RewardTerms["outcome"] != -1 || !ev.Trainable ||
			ev.Policy != "timeout counted as failure" || !modelTimeout || ev.ToolCalls != calls {
			t.Errorf("%s: last interaction evaluated %+v; want timeout counted as a failure", r.Conversation, ev)
		}
	}
	if len(convs) != conversations {
		t.Errorf("%d conversations recorded, want %d", len(convs), conversations)
	}

	// serve's detectors raise both anomalies for (base, order_status).
	want := map[string]bool{reflection.KindDropRate: false, reflection.KindToolCallSpam: false}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, ev := range readEvents(t, c.store, events.TypeAnomalyDetected) {
			p, err := events.Decode(&ev)
			if err != nil {
				t.Fatal(err)
			}
			a := p.(*events.AnomalyDetected)
			if _, ok := want[a.Kind]; ok && a.Version == "base" && a.TaskType == "order_status" && !want[a.Kind] {
				want[a.Kind] = true
				t.Logf("anomaly %s: value %.3f (threshold %.3f) over %d evaluations", a.Kind, a.Value, a.Baseline, a.Window)
			}
		}
		if want[reflection.KindDropRate] && want[reflection.KindToolCallSpam] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("anomalies raised: %v; logs:\n%s", want, c.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
