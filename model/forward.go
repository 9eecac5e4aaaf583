package model

import (
	"errors"
	"fmt"
	"math"

	"citizen/model/kernels"
)

// ErrBatch is wrapped by every error about a malformed Batch.
var ErrBatch = errors.New("model: invalid batch")

// Batch is a set of variable-length sequences packed one after another, with next-token targets
// and loss weights. Attention is causal within each sequence and never crosses sequences;
// positions restart at 0 for each sequence.
//
// The objective that training minimises is
//
//	L = Σ_t  SeqWeights[s(t)]·Weights[t]·ρ(t)·(−log p(Targets[t] | tokens ≤ t)) / N
//	  + KLCoef · Σ_t k3(t) / N,   k3 = exp(r−ℓ) − (r−ℓ) − 1, ℓ = log p(Targets[t]), r = RefLogprobs[t]
//
// where ρ(t) = min(RatioCap, exp(ℓ − BehaviourLogprobs[t])) is the truncated importance ratio of
// an off-policy sample, computed from this very forward pass and held constant (stop-gradient);
// ρ is 1 without BehaviourLogprobs, at positions where it is NaN, and uncapped when RatioCap ≤ 0.
//
// over positions with Targets[t] ≥ 0, where N is Norm, or the number of such positions when Norm
// is 0. k3 is the non-negative, unbiased-in-expectation estimator of KL(p‖ref) from samples of p
// (Schulman's "k3"); it is only added when KLCoef ≠ 0, and not at positions whose RefLogprobs
// is NaN (no reference: a sequence the KL term leaves out). Negative weights are allowed
// (advantage-weighted policy gradient).
type Batch struct {
	Tokens      []int     // input ids, len T
	SeqLens     []int     // lengths of the packed sequences, sum T; nil means one sequence
	Targets     []int     // len T; the id to predict after position t, or −1 for no loss
	Weights     []float32 // optional per-position weight, len T (nil: 1)
	SeqWeights  []float32 // optional per-sequence weight, len(SeqLens) (nil: 1)
	RefLogprobs []float32 // optional per-position reference logprob of Targets[t], len T (NaN: no KL term there)
	KLCoef      float32   // weight of the k3 KL term (needs RefLogprobs)
	Norm        float32   // loss normaliser; 0: the number of positions with a target

	// BehaviourLogprobs is the optional per-position logprob of Targets[t] under the policy that
	// sampled it, len T (NaN: ratio 1 there); RatioCap truncates the ratio.
	BehaviourLogprobs []float32
	RatioCap          float32
}

// NextTokenBatch packs sequences for next-token training. mask[i][j] says that token j of
// sequence i is a training target (for chat: true on assistant tokens); a nil mask (or nil
// mask[i]) trains on every token. Position j predicts token j+1, so Targets[j] = seq[j+1] when
// mask[j+1], else −1. weights (optional, one per sequence) become SeqWeights.
func NextTokenBatch(seqs [][]int, mask [][]bool, weights []float32) *Batch {
	b := &Batch{}
	for i, s := range seqs {
		b.SeqLens = append(b.SeqLens, len(s))
		for j, id := range s {
			b.Tokens = append(b.Tokens, id)
			tgt := -1
			if j+1 < len(s) && (mask == nil || mask[i] == nil || mask[i][j+1]) {
				tgt = s[j+1]
			}
			b.Targets = append(b.Targets, tgt)
		}
	}
	if weights != nil {
		b.SeqWeights = append([]float32(nil), weights...)
	}
	return b
}

func (b *Batch) seqLens() []int {
	if b.SeqLens == nil {
		return []int{len(b.Tokens)}
	}
	return b.SeqLens
}

func (b *Batch) validate(c Config, needTargets bool) error {
	T := len(b.Tokens)
	if T == 0 {
		return fmt.Errorf("%w: no tokens", ErrBatch)
	}
	sum := 0
	for _, L := range b.seqLens() {
		if L <= 0 || L > c.MaxPositionEmbeddings {
			return fmt.Errorf("%w: sequence length %d (max_position_embeddings %d)", ErrBatch, L, c.MaxPositionEmbeddings)
		}
		sum += L
	}
	if sum != T {
		return fmt.Errorf("%w: sequence lengths sum to %d, have %d tokens", ErrBatch, sum, T)
	}
	for _, id := range b.Tokens {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("%w: token id %d outside vocabulary of %d", ErrBatch, id, c.VocabSize)
		}
	}
	if needTargets && len(b.Targets) != T {
		return fmt.Errorf("%w: %d targets for %d tokens", ErrBatch, len(b.Targets), T)
	}
	for _, id := range b.Targets {
		if id >= c.VocabSize {
			return fmt.Errorf("%w: target id %d outside vocabulary of %d", ErrBatch, id, c.VocabSize)
		}
	}
	if b.Weights != nil && len(b.Weights) != T {
		return fmt.Errorf("%w: %d weights for %d tokens", ErrBatch, len(b.Weights), T)
	}
	if b.SeqWeights != nil && len(b.SeqWeights) != len(b.seqLens()) {
		return fmt.Errorf("%w: %d sequence weights for %d sequences", ErrBatch, len(b.SeqWeights), len(b.seqLens()))
	}
	if b.KLCoef != 0 && len(b.RefLogprobs) != T {
		return fmt.Errorf("%w: KLCoef set but %d reference logprobs for %d tokens", ErrBatch, len(b.RefLogprobs), T)
	}
	if b.BehaviourLogprobs != nil && len(b.BehaviourLogprobs) != T {
		return fmt.Errorf("%w: %d behaviour logprobs for %d tokens", ErrBatch, len(b.BehaviourLogprobs), T)
	}
	return nil
}

// LossResult is what a forward pass over a Batch measured.
type LossResult struct {
	Loss     float64   // the objective L of Batch (what Backward differentiates)
	NLL      float64   // mean −log p over target positions, unweighted
	KL       float64   // mean k3 over target positions (0 without RefLogprobs)
	Tokens   int       // number of target positions
	Logprobs []float32 // per position: log p(Targets[t]) under the model (T=1), 0 where no target
}

// acts holds every activation the backward pass needs, for T tokens (see forward for meaning).
type acts struct {
	T, M     int // tokens, rows with logits
	spans    []seqSpan
	pos      []int
	rows     []int // positions that have logits
	resid    [][]float32
	ln1      [][]float32
	rstd1    [][]float32
	q, k, v  [][]float32 // head-major, q and k rotated
	att      [][]float32
	attrows  [][]float32 // [T, qDim] o_proj input
	mid      [][]float32
	ln2      [][]float32
	rstd2    [][]float32
	gate, up [][]float32
	hh       [][]float32
	lu       [][numModules][]float32 // LoRA u = s·x·Aᵀ [T,r]
	lnf      []float32
	rstdf    []float32
	lnfRows  []float32 // [M, C] rows of lnf that have logits
	logits   []float32 // [M, V] logits, then probabilities
	lse      []float64 // [M] log-partition per logit row
	buf      []float32 // backing arena of the activations
	dbuf     []float32 // backing arena of backward scratch
	// forward scratch
	qrows, krows, vrows []float32
	atto                []float32 // head-major attention output
}

// arena hands out slices from one buffer (grown when too small).
type arena struct {
	buf []float32
	off int
}

func (a *arena) take(n int) []float32 {
	s := a.buf[a.off : a.off+n : a.off+n]
	a.off += n
	return s
}

func actsSize(c Config, T, att, M int, lora *Adapter) int {
	C, L := c.HiddenSize, c.NumHiddenLayers
	per := T*C*4 + T*2 + T*c.qDim()*2 + T*c.kvDim()*2 + att + T*c.IntermediateSize*3
	if lora != nil {
		for mod := 0; mod < numModules; mod++ {
			if lora.Config.targets(mod) {
				per += T * lora.Config.Rank
			}
		}
	}
	return L*per + T*C*2 + T + M*C + M*c.VocabSize + 2*T*c.qDim() + 2*T*c.kvDim()
}

// alloc sizes a for the batch; it reuses a's arena when large enough.
func (a *acts) alloc(c Config, b *Batch, lora *Adapter, allRows bool) {
	T := len(b.Tokens)
	spans, attSize := makeSpans(b.seqLens(), c.NumAttentionHeads)
	a.T, a.spans = T, spans
	a.pos = a.pos[:0]
	for _, L := range b.seqLens() {
		for p := 0; p < L; p++ {
			a.pos = append(a.pos, p)
		}
	}
	a.rows = a.rows[:0]
	for t := 0; t < T; t++ {
		if allRows || b.Targets[t] >= 0 {
			a.rows = append(a.rows, t)
		}
	}
	a.M = len(a.rows)
	n := actsSize(c, T, attSize, a.M, lora)
	if cap(a.buf) < n {
		a.buf = make([]float32, n)
	}
	ar := arena{buf: a.buf[:n]}
	C, L, I := c.HiddenSize, c.NumHiddenLayers, c.IntermediateSize
	a.resid = make([][]float32, L+1)
	a.ln1, a.rstd1, a.q, a.k, a.v = make([][]float32, L), make([][]float32, L), make([][]float32, L), make([][]float32, L), make([][]float32, L)
	a.att, a.attrows, a.mid = make([][]float32, L), make([][]float32, L), make([][]float32, L)
	a.ln2, a.rstd2, a.gate, a.up, a.hh = make([][]float32, L), make([][]float32, L), make([][]float32, L), make([][]float32, L), make([][]float32, L)
	a.lu = make([][numModules][]float32, L)
	for l := 0; l < L; l++ {
		a.resid[l] = ar.take(T * C)
		a.ln1[l], a.rstd1[l] = ar.take(T*C), ar.take(T)
		a.q[l], a.k[l], a.v[l] = ar.take(T*c.qDim()), ar.take(T*c.kvDim()), ar.take(T*c.kvDim())
		a.att[l] = ar.take(attSize)
		a.attrows[l] = ar.take(T * c.qDim())
		a.mid[l], a.ln2[l], a.rstd2[l] = ar.take(T*C), ar.take(T*C), ar.take(T)
		a.gate[l], a.up[l], a.hh[l] = ar.take(T*I), ar.take(T*I), ar.take(T*I)
		if lora != nil {
			for mod := 0; mod < numModules; mod++ {
				if lora.Config.targets(mod) {
					a.lu[l][mod] = ar.take(T * lora.Config.Rank)
				}
			}
		}
	}
	a.resid[L] = ar.take(T * C)
	a.lnf, a.rstdf = ar.take(T*C), ar.take(T)
	a.lnfRows, a.logits = ar.take(a.M*C), ar.take(a.M*c.VocabSize)
	a.qrows, a.krows, a.vrows = ar.take(T*c.qDim()), ar.take(T*c.kvDim()), ar.take(T*c.kvDim())
	a.atto = ar.take(T * c.qDim())
	if cap(a.lse) < a.M {
		a.lse = make([]float64, a.M)
	}
	a.lse = a.lse[:a.M]
}

// forward runs the model over b, filling a. With allRows, logits are computed for every position
// (and left as raw logits); otherwise only for positions with a target, which are turned into
// probabilities, and the loss is returned. With intQ the products with quantized matrices take
// the integer path for any number of rows (kernels.MatMulQInt: int16 activations, as decode
// computes them), which training uses; otherwise MatMulQ chooses by the number of rows.
func (m *Model) forward(a *acts, b *Batch, lora *Adapter, allRows, intQ bool) {
	c := m.Config
	a.alloc(c, b, lora, allRows)
	T, C, I, H, KV, hd := a.T, c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	eps := float32(c.RMSNormEps)
	var s float32
	var r int
	if lora != nil {
		s, r = lora.Scale(), lora.Config.Rank
	}
	proj := func(l, mod int, y, x []float32, acc bool) {
		in, out := c.moduleDims(mod)
		m.layerMatrix(l, mod).mul(y, x, T, in, out, acc, intQ)
		if lora != nil && lora.layers[l][mod].A != nil {
			p := lora.layers[l][mod]
			loraForward(y, a.lu[l][mod], x, p.A, p.B, T, in, out, r, s)
		}
	}
	m.embed(a.resid[0], b.Tokens)
	for l := 0; l < c.NumHiddenLayers; l++ {
		w := &m.W.Layers[l]
		rmsnormForward(a.ln1[l], a.rstd1[l], a.resid[l], w.InputNorm, T, C, eps)
		proj(l, modQ, a.qrows, a.ln1[l], false)
		proj(l, modK, a.krows, a.ln1[l], false)
		proj(l, modV, a.vrows, a.ln1[l], false)
		rowsToHeads(a.q[l], a.qrows, T, H, hd, a.pos, m.rope)
		rowsToHeads(a.k[l], a.krows, T, KV, hd, a.pos, m.rope)
		rowsToHeads(a.v[l], a.vrows, T, KV, hd, nil, nil)
		attentionForward(a.atto, a.att[l], a.q[l], a.k[l], a.v[l], a.spans, T, H, KV, hd)
		headsToRows(a.attrows[l], a.atto, T, H, hd, nil, nil)
		copy(a.mid[l], a.resid[l])
		proj(l, modO, a.mid[l], a.attrows[l], true)
		rmsnormForward(a.ln2[l], a.rstd2[l], a.mid[l], w.PostNorm, T, C, eps)
		proj(l, modGate, a.gate[l], a.ln2[l], false)
		proj(l, modUp, a.up[l], a.ln2[l], false)
		swigluForward(a.hh[l], a.gate[l], a.up[l], T*I)
		copy(a.resid[l+1], a.mid[l])
		proj(l, modDown, a.resid[l+1], a.hh[l], true)
	}
	rmsnormForward(a.lnf, a.rstdf, a.resid[c.NumHiddenLayers], m.W.Norm, T, C, eps)
	for i, t := range a.rows {
		copy(a.lnfRows[i*C:(i+1)*C], a.lnf[t*C:(t+1)*C])
	}
	m.headMatrix().mul(a.logits, a.lnfRows, a.M, C, c.VocabSize, false, intQ)
}

// loss turns the logit rows of a into the LossResult of b and, in place, into ∂L/∂logits
// (which backward consumes).
func (m *Model) loss(a *acts, b *Batch) LossResult {
	V := m.Config.VocabSize
	T := a.T
	res := LossResult{Tokens: a.M, Logprobs: make([]float32, T)}
	seqOf := make([]int, 0, T)
	for i, L := range b.seqLens() {
		for j := 0; j < L; j++ {
			seqOf = append(seqOf, i)
		}
	}
	norm := float64(b.Norm)
	if norm == 0 {
		norm = float64(max(a.M, 1))
	}
	coef := make([]float64, a.M) // weight of −logp
	parallelRows(a.M, V*4, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t := a.rows[i]
			row := a.logits[i*V : (i+1)*V]
			y := b.Targets[t]
			zy := row[y]
			lse := softmaxRow(row)
			a.lse[i] = lse
			res.Logprobs[t] = float32(float64(zy) - lse)
		}
	})
	var loss, nll, kl float64
	for i, t := range a.rows {
		lp := float64(res.Logprobs[t])
		w := 1.0
		if b.Weights != nil {
			w *= float64(b.Weights[t])
		}
		if b.SeqWeights != nil {
			w *= float64(b.SeqWeights[seqOf[t]])
		}
		if b.BehaviourLogprobs != nil && !math.IsNaN(float64(b.BehaviourLogprobs[t])) {
			rho := math.Exp(lp - float64(b.BehaviourLogprobs[t]))
			if b.RatioCap > 0 {
				rho = math.Min(rho, float64(b.RatioCap))
			}
			w *= rho
		}
		nll -= lp
		loss -= w * lp / norm
		g := -w / norm // ∂L/∂logp
		if b.KLCoef != 0 && !math.IsNaN(float64(b.RefLogprobs[t])) {
			d := float64(b.RefLogprobs[t]) - lp
			k3 := math.Exp(d) - d - 1
			kl += k3
			loss += float64(b.KLCoef) * k3 / norm
			g += float64(b.KLCoef) * (1 - math.Exp(d)) / norm
		}
		coef[i] = g
	}
	if a.M > 0 {
		res.NLL, res.KL = nll/float64(a.M), kl/float64(a.M)
	}
	res.Loss = loss
	// ∂L/∂z = g·(onehot − p) = (−g)·(p − onehot)
	parallelRows(a.M, V, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := a.logits[i*V : (i+1)*V]
			row[b.Targets[a.rows[i]]] -= 1
			kernels.Scale(float32(-coef[i]), row)
		}
	})
	return res
}

// AddSequence appends one sequence to b, with per-TOKEN annotations (index j refers to ids[j],
// the token being predicted, which is how recorded interactions store them):
// mask[j] makes ids[j] a target (nil: every token but the first); weights[j] is its loss weight
// (nil: 1); refLogprobs[j] its reference log-probability for the KL term (nil: none, which needs
// KLCoef 0 for the whole batch); seqWeight multiplies the whole sequence. Token 0 is never a
// target. b must have been built only with AddSequence (or be empty).
func (b *Batch) AddSequence(ids []int, mask []bool, weights, refLogprobs []float32, seqWeight float32) {
	if len(ids) == 0 {
		return
	}
	start := len(b.Tokens)
	b.SeqLens = append(b.SeqLens, len(ids))
	b.SeqWeights = append(b.SeqWeights, seqWeight)
	for j, id := range ids {
		b.Tokens = append(b.Tokens, id)
		tgt, w, ref := -1, float32(1), float32(0)
		if j+1 < len(ids) && (mask == nil || mask[j+1]) {
			tgt = ids[j+1]
			if weights != nil {
				w = weights[j+1]
			}
			if refLogprobs != nil {
				ref = refLogprobs[j+1]
			}
		}
		b.Targets = append(b.Targets, tgt)
		if weights != nil || b.Weights != nil {
			for len(b.Weights) < start+j {
				b.Weights = append(b.Weights, 1)
			}
			b.Weights = append(b.Weights, w)
		}
		if refLogprobs != nil || b.RefLogprobs != nil {
			for len(b.RefLogprobs) < start+j {
				b.RefLogprobs = append(b.RefLogprobs, 0)
			}
			b.RefLogprobs = append(b.RefLogprobs, ref)
		}
	}
	if b.Weights != nil {
		for len(b.Weights) < len(b.Tokens) {
			b.Weights = append(b.Weights, 1)
		}
	}
	if b.RefLogprobs != nil {
		for len(b.RefLogprobs) < len(b.Tokens) {
			b.RefLogprobs = append(b.RefLogprobs, 0)
		}
	}
	b.padBehaviour()
}

// AddBehaviour gives the sequence AddSequence appended last its behaviour logprobs, per TOKEN as
// there: behaviour[j] is the sampling policy's logprob of ids[j] (NaN: ratio 1), read at target
// positions only. The other sequences' positions stay NaN.
func (b *Batch) AddBehaviour(behaviour []float32) {
	if len(b.SeqLens) == 0 {
		return
	}
	L := b.SeqLens[len(b.SeqLens)-1]
	start := len(b.Tokens) - L
	b.padBehaviour()
	if b.BehaviourLogprobs == nil {
		b.BehaviourLogprobs = make([]float32, len(b.Tokens))
		for i := range b.BehaviourLogprobs {
			b.BehaviourLogprobs[i] = float32(math.NaN())
		}
	}
	for j := 0; j+1 < L && j+1 < len(behaviour); j++ {
		if b.Targets[start+j] >= 0 {
			b.BehaviourLogprobs[start+j] = behaviour[j+1]
		}
	}
}

func (b *Batch) padBehaviour() {
	if b.BehaviourLogprobs == nil {
		return
	}
	for len(b.BehaviourLogprobs) < len(b.Tokens) {
		b.BehaviourLogprobs = append(b.BehaviourLogprobs, float32(math.NaN()))
	}
}
