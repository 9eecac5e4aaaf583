package workplace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedModel imitates citizen's OpenAI-compatible API. It knows each conversation's plan (it
// rebuilds it from the seed, as the harness does) and answers each turn right with probability
// pCorrect, deciding once per (conversation, turn).
type scriptedModel struct {
	t        *testing.T
	rn       *runner // plans only
	pCorrect float64
	hangOn   func(index int, msgs []Message) bool // block until the client gives up
	spam     func(index int) bool                 // call the tool forever
	retry    bool                                 // call the tool once more after a failed lookup

	mu        sync.Mutex
	calls     int
	ids       map[string]int  // interaction id -> conversation index
	good      map[string]bool // "index/turn" -> answered right
	feedbacks []feedbackRequest
}

func newScripted(t *testing.T, cfg Config, p float64) *scriptedModel {
	return &scriptedModel{t: t, rn: newRunner(cfg.withDefaults(), nil, nil), pCorrect: p,
		ids: map[string]int{}, good: map[string]bool{}}
}

func (m *scriptedModel) decide(index, turn int) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", index, turn)
	good := rand.New(rand.NewPCG(h.Sum64(), 1)).Float64() < m.pCorrect
	m.mu.Lock()
	m.good[fmt.Sprintf("%d/%d", index, turn)] = good
	m.mu.Unlock()
	return good
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer test-key" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.URL.Path {
	case "/v1/feedback":
		var f feedbackRequest
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		m.mu.Lock()
		m.feedbacks = append(m.feedbacks, f)
		m.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	conv := req.Metadata["conversation_id"]
	index, err := strconv.Atoi(conv[strings.LastIndex(conv, "-")+1:])
	if err != nil || req.Metadata["type"] == "" || req.User == "" {
		http.Error(w, "bad metadata", 400)
		return
	}
	p := m.rn.plan(index)
	if req.Metadata["type"] != p.task.Type {
		m.t.Errorf("conversation %d: metadata type %q, plan %q", index, req.Metadata["type"], p.task.Type)
	}
	if m.hangOn != nil && m.hangOn(index, req.Messages) {
		<-r.Context().Done()
		return
	}
	turnIdx := -1
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			turnIdx++
		}
	}
	turn := p.task.Turns[turnIdx]
	good := m.decide(index, turnIdx)
	last := req.Messages[len(req.Messages)-1]
	var out Message
	switch {
	case m.spam != nil && m.spam(index) && turn.Tool != nil:
		out = Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_x", Type: "function",
			Function: FunctionCall{Name: turn.Tool.Name, Arguments: turn.Tool.CallJSON()}}}}
	case m.retry && good && last.Role == "tool" && strings.Contains(last.Content, "error") && countRole(req.Messages, "tool") == 1:
		out = Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_retry", Type: "function",
			Function: FunctionCall{Name: turn.Tool.Name, Arguments: turn.Tool.CallJSON()}}}}
	case turn.Tool != nil && last.Role == "user":
		args := turn.Tool.CallJSON()
		if !good {
			args = `{"order_id":"Z99999"}`
		}
		out = Message{Role: "assistant", ToolCalls: []ToolCall{{ID: fmt.Sprintf("call_%d", index), Type: "function",
			Function: FunctionCall{Name: turn.Tool.Name, Arguments: args}}}}
	case last.Role == "tool" && strings.Contains(last.Content, "error") && good:
		out = Message{Role: "assistant", Content: turn.Tool.FaultAnswer}
	case good:
		out = Message{Role: "assistant", Content: turn.Answer}
	default:
		out = Message{Role: "assistant", Content: "I don't know."}
	}
	m.mu.Lock()
	m.calls++
	id := fmt.Sprintf("chatcmpl-%d", m.calls)
	m.ids[id] = index
	m.mu.Unlock()
	version := "v1"
	if index%3 == 0 {
		version = "v2"
	}
	w.Header().Set(VersionHeader, version)
	json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "model": "citizen",
		"choices": []map[string]any{{"index": 0, "message": out, "finish_reason": "stop"}}})
}

func countRole(msgs []Message, role string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// A model that retries a failed lookup and then gets the result is graded on the real answer,
// and the outcome is success; one whose retry fails too must apologise, and the outcome is failure.
func TestRunRetryAfterFault(t *testing.T) {
	cfg := Config{APIKey: "test-key", Interactions: 120, Seed: 6, Families: []string{"order_status"},
		ToolFailRate: 0.5, OutcomeRate: 1, LogPath: filepath.Join(t.TempDir(), "log.jsonl")}
	m := newScripted(t, cfg, 1)
	m.retry = true
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	if _, err := Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	recovered, failedTwice := 0, 0
	for _, r := range readLog(t, cfg.LogPath) {
		tr := r.Turns[0]
		if !r.Correct || r.Dropped {
			t.Errorf("record %d: correct=%v dropped=%v %+v", r.Index, r.Correct, r.Dropped, tr)
		}
		switch {
		case tr.AfterFault:
			failedTwice++
			if r.Outcome != OutcomeFailure || r.ToolCalls != 2 || tr.Expected != m.rn.plan(r.Index).task.Turns[0].Tool.FaultAnswer {
				t.Errorf("record %d: after two faults outcome %q, %d calls", r.Index, r.Outcome, r.ToolCalls)
			}
		case tr.Fault != "":
			recovered++
			if r.Outcome != OutcomeSuccess || r.ToolCalls != 2 {
				t.Errorf("record %d: recovered, outcome %q, %d calls", r.Index, r.Outcome, r.ToolCalls)
			}
		default:
			if r.Outcome != OutcomeSuccess || r.ToolCalls != 1 {
				t.Errorf("record %d: outcome %q, %d calls", r.Index, r.Outcome, r.ToolCalls)
			}
		}
	}
	if recovered == 0 || failedTwice == 0 {
		t.Errorf("recovered %d, failed twice %d", recovered, failedTwice)
	}
}

func readLog(t *testing.T, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []Record
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func within(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.3f, want %.3f ± %.3f", name, got, want, tol)
	}
}

func TestRunEndToEnd(t *testing.T) {
	const n = 600
	drift := Drift{
		{At: 200, Set: map[string]string{"refund_days": "60"}},
		{At: 300, Set: map[string]string{"segment.a.verbosity": "detailed"}},
		{At: 400, Set: map[string]string{"family": "percentage"}},
	}
	cfg := Config{APIKey: "test-key", Users: 9, Interactions: n, Concurrency: 4, Seed: 11,
		FeedbackRate: 0.5, AbandonRate: 0.2, ToolFailRate: 0.2, ToolTimeoutRate: 0.1,
		TimeBudget: time.Second, Drift: drift, Window: 100,
		LogPath: filepath.Join(t.TempDir(), "log.jsonl")}
	m := newScripted(t, cfg, 0.7)
	// Conversations 0, 25, 50, ... hang on their second model call (after a tool round or a first
	// answer), so the time budget drops them after an interaction id is known.
	m.hangOn = func(index int, msgs []Message) bool { return index%25 == 0 && len(msgs) > 2 }
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	var progress bytes.Buffer
	sum, err := Run(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatal(err)
	}
	recs := readLog(t, cfg.LogPath)
	if len(recs) != n || sum.Total.Count != n {
		t.Fatalf("log has %d records, summary %d, want %d", len(recs), sum.Total.Count, n)
	}
	seen := map[int]bool{}
	validCalls, toolErrors, toolTimeouts, timeoutDrops, budgetDrops := 0, 0, 0, 0, 0
	completed, withFeedback, correct, segmentFlips := 0, 0, 0, 0
	for _, r := range recs {
		if seen[r.Index] {
			t.Fatalf("conversation %d logged twice", r.Index)
		}
		seen[r.Index] = true
		p := m.rn.plan(r.Index)
		if r.Type != p.task.Type || r.Prompt != p.task.Turns[0].User {
			t.Fatalf("record %d does not match its plan", r.Index)
		}
		if r.Error != "" {
			t.Fatalf("record %d: error %s", r.Index, r.Error)
		}
		// Drift at the right counts.
		wantPolicy := 1
		if r.Index >= 200 {
			wantPolicy = 2
		}
		if r.PolicyVersion != wantPolicy {
			t.Errorf("record %d: policy version %d, want %d", r.Index, r.PolicyVersion, wantPolicy)
		}
		if r.Type == "percentage" && r.Index < 400 {
			t.Errorf("record %d: percentage before it appeared", r.Index)
		}
		if r.Type == "policy" && strings.HasPrefix(r.Turns[0].Expected, "The refund window") {
			want := "30 days"
			if r.Index >= 200 {
				want = "60 days"
			}
			if !strings.Contains(r.Turns[0].Expected, want) {
				t.Errorf("record %d expects %q, want %s", r.Index, r.Turns[0].Expected, want)
			}
		}
		// Faults: rolled on valid tool calls only.
		for _, tr := range r.Turns {
			if tr.ToolCallOK != nil && *tr.ToolCallOK || tr.Fault != "" {
				validCalls++
			}
			switch tr.Fault {
			case FaultToolError:
				toolErrors++
			case FaultToolTimeout:
				toolTimeouts++
			}
		}
		if r.Dropped {
			if r.Outcome != OutcomeTimeout || !r.FeedbackSent {
				t.Errorf("dropped record %d: outcome %q sent %v", r.Index, r.Outcome, r.FeedbackSent)
			}
			switch r.DropReason {
			case "tool timeout":
				timeoutDrops++
			case "time budget":
				budgetDrops++
				if r.Index%25 != 0 {
					t.Errorf("record %d dropped for time but the model did not hang", r.Index)
				}
			default:
				t.Errorf("record %d: drop reason %q", r.Index, r.DropReason)
			}
			continue
		}
		if r.Index%25 == 0 && len(r.Turns) > 1 {
			t.Errorf("record %d: model hung but the conversation was not dropped", r.Index)
		}
		completed++
		// The harness's grade agrees with what the scripted model meant to do.
		allGood := true
		for i := range r.Turns {
			allGood = allGood && m.good[fmt.Sprintf("%d/%d", r.Index, i)]
		}
		if r.Correct != allGood {
			t.Errorf("record %d (%s): correct=%v, the model answered right=%v: %+v", r.Index, r.Type, r.Correct, allGood, r.Turns)
		}
		if r.Correct {
			correct++
		}
		if r.Abandoned && (r.Outcome != OutcomeAbandoned || !r.FeedbackSent) {
			t.Errorf("abandoned record %d: outcome %q", r.Index, r.Outcome)
		}
		if r.Feedback != nil && r.Segment == "a" && r.Feedback.Verdict.Aspect == "length" {
			// Segment a is terse until 300 (canonical answers are short enough), detailed after.
			if r.Index < 300 {
				t.Errorf("record %d: length complaint from terse segment a: %+v", r.Index, r.Feedback)
			}
			segmentFlips++
		}
		if r.Feedback != nil {
			withFeedback++
			if r.Feedback.Kind == "praise" && !r.Correct {
				t.Errorf("record %d: praise for a wrong answer", r.Index)
			}
		}
		if len(r.Versions) != 1 || (r.Versions[0] == "v2") != (r.Index%3 == 0) {
			t.Errorf("record %d: versions %v", r.Index, r.Versions)
		}
	}
	t.Logf("valid tool calls %d, errors %d, timeouts %d (drops %d), time-budget drops %d", validCalls, toolErrors, toolTimeouts, timeoutDrops, budgetDrops)
	if segmentFlips == 0 {
		t.Error("no length complaints from segment a after it flipped to detailed")
	}
	if toolErrors == 0 || toolTimeouts == 0 || timeoutDrops == 0 || timeoutDrops == toolTimeouts || budgetDrops == 0 {
		t.Errorf("timeout drops %d of %d timeouts, budget drops %d", timeoutDrops, toolTimeouts, budgetDrops)
	}
	within(t, "feedback rate", float64(withFeedback)/float64(completed), 0.5, 0.07)
	if sum.Total.Dropped != timeoutDrops+budgetDrops || sum.Total.Completed != completed || sum.Total.Correct != correct {
		t.Errorf("summary totals %+v disagree with the log", sum.Total)
	}
	within(t, "accuracy", sum.Total.Accuracy, float64(correct)/float64(completed), 1e-9)

	// Feedback posts: one per record that says it sent one, on an interaction the server issued,
	// with unique idempotency keys; corrections state the right answer.
	byConv := map[string]Record{}
	sent := 0
	for _, r := range recs {
		byConv[r.Conversation] = r
		if r.FeedbackSent {
			sent++
		}
	}
	if len(m.feedbacks) != sent {
		t.Errorf("server got %d feedback posts, log says %d", len(m.feedbacks), sent)
	}
	keys := map[string]bool{}
	for _, f := range m.feedbacks {
		idx, ok := m.ids[f.InteractionID]
		if !ok {
			t.Fatalf("feedback for unknown interaction %q", f.InteractionID)
		}
		if keys[f.FeedbackID] {
			t.Errorf("duplicate feedback id %s", f.FeedbackID)
		}
		keys[f.FeedbackID] = true
		r := byConv[fmt.Sprintf("wp-11-%d", idx)]
		if r.Outcome != f.Outcome {
			t.Errorf("conversation %d: posted outcome %q, logged %q", idx, f.Outcome, r.Outcome)
		}
		if f.Correction != "" && r.Correct {
			t.Errorf("conversation %d: correction for a right answer", idx)
		}
		if f.Text == "" && f.Outcome == "" {
			t.Errorf("empty feedback post %+v", f)
		}
	}

	// Windows and types add up; versions are counted.
	wsum := 0
	for _, w := range sum.Windows {
		wsum += w.Count
	}
	if len(sum.Windows) != 6 || wsum != n {
		t.Errorf("%d windows with %d conversations", len(sum.Windows), wsum)
	}
	if sum.Total.Versions["v2"] != n/3 {
		t.Errorf("v2 served %d conversations, want %d", sum.Total.Versions["v2"], n/3)
	}
	if _, ok := sum.ByType["percentage"]; !ok || len(sum.ByType) != 7 {
		t.Errorf("types %v", sum.ByType)
	}
	if sum.Total.Accuracy < 0.3 || sum.Total.Accuracy > 0.8 {
		t.Errorf("accuracy %.3f for a 70%% model", sum.Total.Accuracy)
	}
	tab := sum.Table()
	for _, want := range []string{"total", "[500,600)", "order_status", "drift: 200:refund_days=60"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if !strings.Contains(progress.String(), "600/600") {
		t.Errorf("progress %q", progress.String())
	}
	if _, err := json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
}

// Injected tool faults hit valid tool calls at the configured rates (fixed seed, tolerance ±0.04).
func TestRunFaultRates(t *testing.T) {
	cfg := Config{APIKey: "test-key", Interactions: 800, Concurrency: 4, Seed: 21, Families: []string{"order_status"},
		ToolFailRate: 0.15, ToolTimeoutRate: 0.1, LogPath: filepath.Join(t.TempDir(), "log.jsonl")}
	m := newScripted(t, cfg, 0.8)
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	sum, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	valid, invalid, errs, timeouts, drops := 0, 0, 0, 0, 0
	for _, r := range readLog(t, cfg.LogPath) {
		tr := r.Turns[0]
		if tr.ToolCallOK == nil || !*tr.ToolCallOK {
			invalid++
			if tr.Fault != "" {
				t.Errorf("record %d: fault on an invalid call", r.Index)
			}
			continue
		}
		valid++
		switch tr.Fault {
		case FaultToolError:
			errs++
		case FaultToolTimeout:
			timeouts++
			if r.Dropped {
				drops++
			}
		}
		// After a fault the right reply is an apology; the scripted model gives it when "good".
		if tr.Fault != "" && !r.Dropped && r.Correct != m.good[fmt.Sprintf("%d/0", r.Index)] {
			t.Errorf("record %d: fault handling graded %v", r.Index, r.Correct)
		}
	}
	fv := float64(valid)
	within(t, "tool error rate", float64(errs)/fv, 0.15, 0.04)
	within(t, "tool timeout rate", float64(timeouts)/fv, 0.1, 0.04)
	within(t, "timeouts that drop", float64(drops)/float64(timeouts), 0.5, 0.2)
	within(t, "invalid call share", float64(invalid)/800, 0.2, 0.05)
	if sum.Total.Faults[FaultToolError] != errs || sum.Total.Dropped != drops {
		t.Errorf("summary faults %v dropped %d, log %d/%d", sum.Total.Faults, sum.Total.Dropped, errs, drops)
	}
}

// A model that keeps calling tools runs out of the turn budget; the drop is reported as a timeout.
func TestRunTurnBudget(t *testing.T) {
	cfg := Config{APIKey: "test-key", Interactions: 40, Seed: 3, TurnBudget: 4, Families: []string{"order_status"},
		LogPath: filepath.Join(t.TempDir(), "log.jsonl")}
	m := newScripted(t, cfg, 1)
	m.spam = func(index int) bool { return index%2 == 0 }
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	sum, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readLog(t, cfg.LogPath) {
		if spam := r.Index%2 == 0; spam != r.Dropped || spam && (r.DropReason != "turn budget" || r.Outcome != OutcomeTimeout || r.ToolCalls != 4) {
			t.Errorf("record %d: dropped=%v reason=%q outcome=%q tool calls %d", r.Index, r.Dropped, r.DropReason, r.Outcome, r.ToolCalls)
		}
	}
	if sum.Total.Dropped != 20 || sum.Total.Accuracy != 1 {
		t.Errorf("summary %+v", sum.Total)
	}
}

func TestRunAuthAndConfig(t *testing.T) {
	cfg := Config{APIKey: "wrong", Interactions: 5, Seed: 1}
	m := newScripted(t, cfg, 1)
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	sum, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Errors != 5 || sum.Total.Completed != 0 || len(m.feedbacks) != 0 {
		t.Errorf("unauthorised run: %+v", sum.Total)
	}
	for _, bad := range []Config{
		{Target: srv.URL},
		{Target: srv.URL, Interactions: 1, ToolFailRate: 1.5},
		{Target: srv.URL, Interactions: 1, Families: []string{"poetry"}},
		{Target: srv.URL, Interactions: 1, Drift: Drift{{At: 1, Set: map[string]string{"refund": "x"}}}},
		{Interactions: 1},
	} {
		if _, err := Run(context.Background(), bad, nil); err == nil {
			t.Errorf("Run(%+v) accepted", bad)
		}
	}
}

func TestRunDuration(t *testing.T) {
	cfg := Config{APIKey: "test-key", Duration: 150 * time.Millisecond, Seed: 2, Concurrency: 2}
	m := newScripted(t, cfg, 1)
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg.Target = srv.URL
	sum, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Count == 0 || sum.Total.Accuracy != 1 {
		t.Errorf("duration run: %+v", sum.Total)
	}
}

// Rate paces the conversations: with 20 at 40/s the last one starts
// 19/40 s after the first, so the run cannot end sooner; unpaced the same
// run is several times faster.
func TestRunRate(t *testing.T) {
	run := func(rate float64) time.Duration {
		cfg := Config{APIKey: "test-key", Interactions: 20, Seed: 2, Concurrency: 4, Rate: rate}
		m := newScripted(t, cfg, 1)
		srv := httptest.NewServer(m)
		defer srv.Close()
		cfg.Target = srv.URL
		start := time.Now()
		sum, err := Run(context.Background(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Total.Count != 20 {
			t.Fatalf("rate %v: %d conversations", rate, sum.Total.Count)
		}
		return time.Since(start)
	}
	paced := run(40)
	if min := 19 * time.Second / 40; paced < min {
		t.Fatalf("20 conversations at 40/s took %v, less than %v", paced, min)
	}
	t.Logf("20 conversations: paced at 40/s %v, unpaced %v", paced, run(0))
}

// oracleFor answers every conversation cfg would generate with its canonical answer.
func oracleFor(cfg Config) AnswerFunc {
	rn := newRunner(cfg.withDefaults(), nil, nil)
	byPrompt := map[string]Task{}
	for i := 0; i < cfg.Interactions; i++ {
		p := rn.plan(i)
		byPrompt[p.task.Turns[0].User] = p.task
	}
	return func(ctx context.Context, msgs []Message, tools []Tool) (Message, error) {
		var first string
		turn := -1
		for _, m := range msgs {
			if m.Role == "user" {
				if first == "" {
					first = m.Content
				}
				turn++
			}
		}
		task, ok := byPrompt[first]
		if !ok {
			return Message{}, fmt.Errorf("unknown prompt %q", first)
		}
		tt := task.Turns[turn]
		if tt.Tool != nil && msgs[len(msgs)-1].Role == "user" {
			if len(tools) == 0 {
				return Message{}, fmt.Errorf("no tools declared")
			}
			return Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function",
				Function: FunctionCall{Name: tt.Tool.Name, Arguments: tt.Tool.CallJSON()}}}}, nil
		}
		return Message{Role: "assistant", Content: tt.Answer}, nil
	}
}

func TestEvaluate(t *testing.T) {
	const n, seed = 200, 5
	oracle := oracleFor(Config{Interactions: n, Seed: seed, Concurrency: 1, Users: 1})
	sum, err := Evaluate(context.Background(), oracle, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Count != n || sum.Total.Accuracy != 1 || sum.Total.MeanReward != 1 {
		t.Errorf("oracle: %+v", sum.Total)
	}
	dunno := func(ctx context.Context, msgs []Message, tools []Tool) (Message, error) {
		return Message{Role: "assistant", Content: "I don't know."}, nil
	}
	sum, err = Evaluate(context.Background(), dunno, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Total.Accuracy != 0 || len(sum.ByType) != 6 {
		t.Errorf("know-nothing: %+v types %d", sum.Total, len(sum.ByType))
	}
}

// A model that learned only time zero loses accuracy on policy questions once the policy drifts.
func TestEvaluateAfterDrift(t *testing.T) {
	drifted := InitialWorld()
	drifted.Policy.RefundDays, drifted.Policy.ShippingFee, drifted.Policy.SupportClose = 60, 5.99, 18
	cfg := Config{Interactions: 200, Seed: 8, Families: []string{"policy"}, Users: 1}
	stale := oracleFor(cfg) // time-zero answers
	cfg.World = &drifted
	fresh := oracleFor(cfg)
	s1, err := EvaluateWith(context.Background(), fresh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := EvaluateWith(context.Background(), stale, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s1.Total.Accuracy != 1 || s2.Total.Accuracy > 0.5 {
		t.Errorf("after drift: fresh %.3f, stale %.3f", s1.Total.Accuracy, s2.Total.Accuracy)
	}
}

// TestPlanMarksChangedQuestions: a conversation is marked changed exactly
// when the drift changed its right answer.
func TestPlanMarksChangedQuestions(t *testing.T) {
	drift, err := ParseDrift("50:refund_days=60")
	if err != nil {
		t.Fatal(err)
	}
	rn := newRunner(Config{Seed: 3, Interactions: 400, Drift: drift}.withDefaults(), nil, nil)
	var before, after, refundAfter int
	for i := 0; i < 400; i++ {
		p := rn.plan(i)
		refund := strings.Contains(p.task.Turns[0].Answer, "refund window")
		switch {
		case i < 50 && p.changed:
			before++
		case i >= 50 && p.changed:
			after++
			if !refund {
				t.Fatalf("conversation %d marked changed: %q", i, p.task.Turns[0].Answer)
			}
		}
		if i >= 50 && refund && !strings.Contains(p.task.Turns[0].Answer, "30 days") {
			refundAfter++
		}
	}
	if before != 0 || after == 0 {
		t.Fatalf("changed before the drift %d, after %d", before, after)
	}
	if after < refundAfter {
		t.Fatalf("%d refund answers changed, %d marked", refundAfter, after)
	}
}
