package rollout

import "math"

// moments are running sums of one metric on one arm. Values can be
// removed again (a later evaluation of the same interaction replaces the
// earlier one).
type moments struct {
	n          int
	sum, sumsq float64
}

func (m *moments) add(x float64) { m.n++; m.sum += x; m.sumsq += x * x }

func (m *moments) remove(x float64) { m.n--; m.sum -= x; m.sumsq -= x * x }

func (m moments) mean() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

// withEnds is m with one reward of +1 and one of -1 added, the ends of
// the reward range (pooledVar).
func (m moments) withEnds() moments {
	return moments{n: m.n + 2, sum: m.sum, sumsq: m.sumsq + 2}
}

// variance is the sample variance (n-1), 0 for fewer than two values.
func (m moments) variance() float64 {
	if m.n < 2 {
		return 0
	}
	mu := m.mean()
	v := (m.sumsq - float64(m.n)*mu*mu) / float64(m.n-1)
	if v < 0 {
		return 0
	}
	return v
}

// interval is a confidence sequence on the difference of means
// (candidate minus stable) at one look.
type interval struct {
	Diff, Lo, Hi float64
}

// mixtureCS returns the normal-mixture confidence sequence for the
// difference of the means of cand and stab at level 1-alpha, with mixture
// standard deviation tau (in the metric's units): csOf with V the
// estimated variance of the difference of the sample means (diffVar).
// binary marks 0/1 metrics, whose difference lies in [-1, 1].
func mixtureCS(cand, stab moments, tau, alpha float64, binary bool) interval {
	iv := csOf(cand.mean()-stab.mean(), diffVar(cand, stab, binary), tau, alpha)
	if binary { // a difference of rates lies in [-1, 1]
		iv.Lo, iv.Hi = max(iv.Lo, -1), min(iv.Hi, 1)
	}
	return iv
}

// diffVar is the estimated variance of the difference of the sample
// means of cand and stab. binary marks 0/1 metrics, whose variance is
// smoothed ((k+½)/(n+1)) so that an arm with no events still has one.
func diffVar(cand, stab moments, binary bool) float64 {
	vc, vs := cand.variance(), stab.variance()
	if binary {
		vc, vs = smoothedBernoulli(cand), smoothedBernoulli(stab)
	}
	return vc/float64(cand.n) + vs/float64(stab.n)
}

// csOf is the normal-mixture confidence sequence around the difference d
// whose estimate has variance v: the set of differences theta whose
// mixture likelihood ratio
//
//	sqrt(v/(v+tau²)) · exp(tau²(d-theta)² / (2v(v+tau²)))
//
// stays below 1/alpha, d ± csHalf(v, tau, alpha).
func csOf(d, v, tau, alpha float64) interval {
	half := csHalf(v, tau, alpha)
	return interval{Diff: d, Lo: d - half, Hi: d + half}
}

// csHalf is the half-width of csOf: sqrt(v(v+tau²)/tau² · (2 ln(1/alpha)
// + ln((v+tau²)/v))).
func csHalf(v, tau, alpha float64) float64 {
	v = max(v, 1e-12)
	t2 := tau * tau
	return math.Sqrt(v * (v + t2) / t2 * (2*math.Log(1/alpha) + math.Log((v+t2)/v)))
}

func smoothedBernoulli(m moments) float64 {
	p := (m.sum + 0.5) / (float64(m.n) + 1)
	return p * (1 - p)
}
