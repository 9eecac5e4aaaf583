package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// eachImpl runs f once per implementation this CPU can run, forcing it.
func eachImpl(t *testing.T, f func(t *testing.T)) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			restore, ok := setImpl(im.name)
			if !ok {
				t.Skip("not available")
			}
			defer restore()
			f(t)
		})
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// refMM is a float64 reference: it returns C0 (+) op(A)·op(B) and, per
// element, the bound Σ|a||b| + |c0| used to scale the tolerance.
func refMM(kind int, c0, a, b []float32, m, k, n int, acc bool) (want, mag []float64) {
	// Gather op(A) rows and op(B) columns as contiguous float64 vectors.
	ar := make([]float64, m*k)
	bc := make([]float64, n*k)
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			if kind == kindTN {
				ar[i*k+p] = float64(a[p*m+i])
			} else {
				ar[i*k+p] = float64(a[i*k+p])
			}
		}
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			if kind == kindNT {
				bc[j*k+p] = float64(b[j*k+p])
			} else {
				bc[j*k+p] = float64(b[p*n+j])
			}
		}
	}
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		x := ar[i*k : i*k+k]
		for j := 0; j < n; j++ {
			y := bc[j*k : j*k+k]
			var s, g float64
			if acc {
				s, g = float64(c0[i*n+j]), math.Abs(float64(c0[i*n+j]))
			}
			for p, xv := range x {
				s += xv * y[p]
				g += math.Abs(xv * y[p])
			}
			want[i*n+j], mag[i*n+j] = s, g
		}
	}
	return want, mag
}

var kindNames = []string{"NT", "NN", "TN"}

func callMM(kind int, c, a, b []float32, m, k, n int, acc bool) {
	switch kind {
	case kindNT:
		MatMulNT(c, a, b, m, k, n, acc)
	case kindNN:
		MatMulNN(c, a, b, m, k, n, acc)
	case kindTN:
		MatMulTN(c, a, b, m, k, n, acc)
	}
}

// Tolerance: float32 summation error grows at worst like k·ε·Σ|a||b|; the
// kernels sum in blocks, so a much tighter 4·sqrt(k+1)·ε·Σ|a||b| holds.
const eps32 = 1.0 / (1 << 23)

func checkOne(t *testing.T, r *rand.Rand, kind, m, k, n int, acc bool) {
	t.Helper()
	a := randSlice(r, m*k)
	b := randSlice(r, k*n)
	const guard = 7
	c := randSlice(r, m*n+guard)
	c0 := append([]float32(nil), c...)
	callMM(kind, c, a, b, m, k, n, acc)
	want, mag := refMM(kind, c0, a, b, m, k, n, acc)
	tolf := 4 * math.Sqrt(float64(k+1)) * eps32
	for i := range want {
		if d := math.Abs(float64(c[i]) - want[i]); d > tolf*mag[i]+1e-30 || math.IsNaN(float64(c[i])) {
			t.Fatalf("%s m=%d k=%d n=%d acc=%v: c[%d,%d]=%g want %g (|diff| %g > tol %g)",
				kindNames[kind], m, k, n, acc, i/n, i%n, c[i], want[i], d, tolf*mag[i])
		}
	}
	for i := m * n; i < len(c); i++ {
		if c[i] != c0[i] {
			t.Fatalf("%s m=%d k=%d n=%d: wrote past m*n at %d", kindNames[kind], m, k, n, i)
		}
	}
}

func TestMatMulShapes(t *testing.T) {
	dims := []int{0, 1, 2, 3, 5, 6, 7, 8, 13, 15, 16, 17, 31, 33, 47, 63, 64, 65, 97, 129}
	eachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for kind := range 3 {
			for _, m := range dims {
				for _, n := range dims {
					for _, k := range []int{0, 1, 3, 16, 37} {
						checkOne(t, r, kind, m, k, n, (m+n+k)%2 == 0)
					}
				}
			}
		}
	})
}

func TestMatMulRandom(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for range 25 {
			m, k, n := 1+r.IntN(100), 1+r.IntN(600), 1+r.IntN(200)
			for kind := range 3 {
				checkOne(t, r, kind, m, k, n, r.IntN(2) == 0)
			}
		}
	})
}

// Model-sized shapes, threaded (more than one part) and inline.
func TestMatMulModelShapes(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	shapes := [][3]int{{1, 256, 2048}, {16, 512, 700}, {40, 300, 520}, {130, 600, 256}, {600, 100, 40}, {300, 300, 1}}
	eachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for _, th := range []int{1, 3} {
			prev := Threads()
			SetThreads(th)
			for _, s := range shapes {
				for kind := range 3 {
					checkOne(t, r, kind, s[0], s[1], s[2], th == 3)
				}
			}
			SetThreads(prev)
		}
	})
}

func TestMatMulConcurrent(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 9))
				for range 3 {
					checkOne(t, r, g%3, 70+g, 200, 150, g%2 == 0)
				}
			}()
		}
		wg.Wait()
	})
}

func TestMatMulPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	MatMulNT(make([]float32, 5), make([]float32, 6), make([]float32, 6), 2, 3, 3, false)
}

func TestVectorOps(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(7, 8))
		for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 4099} {
			x, y := randSlice(r, n), randSlice(r, n+3)
			var want, mag float64
			for i := range x {
				want += float64(x[i]) * float64(y[i])
				mag += math.Abs(float64(x[i]) * float64(y[i]))
			}
			if got := Dot(x, y); math.Abs(float64(got)-want) > 4*math.Sqrt(float64(n+1))*eps32*mag+1e-30 {
				t.Fatalf("Dot n=%d: %g want %g", n, got, want)
			}
			y0 := append([]float32(nil), y...)
			Axpy(0.75, x, y)
			for i := range y {
				w, xi := y0[i], float32(0)
				if i < n {
					xi = x[i]
					w = y0[i] + 0.75*xi
				}
				if math.Abs(float64(y[i]-w)) > 2*eps32*(math.Abs(float64(y0[i]))+math.Abs(float64(xi)))+1e-30 {
					t.Fatalf("Axpy n=%d i=%d: %g want %g", n, i, y[i], w)
				}
			}
			x0 := append([]float32(nil), x...)
			Scale(-1.5, x)
			for i := range x {
				if x[i] != -1.5*x0[i] {
					t.Fatalf("Scale n=%d i=%d: %g want %g", n, i, x[i], -1.5*x0[i])
				}
			}
		}
	})
}

func TestElementwise(t *testing.T) {
	x := []float32{-3, -1, 0, 0.5, 2, 10}
	y := make([]float32, len(x))
	SiLU(y, x)
	for i, v := range x {
		w := float64(v) / (1 + math.Exp(-float64(v)))
		if math.Abs(float64(y[i])-w) > 1e-6*math.Max(1, math.Abs(w)) {
			t.Fatalf("SiLU(%g)=%g want %g", v, y[i], w)
		}
	}
	s := []float32{1000, 1001, 999, -5}
	Softmax(s)
	var sum float32
	for _, v := range s {
		sum += v
	}
	if math.Abs(float64(sum-1)) > 1e-6 || !(s[1] > s[0] && s[0] > s[2] && s[3] >= 0) {
		t.Fatalf("Softmax: %v", s)
	}
	w := []float32{1, 2, 0.5}
	xs := []float32{3, 4, 0}
	d := make([]float32, 3)
	r := RMSNorm(d, xs, w, 0)
	wantR := 1 / math.Sqrt(25.0/3)
	if math.Abs(float64(r)-wantR) > 1e-6 || math.Abs(float64(d[1])-4*wantR*2) > 1e-5 {
		t.Fatalf("RMSNorm: r=%g d=%v", r, d)
	}
	// AdamW: first step with zero state moves each parameter by lr·sign(g)
	// (plus weight decay).
	p := []float32{1, -1, 0.5}
	g := []float32{0.1, -2, 0}
	m, v := make([]float32, 3), make([]float32, 3)
	AdamW(p, g, m, v, AdamWParams{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 1})
	want := []float64{1 - 0.01*(1+0.1), -1 - 0.01*(-1-0.1), 0.5 - 0.01*0.1*0.5}
	for i := range p {
		if math.Abs(float64(p[i])-want[i]) > 1e-5 {
			t.Fatalf("AdamW p[%d]=%g want %g", i, p[i], want[i])
		}
	}
}

func ExampleMatMulNT() {
	// y[1×2] = x[1×3] · W[2×3]ᵀ
	x := []float32{1, 2, 3}
	w := []float32{1, 0, 0, 0, 1, 1}
	y := make([]float32, 2)
	MatMulNT(y, x, w, 1, 3, 2, false)
	fmt.Println(y)
	// Output: [1 5]
}

// The decode path (m=1) and threaded calls must not allocate once warm.
func TestMatMulNoAlloc(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	prev := Threads()
	defer SetThreads(prev)
	for _, s := range [][3]int{{1, 256, 688}, {1, 512, 1376}, {16, 256, 256}, {64, 256, 256}} {
		m, k, n := s[0], s[1], s[2]
		a, b, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
		for _, th := range []int{1, 2} {
			SetThreads(th)
			for kind := range 3 {
				callMM(kind, c, a, b, m, k, n, false) // warm scratch buffers and workers
				if got := testing.AllocsPerRun(50, func() { callMM(kind, c, a, b, m, k, n, true) }); got != 0 {
					t.Errorf("%s m=%d k=%d n=%d threads=%d: %v allocs per call", kindNames[kind], m, k, n, th, got)
				}
			}
		}
	}
}

// Few columns (LoRA ranks) take the inner-product paths, also for MatMulNN
// through a transposed copy of B; inline and threaded.
func TestMatMulSkinny(t *testing.T) {
	eachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(11, 12))
		prev := Threads()
		defer SetThreads(prev)
		for _, th := range []int{1, 2} {
			SetThreads(th)
			for _, s := range [][3]int{{100, 300, 8}, {70, 513, 16}, {5, 256, 12}, {600, 300, 8}, {33, 40, 7}, {9, 31, 3}} {
				for kind := range 3 {
					checkOne(t, r, kind, s[0], s[1], s[2], false)
					checkOne(t, r, kind, s[0], s[1], s[2], true)
				}
			}
		}
	})
}

// ExpSum and SwiGLU on every implementation: each e^x within 2e-7 of the float64 value over
// the float32 range, the limits (0 below −87.3, +Inf above the float32 range), and the sum.
func TestExpKernels(t *testing.T) {
	var xs []float32
	for x := -90.0; x <= 89; x += 0.0137 {
		xs = append(xs, float32(x))
	}
	xs = append(xs, -87.3, -87.29, 88, 88.5, 0, float32(math.Inf(-1)), -1e30, 1e-30)
	eachImpl(t, func(t *testing.T) {
		for _, n := range []int{len(xs), 1, 7, 8, 9, 33} {
			x := xs[len(xs)-n:]
			dst := make([]float32, n)
			sum := ExpSum(dst, x, 1, 0)
			var want float64
			for i, v := range x {
				e := math.Exp(float64(v))
				switch {
				case v < -87.3:
					e = 0
				case e > math.MaxFloat32:
					e = math.Inf(1)
				}
				if e == 0 || math.IsInf(e, 1) {
					if float64(dst[i]) != e {
						t.Fatalf("n=%d: e^%g = %g, want %g", n, v, dst[i], e)
					}
				} else if d := math.Abs(float64(dst[i])-e) / e; d > 2e-7 {
					t.Fatalf("n=%d: e^%g = %g, want %g (relative error %g)", n, v, dst[i], e, d)
				}
				want += float64(dst[i])
				// Up to 88 every lane is expGeneric's, bit for bit (the same operations in
				// the same order).
				if g := expGeneric(v); v <= 88 && math.Float32bits(dst[i]) != math.Float32bits(g) {
					t.Fatalf("n=%d: e^%g = %g, expGeneric %g", n, v, dst[i], g)
				}
			}
			if !math.IsInf(want, 1) && math.Abs(sum-want) > 1e-12*want {
				t.Fatalf("n=%d: sum %g, want %g", n, sum, want)
			}
		}
		// scale and shift, in place: a softmax's numerators.
		r := rand.New(rand.NewPCG(3, 3))
		x := randSlice(r, 301)
		want := make([]float64, len(x))
		for i, v := range x {
			want[i] = math.Exp(float64(v*0.125 - 2))
		}
		ExpSum(x, x, 0.125, 2)
		for i := range x {
			if d := math.Abs(float64(x[i])-want[i]) / want[i]; d > 3e-7 {
				t.Fatalf("scaled [%d] = %g, want %g", i, x[i], want[i])
			}
		}
		g, u := randSlice(r, 1000), randSlice(r, 1000)
		for i := range g {
			g[i] *= 30 // σ saturates at both ends
		}
		g[0], g[1] = -100, 100
		h := make([]float32, len(g))
		SwiGLU(h, g, u)
		hg := make([]float32, len(g))
		swigluGeneric(hg, g, u)
		if !slices.Equal(h, hg) {
			t.Fatal("SwiGLU differs from swigluGeneric")
		}
		for i := range g {
			want := float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
			if d := math.Abs(float64(h[i]) - want); d > 1e-6*math.Abs(want)+1e-30 {
				t.Fatalf("SwiGLU(%g, %g) = %g, want %g", g[i], u[i], h[i], want)
			}
		}
	})
}
