package kernels

import "math"

// SiLU computes dst[i] = x[i]·sigmoid(x[i]) for i < len(x) (the Llama MLP
// activation). dst must be at least as long as x; dst may be x itself.
// Safe for concurrent use.
func SiLU(dst, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// Softmax replaces x with softmax(x), computed stably (the maximum is
// subtracted first). An empty x is left alone. Safe for concurrent use.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		if v > mx {
			mx = v
		}
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	Scale(float32(1/sum), x)
}

// RMSNorm writes dst[i] = x[i]·r·weight[i] with r = 1/sqrt(mean(x²)+eps) for
// one row of len(x) elements, and returns r (the backward pass needs it).
// dst and weight must be at least as long as x; dst may be x itself.
// Safe for concurrent use.
func RMSNorm(dst, x, weight []float32, eps float32) float32 {
	if len(x) == 0 {
		return 0
	}
	dst = dst[:len(x)]
	weight = weight[:len(x)]
	ss := Dot(x, x)
	r := float32(1 / math.Sqrt(float64(ss)/float64(len(x))+float64(eps)))
	for i, v := range x {
		dst[i] = v * r * weight[i]
	}
	return r
}

// AdamWParams are the hyper-parameters of one AdamW step. Step counts from 1
// and drives the bias correction.
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
}

// AdamW applies one decoupled-weight-decay Adam step (Loshchilov & Hutter)
// over a flat parameter buffer:
//
//	m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
//	p -= lr·( m̂/(sqrt(v̂)+eps) + wd·p )   with m̂ = m/(1-β1^t), v̂ = v/(1-β2^t)
//
// params, grads, m and v must have the same length and must not overlap.
// Safe for concurrent use on disjoint buffers.
func AdamW(params, grads, m, v []float32, h AdamWParams) {
	n := len(params)
	grads, m, v = grads[:n], m[:n], v[:n]
	t := float64(max(h.Step, 1))
	bc1 := float32(1 / (1 - math.Pow(float64(h.Beta1), t)))
	bc2 := float32(1 / (1 - math.Pow(float64(h.Beta2), t)))
	b1, b2 := h.Beta1, h.Beta2
	for i, g := range grads {
		mi := b1*m[i] + (1-b1)*g
		vi := b2*v[i] + (1-b2)*g*g
		m[i], v[i] = mi, vi
		upd := (mi * bc1) / (float32(math.Sqrt(float64(vi*bc2))) + h.Eps)
		params[i] -= h.LR * (upd + h.WeightDecay*params[i])
	}
}
