package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// SwiGLUBackward: every implementation equals the portable one bit for bit (the same
// operations in the same order), both agree with a float64 reference, and writing dg or du
// over dh gives the same results.
func TestSwiGLUBackward(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	eachImpl(t, func(t *testing.T) {
		for _, n := range []int{1, 7, 8, 9, 1000, 1003} {
			g, u, dh := randSlice(r, n), randSlice(r, n), randSlice(r, n)
			for i := range g {
				g[i] *= 30 // σ saturates at both ends
			}
			g[0] = -100
			if n > 1 {
				g[1] = 100
			}
			dg, du := make([]float32, n), make([]float32, n)
			SwiGLUBackward(dg, du, dh, g, u)
			wg, wu := make([]float32, n), make([]float32, n)
			swigluBackGeneric(wg, wu, dh, g, u)
			if !slices.Equal(dg, wg) || !slices.Equal(du, wu) {
				t.Fatalf("n=%d: differs from swigluBackGeneric", n)
			}
			for i := range g {
				x := float64(g[i])
				s := 1 / (1 + math.Exp(-x))
				wantU := float64(dh[i]) * x * s
				wantG := float64(dh[i]) * float64(u[i]) * s * (1 + x*(1-s))
				if d := math.Abs(float64(du[i]) - wantU); d > 1e-6*math.Abs(wantU)+1e-30 {
					t.Fatalf("du[%d] (g=%g) = %g, want %g", i, g[i], du[i], wantU)
				}
				if d := math.Abs(float64(dg[i]) - wantG); d > 1e-5*math.Abs(wantG)+1e-7*math.Abs(float64(dh[i]*u[i])) {
					t.Fatalf("dg[%d] (g=%g) = %g, want %g", i, g[i], dg[i], wantG)
				}
			}
			// in place: dg over dh, then du over dh
			a := slices.Clone(dh)
			SwiGLUBackward(a, du, a, g, u)
			if !slices.Equal(a, wg) {
				t.Fatalf("n=%d: dg written over dh differs", n)
			}
			b := slices.Clone(dh)
			SwiGLUBackward(dg, b, b, g, u)
			if !slices.Equal(b, wu) {
				t.Fatalf("n=%d: du written over dh differs", n)
			}
		}
	})
}
