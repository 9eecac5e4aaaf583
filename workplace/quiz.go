package workplace

import (
	"context"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// Question is one fresh first turn of a task as Quiz asked it, with the
// answer it got.
type Question struct {
	Family string `json:"family"`
	// Key is the family, or the sub-key Quiz's keyOf gave it.
	Key      string `json:"key"`
	System   string `json:"system,omitempty"`
	User     string `json:"user"`
	Expected string `json:"expected"` // the canonical answer
	Answer   string `json:"answer"`
	Correct  bool   `json:"correct"`
}

// QuizConfig says what Quiz asks.
type QuizConfig struct {
	// N questions per key, Seed for drawing them.
	N    int
	Seed uint64
	// Split divides a family's questions into keys: Split[family] maps a
	// turn to its key, and Keys[family] lists the keys it gives. A family
	// without a Split is one key, its name.
	Split map[string]func(Turn) string
	Keys  map[string][]string
	// Parallel questions are asked at once (default 1); the questions and
	// their order do not depend on it.
	Parallel int
}

// Quiz asks cfg.N fresh questions per key of every active family of w
// that needs no tool (first turns of tasks without tools; order_status,
// which needs its tool, is left out) through ask, and grades each answer
// with the turn's checker. A key the family rarely draws may get fewer
// (20·N draws per family at most). The questions depend only on w and
// cfg, so models quizzed with the same ones answer the same questions
// and compare question by question. A response format is not enforced
// (the caller's ask decides).
func Quiz(ctx context.Context, w World, cfg QuizConfig, ask func(ctx context.Context, system, user string) (string, error)) ([]Question, error) {
	n := cfg.N
	var out []Question
	var checks []func(string) Grade
	for _, name := range w.Families {
		fam := FamilyByName(name)
		if fam == nil || name == "order_status" {
			continue
		}
		h := fnv.New64a()
		io.WriteString(h, name)
		r := rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))
		asked := map[string]int{}
		keys, split := []string{name}, cfg.Split[name]
		if split != nil {
			keys = cfg.Keys[name]
		}
		full := func() bool {
			for _, k := range keys {
				if asked[k] < n {
					return false
				}
			}
			return true
		}
		for tries := 0; tries < 20*n && !full(); tries++ {
			task := fam.Generate(r, w)
			if len(task.Tools) > 0 || len(task.Turns) == 0 {
				continue
			}
			turn := task.Turns[0]
			key := name
			if split != nil {
				key = split(turn)
			}
			if asked[key] >= n {
				continue
			}
			asked[key]++
			out = append(out, Question{Family: name, Key: key, System: task.System, User: turn.User, Expected: turn.Answer})
			checks = append(checks, turn.Check)
		}
	}
	// Every question drawn, then asked, Parallel at a time.
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(max(cfg.Parallel, 1), len(out)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(out) && cctx.Err() == nil; i = int(next.Add(1) - 1) {
				answer, err := ask(cctx, out[i].System, out[i].User)
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				out[i].Answer, out[i].Correct = answer, checks[i](answer).Correct
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
