package model

import (
	"math"
	"math/rand/v2"
	"sort"

	"citizen/model/kernels"
)

// TokenLogprob is a token id with its log-probability.
type TokenLogprob struct {
	ID      int
	Logprob float32
}

// logSoftmaxT writes log-softmax(z/temp) of logits into lp (temp ≤ 0 means 1). Masked logits
// (−Inf) get −Inf.
func logSoftmaxT(lp, z []float32, temp float32) {
	if temp <= 0 {
		temp = 1
	}
	inv := 1 / temp
	mx := float32(math.Inf(-1))
	for _, v := range z {
		if v*inv > mx {
			mx = v * inv
		}
	}
	sum := kernels.ExpSum(lp[:len(z)], z, inv, mx) // lp as scratch
	lse := mx + float32(math.Log(sum))
	for i, v := range z {
		lp[i] = v*inv - lse
	}
}

// sampleToken draws a token from lp (log-probabilities at the request's temperature): greedy
// (argmax, lowest id on ties) when greedy; otherwise from the nucleus of the smallest set of
// most-likely tokens whose probability reaches topP (whole vocabulary when topP ≤ 0 or ≥ 1),
// renormalised. Exactly one uniform number is drawn from rng per call, so a request's random
// stream does not depend on anything but its own choices.
func sampleToken(lp []float32, greedy bool, topP float32, rng *rand.Rand, idxBuf *[]int) int {
	u := rng.Float64()
	if greedy {
		best := 0
		for i, v := range lp {
			if v > lp[best] {
				best = i
			}
		}
		return best
	}
	if topP > 0 && topP < 1 {
		idx := (*idxBuf)[:0]
		defer func() { *idxBuf = idx }()
		for i, v := range lp {
			if !math.IsInf(float64(v), -1) {
				idx = append(idx, i)
			}
		}
		sort.Slice(idx, func(a, b int) bool {
			if lp[idx[a]] != lp[idx[b]] {
				return lp[idx[a]] > lp[idx[b]]
			}
			return idx[a] < idx[b]
		})
		var cum float64
		n := 0
		for n < len(idx) {
			cum += math.Exp(float64(lp[idx[n]]))
			n++
			if cum >= float64(topP) {
				break
			}
		}
		target := u * cum
		var acc float64
		for _, i := range idx[:n] {
			acc += math.Exp(float64(lp[i]))
			if acc > target {
				return i
			}
		}
		return idx[n-1]
	}
	// lp is normalised, so the probabilities sum to 1 up to rounding; if u lands in that
	// rounding gap the last possible token is taken.
	target := u
	var acc float64
	last := 0
	for i, v := range lp {
		p := float64(expf(v))
		if p == 0 {
			continue
		}
		last = i
		acc += p
		if acc > target {
			return i
		}
	}
	return last
}

// topLogprobs returns the k most likely tokens of lp, most likely first (ties: lower id first).
func topLogprobs(lp []float32, k int) []TokenLogprob {
	if k <= 0 {
		return nil
	}
	k = min(k, len(lp))
	top := make([]TokenLogprob, 0, k+1)
	for i, v := range lp {
		if len(top) == k && v <= top[k-1].Logprob {
			continue
		}
		j := len(top)
		top = append(top, TokenLogprob{})
		for j > 0 && top[j-1].Logprob < v {
			top[j] = top[j-1]
			j--
		}
		top[j] = TokenLogprob{ID: i, Logprob: v}
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}
