package model

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"citizen/model/kernels"
)

var (
	// ErrClosed is returned by Generate after Close.
	ErrClosed = errors.New("model: engine closed")
	// ErrRequest is wrapped by errors about an invalid Request.
	ErrRequest = errors.New("model: invalid request")
	// ErrUnknownAdapter is returned when Request.Adapter names no registered adapter.
	ErrUnknownAdapter = errors.New("model: unknown adapter")
)

// FinishReason says why a generation ended.
type FinishReason string

// Finish reasons.
const (
	FinishStop      FinishReason = "stop"      // a stop id or stop sequence was sampled
	FinishLength    FinishReason = "length"    // MaxTokens or the context window was reached
	FinishCancelled FinishReason = "cancelled" // the request's context ended
)

// Request asks for one completion of PromptIDs.
//
// Logprobs: every sampled token carries log p(token) under the distribution it was sampled from
// BEFORE top-p truncation: log-softmax(logits/Temperature) (after LogitMask, when set, which
// renormalises over the tokens it leaves); with Temperature ≤ 0 (greedy) it is log-softmax(logits),
// the model's own distribution at temperature 1. TopLogprobs come from the same distribution.
type Request struct {
	PromptIDs     []int   // at least one token; fewer than max_position_embeddings
	MaxTokens     int     // tokens to generate at most; 0: until the context window is full
	Temperature   float32 // ≤ 0: greedy (argmax)
	TopP          float32 // nucleus sampling when in (0,1); otherwise off
	Seed          uint64  // seeds this request's own RNG (one draw per token), see Engine
	StopIDs       []int   // generation stops after sampling any of these (e.g. end-of-turn)
	StopSequences [][]int // generation stops when the generated tokens end with one of these
	TopLogprobs   int     // how many alternatives to report per token (0–20)
	Adapter       string  // registered LoRA adapter to use; "" for the base model

	// LogitMask, when set, may change logits (for example set −Inf on tokens a JSON grammar
	// forbids) before each sampling step; generated holds the tokens sampled so far. It runs on
	// the engine's goroutine, must be fast, must not block and must not keep either slice. If it
	// leaves no finite logit the request ends with an ErrRequest error.
	LogitMask func(generated []int, logits []float32)
	// OnToken, when set, receives each token as soon as it is sampled, in order, on the
	// goroutine that called Generate (so a slow consumer slows only its own request).
	OnToken func(Token)
}

// Token is one sampled token.
type Token struct {
	ID          int
	Logprob     float32        // see Request for the distribution
	TopLogprobs []TokenLogprob // the Request.TopLogprobs most likely tokens, most likely first
}

// Result is a finished generation.
type Result struct {
	Tokens       []Token // every sampled token, including a final stop id or stop sequence
	StopLen      int     // how many trailing Tokens are the stop id or sequence (0 unless FinishStop)
	FinishReason FinishReason
	PromptTokens int
	FirstToken   time.Duration // time from Generate to the first sampled token
}

// IDs returns the sampled token ids.
func (r *Result) IDs() []int { return TokenIDs(r.Tokens) }

// TokenIDs returns the ids of ts.
func TokenIDs(ts []Token) []int {
	ids := make([]int, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// EngineConfig tunes an Engine. Zero values get defaults.
type EngineConfig struct {
	MaxBatch     int // sequences decoded together at most (default 16); more requests wait
	PrefillChunk int // prompt tokens one sequence feeds per step at most (default 256)
	// StepTokens caps the tokens fed in one step (default 1024): every active sequence feeds at
	// least one, and prompts share what is left, so a burst of new prompts neither stalls the
	// sequences that are decoding for long nor makes one huge step.
	StepTokens int
}

// Engine runs continuous batching over one immutable base Model: concurrent Generate calls join
// the running batch between decode steps; each step feeds every active sequence (a chunk of its
// prompt, or its last sampled token) through the model at once, so every projection is one
// matrix product with one row per fed token.
//
// Determinism: each request has its own RNG seeded from Request.Seed, so what else runs never
// changes its random draws. The logits themselves can differ in the last float32 bits with the
// batch's composition (the kernels block products differently for different row counts; tests
// measure ≤ 1e-6 on logprobs), so a token can only change where a draw falls within that rounding
// of a boundary between two tokens; the tests see identical tokens.
//
// All methods are safe for concurrent use. The Model must not be modified while the Engine
// exists. Adapters are copied on registration; a request keeps the adapter it started with even
// if the name is re-registered or removed meanwhile.
type Engine struct {
	model    *Model
	cfg      EngineConfig
	adapters atomic.Pointer[map[string]*Adapter]
	adMu     sync.Mutex // serialises adapter writers (copy-on-write)

	submit    chan *genSeq
	quit      chan struct{} // Close: stop now
	drain     chan struct{} // Shutdown: admit nothing new, finish what runs
	done      chan struct{}
	closeOnce sync.Once
	drainOnce sync.Once

	active, steps, generated, prompted atomic.Int64

	bufs stepBufs // used only by the loop goroutine
}

// NewEngine starts an engine over m. Call Close to stop it.
func NewEngine(m *Model, cfg EngineConfig) *Engine {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 16
	}
	if cfg.PrefillChunk <= 0 {
		cfg.PrefillChunk = 256
	}
	if cfg.StepTokens <= 0 {
		cfg.StepTokens = 1024
	}
	if m.rope == nil {
		m.rope = newRopeTable(m.Config)
	}
	e := &Engine{model: m, cfg: cfg, submit: make(chan *genSeq), quit: make(chan struct{}), drain: make(chan struct{}), done: make(chan struct{})}
	empty := map[string]*Adapter{}
	e.adapters.Store(&empty)
	go e.loop()
	return e
}

// Model returns the base model (read-only).
func (e *Engine) Model() *Model { return e.model }

// Close stops the engine at once; requests in flight end with ErrClosed. It waits for the loop
// to exit. Safe to call more than once and after Shutdown.
func (e *Engine) Close() {
	e.closeOnce.Do(func() { close(e.quit) })
	<-e.done
}

// Shutdown stops admitting requests (new Generate calls get ErrClosed) and waits until the
// requests in flight finish; if ctx ends first it calls Close and returns ctx's error.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.drainOnce.Do(func() { close(e.drain) })
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		e.Close()
		return ctx.Err()
	}
}

// EngineStats are running totals, safe to read at any time.
type EngineStats struct {
	Active          int   // sequences in the running batch
	Steps           int64 // batched forward steps run
	GeneratedTokens int64 // tokens sampled
	PromptTokens    int64 // prompt tokens fed
}

// Stats returns the engine's counters.
func (e *Engine) Stats() EngineStats {
	return EngineStats{Active: int(e.active.Load()), Steps: e.steps.Load(), GeneratedTokens: e.generated.Load(), PromptTokens: e.prompted.Load()}
}

// RegisterAdapter makes a copy of a available under name, replacing any adapter of that name for
// requests that start afterwards.
func (e *Engine) RegisterAdapter(name string, a *Adapter) error {
	if name == "" {
		return fmt.Errorf("%w: empty adapter name", ErrRequest)
	}
	if err := a.compatible(e.model.Config); err != nil {
		return err
	}
	c := a.Clone()
	c.Name = name
	e.adMu.Lock()
	defer e.adMu.Unlock()
	old := *e.adapters.Load()
	next := make(map[string]*Adapter, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[name] = c
	e.adapters.Store(&next)
	return nil
}

// RemoveAdapter unregisters name; requests already using it finish with it.
func (e *Engine) RemoveAdapter(name string) {
	e.adMu.Lock()
	defer e.adMu.Unlock()
	old := *e.adapters.Load()
	next := make(map[string]*Adapter, len(old))
	for k, v := range old {
		if k != name {
			next[k] = v
		}
	}
	e.adapters.Store(&next)
}

// Adapters lists the registered adapter names, sorted.
func (e *Engine) Adapters() []string {
	m := *e.adapters.Load()
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// genSeq is one request's state inside the engine.
type genSeq struct {
	ctx       context.Context
	req       Request
	adapter   *Adapter
	rng       *rand.Rand
	kc, vc    [][]float32 // per layer: [kv_heads][cap][head_dim]
	cap       int         // positions the cache holds now
	maxCap    int         // positions it may ever need
	pos       int         // tokens in the cache
	pending   []int       // tokens to feed next
	generated []int
	maxGen    int
	out       chan Token
	finish    FinishReason
	stopLen   int
	err       error
	start     time.Time
	first     time.Duration
}

func (s *genSeq) end(reason FinishReason, err error) {
	s.finish, s.err = reason, err
	close(s.out)
}

// Generate runs req to completion and returns the sampled tokens. It blocks until the request
// finishes; tokens are also streamed to req.OnToken as they come. When ctx ends first, the
// partial result is returned with FinishCancelled and ctx's error.
func (e *Engine) Generate(ctx context.Context, req Request) (*Result, error) {
	c := e.model.Config
	if len(req.PromptIDs) == 0 {
		return nil, fmt.Errorf("%w: empty prompt", ErrRequest)
	}
	if len(req.PromptIDs) >= c.MaxPositionEmbeddings {
		return nil, fmt.Errorf("%w: prompt of %d tokens leaves no room in a context of %d", ErrRequest, len(req.PromptIDs), c.MaxPositionEmbeddings)
	}
	for _, id := range req.PromptIDs {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("%w: token id %d outside vocabulary of %d", ErrRequest, id, c.VocabSize)
		}
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > 20 {
		return nil, fmt.Errorf("%w: top_logprobs %d (0–20)", ErrRequest, req.TopLogprobs)
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: max_tokens %d", ErrRequest, req.MaxTokens)
	}
	s := &genSeq{ctx: ctx, req: req, start: time.Now()}
	if req.Adapter != "" {
		s.adapter = (*e.adapters.Load())[req.Adapter]
		if s.adapter == nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownAdapter, req.Adapter)
		}
	}
	room := c.MaxPositionEmbeddings - len(req.PromptIDs)
	s.maxGen = room
	if req.MaxTokens > 0 && req.MaxTokens < room {
		s.maxGen = req.MaxTokens
	}
	// The last sampled token is never fed, so the cache holds prompt + maxGen − 1 tokens at
	// most. It is allocated by the engine when the sequence runs, and grows as it generates, so
	// waiting requests and short answers hold little memory.
	s.maxCap = len(req.PromptIDs) + s.maxGen - 1
	s.kc, s.vc = make([][]float32, c.NumHiddenLayers), make([][]float32, c.NumHiddenLayers)
	s.pending = slices.Clone(req.PromptIDs)
	s.rng = rand.New(rand.NewPCG(req.Seed, req.Seed^0x5851f42d4c957f2d))
	s.out = make(chan Token, s.maxGen+1)

	select {
	case <-e.drain:
		return nil, ErrClosed
	default:
	}
	select {
	case e.submit <- s:
	case <-ctx.Done():
		return &Result{FinishReason: FinishCancelled, PromptTokens: len(req.PromptIDs)}, ctx.Err()
	case <-e.quit:
		return nil, ErrClosed
	case <-e.drain:
		return nil, ErrClosed
	}
	res := &Result{PromptTokens: len(req.PromptIDs)}
	for tok := range s.out {
		res.Tokens = append(res.Tokens, tok)
		if req.OnToken != nil {
			req.OnToken(tok)
		}
	}
	res.FinishReason, res.StopLen, res.FirstToken = s.finish, s.stopLen, s.first
	if s.finish == FinishCancelled {
		return res, ctx.Err()
	}
	return res, s.err
}

func (e *Engine) loop() {
	defer close(e.done)
	var active []*genSeq
	for {
		e.active.Store(int64(len(active)))
		if len(active) == 0 {
			select {
			case s := <-e.submit:
				active = append(active, s)
			case <-e.quit:
				return
			case <-e.drain:
				return
			}
		}
	admit:
		for len(active) < e.cfg.MaxBatch {
			select {
			case s := <-e.submit:
				active = append(active, s)
			default:
				break admit
			}
		}
		select {
		case <-e.quit:
			for _, s := range active {
				s.end(FinishLength, ErrClosed)
			}
			return
		default:
		}
		keep := active[:0]
		for _, s := range active {
			if s.ctx.Err() != nil {
				s.end(FinishCancelled, nil)
				continue
			}
			keep = append(keep, s)
		}
		clear(active[len(keep):])
		active = keep
		if len(active) == 0 {
			continue
		}
		e.step(active)
		keep = active[:0]
		for _, s := range active {
			if s.finish == "" {
				keep = append(keep, s)
			}
		}
		clear(active[len(keep):])
		active = keep
	}
}

// stepBufs are the engine loop's reusable buffers.
type stepBufs struct {
	x, ln, qrows, krows, vrows, qh, atto, attrows, gate, up, hh, u, last, logits, lp []float32
	scratch                                                                          [][]float32
	idx                                                                              [][]int
	drawn                                                                            []Token
}

func grow(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}

// A step's attention (in multiply-adds) and its sampling (in logits) run on the kernels'
// worker pool from these sizes on; smaller ones on the engine's goroutine.
var attParallelWork, sampleParallelWork = 1 << 17, 1 << 16

// group is a run of consecutive rows fed with the same adapter.
type group struct {
	ad     *Adapter
	lo, hi int
}

// step feeds every active sequence once and samples for those whose input is exhausted.
func (e *Engine) step(seqs []*genSeq) {
	m, c, bf := e.model, e.model.Config, &e.bufs
	C, I, H, KV, hd, V := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.VocabSize
	qD, kvD := c.qDim(), c.kvDim()
	eps := float32(c.RMSNormEps)
	// Rows of one adapter are contiguous so that each adapter is one product per projection.
	sort.SliceStable(seqs, func(i, j int) bool { return adName(seqs[i].adapter) < adName(seqs[j].adapter) })

	// Token budget: one token each, then prompt chunks in batch order while the budget lasts.
	n := make([]int, len(seqs))
	off := make([]int, len(seqs))
	budget := e.cfg.StepTokens - len(seqs)
	for i, s := range seqs {
		n[i] = 1
		if extra := min(len(s.pending), e.cfg.PrefillChunk) - 1; extra > 0 && budget > 0 {
			extra = min(extra, budget)
			n[i] += extra
			budget -= extra
		}
	}
	var tokens, pos []int
	var sampleRows []int
	var sampleSeqs []*genSeq
	var groups []group
	N := 0
	for i, s := range seqs {
		off[i] = N
		for r := 0; r < n[i]; r++ {
			tokens = append(tokens, s.pending[r])
			pos = append(pos, s.pos+r)
		}
		if len(groups) > 0 && groups[len(groups)-1].ad == s.adapter {
			groups[len(groups)-1].hi = N + n[i]
		} else {
			groups = append(groups, group{ad: s.adapter, lo: N, hi: N + n[i]})
		}
		N += n[i]
		if n[i] == len(s.pending) {
			sampleRows = append(sampleRows, N-1)
			sampleSeqs = append(sampleSeqs, s)
		}
	}
	for i, s := range seqs {
		s.reserve(c, s.pos+n[i])
	}
	x := grow(&bf.x, N*C)
	ln := grow(&bf.ln, N*C)
	qrows, krows, vrows := grow(&bf.qrows, N*qD), grow(&bf.krows, N*kvD), grow(&bf.vrows, N*kvD)
	qh, atto, attrows := grow(&bf.qh, N*qD), grow(&bf.atto, N*qD), grow(&bf.attrows, N*qD)
	gate, up, hh := grow(&bf.gate, N*I), grow(&bf.up, N*I), grow(&bf.hh, N*I)
	maxR := 0
	for _, g := range groups {
		if g.ad != nil {
			maxR = max(maxR, g.ad.Config.Rank)
		}
	}
	u := grow(&bf.u, N*maxR)

	addLoRA := func(l, mod int, y, xin []float32) {
		in, out := c.moduleDims(mod)
		for _, g := range groups {
			if g.ad == nil || g.ad.layers[l][mod].A == nil {
				continue
			}
			p, rows := g.ad.layers[l][mod], g.hi-g.lo
			loraForward(y[g.lo*out:], u, xin[g.lo*in:], p.A, p.B, rows, in, out, g.ad.Config.Rank, g.ad.Scale())
		}
	}
	proj := func(l, mod int, y, xin []float32, acc bool) {
		in, out := c.moduleDims(mod)
		m.layerMatrix(l, mod).mul(y, xin, N, in, out, acc, false)
		addLoRA(l, mod, y, xin)
	}
	m.embed(x, tokens)
	// Attention and sampling run per sequence on the kernels' worker pool (kernels.Parallel),
	// each goroutine with its own scratch.
	workers := max(1, min(runtime.GOMAXPROCS(0), kernels.Threads()))
	if len(bf.scratch) < workers {
		bf.scratch = make([][]float32, workers)
		bf.idx = make([][]int, workers)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	group := H / KV
	attWork := 0
	for i, s := range seqs {
		attWork += n[i] * (s.pos + n[i]) * hd * H * 2
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		w := &m.W.Layers[l]
		rmsnormForward(ln, nil, x, w.InputNorm, N, C, eps)
		m.mulShared(l, ln, N, []int{modQ, modK, modV}, [][]float32{qrows, krows, vrows})
		addLoRA(l, modQ, qrows, ln)
		addLoRA(l, modK, krows, ln)
		addLoRA(l, modV, vrows, ln)
		rowsToHeads(qh, qrows, N, H, hd, pos, m.rope)
		// rotate keys and append keys and values to each sequence's cache
		for i, s := range seqs {
			kc, vc := s.kc[l], s.vc[l]
			for r := 0; r < n[i]; r++ {
				t, p := off[i]+r, s.pos+r
				for h := 0; h < KV; h++ {
					kd := kc[(h*s.cap+p)*hd : (h*s.cap+p+1)*hd]
					copy(kd, krows[t*kvD+h*hd:t*kvD+(h+1)*hd])
					m.rope.rotate(kd, p, 1)
					copy(vc[(h*s.cap+p)*hd:(h*s.cap+p+1)*hd], vrows[t*kvD+h*hd:t*kvD+(h+1)*hd])
				}
			}
		}
		task := func(wk, ti int) {
			i, h := ti/H, ti%H
			s := seqs[i]
			ni := n[i]
			if ni == 0 {
				return
			}
			kv := h / group
			kc, vc := s.kc[l][kv*s.cap*hd:], s.vc[l][kv*s.cap*hd:]
			qs, os := qh[(h*N+off[i])*hd:], atto[(h*N+off[i])*hd:]
			// row blocks [r0,r1) of the fed tokens see keys [0, pos+r1)
			for r0 := 0; r0 < ni; r0 += attBlock {
				r1 := min(r0+attBlock, ni)
				rows, cols := r1-r0, s.pos+r1
				sc := grow(&bf.scratch[wk], rows*cols)
				kernels.MatMulNT(sc, qs[r0*hd:], kc, rows, hd, cols, false)
				for r := 0; r < rows; r++ {
					softmaxCausalRow(sc[r*cols:(r+1)*cols], s.pos+r0+r, scale)
				}
				kernels.MatMulNN(os[r0*hd:], sc, vc, rows, cols, hd, false)
			}
		}
		if attWork < attParallelWork {
			for ti := 0; ti < len(seqs)*H; ti++ {
				task(0, ti)
			}
		} else {
			kernels.Parallel(len(seqs)*H, workers, task)
		}
		headsToRows(attrows, atto, N, H, hd, nil, nil)
		proj(l, modO, x, attrows, true)
		rmsnormForward(ln, nil, x, w.PostNorm, N, C, eps)
		m.mulShared(l, ln, N, []int{modGate, modUp}, [][]float32{gate, up})
		addLoRA(l, modGate, gate, ln)
		addLoRA(l, modUp, up, ln)
		swigluForward(hh, gate, up, N*I)
		proj(l, modDown, x, hh, true)
	}
	for i, s := range seqs {
		s.pos += n[i]
		s.pending = s.pending[n[i]:]
		if s.pos <= len(s.req.PromptIDs) {
			e.prompted.Add(int64(n[i]))
		}
	}
	e.steps.Add(1)
	S := len(sampleRows)
	if S == 0 {
		return
	}
	last := grow(&bf.last, S*C)
	for j, t := range sampleRows {
		copy(last[j*C:(j+1)*C], x[t*C:(t+1)*C])
	}
	rmsnormForward(last, nil, last, m.W.Norm, S, C, eps)
	logits := grow(&bf.logits, S*V)
	m.headMatrix().mul(logits, last, S, C, V, false, false)
	lp := grow(&bf.lp, S*V)
	// The requests' LogitMask hooks run here, one after another, on the engine's goroutine;
	// the softmaxes and draws (each sequence's own RNG) in parallel; the tokens are recorded
	// in batch order.
	ok := make([]bool, S)
	for j, s := range sampleSeqs {
		ok[j] = e.mask(s, logits[j*V:(j+1)*V])
	}
	drawn := bf.drawn[:0]
	drawn = append(drawn, make([]Token, S)...)
	bf.drawn = drawn
	drawOne := func(w, j int) {
		if ok[j] {
			drawn[j] = draw(sampleSeqs[j], logits[j*V:(j+1)*V], lp[j*V:(j+1)*V], &bf.idx[w])
		}
	}
	if S*V < sampleParallelWork {
		for j := range S {
			drawOne(0, j)
		}
	} else {
		kernels.Parallel(S, workers, drawOne)
	}
	for j, s := range sampleSeqs {
		if ok[j] {
			e.record(s, drawn[j])
		}
	}
}

func adName(a *Adapter) string {
	if a == nil {
		return ""
	}
	return a.Name
}

// mask runs s's LogitMask on its logits z, if it has one; false when s ended (the hook failed
// or left no token to sample).
func (e *Engine) mask(s *genSeq, z []float32) bool {
	req := &s.req
	if req.LogitMask == nil {
		return true
	}
	if err := callMask(req.LogitMask, s.generated, z); err != nil {
		s.end(FinishStop, err)
		return false
	}
	for _, v := range z {
		if !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) {
			return true
		}
	}
	s.end(FinishStop, fmt.Errorf("%w: LogitMask left no token to sample", ErrRequest))
	return false
}

// draw samples the next token of s from its (masked) logits z, with lp and idx as scratch. It
// touches only s's RNG, so the draws of different sequences may run at once.
func draw(s *genSeq, z, lp []float32, idx *[]int) Token {
	req := &s.req
	logSoftmaxT(lp, z, req.Temperature)
	tok := sampleToken(lp, req.Temperature <= 0, req.TopP, s.rng, idx)
	return Token{ID: tok, Logprob: lp[tok], TopLogprobs: topLogprobs(lp, req.TopLogprobs)}
}

// record appends the sampled token t to s, streams it, and ends s at a stop or its length.
func (e *Engine) record(s *genSeq, t Token) {
	req := &s.req
	tok := t.ID
	if len(s.generated) == 0 {
		s.first = time.Since(s.start)
	}
	s.generated = append(s.generated, tok)
	e.generated.Add(1)
	s.out <- t
	if slices.Contains(req.StopIDs, tok) {
		s.stopLen = 1
		s.end(FinishStop, nil)
		return
	}
	for _, ss := range req.StopSequences {
		if len(ss) > 0 && len(ss) <= len(s.generated) && slices.Equal(s.generated[len(s.generated)-len(ss):], ss) {
			s.stopLen = len(ss)
			s.end(FinishStop, nil)
			return
		}
	}
	if len(s.generated) >= s.maxGen {
		s.end(FinishLength, nil)
		return
	}
	s.pending = append(s.pending, tok)
}

// callMask runs the caller's hook, turning a panic into an error so that one bad hook cannot stop
// the engine.
func callMask(f func([]int, []float32), generated []int, z []float32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: LogitMask panicked: %v", ErrRequest, r)
		}
	}()
	f(generated, z)
	return nil
}

// reserve makes the KV cache hold at least need positions (doubling, up to maxCap).
func (s *genSeq) reserve(c Config, need int) {
	if need <= s.cap {
		return
	}
	nc := min(max(need, 2*s.cap, 16), s.maxCap)
	hd := c.HeadDim
	for l := range s.kc {
		k, v := make([]float32, c.NumKeyValueHeads*nc*hd), make([]float32, c.NumKeyValueHeads*nc*hd)
		for h := 0; h < c.NumKeyValueHeads; h++ {
			copy(k[h*nc*hd:], s.kc[l][h*s.cap*hd:(h*s.cap+s.pos)*hd])
			copy(v[h*nc*hd:], s.vc[l][h*s.cap*hd:(h*s.cap+s.pos)*hd])
		}
		s.kc[l], s.vc[l] = k, v
	}
	s.cap = nc
}
