package model

import "math"

// expf is a float32 exp with relative error below 2e-7 over the float32 range (Cody–Waite range
// reduction and a degree-6 polynomial); exp(-Inf) = 0. It is several times faster than math.Exp.
func expf(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	if x > 88 {
		return float32(math.Exp(float64(x)))
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	// e^r on [-ln2/2, ln2/2]
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	e := p*r*r + r + 1
	return e * math.Float32frombits(uint32(int32(n)+127)<<23)
}
