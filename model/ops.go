package model

// Layer operations, each a forward/backward pair (llm.c style). Shapes are in the comments;
// T is the number of packed tokens. Backward functions ACCUMULATE into parameter gradients and,
// where stated, into input gradients. A nil parameter gradient means "frozen": it is skipped.

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"citizen/model/kernels"
)

// parallel runs fn(i) for i in [0,n) on up to GOMAXPROCS goroutines (dynamic scheduling).
// fn gets a worker index w < workers for per-worker scratch.
func parallel(n int, fn func(w, i int)) {
	workers := runtime.GOMAXPROCS(0)
	if workers > n {
		workers = n
	}
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(w, i)
			}
		}(w)
	}
	wg.Wait()
}

// parallelRows splits [0,n) rows into chunks when rows*cost is large enough to pay for goroutines.
func parallelRows(n, costPerRow int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n*costPerRow < 1<<16 || workers <= 1 || n < 2 {
		fn(0, n)
		return
	}
	chunks := workers * 4
	if chunks > n {
		chunks = n
	}
	parallel(chunks, func(_, c int) {
		fn(c*n/chunks, (c+1)*n/chunks)
	})
}

// ---- linear: y[T,out] = x[T,in]·W[out,in]ᵀ -------------------------------------------------

func linearForward(y, x, w []float32, T, in, out int) {
	kernels.MatMulNT(y, x, w, T, in, out, false)
}

// linearBackward: dx[T,in] = dy·W, or += when acc (when dx != nil); dW[out,in] += dyᵀ·x (when
// dw != nil).
func linearBackward(dx, dw, dy, x, w []float32, T, in, out int, acc bool) {
	if dx != nil {
		kernels.MatMulNN(dx, dy, w, T, out, in, acc)
	}
	if dw != nil {
		kernels.MatMulTN(dw, dy, x, out, T, in, true)
	}
}

// ---- LoRA on a linear layer: y += s·(x·Aᵀ)·Bᵀ, A [r,in], B [out,r] -----------------------------
// u[T,r] = s·x·Aᵀ is saved for the backward pass.

func loraForward(y, u, x, a, b []float32, T, in, out, r int, s float32) {
	kernels.MatMulNT(u, x, a, T, in, r, false)
	kernels.Scale(s, u[:T*r])
	kernels.MatMulNT(y, u, b, T, r, out, true)
}

// loraBackward: dB += dyᵀ·u; du = dy·B; dA += s·duᵀ·x; dx += s·du·A. du is scratch of T·r + in·r
// floats: du itself [T,r], then dAᵀ [in,r] (computed as xᵀ·du, a product with few columns that
// needs no packing of x, and added into dA transposed).
func loraBackward(dx, da, db, du, dy, x, u, a, b []float32, T, in, out, r int, s float32) {
	if db != nil {
		kernels.MatMulTN(db, dy, u, out, T, r, true)
	}
	dat := du[T*r : T*r+in*r]
	du = du[:T*r]
	kernels.MatMulNN(du, dy, b, T, out, r, false)
	kernels.Scale(s, du)
	if da != nil {
		kernels.MatMulTN(dat, x, du, in, T, r, false)
		for j := range r {
			row := da[j*in : (j+1)*in]
			for i := range row {
				row[i] += dat[i*r+j]
			}
		}
	}
	if dx != nil {
		kernels.MatMulNN(dx, du, a, T, r, in, true)
	}
}

// ---- embedding ----------------------------------------------------------------------------------

// embedForward: out[T,C] = E[tokens[t]].
func embedForward(out, e []float32, tokens []int, C int) {
	for t, id := range tokens {
		copy(out[t*C:(t+1)*C], e[id*C:(id+1)*C])
	}
}

// embedBackward: dE[tokens[t]] += dout[t].
func embedBackward(de, dout []float32, tokens []int, C int) {
	for t, id := range tokens {
		row := de[id*C : (id+1)*C]
		for i, g := range dout[t*C : (t+1)*C] {
			row[i] += g
		}
	}
}

// ---- RMSNorm: out = x / sqrt(mean(x²)+eps) ⊙ w ---------------------------------------------------

// rmsnormForward: x,out [T,C], w [C], rstd [T] (saved).
func rmsnormForward(out, rstd, x, w []float32, T, C int, eps float32) {
	parallelRows(T, C, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xr := x[t*C : (t+1)*C]
			var ss float64
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			r := float32(1 / math.Sqrt(ss/float64(C)+float64(eps)))
			if rstd != nil {
				rstd[t] = r
			}
			or := out[t*C : (t+1)*C]
			for i, v := range xr {
				or[i] = v * r * w[i]
			}
		}
	})
}

// rmsnormBackward: dx[T,C] += ∂L/∂x; dw[C] += Σ_t dout⊙x̂ (when dw != nil).
func rmsnormBackward(dx, dw, dout, x, w, rstd []float32, T, C int) {
	parallelRows(T, C, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			xr, dor, dxr := x[t*C:(t+1)*C], dout[t*C:(t+1)*C], dx[t*C:(t+1)*C]
			r := rstd[t]
			var dot float64 // Σ dx̂·x̂
			for i := range xr {
				dot += float64(dor[i]*w[i]) * float64(xr[i]*r)
			}
			m := float32(dot / float64(C))
			for i := range xr {
				xh := xr[i] * r
				dxr[i] += r * (dor[i]*w[i] - xh*m)
			}
		}
	})
	if dw != nil {
		for t := 0; t < T; t++ {
			xr, dor := x[t*C:(t+1)*C], dout[t*C:(t+1)*C]
			r := rstd[t]
			for i := range xr {
				dw[i] += dor[i] * xr[i] * r
			}
		}
	}
}

// ---- RoPE (Hugging Face split halves) -------------------------------------------------------------

// ropeTable holds cos and sin [maxPos, headDim/2].
type ropeTable struct {
	half     int
	cos, sin []float32
}

func newRopeTable(c Config) *ropeTable {
	half := c.HeadDim / 2
	rt := &ropeTable{half: half, cos: make([]float32, c.MaxPositionEmbeddings*half), sin: make([]float32, c.MaxPositionEmbeddings*half)}
	for j := 0; j < half; j++ {
		inv := math.Pow(c.RopeTheta, -float64(2*j)/float64(c.HeadDim))
		for p := 0; p < c.MaxPositionEmbeddings; p++ {
			ang := float64(p) * inv
			rt.cos[p*half+j] = float32(math.Cos(ang))
			rt.sin[p*half+j] = float32(math.Sin(ang))
		}
	}
	return rt
}

// rotate applies RoPE at position p to one head vector in place (sign=+1) or its inverse,
// which is also its transpose and so its backward (sign=-1):
// x' = x·cos + rotate_half(x)·sin, rotate_half(x) = (-x2, x1).
func (rt *ropeTable) rotate(x []float32, p int, sign float32) {
	h := rt.half
	cs, sn := rt.cos[p*h:(p+1)*h], rt.sin[p*h:(p+1)*h]
	x1, x2 := x[:h], x[h:2*h]
	for j := 0; j < h; j++ {
		c, s := cs[j], sign*sn[j]
		a, b := x1[j], x2[j]
		x1[j] = a*c - b*s
		x2[j] = b*c + a*s
	}
}

// rowsToHeads: dst[nh][T][hd] = rope(src[T][nh*hd]) (no rope when rt is nil).
func rowsToHeads(dst, src []float32, T, nh, hd int, pos []int, rt *ropeTable) {
	parallelRows(T, nh*hd*2, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < nh; h++ {
				d := dst[(h*T+t)*hd : (h*T+t+1)*hd]
				copy(d, src[t*nh*hd+h*hd:t*nh*hd+(h+1)*hd])
				if rt != nil {
					rt.rotate(d, pos[t], 1)
				}
			}
		}
	})
}

// headsToRows: dst[T][nh*hd] = rope⁻¹(src[nh][T][hd]) (the backward of rowsToHeads; plain
// transpose when rt is nil).
func headsToRows(dst, src []float32, T, nh, hd int, pos []int, rt *ropeTable) {
	parallelRows(T, nh*hd*2, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			for h := 0; h < nh; h++ {
				d := dst[t*nh*hd+h*hd : t*nh*hd+(h+1)*hd]
				copy(d, src[(h*T+t)*hd:(h*T+t+1)*hd])
				if rt != nil {
					rt.rotate(d, pos[t], -1)
				}
			}
		}
	})
}

// ---- SwiGLU: h = silu(g) ⊙ u ----------------------------------------------------------------------

func swigluForward(h, g, u []float32, n int) {
	parallelRows(n, 8, func(lo, hi int) {
		kernels.SwiGLU(h[lo:hi], g[lo:hi], u[lo:hi])
	})
}

// swigluBackward: dg = dh·u·σ(g)(1+g(1-σ(g))), du = dh·silu(g) (both overwritten).
func swigluBackward(dg, du, dh, g, u []float32, n int) {
	parallelRows(n, 8, func(lo, hi int) {
		kernels.SwiGLUBackward(dg[lo:hi], du[lo:hi], dh[lo:hi], g[lo:hi], u[lo:hi])
	})
}

// ---- causal self-attention over packed sequences ---------------------------------------------------

// attBlock is the row-block size of causal attention: block b holds query rows [r0, r1) against
// keys [0, r1), so the masked upper triangle is (mostly) never computed. A variable for tests.
var attBlock = 64

// seqSpan is one packed sequence: tokens [start, start+len); its attention probabilities start
// at attOff (per head: the row blocks, each rows×r1, one after another; perHead floats).
type seqSpan struct{ start, len, attOff, perHead int }

// causalTiles returns the size of one head's blocked causal attention matrix for length L.
func causalTiles(L int) int {
	n := 0
	for r0 := 0; r0 < L; r0 += attBlock {
		r1 := min(r0+attBlock, L)
		n += (r1 - r0) * r1
	}
	return n
}

func makeSpans(seqLens []int, H int) ([]seqSpan, int) {
	spans := make([]seqSpan, len(seqLens))
	st, off := 0, 0
	for i, L := range seqLens {
		ph := causalTiles(L)
		spans[i] = seqSpan{start: st, len: L, attOff: off, perHead: ph}
		st += L
		off += H * ph
	}
	return spans, off
}

// softmaxCausalRow turns scores row i (length L) into probabilities over j ≤ i (masked
// entries become 0).
func softmaxCausalRow(row []float32, i int, scale float32) {
	mx := float32(math.Inf(-1))
	for j := 0; j <= i; j++ {
		if v := row[j] * scale; v > mx {
			mx = v
		}
	}
	sum := kernels.ExpSum(row[:i+1], row[:i+1], scale, mx)
	kernels.Scale(float32(1/sum), row[:i+1])
	clear(row[i+1:])
}

// attentionForward: q [H][T][hd], k,v [KV][T][hd] (head-major, q and k rotated), out [H][T][hd],
// att receives the probabilities (per span, per head, in row blocks). Heads h share KV head
// h/(H/KV).
func attentionForward(out, att, q, k, v []float32, spans []seqSpan, T, H, KV, hd int) {
	group := H / KV
	scale := float32(1 / math.Sqrt(float64(hd)))
	parallel(len(spans)*H, func(_, task int) {
		s, h := spans[task/H], task%H
		kv := h / group
		qh := q[(h*T+s.start)*hd:]
		kh := k[(kv*T+s.start)*hd:]
		vh := v[(kv*T+s.start)*hd:]
		oh := out[(h*T+s.start)*hd:]
		p := att[s.attOff+h*s.perHead:]
		for r0 := 0; r0 < s.len; r0 += attBlock {
			r1 := min(r0+attBlock, s.len)
			rows := r1 - r0
			tile := p[:rows*r1]
			p = p[rows*r1:]
			kernels.MatMulNT(tile, qh[r0*hd:], kh, rows, hd, r1, false)
			for i := 0; i < rows; i++ {
				softmaxCausalRow(tile[i*r1:(i+1)*r1], r0+i, scale)
			}
			kernels.MatMulNN(oh[r0*hd:], tile, vh, rows, r1, hd, false)
		}
	})
}

// attentionBackward: from dout [H][T][hd] computes dq [H][T][hd] and dk, dv [KV][T][hd] (all
// overwritten within the spans). Tasks are (span, kv head) so GQA heads sharing dk/dv never race.
func attentionBackward(dq, dk, dv, dout, att, q, k, v []float32, spans []seqSpan, T, H, KV, hd int) {
	group := H / KV
	scale := float32(1 / math.Sqrt(float64(hd)))
	scratch := make([][]float32, runtime.GOMAXPROCS(0))
	parallel(len(spans)*KV, func(w, task int) {
		if scratch[w] == nil {
			scratch[w] = make([]float32, attBlock*attBlock*8)
		}
		s, kv := spans[task/KV], task%KV
		kh, vh := k[(kv*T+s.start)*hd:], v[(kv*T+s.start)*hd:]
		dkh, dvh := dk[(kv*T+s.start)*hd:], dv[(kv*T+s.start)*hd:]
		clear(dkh[:s.len*hd])
		clear(dvh[:s.len*hd])
		for g := 0; g < group; g++ {
			h := kv*group + g
			p := att[s.attOff+h*s.perHead:]
			doh := dout[(h*T+s.start)*hd:]
			qh := q[(h*T+s.start)*hd:]
			dqh := dq[(h*T+s.start)*hd:]
			for r0 := 0; r0 < s.len; r0 += attBlock {
				r1 := min(r0+attBlock, s.len)
				rows := r1 - r0
				tile := p[:rows*r1]
				p = p[rows*r1:]
				dp := grow(&scratch[w], rows*r1)
				// dV[0:r1] += Pᵀ·dO ; dP = dO·Vᵀ
				kernels.MatMulTN(dvh, tile, doh[r0*hd:], r1, rows, hd, true)
				kernels.MatMulNT(dp, doh[r0*hd:], vh, rows, hd, r1, false)
				// dS = P ⊙ (dP − Σ_j dP⊙P) · scale
				for i := 0; i < rows; i++ {
					pr, dr := tile[i*r1:(i+1)*r1], dp[i*r1:(i+1)*r1]
					lim := r0 + i
					var dot float32
					for j := 0; j <= lim; j++ {
						dot += pr[j] * dr[j]
					}
					for j := 0; j <= lim; j++ {
						dr[j] = pr[j] * (dr[j] - dot) * scale
					}
					clear(dr[lim+1:])
				}
				// dQ = dS·K ; dK[0:r1] += dSᵀ·Q
				kernels.MatMulNN(dqh[r0*hd:], dp, kh, rows, r1, hd, false)
				kernels.MatMulTN(dkh, dp, qh[r0*hd:], r1, rows, hd, true)
			}
		}
	})
}

// ---- output head and cross-entropy ---------------------------------------------------------------

// softmaxRow overwrites row with probabilities and returns log Σ exp (the log-partition).
func softmaxRow(row []float32) float64 {
	mx := float32(math.Inf(-1))
	for _, v := range row {
		if v > mx {
			mx = v
		}
	}
	sum := kernels.ExpSum(row, row, 1, mx)
	kernels.Scale(float32(1/sum), row)
	return float64(mx) + math.Log(sum)
}
