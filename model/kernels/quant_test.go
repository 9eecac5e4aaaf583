package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var qTypes = []QType{Q8_0, Q4_0, Q4_1}

// randQMatrix returns a rows × cols matrix of random blocks with scales like a trained model's.
func randQMatrix(r *rand.Rand, t QType, rows, cols int) *QMatrix {
	bb := t.BlockBytes()
	data := make([]byte, rows*cols/QBlock*bb)
	for b := 0; b < len(data)/bb; b++ {
		blk := data[b*bb : (b+1)*bb]
		for i := range blk {
			blk[i] = byte(r.Uint32())
		}
		binary.LittleEndian.PutUint16(blk, float32ToHalf(float32(r.Float64()*0.02+1e-4)))
		if t == Q4_1 {
			binary.LittleEndian.PutUint16(blk[2:], float32ToHalf(float32(-r.Float64()*0.15)))
		}
	}
	w, err := NewQMatrix(t, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return w
}

func TestHalfRoundTrip(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := halfToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := float32ToHalf(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x → %#04x", h, g)
			}
			continue
		}
		if g := float32ToHalf(f); g != uint16(h) {
			t.Fatalf("half %#04x → %g → %#04x", h, f, g)
		}
	}
	for _, c := range []struct {
		x float32
		h uint16
	}{{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e-8, 0}, {5.9604645e-08, 1}, {1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02}} {
		if g := float32ToHalf(c.x); g != c.h {
			t.Errorf("float32ToHalf(%g) = %#04x, want %#04x", c.x, g, c.h)
		}
	}
}

// TestQuantKernels compares every implementation's quantized primitives with the portable ones.
func TestQuantKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	eachImpl(t, func(t *testing.T) {
		im := current.Load()
		for _, qt := range qTypes {
			for _, cols := range []int{32, 64, 576, 1536} {
				w := randQMatrix(r, qt, 7, cols)
				want := make([]float32, 7*cols)
				got := make([]float32, 7*cols)
				for r := 0; r < 7; r++ {
					row := w.data[r*w.rowBytes : (r+1)*w.rowBytes]
					dequantGeneric(qt, want[r*cols:(r+1)*cols], row, w.nb)
					im.dequant(qt, got[r*cols:(r+1)*cols], row, w.nb)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s dequant cols=%d [%d] = %g, want %g", qt, cols, i, got[i], want[i])
					}
				}
				x := randSlice(r, cols)
				var act q8Act
				act.grow(1, cols, false)
				act.grow(1, cols, true)
				o1, o2 := make([]float32, 7), make([]float32, 7)
				for _, bits := range []int{8, 16} {
					if bits == 8 {
						quantizeAct(act.q, act.ds, x)
						gemvQGeneric(qt, o1, w.data, w.nb, act.q, act.ds)
						im.gemvQ(qt, o2, w.data, w.nb, act.q, act.ds)
					} else {
						quantizeAct16(act.q16, act.ds, x)
						gemvQ16Generic(qt, o1, w.data, w.nb, act.q16, act.ds)
						im.gemvQ16(qt, o2, w.data, w.nb, act.q16, act.ds)
					}
					for i := range o1 {
						// The activations' rounding moves each x_j by at most half a step
						// (its block's max|x|/127, or /32767): bound = Σ|w_j|·step/2.
						levels := 127.0
						if bits == 16 {
							levels = 32767
						}
						var mag, exact, bound float64
						for j := 0; j < cols; j++ {
							mag += math.Abs(float64(want[i*cols+j]) * float64(x[j]))
							exact += float64(want[i*cols+j]) * float64(x[j])
						}
						for b := 0; b < cols/QBlock; b++ {
							var amax, wsum float64
							for j := b * QBlock; j < (b+1)*QBlock; j++ {
								amax = max(amax, math.Abs(float64(x[j])))
								wsum += math.Abs(float64(want[i*cols+j]))
							}
							bound += wsum * amax / levels / 2
						}
						if d := math.Abs(float64(o1[i] - o2[i])); d > 1e-5*mag+1e-6 {
							t.Fatalf("%s gemv int%d cols=%d row %d: %g vs generic %g", qt, bits, cols, i, o2[i], o1[i])
						}
						if d := math.Abs(float64(o2[i]) - exact); d > 1.01*bound+2e-6*mag+1e-6 {
							t.Fatalf("%s gemv int%d cols=%d row %d: %g, exact %g", qt, bits, cols, i, o2[i], exact)
						}
					}
				}
			}
		}
	})
}

// Every implementation's activation quantizers equal the portable ones bit for bit, on blocks
// of zeros, of one value, of mixed magnitudes and at the rounding ties.
func TestQuantizeActKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	eachImpl(t, func(t *testing.T) {
		im := current.Load()
		for _, cols := range []int{32, 64, 256, 288, 576, 1536} {
			x := randSlice(r, cols)
			clear(x[:QBlock])                                // a zero block
			for j := QBlock; j < 2*QBlock && j < cols; j++ { // a block of ties: 127·(j/2) steps
				x[j] = float32(j-QBlock) / 2
			}
			for j := 2 * QBlock; j < cols; j += 7 {
				x[j] *= float32(math.Pow(10, float64(j%9-4)))
			}
			nds := actDS(cols)
			var want, got q8Act
			want.grow(1, cols, false)
			want.grow(1, cols, true)
			got.grow(1, cols, false)
			got.grow(1, cols, true)
			for i := range got.ds {
				got.ds[i] = float32(i + 1) // padding must come back zero
			}
			quantizeAct(want.q, want.ds[:nds], x)
			im.quantAct(got.q, got.ds[:nds], x)
			if !slices.Equal(got.q, want.q) || !slices.Equal(got.ds, want.ds) {
				t.Fatalf("int8 cols=%d: q %v ds %v, want %v %v", cols, got.q[:40], got.ds, want.q[:40], want.ds)
			}
			for i := range got.ds {
				got.ds[i] = float32(i + 1)
			}
			quantizeAct16(want.q16, want.ds[:nds], x)
			im.quantAct16(got.q16, got.ds[:nds], x)
			if !slices.Equal(got.q16, want.q16) || !slices.Equal(got.ds, want.ds) {
				t.Fatalf("int16 cols=%d: q %v ds %v, want %v %v", cols, got.q16[:40], got.ds, want.q16[:40], want.ds)
			}
		}
	})
}

// refQ returns A·Wᵀ (nt) or A·W in float64 with the dequantized W, and the magnitudes Σ|a·w|.
func refQ(w *QMatrix, a []float32, m int, nt bool) (want, mag []float64) {
	wf := make([]float32, w.Rows*w.Cols)
	for r := 0; r < w.Rows; r++ {
		dequantGeneric(w.Type, wf[r*w.Cols:(r+1)*w.Cols], w.data[r*w.rowBytes:(r+1)*w.rowBytes], w.nb)
	}
	n, k := w.Rows, w.Cols
	if nt {
		want, mag = make([]float64, m*n), make([]float64, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				for p := 0; p < k; p++ {
					v := float64(a[i*k+p]) * float64(wf[j*k+p])
					want[i*n+j] += v
					mag[i*n+j] += math.Abs(v)
				}
			}
		}
		return want, mag
	}
	want, mag = make([]float64, m*k), make([]float64, m*k)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				v := float64(a[i*n+j]) * float64(wf[j*k+p])
				want[i*k+p] += v
				mag[i*k+p] += math.Abs(v)
			}
		}
	}
	return want, mag
}

func TestMatMulQ(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	eachImpl(t, func(t *testing.T) {
		for _, qt := range qTypes {
			for _, sh := range []struct{ m, n, k int }{{1, 37, 64}, {1, 300, 64}, {3, 300, 96}, {7, 16, 32}, {8, 33, 64}, {21, 517, 128}, {24, 80, 64}, {40, 517, 288}, {33, 1100, 64}} {
				for _, acc := range []bool{false, true} {
					for _, threads := range []int{1, 2} {
						defer SetThreads(Threads())
						SetThreads(threads)
						w := randQMatrix(r, qt, sh.n, sh.k)
						a := randSlice(r, sh.m*sh.k)
						c0 := randSlice(r, sh.m*sh.n)
						c := append([]float32(nil), c0...)
						MatMulQ(c, a, w, sh.m, acc)
						want, mag := refQ(w, a, sh.m, true)
						// The integer path quantizes activations to 8 bits: each product is off
						// by up to 1/254 of its block's largest |a|; the float path by rounding.
						tol := 1e-5
						if sh.m < int(quantFloatRows.Load()) {
							tol = 1.0 / 127
						}
						for i := range want {
							if acc {
								want[i] += float64(c0[i])
							}
							if d := math.Abs(float64(c[i]) - want[i]); d > tol*mag[i]+1e-5 {
								t.Fatalf("%s m=%d n=%d k=%d acc=%v threads=%d: [%d] = %g, want %g (mag %g)", qt, sh.m, sh.n, sh.k, acc, threads, i, c[i], want[i], mag[i])
							}
						}
					}
				}
			}
		}
	})
}

// MatMulQs gives each product exactly what MatMulQ gives it alone, on both paths.
func TestMatMulQsEqualsMatMulQ(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	eachImpl(t, func(t *testing.T) {
		for _, m := range []int{1, 3, 9} {
			a := randSlice(r, m*96)
			ws := []*QMatrix{randQMatrix(r, Q4_1, 40, 96), randQMatrix(r, Q8_0, 17, 96), randQMatrix(r, Q4_0, 33, 96)}
			var ps []QProduct
			var want [][]float32
			for i, w := range ws {
				c := randSlice(r, m*w.Rows)
				ref := append([]float32(nil), c...)
				MatMulQ(ref, a, w, m, i == 1)
				ps = append(ps, QProduct{C: c, W: w, Acc: i == 1})
				want = append(want, ref)
			}
			MatMulQs(a, m, ps...)
			for i, p := range ps {
				if !slices.Equal(p.C, want[i]) {
					t.Fatalf("m=%d product %d (%s): differs from MatMulQ", m, i, p.W.Type)
				}
			}
		}
	})
}

// TestMatMulQError pins the integer path's typical error: on Gaussian activations the relative
// error of a 576-long product stays near the activations' 8-bit rounding, far below 1%.
func TestMatMulQError(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, qt := range qTypes {
		w := randQMatrix(r, qt, 256, 576)
		a := randSlice(r, 576)
		c := make([]float32, 256)
		MatMulQ(c, a, w, 1, false)
		want, _ := refQ(w, a, 1, true)
		var num, den float64
		for i := range want {
			num += (float64(c[i]) - want[i]) * (float64(c[i]) - want[i])
			den += want[i] * want[i]
		}
		if rel := math.Sqrt(num / den); rel > 0.01 {
			t.Errorf("%s: relative RMS error %g of the integer path", qt, rel)
		}
	}
}

func TestMatMulQNN(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	eachImpl(t, func(t *testing.T) {
		for _, qt := range qTypes {
			for _, sh := range []struct{ m, n, k int }{{1, 37, 64}, {5, 300, 96}, {33, 600, 64}, {13, 70, 608}, {40, 517, 288}} {
				for _, acc := range []bool{false, true} {
					w := randQMatrix(r, qt, sh.n, sh.k)
					a := randSlice(r, sh.m*sh.n)
					c0 := randSlice(r, sh.m*sh.k)
					c := append([]float32(nil), c0...)
					MatMulQNN(c, a, w, sh.m, acc)
					want, mag := refQ(w, a, sh.m, false)
					for i := range want {
						if acc {
							want[i] += float64(c0[i])
						}
						if d := math.Abs(float64(c[i]) - want[i]); d > 1e-5*mag[i]+1e-5 {
							t.Fatalf("%s m=%d n=%d k=%d acc=%v: [%d] = %g, want %g", qt, sh.m, sh.n, sh.k, acc, i, c[i], want[i])
						}
					}
				}
			}
		}
	})
}

// The products of many rows that dequantize W straight into the GEMM's panels (impl.qnt,
// impl.qnn) give what dequantized tiles and mm give: MatMulQNN bit for bit (the same sums in
// the same order), MatMulQ within float rounding (with acc the old C is added first instead of
// last; the tiles' path takes narrow last tiles by inner products).
func TestQuantPanelsEqualTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	eachImpl(t, func(t *testing.T) {
		im := current.Load()
		if im.qnt == nil && im.qnn == nil {
			t.Skip("no panel path")
		}
		tiles := *im
		tiles.qnt, tiles.qnn = nil, nil
		run := func(use *impl, f func()) {
			current.Store(use)
			defer current.Store(im)
			f()
		}
		for _, qt := range qTypes {
			for _, sh := range []struct{ m, n, k int }{{32, 64, 32}, {45, 517, 288}, {70, 1100, 608}, {33, 200, 1536}} {
				for _, acc := range []bool{false, true} {
					w := randQMatrix(r, qt, sh.n, sh.k)
					a := randSlice(r, sh.m*sh.k)
					c0 := randSlice(r, sh.m*sh.n)
					got, want := slices.Clone(c0), slices.Clone(c0)
					run(im, func() { MatMulQ(got, a, w, sh.m, acc) })
					run(&tiles, func() { MatMulQ(want, a, w, sh.m, acc) })
					for i := range want {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(math.Abs(float64(want[i]))+math.Abs(float64(c0[i]))+math.Sqrt(float64(sh.k))) {
							t.Fatalf("%s MatMulQ m=%d n=%d k=%d acc=%v: [%d] = %g, tiles %g", qt, sh.m, sh.n, sh.k, acc, i, got[i], want[i])
						}
					}
					dy := randSlice(r, sh.m*sh.n)
					d0 := randSlice(r, sh.m*sh.k)
					gotNN, wantNN := slices.Clone(d0), slices.Clone(d0)
					run(im, func() { MatMulQNN(gotNN, dy, w, sh.m, acc) })
					run(&tiles, func() { MatMulQNN(wantNN, dy, w, sh.m, acc) })
					if !slices.Equal(gotNN, wantNN) {
						t.Fatalf("%s MatMulQNN m=%d n=%d k=%d acc=%v: differs from the tiles' product", qt, sh.m, sh.n, sh.k, acc)
					}
				}
			}
		}
	})
}

func TestQuantizeQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := randSlice(r, 32*50)
	x[5] = 0
	for i := 64; i < 96; i++ {
		x[i] = 0 // an all-zero block
	}
	dst := make([]byte, len(x)/32*34)
	if err := QuantizeQ8_0(dst, x); err != nil {
		t.Fatal(err)
	}
	w, err := NewQMatrix(Q8_0, 50, 32, dst)
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	w.DequantizeRows(y, 0, 50)
	for b := 0; b < 50; b++ {
		var amax float32
		for _, v := range x[b*32 : (b+1)*32] {
			amax = max(amax, abs32(v))
		}
		for j := b * 32; j < (b+1)*32; j++ {
			if d := abs32(x[j] - y[j]); d > amax*(0.5/127+1e-3) {
				t.Fatalf("weight %d: %g → %g (block max %g)", j, x[j], y[j], amax)
			}
		}
	}
	if err := QuantizeQ8_0(dst[:10], x); err == nil {
		t.Error("short destination accepted")
	}
}

func TestNewQMatrixErrors(t *testing.T) {
	for _, c := range []struct {
		t          QType
		rows, cols int
		n          int
	}{{0, 1, 32, 34}, {Q8_0, 1, 31, 34}, {Q8_0, 0, 32, 0}, {Q8_0, 2, 32, 34}, {Q4_1, 1, 64, 41}, {Q4_0, -1, 32, 18}, {Q8_0, 1 << 40, 1 << 40, 34}} {
		if _, err := NewQMatrix(c.t, c.rows, c.cols, make([]byte, c.n)); err == nil {
			t.Errorf("NewQMatrix(%v, %d, %d, %d bytes) accepted", c.t, c.rows, c.cols, c.n)
		}
	}
	data := make([]byte, 2*3*20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	w, err := NewQMatrix(Q4_1, 2, 96, data)
	if err != nil {
		t.Fatal(err)
	}
	if got := append(w.Blocks(0), w.Blocks(1)...); string(got) != string(data) {
		t.Error("Blocks does not return the GGUF blocks NewQMatrix was given")
	}
}

// FuzzQMatrix: any accepted matrix can be multiplied and dequantized without a panic.
func FuzzQMatrix(f *testing.F) {
	f.Add(uint8(Q4_1), 2, 32, make([]byte, 40))
	f.Add(uint8(Q8_0), 1, 64, make([]byte, 68))
	f.Add(uint8(Q4_0), 3, 32, []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghij"))
	f.Fuzz(func(t *testing.T, typ uint8, rows, cols int, data []byte) {
		w, err := NewQMatrix(QType(typ), rows, cols, data)
		if err != nil {
			return
		}
		a := make([]float32, 9*max(rows, cols))
		for i := range a {
			a[i] = float32(i%7) - 3
		}
		MatMulQ(make([]float32, rows), a, w, 1, false)
		MatMulQ(make([]float32, 9*rows), a, w, 9, true)
		MatMulQNN(make([]float32, cols), a, w, 1, false)
		w.DequantizeRows(make([]float32, rows*cols), 0, rows)
	})
}

// TestBatchKernels compares every implementation's batched integer products (its lanes of
// transposed activation rows at a time) with gemvQ16Generic run on each row alone, for full
// groups of rows and partial ones, at widths with and without a partial last group of 8
// blocks.
func TestBatchKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	eachImpl(t, func(t *testing.T) {
		im := current.Load()
		L := im.batchLanes
		for _, qt := range qTypes {
			for _, cols := range []int{32, 96, 256, 576, 1536} {
				for _, rows := range []int{L, 5} {
					const wrows = 7
					w := randQMatrix(r, qt, wrows, cols)
					nds := actDS(cols)
					var act q8Act
					act.grow(rows, cols, true)
					x := randSlice(r, rows*cols)
					for i := 0; i < rows; i++ {
						im.quantAct16(act.q16[i*cols:(i+1)*cols], act.ds[i*nds:(i+1)*nds], x[i*cols:(i+1)*cols])
					}
					nb := cols / QBlock
					xt, xdt := make([]int16, nb*QBlock*L), make([]float32, nb*2*L)
					for i := range xt {
						xt[i] = 1 // must be overwritten, padding rows included
					}
					transposeAct(im, xt, xdt, act.q16, act.ds, rows, cols, L)
					got := make([]float32, L*wrows)
					im.gemmQ16B(qt, got, w.data, nb, L, xt, xdt, make([]float32, batchScratch(nb)))
					want := make([]float32, wrows)
					wf := make([]float32, cols)
					for i := 0; i < L; i++ {
						if i >= rows {
							for j := 0; j < wrows; j++ {
								if got[L*j+i] != 0 {
									t.Fatalf("%s cols=%d: padding row %d gives %g", qt, cols, i, got[L*j+i])
								}
							}
							continue
						}
						gemvQ16Generic(qt, want, w.data, w.nb, act.q16[i*cols:(i+1)*cols], act.ds[i*nds:(i+1)*nds])
						for j := range want {
							var mag float64
							w.DequantizeRows(wf, j, j+1)
							for p := range wf {
								mag += math.Abs(float64(wf[p]) * float64(x[i*cols+p]))
							}
							if d := math.Abs(float64(got[L*j+i] - want[j])); d > 1e-5*mag+1e-6 {
								t.Fatalf("%s cols=%d rows=%d: row %d × W row %d = %g, gemvQ16 %g", qt, cols, rows, i, j, got[L*j+i], want[j])
							}
						}
					}
				}
			}
		}
	})
}

// MatMulQ's batched integer path (batchMinRows to quantFloatRows rows) gives each row what
// the one-row path gives it, within the float rounding of the block sums' order.
func TestMatMulQBatchEqualsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	defer SetQuantFloatRows(SetQuantFloatRows(math.MaxInt))
	eachImpl(t, func(t *testing.T) {
		for _, qt := range qTypes {
			for _, m := range []int{current.Load().batchMinRows(), 9, 16, 21, 35} {
				for _, acc := range []bool{false, true} {
					w := randQMatrix(r, qt, 300, 576)
					a := randSlice(r, m*576)
					c0 := randSlice(r, m*300)
					got := append([]float32(nil), c0...)
					MatMulQ(got, a, w, m, acc)
					for i := 0; i < m; i++ {
						want := append([]float32(nil), c0[i*300:(i+1)*300]...)
						MatMulQ(want, a[i*576:(i+1)*576], w, 1, acc)
						for j := range want {
							if d := math.Abs(float64(got[i*300+j] - want[j])); d > 1e-5*(math.Abs(float64(want[j]))+1) {
								t.Fatalf("%s m=%d acc=%v: row %d col %d = %g, one row alone %g", qt, m, acc, i, j, got[i*300+j], want[j])
							}
						}
					}
				}
			}
		}
	})
}
