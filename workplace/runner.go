package workplace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config configures Run. Zero values take the defaults noted.
type Config struct {
	Target       string        // base URL of citizen, e.g. http://localhost:8080 (required)
	APIKey       string        // sent as Authorization: Bearer KEY
	Model        string        // request "model" field; default "citizen"
	Users        int           // simulated users; default 12
	Interactions int           // conversations to run; 0 = until Duration
	Duration     time.Duration // stop starting conversations after this; 0 = no limit
	Concurrency  int           // conversations in flight; default 4
	// Rate, when positive, paces the traffic: conversation i starts no
	// earlier than i/Rate seconds after the run's start (users arrive at
	// that rate; Concurrency still bounds those in flight). 0 = as fast
	// as Concurrency allows.
	Rate         float64
	Seed         int64   // everything random derives from it
	FeedbackRate float64 // probability a user writes feedback after a conversation
	AbandonRate  float64 // probability a user walks away before each follow-up turn
	OutcomeRate  float64 // probability of reporting success/failure when no feedback is sent
	// ToolFailRate is the probability a valid tool call returns {"error":"upstream unavailable"}.
	ToolFailRate float64
	// ToolTimeoutRate is the probability a valid tool call times out: half of those return
	// {"error":"timeout"}, the other half drop the conversation (outcome timeout).
	ToolTimeoutRate float64
	TurnBudget      int           // most model calls per conversation; 0 = 8; past it the conversation is dropped
	TimeBudget      time.Duration // most wall time per conversation; 0 = none; past it the conversation is dropped
	Drift           Drift         // world changes by conversation index
	Families        []string      // restrict to these families (still subject to the world's active set)
	World           *World        // world at time zero; default InitialWorld()
	Window          int           // conversations per summary window; default max(Interactions/10, 50)
	LogPath         string        // JSONL log of every conversation; "" = none
	HTTPClient      *http.Client  // default: a client with a 60 s timeout
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = "citizen"
	}
	if c.Users <= 0 {
		c.Users = 12
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.TurnBudget <= 0 {
		c.TurnBudget = 8
	}
	if c.World == nil {
		w := InitialWorld()
		c.World = &w
	}
	if c.Window <= 0 {
		c.Window = max(c.Interactions/10, 50)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	return c
}

// Validate reports a configuration Run cannot use.
func (c Config) Validate() error {
	switch {
	case c.Interactions <= 0 && c.Duration <= 0:
		return errors.New("workplace: set Interactions or Duration")
	case c.Interactions < 0 || c.Duration < 0:
		return errors.New("workplace: negative Interactions or Duration")
	}
	for name, p := range map[string]float64{"FeedbackRate": c.FeedbackRate, "AbandonRate": c.AbandonRate,
		"OutcomeRate": c.OutcomeRate, "ToolFailRate": c.ToolFailRate, "ToolTimeoutRate": c.ToolTimeoutRate} {
		if p < 0 || p > 1 {
			return fmt.Errorf("workplace: %s %v not in [0,1]", name, p)
		}
	}
	if c.ToolFailRate+c.ToolTimeoutRate > 1 {
		return errors.New("workplace: ToolFailRate + ToolTimeoutRate > 1")
	}
	for _, f := range c.Families {
		if FamilyByName(f) == nil {
			return fmt.Errorf("workplace: unknown family %q", f)
		}
	}
	base := InitialWorld()
	if c.World != nil {
		base = *c.World
	}
	return c.Drift.Validate(base)
}

// Fault kinds recorded in the log.
const (
	FaultToolError   = "tool_error"
	FaultToolTimeout = "tool_timeout"
)

// Outcomes reported to citizen.
const (
	OutcomeSuccess   = "success"
	OutcomeFailure   = "failure"
	OutcomeTimeout   = "timeout"
	OutcomeAbandoned = "abandoned"
)

// TurnRecord is one user turn of a logged conversation.
type TurnRecord struct {
	InteractionIDs []string `json:"interaction_ids"` // every completion of the turn, tool rounds included
	User           string   `json:"user"`
	Answer         string   `json:"answer"`
	Expected       string   `json:"expected"`
	ToolCalls      []string `json:"tool_calls,omitempty"` // name(arguments)
	ToolCallOK     *bool    `json:"tool_call_ok,omitempty"`
	Fault          string   `json:"fault,omitempty"`       // an injected tool fault in this turn
	AfterFault     bool     `json:"after_fault,omitempty"` // the answer followed a failed lookup (graded as such)
	Correct        bool     `json:"correct"`
	Score          float64  `json:"score"`
	Reason         string   `json:"reason,omitempty"`
	Versions       []string `json:"versions"`
	LatencyMS      float64  `json:"latency_ms"`
}

// Record is one logged conversation (one JSONL line).
type Record struct {
	Index         int    `json:"index"`
	Conversation  string `json:"conversation"`
	Type          string `json:"type"`
	User          string `json:"user"`
	Segment       string `json:"segment"`
	PolicyVersion int    `json:"policy_version"`
	// Changed: a drift changed this question's right answer (it differs
	// from the answer in the run's starting world).
	Changed       bool         `json:"changed,omitempty"`
	Prompt        string       `json:"prompt"`
	Answer        string       `json:"answer"`
	Correct       bool         `json:"correct"`
	Reward        float64      `json:"reward"`
	Turns         []TurnRecord `json:"turns"`
	ToolCalls     int          `json:"tool_calls"`
	Faults        []string     `json:"faults,omitempty"`
	Dropped       bool         `json:"dropped"`
	DropReason    string       `json:"drop_reason,omitempty"`
	Abandoned     bool         `json:"abandoned,omitempty"`
	Outcome       string       `json:"outcome,omitempty"` // as reported to citizen, if reported
	Feedback      *Feedback    `json:"feedback,omitempty"`
	FeedbackSent  bool         `json:"feedback_sent"`
	FeedbackError string       `json:"feedback_error,omitempty"`
	Versions      []string     `json:"versions,omitempty"`
	LatencyMS     float64      `json:"latency_ms"`
	Error         string       `json:"error,omitempty"`
}

// runner holds what every conversation of one run shares.
type runner struct {
	cfg   Config
	users []User
	model completer
	fb    feedbackPoster
}

func newRunner(cfg Config, model completer, fb feedbackPoster) *runner {
	segs := make([]string, 0, len(cfg.World.Segments))
	for s := range cfg.World.Segments {
		segs = append(segs, s)
	}
	slices.Sort(segs)
	if len(segs) == 0 {
		segs = []string{""}
	}
	return &runner{cfg: cfg, users: NewUsers(cfg.Users, cfg.Seed, segs), model: model, fb: fb}
}

// plan is conversation i's task, user and world; a pure function of the seed, i and the drift.
type plan struct {
	index int
	id    string
	world World
	task  Task
	// changed: the task's right answer differs in the starting world.
	changed bool
	user    User
	prefs   Preferences
	r       *rand.Rand // faults and user decisions
}

func (rn *runner) plan(i int) plan {
	w := rn.cfg.Drift.WorldAt(*rn.cfg.World, i)
	fams := w.Families
	if len(rn.cfg.Families) > 0 {
		fams = slices.DeleteFunc(slices.Clone(rn.cfg.Families), func(f string) bool { return !w.Active(f) })
		if len(fams) == 0 {
			fams = rn.cfg.Families
		}
	}
	tr := rand.New(rand.NewPCG(uint64(rn.cfg.Seed), uint64(2*i)))
	fam := FamilyByName(pick(tr, fams))
	task := fam.Generate(tr, w)
	changed := false
	if rn.cfg.World.Active(fam.Name()) {
		// The same draw in the starting world: the question is the same,
		// and its answer there tells whether a drift changed it.
		tr0 := rand.New(rand.NewPCG(uint64(rn.cfg.Seed), uint64(2*i)))
		pick(tr0, fams)
		t0 := fam.Generate(tr0, *rn.cfg.World)
		changed = len(t0.Turns) > 0 && len(task.Turns) > 0 && t0.Turns[0].User == task.Turns[0].User && t0.Turns[0].Answer != task.Turns[0].Answer
	}
	ur := rand.New(rand.NewPCG(uint64(rn.cfg.Seed), uint64(2*i+1)))
	u := rn.users[ur.IntN(len(rn.users))]
	return plan{index: i, id: fmt.Sprintf("wp-%d-%d", rn.cfg.Seed, i), world: w, task: task, changed: changed, user: u,
		prefs: w.Segments[u.Segment], r: ur}
}

// errDropped marks a conversation the harness gave up on.
type errDropped struct{ reason string }

func (e errDropped) Error() string { return "dropped: " + e.reason }

// play runs conversation p against the model and reports its feedback. It returns ok=false only
// when ctx (the run) was cancelled midway.
func (rn *runner) play(ctx context.Context, p plan) (Record, bool) {
	t := p.task
	rec := Record{Index: p.index, Conversation: p.id, Type: t.Type, User: p.user.ID, Segment: p.user.Segment,
		PolicyVersion: t.PolicyVersion, Changed: p.changed, Prompt: t.Turns[0].User}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if rn.cfg.TimeBudget > 0 {
		cctx, cancel = context.WithTimeout(ctx, rn.cfg.TimeBudget)
	}
	defer cancel()
	var msgs []Message
	if t.System != "" {
		msgs = append(msgs, Message{Role: "system", Content: t.System})
	}
	calls := 0
	var lastID string
	versions := map[string]bool{}
	var runErr error
turns:
	for ti, turn := range t.Turns {
		if ti > 0 && p.r.Float64() < rn.cfg.AbandonRate {
			rec.Abandoned = true
			break
		}
		msgs = append(msgs, Message{Role: "user", Content: turn.User})
		tr := TurnRecord{User: turn.User, Expected: turn.Answer}
		faulted, toolOK := false, false
		var final Message
		for {
			if calls >= rn.cfg.TurnBudget {
				runErr = errDropped{"turn budget"}
				rec.Turns = append(rec.Turns, tr)
				break turns
			}
			req := chatRequest{Model: rn.cfg.Model, Messages: slices.Clone(msgs), Tools: t.Tools,
				ResponseFormat: t.ResponseFormat, User: p.user.ID,
				Metadata: map[string]string{"type": t.Type, "user": p.user.ID, "conversation_id": p.id}}
			c, err := rn.model.complete(cctx, req)
			calls++
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return rec, false
				case cctx.Err() != nil:
					runErr = errDropped{"time budget"}
				default:
					runErr = err
				}
				rec.Turns = append(rec.Turns, tr)
				break turns
			}
			lastID = c.ID
			tr.InteractionIDs = append(tr.InteractionIDs, c.ID)
			tr.Versions = append(tr.Versions, c.Version)
			versions[c.Version] = true
			tr.LatencyMS += ms(c.Latency)
			rec.LatencyMS += ms(c.Latency)
			if len(c.Message.ToolCalls) == 0 {
				final = c.Message
				break
			}
			am := c.Message
			am.Role = "assistant"
			msgs = append(msgs, am)
			for _, call := range c.Message.ToolCalls {
				rec.ToolCalls++
				tr.ToolCalls = append(tr.ToolCalls, call.Function.Name+"("+call.Function.Arguments+")")
				content, fault, drop := rn.toolResult(p, turn, call)
				if turn.Tool != nil && turn.Tool.CheckCall(call) == nil {
					// A valid call; a retry after a fault that succeeds clears the fault.
					toolOK, faulted = true, fault != ""
				}
				if fault != "" {
					tr.Fault = fault
					rec.Faults = append(rec.Faults, fault)
				}
				if turn.Tool != nil {
					ok := toolOK
					tr.ToolCallOK = &ok
				}
				if drop {
					runErr = errDropped{"tool timeout"}
					rec.Turns = append(rec.Turns, tr)
					break turns
				}
				msgs = append(msgs, Message{Role: "tool", ToolCallID: call.ID, Content: content})
			}
		}
		final.Role = "assistant"
		msgs = append(msgs, final)
		tr.Answer = final.Content
		var g Grade
		if faulted {
			tr.AfterFault = true
			g = turn.Tool.CheckFault(final.Content)
			tr.Expected = turn.Tool.FaultAnswer
		} else {
			g = turn.Check(final.Content)
		}
		if turn.Tool != nil {
			ok := toolOK
			tr.ToolCallOK = &ok
			if !ok {
				g = Grade{Correct: false, Score: 0.5 * g.Score, Reason: "no valid " + turn.Tool.Name + " call"}
				if len(tr.ToolCalls) == 0 {
					g.Score = 0
				}
			}
		}
		tr.Correct, tr.Score, tr.Reason = g.Correct, g.Score, g.Reason
		rec.Turns = append(rec.Turns, tr)
		rec.Answer = final.Content
		if faulted {
			break // the lookup failed; follow-ups would depend on it, so the user leaves
		}
	}
	for v := range versions {
		rec.Versions = append(rec.Versions, v)
	}
	slices.Sort(rec.Versions)
	var dropped errDropped
	switch {
	case errors.As(runErr, &dropped):
		rec.Dropped, rec.DropReason = true, dropped.reason
	case runErr != nil:
		rec.Error = runErr.Error()
	}
	graded := rec.Turns
	if rec.Dropped || rec.Error != "" {
		graded = graded[:len(graded)-1] // the turn that broke off
	}
	rec.Correct = !rec.Dropped && rec.Error == ""
	for _, tr := range graded {
		rec.Reward += tr.Score
		rec.Correct = rec.Correct && tr.Correct
	}
	if len(graded) > 0 {
		rec.Reward /= float64(len(graded))
	}
	rec.Correct = rec.Correct && len(graded) > 0
	if rn.fb != nil && lastID != "" && rec.Error == "" {
		rn.sendFeedback(ctx, p, &rec, lastID)
	}
	return rec, true
}

// toolResult answers one tool call: the tool's result, an error the model caused (wrong tool or
// arguments), or an injected environment fault.
func (rn *runner) toolResult(p plan, turn Turn, call ToolCall) (content, fault string, drop bool) {
	if turn.Tool == nil || call.Function.Name != turn.Tool.Name {
		return `{"error":"unknown tool ` + jsonEscape(call.Function.Name) + `"}`, "", false
	}
	if err := turn.Tool.CheckCall(call); err != nil {
		var args map[string]any
		if json.Unmarshal([]byte(call.Function.Arguments), &args) != nil {
			return `{"error":"invalid arguments"}`, "", false
		}
		return `{"error":"order not found"}`, "", false
	}
	x := p.r.Float64()
	switch {
	case x < rn.cfg.ToolFailRate:
		return `{"error":"upstream unavailable"}`, FaultToolError, false
	case x < rn.cfg.ToolFailRate+rn.cfg.ToolTimeoutRate:
		if p.r.IntN(2) == 0 {
			return "", FaultToolTimeout, true
		}
		return `{"error":"timeout"}`, FaultToolTimeout, false
	}
	return turn.Tool.Result, "", false
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

// sendFeedback decides and posts what the user (or the harness) reports about conversation p.
func (rn *runner) sendFeedback(ctx context.Context, p plan, rec *Record, lastID string) {
	req := feedbackRequest{FeedbackID: p.id + "-fb"}
	switch {
	case rec.Dropped:
		req.InteractionID, req.Outcome = lastID, OutcomeTimeout
	default:
		// The user judges the first wrong turn, else the last one.
		judged := len(rec.Turns) - 1
		for i, tr := range rec.Turns {
			if !tr.Correct {
				judged = i
				break
			}
		}
		tr := rec.Turns[judged]
		req.InteractionID = tr.InteractionIDs[len(tr.InteractionIDs)-1]
		// A conversation broken by a tool fault did not get the customer what they came for,
		// however well the model handled it: the outcome is failure; the fault is in the record.
		outcome := OutcomeSuccess
		for _, tr := range rec.Turns {
			if !tr.Correct || tr.AfterFault {
				outcome = OutcomeFailure
			}
		}
		if rec.Abandoned {
			outcome = OutcomeAbandoned
		}
		if p.r.Float64() < rn.cfg.FeedbackRate {
			turn := p.task.Turns[judged]
			g := Grade{Correct: tr.Correct, Score: tr.Score}
			fb := p.user.Write(p.r, p.user.Judge(g, tr.Answer, tr.Expected, p.prefs, tr.AfterFault), turn, p.prefs)
			rec.Feedback = &fb
			req.Text, req.Rating, req.Correction, req.Outcome = fb.Text, fb.Rating, fb.Correction, outcome
		} else if rec.Abandoned || p.r.Float64() < rn.cfg.OutcomeRate {
			req.InteractionID, req.Outcome = lastID, outcome
		} else {
			return
		}
	}
	rec.Outcome = req.Outcome
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := rn.fb.postFeedback(pctx, req); err != nil {
		rec.FeedbackError = err.Error()
		return
	}
	rec.FeedbackSent = true
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Run drives simulated users against the citizen at cfg.Target until cfg.Interactions
// conversations have finished or cfg.Duration has passed, writing a JSONL record per
// conversation to cfg.LogPath and a progress line to progress (nil for none). It returns the
// summary of what finished; the error is non-nil for a bad config, an unwritable log, or a
// cancelled ctx (the summary is then partial). Run is safe to call concurrently with other Runs.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	if cfg.Target == "" {
		return Summary{}, errors.New("workplace: Target is required")
	}
	cfg = cfg.withDefaults()
	hc := &httpClient{base: strings.TrimRight(cfg.Target, "/"), apiKey: cfg.APIKey, hc: cfg.HTTPClient}
	return run(ctx, cfg, hc, hc, progress)
}

func run(ctx context.Context, cfg Config, model completer, fb feedbackPoster, progress io.Writer) (Summary, error) {
	var log *bufio.Writer
	if cfg.LogPath != "" {
		f, err := os.Create(cfg.LogPath)
		if err != nil {
			return Summary{}, fmt.Errorf("workplace: log: %w", err)
		}
		defer f.Close()
		log = bufio.NewWriter(f)
		defer log.Flush()
	}
	rn := newRunner(cfg, model, fb)
	start := time.Now()
	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		tm := time.NewTimer(cfg.Duration)
		defer tm.Stop()
		deadline = tm.C
	}
	jobs := make(chan int)
	results := make(chan Record)
	go func() {
		defer close(jobs)
		for i := 0; cfg.Interactions == 0 || i < cfg.Interactions; i++ {
			if cfg.Rate > 0 {
				if wait := time.Until(start.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))); wait > 0 {
					tm := time.NewTimer(wait)
					select {
					case <-tm.C:
					case <-deadline:
						tm.Stop()
						return
					case <-ctx.Done():
						tm.Stop()
						return
					}
				}
			}
			select {
			case jobs <- i:
			case <-deadline:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if rec, ok := rn.play(ctx, rn.plan(i)); ok {
					results <- rec
				}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()

	agg := newAggregator(cfg)
	bar := newProgressBar(progress, cfg.Interactions, start)
	var logErr error
	for rec := range results {
		agg.add(rec)
		if log != nil && logErr == nil {
			b, _ := json.Marshal(rec)
			if _, err := log.Write(append(b, '\n')); err != nil {
				logErr = err
			}
		}
		bar.update(agg.total.Count, agg.total.accuracy(), agg.total.Dropped, false)
	}
	bar.update(agg.total.Count, agg.total.accuracy(), agg.total.Dropped, true)
	s := agg.summary(time.Since(start))
	if log != nil && logErr == nil {
		logErr = log.Flush()
	}
	if logErr != nil {
		return s, fmt.Errorf("workplace: log: %w", logErr)
	}
	return s, ctx.Err()
}

// Evaluate scores a model offline, without HTTP: n conversations drawn from seed over the
// time-zero world and families, with no faults, feedback or abandonment. answer is called from one
// goroutine at a time.
func Evaluate(ctx context.Context, answer AnswerFunc, n int, seed int64) (Summary, error) {
	return EvaluateWith(ctx, answer, Config{Interactions: n, Seed: seed, Concurrency: 1, Users: 1})
}

// EvaluateWith is Evaluate with the conversation-shaping fields of cfg honoured: Interactions,
// Seed, World, Families, Drift, ToolFailRate, ToolTimeoutRate, AbandonRate, TurnBudget,
// TimeBudget, Window, LogPath and Concurrency (answer must be safe for concurrent use when
// Concurrency > 1). Target, APIKey and the feedback settings are ignored: nothing is posted.
func EvaluateWith(ctx context.Context, answer AnswerFunc, cfg Config) (Summary, error) {
	if cfg.Interactions <= 0 {
		return Summary{}, errors.New("workplace: Evaluate needs Interactions > 0")
	}
	cfg.Duration = 0
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	cfg = cfg.withDefaults()
	return run(ctx, cfg, &funcCompleter{f: answer}, nil, nil)
}

// progressBar writes a one-line, carriage-return-refreshed progress report.
type progressBar struct {
	w     io.Writer
	total int
	start time.Time
	last  time.Time
}

func newProgressBar(w io.Writer, total int, start time.Time) *progressBar {
	return &progressBar{w: w, total: total, start: start}
}

func (b *progressBar) update(done int, acc float64, drops int, final bool) {
	if b.w == nil || (!final && time.Since(b.last) < 200*time.Millisecond) {
		return
	}
	b.last = time.Now()
	rate := float64(done) / max(time.Since(b.start).Seconds(), 1e-9)
	bar, tot := "", "?"
	if b.total > 0 {
		const width = 30
		fill := done * width / b.total
		bar = "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "] "
		tot = fmt.Sprint(b.total)
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(b.w, "\rworkplace %s%d/%s  %.1f/s  accuracy %.3f  drops %d%s", bar, done, tot, rate, acc, drops, end)
}
