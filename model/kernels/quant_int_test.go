package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The VNNI kernels compute what qgemm16Generic computes, within float rounding (they fuse the
// scaled additions).
func TestQGemm16Kernels(t *testing.T) {
	im := current.Load()
	if im.qgemm16 == nil {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, withMin := range []bool{false, true} {
		for mr := 1; mr <= 4; mr++ {
			for _, load := range []bool{false, true} {
				const nblk, lda, ldds, ldc = 3, 3*QBlock + 5, 3*2 + 1, qPanel + 3
				a := make([]int16, (mr-1)*lda+nblk*QBlock)
				for i := range a {
					a[i] = int16(r.IntN(65535) - 32767)
				}
				ds := randSlice(r, (mr-1)*ldds+2*nblk)
				b := make([]uint32, nblk*16*qPanel)
				for i := range b {
					b[i] = uint32(uint16(int16(r.IntN(256)-128))) | uint32(uint16(int16(r.IntN(256)-128)))<<16
				}
				sb := randSlice(r, nblk*qPanel)
				var mb []float32
				if withMin {
					mb = randSlice(r, nblk*qPanel)
				}
				c0 := randSlice(r, (mr-1)*ldc+qPanel)
				got, want := slices.Clone(c0), slices.Clone(c0)
				im.qgemm16(mr, nblk, a, lda, ds, ldds, b, sb, mb, got, ldc, load)
				qgemm16Generic(mr, nblk, a, lda, ds, ldds, b, sb, mb, want, ldc, load)
				for i := range mr {
					for j := range ldc {
						o := i*ldc + j
						if o >= len(c0) {
							break
						}
						x, y := got[o], want[o]
						if j >= qPanel {
							if x != c0[o] {
								t.Fatalf("mr=%d: wrote outside the tile at [%d][%d]", mr, i, j)
							}
							continue
						}
						if d := math.Abs(float64(x - y)); d > 1e-6*qgemm16Mag(i, j, nblk, a, lda, ds, ldds, b, sb, mb) {
							t.Fatalf("min=%v mr=%d load=%v [%d][%d] = %g, generic %g", withMin, mr, load, i, j, x, y)
						}
					}
				}
			}
		}
	}
}

// qgemm16Mag is Σ over blocks of the magnitudes of the terms qgemm16Generic adds into C[i][j].
func qgemm16Mag(i, j, nblk int, a []int16, lda int, ds []float32, ldds int, b []uint32, sb, mb []float32) float64 {
	var mag float64
	for kb := range nblk {
		var sum int64
		for t := range 16 {
			bw := b[(kb*16+t)*qPanel+j]
			sum += int64(a[i*lda+kb*QBlock+2*t])*int64(int16(bw)) + int64(a[i*lda+kb*QBlock+2*t+1])*int64(int16(bw>>16))
		}
		mag += math.Abs(float64(sb[kb*qPanel+j]) * float64(ds[i*ldds+2*kb]) * float64(sum))
		if mb != nil {
			mag += math.Abs(float64(mb[kb*qPanel+j]) * float64(ds[i*ldds+2*kb+1]))
		}
	}
	return mag + 1
}

// MatMulQInt gives each row what MatMulQ's integer path gives it (the same int16 activations;
// float rounding of block sums taken in another order), on every implementation and with the
// generic kernel in place of the VNNI one, for row counts below and above the kernel's
// threshold, panels cut short and several chunks of blocks.
func TestMatMulQInt(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	defer SetQuantFloatRows(SetQuantFloatRows(math.MaxInt))
	check := func(t *testing.T, use *impl) {
		for _, qt := range qTypes {
			for _, sh := range []struct{ m, n, k int }{{3, 50, 64}, {16, 48, 32}, {21, 100, 288}, {37, 200, 608}} {
				for _, acc := range []bool{false, true} {
					w := randQMatrix(r, qt, sh.n, sh.k)
					a := randSlice(r, sh.m*sh.k)
					c0 := randSlice(r, sh.m*sh.n)
					got := slices.Clone(c0)
					prev := current.Load()
					current.Store(use)
					MatMulQInt(got, a, w, sh.m, acc)
					current.Store(prev)
					want := slices.Clone(c0)
					for i := range sh.m { // one row at a time: MatMulQ's one-row integer path
						MatMulQ(want[i*sh.n:(i+1)*sh.n], a[i*sh.k:(i+1)*sh.k], w, 1, acc)
					}
					_, mag := refQ(w, a, sh.m, true)
					for i := range want {
						if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(mag[i]+math.Abs(float64(c0[i])))+1e-6 {
							t.Fatalf("%s m=%d n=%d k=%d acc=%v: [%d] = %g, integer path %g", qt, sh.m, sh.n, sh.k, acc, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	eachImpl(t, func(t *testing.T) {
		check(t, current.Load())
		generic := *current.Load()
		generic.qgemm16 = qgemm16Generic
		check(t, &generic)
	})
}
