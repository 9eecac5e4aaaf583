package kernels

import (
	"encoding/binary"
	"sync"
)

// The integer path of MatMulQInt for many rows: A's rows quantized to int16 per 32-block (as
// MatMulQ's integer path does), W's quants widened to int16 in panels of qPanel rows, and a
// register-blocked kernel (AVX-512 VNNI, vnni_amd64.s; qgemm16Generic elsewhere and as its
// reference) that sums each block in integers and scales it by the two blocks' d (adding the
// Q4_1 minimums times the activation block's s = d·Σq).

// qPanel is the columns (W rows) of one panel; qChunk the blocks a kernel call spans, so that
// its part of the panel (qChunk · 3 KB) stays in L1 while the rows of A pass over it.
const (
	qPanel = 48
	qChunk = 8
)

// qPanelBuf is one panel: b the int16 pairs as words (low half the even position), per block
// and pair of positions the qPanel columns' two weights; sb and mb per block the columns' d and
// (Q4_1) m.
type qPanelBuf struct {
	b      []uint32
	sb, mb []float32
}

// packPanel fills p with rows [j0, j0+qPanel) of w (rows past w.Rows are zero).
func packPanel(p *qPanelBuf, w *QMatrix, j0 int) {
	nb := w.nb
	if cap(p.b) < nb*16*qPanel {
		p.b = make([]uint32, nb*16*qPanel)
	}
	p.b = p.b[:nb*16*qPanel]
	p.sb = growF(&p.sb, nb*qPanel)
	p.mb = growF(&p.mb, nb*qPanel)
	le := binary.LittleEndian
	ns, qb := w.Type.scales(), w.Type.qsBytes()
	for r := range qPanel {
		j := j0 + r
		if j >= w.Rows {
			for o := r; o < len(p.b); o += qPanel {
				p.b[o] = 0
			}
			for o := r; o < len(p.sb); o += qPanel {
				p.sb[o], p.mb[o] = 0, 0
			}
			continue
		}
		row := w.data[j*w.rowBytes : (j+1)*w.rowBytes]
		qs := row[2*ns*nb:]
		for b := range nb {
			q := qs[b*qb : (b+1)*qb]
			out := p.b[b*16*qPanel+r:]
			switch w.Type {
			case Q8_0:
				for t := range 16 {
					out[t*qPanel] = uint32(uint16(int16(int8(q[2*t])))) | uint32(uint16(int16(int8(q[2*t+1]))))<<16
				}
			case Q4_1:
				// byte i holds position i (low nibble) and i+16 (high nibble)
				for t := range 8 {
					u := uint32(q[2*t]) | uint32(q[2*t+1])<<16
					out[t*qPanel] = u & 0x000f000f
					out[(t+8)*qPanel] = u >> 4 & 0x000f000f
				}
			case Q4_0:
				for t := range 8 {
					x0, x1 := q[2*t], q[2*t+1]
					out[t*qPanel] = uint32(uint16(int16(x0&15)-8)) | uint32(uint16(int16(x1&15)-8))<<16
					out[(t+8)*qPanel] = uint32(uint16(int16(x0>>4)-8)) | uint32(uint16(int16(x1>>4)-8))<<16
				}
			}
			p.sb[b*qPanel+r] = halfToFloat32(le.Uint16(row[2*b:]))
			if ns == 2 {
				p.mb[b*qPanel+r] = halfToFloat32(le.Uint16(row[2*(nb+b):]))
			} else {
				p.mb[b*qPanel+r] = 0
			}
		}
	}
}

// qgemm16Generic is the kernel of vnni_amd64.s in Go: rows [0, mr) of the tile, qPanel
// columns, nblk blocks; a row i at a[i*lda:], its (d, s) pairs at ds[i*ldds:], the panel's
// blocks from b, sb, mb (mb nil: no minimums), C row i at c[i*ldc:].
func qgemm16Generic(mr, nblk int, a []int16, lda int, ds []float32, ldds int, b []uint32, sb, mb, c []float32, ldc int, load bool) {
	var acc [4][qPanel]float32
	for kb := range nblk {
		for i := range mr {
			ai := a[i*lda+kb*QBlock:]
			d, s := ds[i*ldds+2*kb], ds[i*ldds+2*kb+1]
			for j := range qPanel {
				var sum int32
				for t := range 16 {
					bw := b[(kb*16+t)*qPanel+j]
					sum += int32(ai[2*t])*int32(int16(bw)) + int32(ai[2*t+1])*int32(int16(bw>>16))
				}
				acc[i][j] += sb[kb*qPanel+j] * d * float32(sum)
				if mb != nil {
					acc[i][j] += mb[kb*qPanel+j] * s
				}
			}
		}
	}
	for i := range mr {
		cr := c[i*ldc : i*ldc+qPanel]
		for j, x := range acc[i][:] {
			if load {
				cr[j] += x
			} else {
				cr[j] = x
			}
		}
	}
}

var qPanelPool = sync.Pool{New: func() any { return new(qPanelBuf) }}

// mulQIntMany is MatMulQInt's many-row path on im.qgemm16.
func mulQIntMany(im *impl, c, a []float32, w *QMatrix, m int, acc bool) {
	pack := func(p *qPanelBuf, j0 int) *qPanelBuf { packPanel(p, w, j0); return p }
	mulQPanels(im, c, a, m, w.Cols, w.Rows, w.Type == Q4_1, pack, acc)
}

// mulQPanels computes C[m×n] = A[m×k]·Bᵀ (or adds it into C when acc) on im.qgemm16, the
// panel of B's qPanel rows from j0 (k/QBlock blocks) returned by pack (which may write it
// into the scratch panel it is given); minW: the panels carry minimums.
func mulQPanels(im *impl, c, a []float32, m, k, n int, minW bool, pack func(p *qPanelBuf, j0 int) *qPanelBuf, acc bool) {
	nb := k / QBlock
	sc := qScratchPool.Get().(*qScratch)
	defer qScratchPool.Put(sc)
	sc.act.grow(m, k, true)
	nds := actDS(k)
	dsx := growF(&sc.w, m*nb*2) // per row and block (d, s)
	for i := range m {
		ds := sc.act.ds[i*nds : (i+1)*nds]
		im.quantAct16(sc.act.q16[i*k:(i+1)*k], ds, a[i*k:(i+1)*k])
		for b := range nb {
			dsx[i*nb*2+2*b], dsx[i*nb*2+2*b+1] = ds[b], ds[nds/2+b]
		}
	}
	q16 := sc.act.q16
	parallelFor(n, qPanel, m*k*n, func(lo, hi int) {
		buf := qPanelPool.Get().(*qPanelBuf)
		defer qPanelPool.Put(buf)
		var tile [4 * qPanel]float32
		for j0 := lo; j0 < hi; j0 += qPanel {
			p := pack(buf, j0)
			nr := min(qPanel, n-j0)
			for cb := 0; cb < nb; cb += qChunk {
				nblk := min(qChunk, nb-cb)
				load := acc || cb > 0
				bb, sbb := p.b[cb*16*qPanel:], p.sb[cb*qPanel:]
				var mbb []float32
				if minW {
					mbb = p.mb[cb*qPanel:]
				}
				for ir := 0; ir < m; ir += 4 {
					mr := min(4, m-ir)
					ai, di := q16[ir*k+cb*QBlock:], dsx[ir*nb*2+cb*2:]
					if nr == qPanel {
						im.qgemm16(mr, nblk, ai, k, di, nb*2, bb, sbb, mbb, c[ir*n+j0:], n, load)
						continue
					}
					im.qgemm16(mr, nblk, ai, k, di, nb*2, bb, sbb, mbb, tile[:], qPanel, false)
					for i := range mr {
						cr := c[(ir+i)*n+j0 : (ir+i)*n+j0+nr]
						for j := range cr {
							if load {
								cr[j] += tile[i*qPanel+j]
							} else {
								cr[j] = tile[i*qPanel+j]
							}
						}
					}
				}
			}
		}
	})
}
