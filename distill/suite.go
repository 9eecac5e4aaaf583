package distill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
)

// SuiteCase is one question of the fixed regression suite: a prompt of a
// task type and its right answer.
type SuiteCase struct {
	Type     string               `json:"type"`
	Messages []events.ChatMessage `json:"messages"`
	Expected string               `json:"expected"`
}

// SuiteGrade says whether answer is right for c (ok false: the type has
// no grader that can judge it; the case then does not count). It is
// called from several goroutines at once.
type SuiteGrade func(c SuiteCase, answer string) (right, ok bool)

// maxLine bounds one line of a suite or rehearsal file.
const maxLine = 1 << 20

// ParseSuite reads a regression suite: JSON Lines, one SuiteCase per
// line (blank lines are skipped). Every case needs a type, at least one
// message ending with the user's, and an expected answer; an unknown
// field is an error (a misspelt "expected" would otherwise drop the
// answer). Errors name the line; nothing is returned with one.
func ParseSuite(r io.Reader) ([]SuiteCase, error) {
	return parseJSONL(r, "suite", (*SuiteCase).validate)
}

// parseJSONL reads JSON Lines of T (blank lines skipped, unknown fields
// and trailing values refused, each value checked by validate). Errors
// name the file kind (what) and the line; nothing is returned with one.
func parseJSONL[T any](r io.Reader, what string, validate func(*T) error) ([]T, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var out []T
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var c T
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("%s line %d: more than one JSON value", what, line)
		}
		if err := validate(&c); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", what, line, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

func (c *SuiteCase) validate() error {
	switch {
	case c.Type == "":
		return errors.New(`no "type"`)
	case c.Expected == "":
		return errors.New(`no "expected" answer`)
	case len(c.Messages) == 0:
		return errors.New(`no "messages"`)
	case c.Messages[len(c.Messages)-1].Role != "user":
		return fmt.Errorf("the last message is the %s's; a case asks a question (role user)", c.Messages[len(c.Messages)-1].Role)
	}
	for i, m := range c.Messages {
		if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("message %d: role %q (system, user or assistant)", i, m.Role)
		}
	}
	return nil
}

// LoadSuite reads a regression suite file (ParseSuite).
func LoadSuite(path string) ([]SuiteCase, error) { return loadJSONL(path, ParseSuite) }

// WriteSuite writes cases as ParseSuite reads them.
func WriteSuite(w io.Writer, cases []SuiteCase) error { return encodeJSONL(w, cases) }

// loadJSONL reads the file at path with parse; a parse error names the
// file.
func loadJSONL[T any](path string, parse func(io.Reader) ([]T, error)) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// encodeJSONL writes vs as JSON Lines, one value per line.
func encodeJSONL[T any](w io.Writer, vs []T) error {
	enc := json.NewEncoder(w)
	for i := range vs {
		if err := enc.Encode(&vs[i]); err != nil {
			return err
		}
	}
	return nil
}

// suiteParallel is how many suite questions are asked at once.
const suiteParallel = 16

// suiteCache holds the suite results of the versions that do not change
// (the base, promoted parents): a version's adapter is immutable, so its
// answers to a fixed suite are asked once per process.
type suiteCache struct {
	mu sync.Mutex
	m  map[string]map[string]events.SuiteCount // version or "base" -> type
}

// suiteScore answers every case greedily with adapter a (nil: the base)
// and counts per type the cases the grader judged (N) and those answered
// right (Right). A non-empty key (a version, "base") caches the result.
func (d *Distiller) suiteScore(ctx context.Context, a *model.Adapter, key string) (map[string]events.SuiteCount, error) {
	cfg := d.cfg
	if key != "" {
		d.suite.mu.Lock()
		r, ok := d.suite.m[key]
		d.suite.mu.Unlock()
		if ok {
			return r, nil
		}
	}
	adapter := ""
	if a != nil {
		adapter = fmt.Sprintf("distill-suite-%d", evalSeq.Add(1))
		if err := cfg.Chat.Engine.RegisterAdapter(adapter, a); err != nil {
			return nil, err
		}
		defer cfg.Chat.Engine.RemoveAdapter(adapter)
	}
	// The questions go to the engine suiteParallel at a time: it batches
	// concurrent requests (1,000 questions took 4.8 s one by one, 2.7 s
	// sixteen at a time on 2 cores).
	type verdict struct{ judged, right bool }
	verdicts := make([]verdict, len(cfg.Suite))
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(suiteParallel, len(cfg.Suite)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(cfg.Suite) && cctx.Err() == nil; i = int(next.Add(1) - 1) {
				c := cfg.Suite[i]
				got, err := cfg.Chat.Complete(cctx, chat.Request{Messages: toTok(c.Messages), MaxTokens: cfg.SuiteMaxTokens, Adapter: adapter})
				if errors.Is(err, chat.ErrPromptTooLong) {
					continue
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				right, ok := cfg.SuiteGrade(c, got.Message.Content)
				verdicts[i] = verdict{ok, right}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("regression suite: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := map[string]events.SuiteCount{}
	for i, v := range verdicts {
		if !v.judged {
			continue
		}
		n := out[cfg.Suite[i].Type]
		n.N++
		if v.right {
			n.Right++
		}
		out[cfg.Suite[i].Type] = n
	}
	if key != "" {
		d.suite.mu.Lock()
		if d.suite.m == nil {
			d.suite.m = map[string]map[string]events.SuiteCount{}
		}
		d.suite.m[key] = out
		d.suite.mu.Unlock()
	}
	return out, nil
}

// suiteCheck asks the regression suite of the candidate, its parent (when
// it is not the base) and the base (nil without a suite, or without the
// chat model to answer).
func (d *Distiller) suiteCheck(ctx context.Context, cand, parent *model.Adapter, parentVersion string) (*events.SuiteCheck, error) {
	cfg := d.cfg
	if len(cfg.Suite) == 0 || cfg.Chat == nil {
		return nil, nil
	}
	c, err := d.suiteScore(ctx, cand, "")
	if err != nil {
		return nil, err
	}
	b, err := d.suiteScore(ctx, nil, parentName(""))
	if err != nil {
		return nil, err
	}
	out := &events.SuiteCheck{Candidate: c, Base: b}
	if parent != nil {
		if out.Parent, err = d.suiteScore(ctx, parent, parentVersion); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SuiteReasons are the gate's reasons to reject a candidate on the
// regression suite: a type it answers more than MaxSuiteLoss·N questions
// fewer right than its parent, or than the base (so the losses of
// successive versions do not add up), or a type it was judged on a
// different number of questions.
func (g GateConfig) SuiteReasons(s *events.SuiteCheck) []string {
	if s == nil {
		return nil
	}
	g.defaults()
	var out []string
	refs := []struct {
		name   string
		counts map[string]events.SuiteCount
	}{{"base", s.Base}}
	if s.Parent != nil {
		refs = append(refs, refs[0])
		refs[0].name, refs[0].counts = "parent", s.Parent
	}
	for _, ref := range refs {
		for _, t := range slices.Sorted(maps.Keys(ref.counts)) {
			r := ref.counts[t]
			c, ok := s.Candidate[t]
			if !ok || c.N != r.N {
				out = append(out, fmt.Sprintf("suite/%s: candidate judged on %d questions, %s on %d", t, c.N, ref.name, r.N))
				continue
			}
			if float64(c.Right) < float64(r.Right)-g.MaxSuiteLoss*float64(r.N) {
				out = append(out, fmt.Sprintf("suite/%s: %d of %d right, %s %d (max loss %.3g)", t, c.Right, c.N, ref.name, r.Right, g.MaxSuiteLoss*float64(r.N)))
			}
		}
	}
	return out
}
