package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/gen

// gemmFunc is a generated microkernel: C[mr × nv·W] (+)= A·B over kc steps.
// A element (i,p) at a + i·ia + p·sa bytes (broadcast), B row p at b + p·ldb
// bytes (nv vectors), C row i at c + i·ldc bytes. load adds the old C.
type gemmFunc func(kc int, a *float32, sa, ia int, b *float32, ldb int, c *float32, ldc int, load bool)

// simd is one SIMD level of the implementation.
type simd struct {
	lanes int // float32 per vector
	mr    int // microkernel rows
	nvMax int // microkernel vectors per row
	kern  func(mr, nv int) gemmFunc
	// dotRows is how many rows of A the level's dotNT kernels take at once
	// (see internal/gen: r ≤ dotRows rows of A against groups of 4 rows of
	// B, over a multiple of the lane count).
	dotRows int
	// dotMaxM: MatMulNT with at most this many rows may use the
	// packing-free inner-product kernels (decode: m=1 or a small batch); see
	// useDot. Placed at the measured crossover (BenchmarkTuneNTDot).
	dotMaxM int
	dot     func(a, b *float32, n int) float32
	axpy    func(alpha float32, x, y *float32, n int)
	scale   func(alpha float32, x *float32, n int)
}

// Cache blocking: a packed B block is kcBlock×ncBlock floats (512 KB, half of
// this machine's per-core L2); an A micro-panel (mr×kc, ≤6 KB) stays in L1
// while the B block streams past it.
const (
	kcBlock = 256
	ncBlock = 512
)

type scratch struct {
	b    []float32 // kcBlock × ncBlock
	tile []float32 // one microkernel tile (narrow last panels, skinny TN)
}

// scratchFree keeps packing buffers across calls (a sync.Pool would hand
// its 512 KB buffers to the garbage collector every cycle).
var scratchFree = make(chan *scratch, 8)

func getScratch() *scratch {
	select {
	case sc := <-scratchFree:
		return sc
	default:
		return &scratch{b: make([]float32, kcBlock*ncBlock), tile: make([]float32, 6*64)}
	}
}

func putScratch(sc *scratch) {
	select {
	case scratchFree <- sc:
	default:
	}
}

var (
	avx512 = &simd{lanes: 16, mr: 6, nvMax: 4, dotMaxM: 64,
		kern:    func(mr, nv int) gemmFunc { return gemmavx512Tab[mr][nv] },
		dotRows: dotNTavx512Rows, dot: dotavx512, axpy: axpyavx512, scale: scaleavx512}
	avx2 = &simd{lanes: 8, mr: 6, nvMax: 2, dotMaxM: 40,
		kern:    func(mr, nv int) gemmFunc { return gemmavx2Tab[mr][nv] },
		dotRows: dotNTavx2Rows, dot: dotavx2, axpy: axpyavx2, scale: scaleavx2}
)

func init() {
	var fast []*impl
	if hasAVX512() {
		fast = append(fast, avx512.impl("avx512"))
	}
	if avx2OK() {
		fast = append(fast, avx2.impl("avx2"))
	}
	impls = append(fast, impls...)
	selectImpl()
}

func avx2OK() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

func hasAVX512() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasFMA }

func (s *simd) impl(name string) *impl {
	im := &impl{name: name, mm: s.mm, dot: s.dotS, axpy: s.axpyS, scale: s.scaleS, gemvQ: gemvQGeneric, gemvQ16: gemvQ16Generic, gemmQ16B: gemmQ16BGeneric, batchLanes: 8, scatter16: scatter16Go, dequant: dequantGeneric,
		quantAct: quantizeAct, quantAct16: quantizeAct16, expSum: expSumGeneric, swiglu: swigluGeneric, swigluBack: swigluBackGeneric}
	if avx2OK() {
		im.expSum, im.swiglu, im.swigluBack = expSumSIMD, swigluSIMD, swigluBackSIMD
		im.scatter16, im.transposePairs = scatter16AVX2, transposePairsAVX2
	}
	if quantAVX2OK() {
		im.gemvQ, im.gemvQ16, im.dequant = gemvQAVX2, gemvQ16AVX2, dequantAVX2
		im.gemmQ16B = gemmQ16BAVX2
		if name == "avx512" && cpu.X86.HasAVX512BW {
			im.gemmQ16B, im.batchLanes = gemmQ16BAVX512, 16
		}
		im.quantAct, im.quantAct16 = quantActAVX2, quantAct16AVX2Row
		im.qnt = s.qnt
		if name == "avx512" && vnniOK() {
			im.qgemm16 = qgemm16VNNI
			im.gemmQ16B = gemmQ16BVNNI
		}
		if s.nvMax*s.lanes%QBlock == 0 {
			im.qnn = s.qnn
		}
	}
	return im
}

func (s *simd) dotS(a, b []float32) float32 {
	n := len(a) / (4 * s.lanes) * (4 * s.lanes)
	var r float32
	if n > 0 {
		r = s.dot(&a[0], &b[0], n)
	}
	return r + dotGeneric(a[n:], b[n:len(a)])
}

func (s *simd) axpyS(alpha float32, x, y []float32) {
	n := len(x) / (4 * s.lanes) * (4 * s.lanes)
	if n > 0 {
		s.axpy(alpha, &x[0], &y[0], n)
	}
	axpyGeneric(alpha, x[n:], y[n:len(x)])
}

func (s *simd) scaleS(alpha float32, x []float32) {
	n := len(x) / (4 * s.lanes) * (4 * s.lanes)
	if n > 0 {
		s.scale(alpha, &x[0], n)
	}
	scaleGeneric(alpha, x[n:])
}

// mm computes C[i0:i1, j0:j1].
func (s *simd) mm(kind int, c, a, b []float32, m, k, n int, acc bool, i0, i1, j0, j1 int) {
	if i0 == i1 || j0 == j1 {
		return
	}
	switch {
	case kind == kindNT && s.useDot(i1-i0, k, j1-j0):
		s.ntInner(c, a, b, k, n, acc, i0, i1, j0, j1, 0)
		return
	case kind == kindNN && s.skinny(k, j1-j0) && (j1-j0)*k <= kcBlock*ncBlock:
		// A·B with few columns is A·(Bᵀ)ᵀ: transpose those columns of B
		// (k × w, small) and take the inner-product path.
		sc := getScratch()
		defer putScratch(sc)
		w := j1 - j0
		bt := sc.b[:w*k]
		for p := range k {
			for jj, v := range b[p*n+j0 : p*n+j1] {
				bt[jj*k+p] = v
			}
		}
		s.ntInner(c, a, bt, k, n, acc, i0, i1, j0, j1, j0)
		return
	case kind == kindTN && s.skinny(k, j1-j0):
		s.tnSkinny(c, a, b, m, k, n, acc, i0, i1, j0, j1)
		return
	case kind == kindNN && i1-i0 <= s.mr && k > 0:
		s.nnDirect(c, a, b, k, n, acc, i0, i1, j0, j1)
		return
	}
	s.gemm(kind, c, a, b, m, k, n, acc, i0, i1, j0, j1)
}

// nnDirect is gemm for A·B with at most one microkernel's rows of A (decode's attention
// probabilities times the values): every element of B is used once, so the microkernels read
// B's rows in place instead of from a packed copy. The k blocks, the microkernel calls and
// the order of their sums are gemm's, so the columns in whole vectors are gemm's bit for bit;
// the last (j1-j0) % lanes columns go to the portable code.
func (s *simd) nnDirect(c, a, b []float32, k, n int, acc bool, i0, i1, j0, j1 int) {
	W := s.lanes
	NR := s.nvMax * W
	jv := j0 + (j1-j0)/W*W
	if jv < j1 {
		genericMM(kindNN, c, a, b, 0, k, n, acc, i0, i1, jv, j1)
	}
	mr := i1 - i0
	for pc := 0; pc < k; pc += kcBlock {
		kc := min(kcBlock, k-pc)
		load := acc || pc > 0
		_ = a[(i1-1)*k+pc+kc-1] // bounds for the assembly
		for jr := j0; jr < jv; jr += NR {
			nr := min(NR, jv-jr) // a multiple of W
			_ = b[(pc+kc-1)*n+jr+nr-1]
			_ = c[(i1-1)*n+jr+nr-1]
			s.kern(mr, nr/W)(kc, &a[i0*k+pc], 4, k*4, &b[pc*n+jr], n*4, &c[i0*n+jr], n*4, load)
		}
	}
}

// tnSkinny computes C[i0:i1, j0:j1] = Aᵀ·B for few columns by computing Cᵀ
// tiles with the roles swapped: B's few columns are broadcast (the
// microkernel's A side, up to 6 of them) against rows of A, which in the TN
// layout are contiguous along i (the vector side, read in place). Each tile
// (≤ 6 × 64) accumulates over all of k in registers and is then transposed
// into C. The last (i1-i0) % lanes rows go to the portable code.
func (s *simd) tnSkinny(c, a, b []float32, m, k, n int, acc bool, i0, i1, j0, j1 int) {
	W := s.lanes
	iv := i0 + (i1-i0)/W*W
	if iv < i1 {
		genericMM(kindTN, c, a, b, m, k, n, acc, iv, i1, j0, j1)
	}
	if iv == i0 {
		return
	}
	sc := getScratch()
	defer putScratch(sc)
	IB := s.nvMax * W
	for i := i0; i < iv; i += IB {
		ib := min(IB, iv-i)   // a multiple of W
		_ = a[(k-1)*m+i+ib-1] // bounds for the assembly
		for j := j0; j < j1; j += s.mr {
			jw := min(s.mr, j1-j)
			_ = b[(k-1)*n+j+jw-1]
			t := sc.tile[:jw*ib]
			s.kern(jw, ib/W)(k, &b[j], n*4, 4, &a[i], m*4, &t[0], ib*4, false)
			for jj := range jw {
				for ii, v := range t[jj*ib : jj*ib+ib] {
					if idx := (i+ii)*n + j + jj; acc {
						c[idx] += v
					} else {
						c[idx] = v
					}
				}
			}
		}
	}
}

// ntInner computes C[i0:i1, j0:j1] = A·Bᵀ by inner products, where column j
// of C takes row j-bj0 of b: groups of 4 columns in assembly, the last
// (j1-j0)%4 as vector dots.
func (s *simd) ntInner(c, a, b []float32, k, n int, acc bool, i0, i1, j0, j1, bj0 int) {
	j4 := j0
	if k >= s.lanes {
		j4 = j0 + (j1-j0)/4*4
	}
	if j4 > j0 {
		s.ntDot(c, a, b, k, n, acc, i0, i1, j0, j4, bj0)
	}
	for i := i0; i < i1; i++ {
		for j := j4; j < j1; j++ {
			v := s.dotS(a[i*k:i*k+k], b[(j-bj0)*k:(j-bj0)*k+k])
			if acc {
				c[i*n+j] += v
			} else {
				c[i*n+j] = v
			}
		}
	}
}

// useDot reports whether MatMulNT with m rows and inner size k takes the
// inner-product path. Its cost per output has a fixed part (the horizontal
// sums) that long rows amortise; the packed path's cost of packing B is
// amortised over the rows of A. Measured on Zen 5: inner products win while
// 8·m ≤ k (and always for m ≤ 4, where packing B would be pure overhead).
// Products with few columns (LoRA ranks 8 and 16) also take it: the packed
// path would pad or under-fill its 16-lane tile (see skinny).
func (s *simd) useDot(m, k, n int) bool {
	return m <= 4 || (m <= s.dotMaxM && 8*m <= k) || s.skinny(k, n)
}

// skinny reports whether a product n columns wide is faster by inner
// products than packed (measured on Zen 5: AVX-512 2.5× at n=8, 1.3× at
// n=16 with k ≥ 256; AVX2 1.3× at n=8 with k ≥ 256, slower otherwise).
func (s *simd) skinny(k, n int) bool {
	if s.lanes == 16 {
		return n <= 8 && k >= 32 || n <= 16 && k >= 256
	}
	return n <= 8 && k >= 256
}

// ntDot is the packing-free C = A·Bᵀ for few rows of A. One assembly call
// computes up to 16 groups of 4 columns for up to dotRows rows of A; when
// several row blocks pass over the same columns, fewer groups are taken so
// that their rows of B stay in L1.
// Column j of C takes row j-bj0 of b; k is at least the lane count.
func (s *simd) ntDot(c, a, b []float32, k, n int, acc bool, i0, i1, j0, j1, bj0 int) {
	k16 := k / s.lanes * s.lanes
	rmax := s.dotRows
	groups := 16
	if i1-i0 > rmax {
		groups = min(16, max(1, 2048/k))
	}
	// With acc=false and no k tail the kernels store straight into C;
	// otherwise into out (rows of 64), and Go adds tails and accumulates.
	direct := !acc && k16 == k
	var out [4 * 64]float32
	for jb := j0; jb < j1; jb += 4 * groups {
		nj := min(4*groups, j1-jb) / 4        // j1-j0 is a multiple of 4
		bb := b[(jb-bj0)*k : (jb-bj0+4*nj)*k] // the rows of B this group reads
		for i := i0; i < i1; i += rmax {
			r := min(rmax, i1-i)
			_ = a[(i+r-1)*k+k16-1]
			o, ldo := &out[0], 64*4
			if direct {
				_ = c[(i+r-1)*n+jb+4*nj-1]
				o, ldo = &c[i*n+jb], n*4
			}
			// Direct calls keep out on the stack (go:noescape does not
			// survive a call through a func value).
			if s.lanes == 16 {
				dotNTavx512(r, &a[i*k], k*4, &bb[0], k*4, k16, o, ldo, nj)
			} else {
				dotNTavx2(r, &a[i*k], k*4, &bb[0], k*4, k16, o, ldo, nj)
			}
			if direct {
				continue
			}
			for ii := 0; ii < r; ii++ {
				ar := a[(i+ii)*k+k16 : (i+ii)*k+k]
				row := out[ii*64 : ii*64+4*nj]
				if k16 < k {
					for j := range row {
						row[j] += dotGeneric(ar, bb[j*k+k16:j*k+k])
					}
				}
				cr := c[(i+ii)*n+jb : (i+ii)*n+jb+4*nj]
				if acc {
					for j, v := range row {
						cr[j] += v
					}
				} else {
					copy(cr, row)
				}
			}
		}
	}
}

// gemm computes C[i0:i1, j0:j1] with packed B blocks and the
// register-blocked microkernels. A last panel narrower than a vector multiple
// is packed with zero columns, computed into a scratch tile and merged.
func (s *simd) gemm(kind int, c, a, b []float32, m, k, n int, acc bool, i0, i1, j0, j1 int) {
	sc := getScratch()
	defer putScratch(sc)
	W := s.lanes
	NR := s.nvMax * W
	MR := s.mr
	for pc := 0; pc < k; pc += kcBlock {
		kc := min(kcBlock, k-pc)
		load := acc || pc > 0
		for jc := j0; jc < j1; jc += ncBlock {
			nc := min(ncBlock, j1-jc)
			packB(kind, sc.b, b, k, n, pc, kc, jc, nc, NR, W)
			for ir := i0; ir < i1; ir += MR {
				mr := min(MR, i1-ir)
				// A is read in place: element (i,p) at a + i·ia + p·sa. For TN
				// ([k×m]) that is a strided walk; measured faster than packing
				// the micro-panel, also for power-of-two m, on Zen 5.
				var ap *float32
				var sa, ia int
				if kind == kindTN {
					ap, sa, ia = &a[pc*m+ir], m*4, 4
				} else {
					ap, sa, ia = &a[ir*k+pc], 4, k*4
				}
				for jr := jc; jr < jc+nc; jr += NR {
					nr := min(NR, jc+nc-jr)
					nrv := (nr + W - 1) / W * W
					bp := &sc.b[(jr-jc)*kc]
					if nr == nrv {
						_ = c[(ir+mr-1)*n+jr+nr-1] // bounds for the assembly
						s.kern(mr, nr/W)(kc, ap, sa, ia, bp, nr*4, &c[ir*n+jr], n*4, load)
						continue
					}
					t := sc.tile[:mr*nrv]
					s.kern(mr, nrv/W)(kc, ap, sa, ia, bp, nrv*4, &t[0], nrv*4, false)
					for i := range mr {
						cr := c[(ir+i)*n+jr : (ir+i)*n+jr+nr]
						tr := t[i*nrv : i*nrv+nr]
						if load {
							for j, v := range tr {
								cr[j] += v
							}
						} else {
							copy(cr, tr)
						}
					}
				}
			}
		}
	}
}

// packB copies B's block (rows pc..pc+kc of the k dimension, columns
// jc..jc+nc of the n dimension) into dst as column panels of width NR:
// panel q holds kc rows of its width, contiguous. The last panel may be
// narrower; its width is rounded up to a multiple of W with zero columns.
func packB(kind int, dst, b []float32, k, n, pc, kc, jc, nc, NR, W int) {
	for q := 0; q < nc; q += NR {
		w := min(NR, nc-q)
		wv := (w + W - 1) / W * W
		pan := dst[q*kc : q*kc+wv*kc]
		if kind == kindNT {
			// B is [n×k]: transpose, 8×8 blocks in assembly, the last kc%8
			// rows and w%8 columns in Go.
			kc8 := kc / 8 * 8
			w8 := w / 8 * 8
			for jj := 0; jj < w8; jj += 8 {
				if kc8 > 0 {
					_ = b[(jc+q+jj+7)*k+pc+kc8-1] // bounds for the assembly
					transpose8(&b[(jc+q+jj)*k+pc], k*4, &pan[jj], wv*4, kc8/8)
				}
				for r := jj; r < jj+8; r++ {
					src := b[(jc+q+r)*k+pc+kc8 : (jc+q+r)*k+pc+kc]
					for p, v := range src {
						pan[(kc8+p)*wv+r] = v
					}
				}
			}
			for r := w8; r < w; r++ {
				src := b[(jc+q+r)*k+pc : (jc+q+r)*k+pc+kc]
				for p, v := range src {
					pan[p*wv+r] = v
				}
			}
			if w < wv {
				for p := range kc {
					clear(pan[p*wv+w : p*wv+wv])
				}
			}
		} else {
			for p := range kc {
				row := pan[p*wv : p*wv+wv]
				copy(row, b[(pc+p)*n+jc+q:(pc+p)*n+jc+q+w])
				clear(row[w:])
			}
		}
	}
}

//go:noescape
func expSumAVX2(dst, x *float32, n int, scale, shift float32) float64

//go:noescape
func swigluAVX2(h, gate, up *float32, n int)

//go:noescape
func swigluBackAVX2(dg, du, dh, gate, up *float32, n int)

func swigluBackSIMD(dg, du, dh, g, u []float32) {
	n := len(g) / 8 * 8
	if n > 0 {
		_, _, _, _, _ = dg[n-1], du[n-1], dh[n-1], g[n-1], u[n-1]
		swigluBackAVX2(&dg[0], &du[0], &dh[0], &g[0], &u[0], n)
	}
	swigluBackGeneric(dg[n:], du[n:], dh[n:], g[n:], u[n:])
}

func expSumSIMD(dst, x []float32, scale, shift float32) float64 {
	n := len(x) / 8 * 8
	var s float64
	if n > 0 {
		_, _ = dst[n-1], x[n-1]
		s = expSumAVX2(&dst[0], &x[0], n, scale, shift)
	}
	return s + expSumGeneric(dst[n:], x[n:], scale, shift)
}

func swigluSIMD(h, g, u []float32) {
	n := len(g) / 8 * 8
	if n > 0 {
		_, _, _ = h[n-1], g[n-1], u[n-1]
		swigluAVX2(&h[0], &g[0], &u[0], n)
	}
	swigluGeneric(h[n:], g[n:], u[n:])
}
