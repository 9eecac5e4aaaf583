package kernels

// Products of many rows of A with a QMatrix (prefill, training) on the packed float32 GEMM,
// with W's blocks dequantized straight into the packed panels: no dequantized copy of W, no
// second packing pass, A read in place and C written in place.

// dequantBlocks writes blocks [b0, b1) of row r of w as float32 into dst ((b1−b0)·32 floats).
func dequantBlocks(w *QMatrix, dst []float32, r, b0, b1 int) {
	if b0 == b1 {
		return
	}
	row := w.data[r*w.rowBytes : (r+1)*w.rowBytes]
	nb, n := w.nb, b1-b0
	_ = dst[n*QBlock-1]
	switch w.Type {
	case Q4_1:
		dequantQ4_1AVX2(&dst[0], &row[2*b0], &row[2*nb+2*b0], &row[4*nb+16*b0], n)
	case Q4_0:
		dequantQ4_0AVX2(&dst[0], &row[2*b0], &row[2*nb+16*b0], n)
	case Q8_0:
		dequantQ8_0AVX2(&dst[0], &row[2*b0], &row[2*nb+32*b0], n)
	default:
		panic("kernels: dequant: unknown type")
	}
}

// qnt computes C[:, j0:j1] = A·W[j0:j1, :]ᵀ (+= when acc) for A [m×k], W [n×k] quantized,
// C [m×n]: MatMulQ's many-row path. Each packed block of Wᵀ (kcBlock of k × ncBlock of W's
// rows) is made by dequantizing up to NR rows' blocks into a small tile and transposing it
// into its panel; the microkernels then run as in gemm, with C written in place.
func (s *simd) qnt(c, a []float32, w *QMatrix, m int, acc bool, j0, j1 int) {
	k, n := w.Cols, w.Rows
	W := s.lanes
	NR := s.nvMax * W
	MR := s.mr
	sc := getScratch()
	defer putScratch(sc)
	qs := qScratchPool.Get().(*qScratch)
	defer qScratchPool.Put(qs)
	tmp := growF(&qs.w, NR*kcBlock)
	for jc := j0; jc < j1; jc += ncBlock {
		nc := min(ncBlock, j1-jc)
		for pc := 0; pc < k; pc += kcBlock {
			kc := min(kcBlock, k-pc) // a multiple of 32
			load := acc || pc > 0
			for q := 0; q < nc; q += NR {
				wr := min(NR, nc-q)
				wv := (wr + W - 1) / W * W
				pan := sc.b[q*kc : q*kc+wv*kc]
				t := tmp[:wv*kc]
				for r := range wr {
					dequantBlocks(w, t[r*kc:(r+1)*kc], jc+q+r, pc/QBlock, (pc+kc)/QBlock)
				}
				clear(t[wr*kc:])
				for jj := 0; jj < wv; jj += 8 {
					transpose8(&t[jj*kc], kc*4, &pan[jj], wv*4, kc/8)
				}
			}
			for ir := 0; ir < m; ir += MR {
				mr := min(MR, m-ir)
				ap := &a[ir*k+pc]
				_ = a[(ir+mr-1)*k+pc+kc-1]
				for jr := jc; jr < jc+nc; jr += NR {
					nr := min(NR, jc+nc-jr)
					nrv := (nr + W - 1) / W * W
					bp := &sc.b[(jr-jc)*kc]
					if nr == nrv {
						_ = c[(ir+mr-1)*n+jr+nr-1] // bounds for the assembly
						s.kern(mr, nr/W)(kc, ap, 4, k*4, bp, nr*4, &c[ir*n+jr], n*4, load)
						continue
					}
					t := sc.tile[:mr*nrv]
					s.kern(mr, nrv/W)(kc, ap, 4, k*4, bp, nrv*4, &t[0], nrv*4, false)
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

// qnn computes C[:, j0:j1] = A·W[:, j0:j1] (+= when acc) for A [m×n], W [n×k] quantized,
// C [m×k]: MatMulQNN. A packed block of W (kcBlock of its rows × ncBlock of its columns) is its rows'
// blocks dequantized straight into the panels (NR, a multiple of 32 wide); A is read in
// place. j0 and j1 are multiples of 32.
func (s *simd) qnn(c, a []float32, w *QMatrix, m int, acc bool, j0, j1 int) {
	k, n := w.Cols, w.Rows
	W := s.lanes
	NR := s.nvMax * W
	MR := s.mr
	sc := getScratch()
	defer putScratch(sc)
	for pc := 0; pc < n; pc += kcBlock {
		kc := min(kcBlock, n-pc)
		load := acc || pc > 0
		for jc := j0; jc < j1; jc += ncBlock {
			nc := min(ncBlock, j1-jc) // a multiple of 32
			for q := 0; q < nc; q += NR {
				wv := min(NR, nc-q) // a multiple of 32, so of W
				pan := sc.b[q*kc : q*kc+wv*kc]
				b0 := (jc + q) / QBlock
				for p := range kc {
					dequantBlocks(w, pan[p*wv:(p+1)*wv], pc+p, b0, b0+wv/QBlock)
				}
			}
			for ir := 0; ir < m; ir += MR {
				mr := min(MR, m-ir)
				ap := &a[ir*n+pc]
				_ = a[(ir+mr-1)*n+pc+kc-1]
				for jr := jc; jr < jc+nc; jr += NR {
					nr := min(NR, jc+nc-jr)
					_ = c[(ir+mr-1)*k+jr+nr-1] // bounds for the assembly
					s.kern(mr, nr/W)(kc, ap, 4, n*4, &sc.b[(jr-jc)*kc], nr*4, &c[ir*k+jr], k*4, load)
				}
			}
		}
	}
}
