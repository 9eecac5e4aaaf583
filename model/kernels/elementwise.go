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

// ExpSum writes dst[i] = e^(x[i]·scale − shift) for i < len(x) (x·scale and the difference each
// rounded to float32) and returns the sum of the dst values, accumulated in float64 (the
// softmax and log-softmax denominators). Each exponential has a relative error below 2e-7; e^x is 0 below
// −87.3. dst must be at least as long as x; dst may be x itself. Safe for concurrent use.
func ExpSum(dst, x []float32, scale, shift float32) float64 {
	return current.Load().expSum(dst[:len(x)], x, scale, shift)
}

// SwiGLU writes h[i] = g[i]·σ(g[i])·u[i] with σ(x) = 1/(1 + e^−x), for i < len(g) (the Llama
// MLP's gated activation); e^x as in ExpSum. h and u must be at least as long as g; h may be g
// or u. Safe for concurrent use.
func SwiGLU(h, g, u []float32) {
	current.Load().swiglu(h[:len(g)], g, u[:len(g)])
}

// SwiGLUBackward is SwiGLU's backward pass: from dh = ∂L/∂h it writes
// du[i] = dh[i]·g[i]·σ(g[i]) and dg[i] = dh[i]·u[i]·σ(g[i])·(1 + g[i]·(1 − σ(g[i]))) for
// i < len(g), σ as in SwiGLU. dg, du, dh and u must be at least as long as g; dg and du must
// not overlap each other or the inputs, except that either may be dh. Safe for concurrent use.
func SwiGLUBackward(dg, du, dh, g, u []float32) {
	n := len(g)
	current.Load().swigluBack(dg[:n], du[:n], dh[:n], g, u[:n])
}

// swigluBackGeneric reads dh[i], g[i] and u[i] before writing dg[i] and du[i], so either
// output may be dh.
func swigluBackGeneric(dg, du, dh, g, u []float32) {
	for i, x := range g {
		d := dh[i]
		s := 1 / (1 + expGeneric(-x))
		du[i] = d * x * s
		dg[i] = d * u[i] * s * (1 + x*(1-s))
	}
}

func expSumGeneric(dst, x []float32, scale, shift float32) float64 {
	var sum float64
	for i, v := range x {
		e := expGeneric(v*scale - shift)
		dst[i] = e
		sum += float64(e)
	}
	return sum
}

func swigluGeneric(h, g, u []float32) {
	for i, x := range g {
		h[i] = x * (1 / (1 + expGeneric(-x))) * u[i]
	}
}

// expGeneric is a float32 e^x with relative error below 2e-7 over the float32 range (Cody–Waite
// range reduction and a degree-6 polynomial); 0 below −87.3, math.Exp above 88.
func expGeneric(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x > 88 {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	e := p*r*r + r + 1
	return e * math.Float32frombits(uint32(int32(n)+127)<<23)
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
