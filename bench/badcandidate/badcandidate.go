// Package badcandidate is bench learn's rollback check: a trainer
// decorator that makes one candidate bad on purpose, and the operator's
// start of that candidate's canary once the offline gate has rejected it,
// so the bench can show that the rollout controller rolls a bad version
// back in its first step. Nothing in the distiller or the rollout
// controller knows of it: the decorator changes only the job it hands to
// the trainer it wraps, and the start goes through the operator API
// (POST /v1/ops/rollout/start) as an operator's would.
package badcandidate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"citizen/distill"
)

// DefaultLR is the bad cycle's learning rate: with the policy gradient
// alone, high enough that the candidate moves far from its parent in the
// wrong direction within the cycle's own steps.
const DefaultLR = 3e-3

// Trainer wraps a distill.Trainer. The first job it trains successfully
// is made bad (Invert); every later job goes to Next unchanged. A job
// that fails (a cycle abandoned or timed out) does not count: the next
// one is made bad instead. Safe for concurrent use.
//
// Invert changes job.Dataset, so Next must train from it (the embedded
// trainer does; a distill.CommandTrainer reads DatasetDir and would train
// on the true rewards).
type Trainer struct {
	Next distill.Trainer
	// LR and Steps of the bad cycle (zero: DefaultLR, and the job's own
	// steps). A rejected candidate is held in its first step whatever it
	// does online (rollout.Config.HoldMargin), so it need not be trained
	// longer than any other cycle.
	LR    float64
	Steps int

	mu      sync.Mutex
	busy    bool // the bad job is training
	version string
	trained chan struct{} // closed once the bad job trained
}

// New returns a Trainer around next.
func New(next distill.Trainer) *Trainer {
	return &Trainer{Next: next, trained: make(chan struct{})}
}

// Wrap sets Next and returns t: the form services.App.WrapTrainer takes.
func (t *Trainer) Wrap(next distill.Trainer) distill.Trainer {
	t.Next = next
	return t
}

// Train implements distill.Trainer.
func (t *Trainer) Train(ctx context.Context, job *distill.TrainJob) (distill.TrainResult, error) {
	if t.Next == nil {
		return distill.TrainResult{}, errNoNext
	}
	t.mu.Lock()
	bad := t.version == "" && !t.busy
	if bad {
		t.busy = true
	}
	t.mu.Unlock()
	if !bad {
		return t.Next.Train(ctx, job)
	}
	lr, steps := t.LR, t.Steps
	if lr == 0 {
		lr = DefaultLR
	}
	if steps == 0 {
		steps = job.Hyper.Steps
	}
	res, err := t.Next.Train(ctx, Invert(job, lr, steps))
	t.mu.Lock()
	t.busy = false
	if err == nil {
		t.version = job.Version
		close(t.trained)
	}
	t.mu.Unlock()
	return res, err
}

// Version returns the version the bad job trained, once it has.
func (t *Trainer) Version() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version, t.version != ""
}

// Trained is closed once the bad job has trained.
func (t *Trainer) Trained() <-chan struct{} { return t.trained }

// Invert returns a copy of job that trains a deliberately bad candidate:
// every policy example's reward and advantage negated (what the graders
// called good is pushed down, what they called bad up), every other
// example dropped (self-distilled, revised and updated answers and
// anchors all point at good answers; rehearsal is off), the policy
// gradient alone (no KL term to keep it near its parent) at lr for steps
// optimizer steps (0: as the job's Hyper sizes them). job and its
// dataset are not changed; the hold-out the offline gate judges by keeps
// the true rewards.
func Invert(job *distill.TrainJob, lr float64, steps int) *distill.TrainJob {
	ds := *job.Dataset
	ds.Train = make([]distill.Example, 0, len(job.Dataset.Train))
	for _, ex := range job.Dataset.Train {
		if ex.Kind != distill.KindPolicy {
			continue
		}
		ex.Reward, ex.Advantage = -ex.Reward, -ex.Advantage
		ds.Train = append(ds.Train, ex)
	}
	ds.Rehearsal = nil
	j := *job
	j.Dataset = &ds
	j.Objective = distill.Objective{PolicyGradient: true}
	j.Hyper.LR, j.Hyper.Steps = lr, steps
	return &j
}

// Outcome is what became of the bad candidate at the gate and after.
type Outcome struct {
	Version string `json:"version"`
	// Gate is the offline gate's verdict: "rejected" or "accepted".
	Gate       string `json:"gate"`
	GateReason string `json:"gate_reason,omitempty"`
	// StartedBy is "operator" when the bench started its canary through
	// the operator API (the gate rejected it), "controller" when the gate
	// accepted it and the controller started it as any other.
	StartedBy string `json:"started_by,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Operator is the operator API of a running citizen.
type Operator struct {
	BaseURL, APIKey string
	Client          *http.Client // default http.DefaultClient
	// Poll is the interval between reads of the versions (default 200 ms).
	Poll time.Duration
}

// StartWhenRejected waits for t's bad job, then for its version's
// weights.trained (GET /v1/ops/versions), and, when the offline gate
// rejected it, starts its canary as an operator (POST
// /v1/ops/rollout/start with reason). A version the gate accepted is
// left to the controller. It returns when the start is done or refused,
// or ctx ends (Outcome.Error says what went wrong).
func StartWhenRejected(ctx context.Context, t *Trainer, op Operator, reason string) Outcome {
	if op.Client == nil {
		op.Client = http.DefaultClient
	}
	if op.Poll <= 0 {
		op.Poll = 200 * time.Millisecond
	}
	select {
	case <-t.Trained():
	case <-ctx.Done():
		return Outcome{Error: "no bad candidate trained: " + ctx.Err().Error()}
	}
	v, _ := t.Version()
	out := Outcome{Version: v}
	tick := time.NewTicker(op.Poll)
	defer tick.Stop()
	for {
		st, why, err := op.status(ctx, v)
		switch {
		case err != nil:
			// A transient failure is retried; the context bounds it.
		case st == "":
			// Not recorded yet: the gate is still judging it.
		case st == "rejected":
			out.Gate, out.GateReason = "rejected", why
			if err := op.start(ctx, v, reason); err != nil {
				out.Error = err.Error()
				return out
			}
			out.StartedBy = "operator"
			return out
		default:
			out.Gate, out.StartedBy = "accepted", "controller"
			return out
		}
		select {
		case <-ctx.Done():
			out.Error = fmt.Sprintf("version %s not started: %v", v, ctx.Err())
			if err != nil {
				out.Error += " (last error: " + err.Error() + ")"
			}
			return out
		case <-tick.C:
		}
	}
}

// status is version's status in GET /v1/ops/versions ("" when it is not
// listed yet) and its gate reason.
func (op Operator) status(ctx context.Context, version string) (string, string, error) {
	var vr struct {
		Versions []struct {
			Version, Status, Reason string
		} `json:"versions"`
	}
	if err := op.call(ctx, http.MethodGet, "/v1/ops/versions", nil, &vr); err != nil {
		return "", "", err
	}
	for _, x := range vr.Versions {
		if x.Version == version {
			return x.Status, x.Reason, nil
		}
	}
	return "", "", nil
}

func (op Operator) start(ctx context.Context, version, reason string) error {
	body, _ := json.Marshal(map[string]string{"candidate": version, "reason": reason})
	return op.call(ctx, http.MethodPost, "/v1/ops/rollout/start", body, nil)
}

func (op Operator) call(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(op.BaseURL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+op.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := op.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("badcandidate: %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("badcandidate: %s %s: %w", method, path, err)
	}
	return nil
}

// errNoNext is what a Trainer without Next returns.
var errNoNext = errors.New("badcandidate: Trainer.Next is nil")
