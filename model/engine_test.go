package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"citizen/model/kernels"
)

func engineTestModel(t testing.TB) *Model {
	c := llama(64, 32, 64, 2, 4, 2, 64)
	c.HeadDim = 8
	c.InitializerRange = 0.15 // peaked distributions make sampling bugs visible
	m, err := NewRandom(c, 11)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recomputeLogprobs runs one full (training-path) forward pass over prompt+completion and returns
// log-softmax(logits/T) of each completion token (T ≤ 0 means 1).
func recomputeLogprobs(t *testing.T, m *Model, ad *Adapter, prompt []int, res *Result, temp float32) []float32 {
	t.Helper()
	ids := append(slices.Clone(prompt), res.IDs()...)
	logits, err := m.Logits(&Batch{Tokens: ids[:len(ids)-1]}, ad)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	lp := make([]float32, V)
	out := make([]float32, len(res.Tokens))
	for i := range res.Tokens {
		row := logits[(len(prompt)-1+i)*V : (len(prompt)+i)*V]
		logSoftmaxT(lp, row, temp)
		out[i] = lp[res.Tokens[i].ID]
	}
	return out
}

type genCase struct {
	req  Request
	temp float32
}

func genCases() []genCase {
	return []genCase{
		{Request{PromptIDs: []int{1, 2, 3}, MaxTokens: 30, Temperature: 1, Seed: 1, TopLogprobs: 3}, 1},
		{Request{PromptIDs: []int{5, 6, 7, 8, 9, 10, 11}, MaxTokens: 25, Temperature: 0.7, TopP: 0.9, Seed: 2}, 0.7},
		{Request{PromptIDs: []int{9}, MaxTokens: 40, Temperature: 0, Seed: 3, TopLogprobs: 5}, 0},
		{Request{PromptIDs: []int{4, 4, 4, 4}, MaxTokens: 33, Temperature: 1.3, Seed: 4}, 1.3},
		{Request{PromptIDs: []int{60, 61, 62, 63, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, MaxTokens: 20, Temperature: 1, Seed: 5}, 1},
	}
}

func TestEngineLogprobsMatchFullForward(t *testing.T) {
	for _, blk := range []int{64, 4} {
		for _, chunk := range []int{5, 256} {
			for _, budget := range []int{7, 0} {
				t.Run(fmt.Sprintf("attBlock=%d/prefillChunk=%d/stepTokens=%d", blk, chunk, budget), func(t *testing.T) {
					defer func(old int) { attBlock = old }(attBlock)
					attBlock = blk
					testEngineLogprobs(t, EngineConfig{MaxBatch: 8, PrefillChunk: chunk, StepTokens: budget})
				})
			}
		}
	}
}

func testEngineLogprobs(t *testing.T, cfg EngineConfig) {
	testEngineLogprobsOn(t, engineTestModel(t), cfg)
}

// The per-sequence attention and sampling on the kernels' worker pool (two goroutines, every
// step, a vocabulary as large as a real one) give the full forward pass's logprobs.
func TestEngineParallelStepMatchesFullForward(t *testing.T) {
	defer func(a, s int) { attParallelWork, sampleParallelWork = a, s }(attParallelWork, sampleParallelWork)
	attParallelWork, sampleParallelWork = 0, 0
	defer kernels.SetThreads(kernels.Threads())
	kernels.SetThreads(2)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	c := llama(16384, 32, 64, 2, 4, 2, 64)
	c.HeadDim = 8
	c.InitializerRange = 0.15
	m, err := NewRandom(c, 12)
	if err != nil {
		t.Fatal(err)
	}
	testEngineLogprobsOn(t, m, EngineConfig{MaxBatch: 8})
}

func testEngineLogprobsOn(t *testing.T, m *Model, cfg EngineConfig) {
	e := NewEngine(m, cfg)
	defer e.Close()
	cases := genCases()
	results := make([]*Result, len(cases))
	var wg sync.WaitGroup
	for i, gc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Generate(context.Background(), gc.req)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	for i, gc := range cases {
		res := results[i]
		if res == nil {
			continue
		}
		if res.FinishReason != FinishLength || len(res.Tokens) != gc.req.MaxTokens {
			t.Errorf("case %d: %d tokens, finish %s", i, len(res.Tokens), res.FinishReason)
		}
		want := recomputeLogprobs(t, m, nil, gc.req.PromptIDs, res, gc.temp)
		for j, tok := range res.Tokens {
			if d := math.Abs(float64(tok.Logprob - want[j])); d > 1e-4 {
				t.Errorf("case %d token %d: engine logprob %.6f, full forward %.6f", i, j, tok.Logprob, want[j])
			}
			if len(tok.TopLogprobs) != gc.req.TopLogprobs {
				t.Errorf("case %d: %d top logprobs", i, len(tok.TopLogprobs))
			}
			for k := 1; k < len(tok.TopLogprobs); k++ {
				if tok.TopLogprobs[k].Logprob > tok.TopLogprobs[k-1].Logprob {
					t.Errorf("top logprobs not sorted")
				}
			}
			if gc.temp == 0 && len(tok.TopLogprobs) > 0 && tok.TopLogprobs[0].ID != tok.ID {
				t.Errorf("greedy token %d is not the top-1 %d", tok.ID, tok.TopLogprobs[0].ID)
			}
		}
	}
}

func TestEngineDeterministicRegardlessOfBatching(t *testing.T) {
	m := engineTestModel(t)
	cases := genCases()
	// solo: one request at a time, batch size 1
	solo := NewEngine(m, EngineConfig{MaxBatch: 1})
	want := make([][]int, len(cases))
	for i, gc := range cases {
		res, err := solo.Generate(context.Background(), gc.req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.IDs()
	}
	solo.Close()
	// all at once, in one running batch, twice
	for rep := 0; rep < 2; rep++ {
		e := NewEngine(m, EngineConfig{MaxBatch: 16, PrefillChunk: 3})
		var wg sync.WaitGroup
		got := make([][]int, len(cases))
		for i, gc := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.Generate(context.Background(), gc.req)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = res.IDs()
			}()
		}
		wg.Wait()
		e.Close()
		for i := range cases {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("rep %d case %d: batched %v, solo %v", rep, i, got[i], want[i])
			}
		}
	}
	// a different seed gives a different sample
	e := NewEngine(m, EngineConfig{})
	defer e.Close()
	r := cases[0].req
	r.Seed = 99
	res, _ := e.Generate(context.Background(), r)
	if slices.Equal(res.IDs(), want[0]) {
		t.Errorf("seed 99 reproduced seed 1's sample %v", want[0])
	}
}

func TestEngineStopsAndCancel(t *testing.T) {
	m := engineTestModel(t)
	e := NewEngine(m, EngineConfig{})
	defer e.Close()
	base := Request{PromptIDs: []int{1, 2, 3}, MaxTokens: 30, Temperature: 1, Seed: 7}
	full, err := e.Generate(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	ids := full.IDs()

	r := base
	r.StopIDs = []int{ids[5]}
	res, _ := e.Generate(context.Background(), r)
	k := slices.Index(ids, ids[5])
	if res.FinishReason != FinishStop || res.StopLen != 1 || !slices.Equal(res.IDs(), ids[:k+1]) {
		t.Errorf("stop id: %v %s", res.IDs(), res.FinishReason)
	}

	r = base
	r.StopSequences = [][]int{{999}, ids[7:10]}
	res, _ = e.Generate(context.Background(), r)
	if res.FinishReason != FinishStop || res.StopLen != 3 || len(res.Tokens) > 10 {
		t.Errorf("stop sequence: %v %s", res.IDs(), res.FinishReason)
	}

	r = base
	r.MaxTokens = 0 // fill the context window
	res, _ = e.Generate(context.Background(), r)
	if res.FinishReason != FinishLength || len(res.Tokens) != m.Config.MaxPositionEmbeddings-3 {
		t.Errorf("context window: %d tokens %s", len(res.Tokens), res.FinishReason)
	}

	// streaming, then cancellation (from the logit hook, which runs in step with the engine)
	ctx, cancel := context.WithCancel(context.Background())
	var streamed []int
	r = base
	r.MaxTokens = 0
	r.OnToken = func(tok Token) { streamed = append(streamed, tok.ID) }
	r.LogitMask = func(gen []int, _ []float32) {
		if len(gen) == 4 {
			cancel()
		}
	}
	res, err = e.Generate(ctx, r)
	if !errors.Is(err, context.Canceled) || res.FinishReason != FinishCancelled || len(res.Tokens) != 5 {
		t.Errorf("cancel: err %v finish %s tokens %d", err, res.FinishReason, len(res.Tokens))
	}
	if !slices.Equal(streamed, res.IDs()) {
		t.Errorf("streamed %v, result %v", streamed, res.IDs())
	}

	// constrained decoding: the mask allows only even ids
	r = base
	r.LogitMask = func(_ []int, z []float32) {
		for i := 1; i < len(z); i += 2 {
			z[i] = float32(math.Inf(-1))
		}
	}
	res, _ = e.Generate(context.Background(), r)
	for _, id := range res.IDs() {
		if id%2 != 0 {
			t.Fatalf("mask ignored: %v", res.IDs())
		}
	}

	r = base
	r.LogitMask = func(gen []int, z []float32) {
		if len(gen) == 3 {
			for i := range z {
				z[i] = float32(math.Inf(-1))
			}
		}
	}
	if res, err := e.Generate(context.Background(), r); !errors.Is(err, ErrRequest) || len(res.Tokens) != 3 {
		t.Errorf("mask forbidding everything: %v", err)
	}

	r = base
	r.LogitMask = func([]int, []float32) { panic("boom") }
	if _, err := e.Generate(context.Background(), r); !errors.Is(err, ErrRequest) {
		t.Errorf("panicking mask: %v", err)
	}
	if _, err := e.Generate(context.Background(), base); err != nil {
		t.Errorf("engine broken after a panicking mask: %v", err)
	}

	for _, bad := range []Request{{}, {PromptIDs: []int{64}}, {PromptIDs: make([]int, 64)}, {PromptIDs: []int{1}, Adapter: "nope"}} {
		if _, err := e.Generate(context.Background(), bad); err == nil {
			t.Errorf("request %+v accepted", bad)
		}
	}
}

// TestEngineDeterministicPreset repeats the batching-invariance check on the ~3M preset, whose
// dimensions take the kernels' blocked (packed) paths for batched rows but not for single rows.
func TestEngineDeterministicPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	m, err := NewRandom(Tiny3M(), 5)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	reqs := make([]Request, n)
	for i := range reqs {
		reqs[i] = Request{PromptIDs: prompt(3+5*i, m.Config.VocabSize, i), MaxTokens: 16, Temperature: 1, Seed: uint64(i), TopLogprobs: 1}
	}
	solo := NewEngine(m, EngineConfig{MaxBatch: 1})
	want := make([]*Result, n)
	for i, r := range reqs {
		want[i], err = solo.Generate(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
	}
	solo.Close()
	e := NewEngine(m, EngineConfig{MaxBatch: n, PrefillChunk: 7})
	defer e.Close()
	got := make([]*Result, n)
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = e.Generate(context.Background(), r)
		}()
	}
	wg.Wait()
	var worst float64
	for i := range reqs {
		if !slices.Equal(got[i].IDs(), want[i].IDs()) {
			t.Errorf("request %d: batched %v, solo %v", i, got[i].IDs(), want[i].IDs())
			continue
		}
		for j := range got[i].Tokens {
			worst = math.Max(worst, math.Abs(float64(got[i].Tokens[j].Logprob-want[i].Tokens[j].Logprob)))
		}
	}
	t.Logf("largest logprob difference batched vs solo: %g", worst)
	if worst > 1e-4 {
		t.Errorf("logprobs differ by %g between batched and solo runs", worst)
	}
}

func TestEngineShutdownFinishesInFlight(t *testing.T) {
	m := engineTestModel(t)
	e := NewEngine(m, EngineConfig{})
	started := make(chan struct{})
	var res *Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		once := sync.Once{}
		res, err = e.Generate(context.Background(), Request{PromptIDs: []int{1, 2}, MaxTokens: 40, Temperature: 1,
			LogitMask: func([]int, []float32) { once.Do(func() { close(started) }) }})
	}()
	<-started
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	if err != nil || len(res.Tokens) != 40 || res.FinishReason != FinishLength {
		t.Fatalf("in-flight request after Shutdown: %v %+v", err, res)
	}
	if _, err := e.Generate(context.Background(), Request{PromptIDs: []int{1}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after Shutdown: %v", err)
	}
	st := e.Stats()
	if st.GeneratedTokens != 40 || st.PromptTokens != 2 || st.Steps != 40 || st.Active != 0 {
		t.Errorf("stats %+v", st)
	}
	e.Close() // idempotent after Shutdown
}

// A request waiting for the engine returns when its context ends; with more requests than
// MaxBatch the rest wait for room and every request gets exactly its solo result.
func TestEngineQueueAndCancelWhileWaiting(t *testing.T) {
	m := engineTestModel(t)
	cases := genCases()
	solo := NewEngine(m, EngineConfig{MaxBatch: 1})
	want := make([][]int, len(cases))
	for i, gc := range cases {
		res, err := solo.Generate(context.Background(), gc.req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.IDs()
	}
	solo.Close()

	e := NewEngine(m, EngineConfig{MaxBatch: 2})
	defer e.Close()
	// Hold the engine inside a step (a blocking mask: test only, real masks must not block), so
	// nothing is admitted; a waiting request must still return when its context ends.
	release, started := make(chan struct{}), make(chan struct{})
	holderDone := make(chan struct{})
	go func() {
		defer close(holderDone)
		once := sync.Once{}
		e.Generate(context.Background(), Request{PromptIDs: []int{1}, MaxTokens: 5, LogitMask: func([]int, []float32) {
			once.Do(func() {
				close(started)
				<-release
			})
		}})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	res, err := e.Generate(ctx, Request{PromptIDs: []int{2}, MaxTokens: 5})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || res.FinishReason != FinishCancelled || len(res.Tokens) != 0 {
		t.Fatalf("cancel while waiting: %v %+v", err, res)
	}
	close(release)
	<-holderDone

	var wg sync.WaitGroup
	got := make([][]int, len(cases))
	for i, gc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Generate(context.Background(), gc.req)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = res.IDs()
		}()
	}
	wg.Wait()
	for i := range cases {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("case %d: %v, solo %v", i, got[i], want[i])
		}
	}
}
