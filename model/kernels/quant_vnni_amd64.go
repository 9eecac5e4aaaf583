package kernels

import "golang.org/x/sys/cpu"

func vnniOK() bool { return hasAVX512() && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI }

//go:noescape
func qgemm16VNNI_1x3(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_2x3(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_3x3(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_4x3(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_1x3m(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_2x3m(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_3x3m(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

//go:noescape
func qgemm16VNNI_4x3m(nblk int, a *int16, lda int, ds *float32, ldds int, b *uint32, sb, mb, c *float32, ldc int, load bool)

// qgemm16VNNI is qgemm16Generic on the generated kernels (strides in elements, as there).
func qgemm16VNNI(mr, nblk int, a []int16, lda int, ds []float32, ldds int, b []uint32, sb, mb, c []float32, ldc int, load bool) {
	if mr < 1 || mr > 4 || nblk < 1 || len(a) < (mr-1)*lda+nblk*QBlock || len(ds) < (mr-1)*ldds+2*nblk ||
		len(b) < nblk*16*qPanel || len(sb) < nblk*qPanel || (mb != nil && len(mb) < nblk*qPanel) || len(c) < (mr-1)*ldc+qPanel {
		panic("kernels: qgemm16: bad tile")
	}
	pa, pd, pb, ps, pc := &a[0], &ds[0], &b[0], &sb[0], &c[0]
	la, ld, lc := lda*2, ldds*4, ldc*4
	if mb == nil {
		switch mr {
		case 1:
			qgemm16VNNI_1x3(nblk, pa, la, pd, ld, pb, ps, ps, pc, lc, load)
		case 2:
			qgemm16VNNI_2x3(nblk, pa, la, pd, ld, pb, ps, ps, pc, lc, load)
		case 3:
			qgemm16VNNI_3x3(nblk, pa, la, pd, ld, pb, ps, ps, pc, lc, load)
		default:
			qgemm16VNNI_4x3(nblk, pa, la, pd, ld, pb, ps, ps, pc, lc, load)
		}
		return
	}
	pm := &mb[0]
	switch mr {
	case 1:
		qgemm16VNNI_1x3m(nblk, pa, la, pd, ld, pb, ps, pm, pc, lc, load)
	case 2:
		qgemm16VNNI_2x3m(nblk, pa, la, pd, ld, pb, ps, pm, pc, lc, load)
	case 3:
		qgemm16VNNI_3x3m(nblk, pa, la, pd, ld, pb, ps, pm, pc, lc, load)
	default:
		qgemm16VNNI_4x3m(nblk, pa, la, pd, ld, pb, ps, pm, pc, lc, load)
	}
}
