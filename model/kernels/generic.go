package kernels

// Portable pure-Go implementations. They are the reference for the tests and
// the fallback on CPUs without AVX2+FMA. Each computes the sub-block
// C[i0:i1, j0:j1] of the full product; the full shapes give the strides.

// genericMM computes the sub-block [i0,i1)×[j0,j1) of C for the given layout.
func genericMM(kind int, c, a, b []float32, m, k, n int, acc bool, i0, i1, j0, j1 int) {
	switch kind {
	case kindNT:
		for i := i0; i < i1; i++ {
			ar := a[i*k : i*k+k]
			cr := c[i*n : i*n+n]
			for j := j0; j < j1; j++ {
				s := dotGeneric(ar, b[j*k:j*k+k])
				if acc {
					cr[j] += s
				} else {
					cr[j] = s
				}
			}
		}
	case kindNN:
		for i := i0; i < i1; i++ {
			cr := c[i*n+j0 : i*n+j1]
			if !acc {
				clear(cr)
			}
			ar := a[i*k : i*k+k]
			for p, av := range ar {
				if av != 0 {
					axpyGeneric(av, b[p*n+j0:p*n+j1], cr)
				}
			}
		}
	case kindTN:
		for i := i0; i < i1; i++ {
			cr := c[i*n+j0 : i*n+j1]
			if !acc {
				clear(cr)
			}
			for p := 0; p < k; p++ {
				if av := a[p*m+i]; av != 0 {
					axpyGeneric(av, b[p*n+j0:p*n+j1], cr)
				}
			}
		}
	}
}

func dotGeneric(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGeneric(alpha float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y[i] += alpha * x[i]
		y[i+1] += alpha * x[i+1]
		y[i+2] += alpha * x[i+2]
		y[i+3] += alpha * x[i+3]
	}
	for ; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}

func scaleGeneric(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}
