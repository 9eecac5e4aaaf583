package feedback

import "math"

// lbfgs minimises f (which writes its gradient into g) from x with
// limited-memory BFGS (m = 10) and a backtracking Armijo line search. It
// is deterministic and stops after maxIter iterations or when the
// gradient's max-norm falls below tol.
func lbfgs(f func(x, g []float64) float64, x []float64, maxIter int, tol float64) []float64 {
	n := len(x)
	const m = 10
	g := make([]float64, n)
	fx := f(x, g)
	var ss, ys [][]float64
	var rhos []float64
	d := make([]float64, n)
	xn := make([]float64, n)
	gn := make([]float64, n)
	alpha := make([]float64, m)
	for it := 0; it < maxIter; it++ {
		if maxAbs(g) < tol {
			break
		}
		// two-loop recursion
		copy(d, g)
		for k := len(ss) - 1; k >= 0; k-- {
			alpha[k] = rhos[k] * dot(ss[k], d)
			axpy(-alpha[k], ys[k], d)
		}
		if len(ss) > 0 {
			k := len(ss) - 1
			gamma := dot(ss[k], ys[k]) / dot(ys[k], ys[k])
			scale(gamma, d)
		} else {
			scale(1/math.Max(1, maxAbs(g)), d)
		}
		for k := 0; k < len(ss); k++ {
			beta := rhos[k] * dot(ys[k], d)
			axpy(alpha[k]-beta, ss[k], d)
		}
		scale(-1, d)
		gd := dot(g, d)
		if gd >= 0 {
			// not a descent direction: restart with steepest descent
			ss, ys, rhos = nil, nil, nil
			copy(d, g)
			scale(-1/math.Max(1, maxAbs(g)), d)
			gd = dot(g, d)
		}
		step := 1.0
		var fn float64
		ok := false
		for ls := 0; ls < 40; ls++ {
			for i := range x {
				xn[i] = x[i] + step*d[i]
			}
			fn = f(xn, gn)
			if fn <= fx+1e-4*step*gd {
				ok = true
				break
			}
			step *= 0.5
		}
		if !ok {
			break
		}
		s := make([]float64, n)
		y := make([]float64, n)
		for i := range x {
			s[i] = xn[i] - x[i]
			y[i] = gn[i] - g[i]
		}
		sy := dot(s, y)
		copy(x, xn)
		copy(g, gn)
		conv := math.Abs(fx-fn) <= 1e-10*math.Max(1, math.Abs(fx))
		fx = fn
		if sy > 1e-12 {
			if len(ss) == m {
				ss, ys, rhos = ss[1:], ys[1:], rhos[1:]
			}
			ss = append(ss, s)
			ys = append(ys, y)
			rhos = append(rhos, 1/sy)
		}
		if conv {
			break
		}
	}
	return x
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func axpy(a float64, x, y []float64) {
	for i := range x {
		y[i] += a * x[i]
	}
}

func scale(a float64, x []float64) {
	for i := range x {
		x[i] *= a
	}
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		if a := math.Abs(v); a > m {
			m = a
		}
	}
	return m
}
