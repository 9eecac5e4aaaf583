package memory

import (
	"context"
	"sort"
)

// TypeGuess is an inferred interaction type.
type TypeGuess struct {
	Type       string  `json:"type"`
	Confidence float64 `json:"confidence"`
	Neighbours int     `json:"neighbours"`
}

// Unknown is the type given when no label wins with enough confidence.
const Unknown = "unknown"

// InferType votes among the k nearest labelled points (payload
// label_source "given") of the tenant, weighting each by its similarity.
// The confidence is the winning type's share of the vote; below
// minConfidence (or with no neighbours) the answer is Unknown.
func InferType(ctx context.Context, ix Index, collection, tenant string, v []float32, k int, minConfidence float64) (TypeGuess, error) {
	f := Filter{Must: []Condition{Eq("label_source", "given")}}
	if tenant != "" {
		f.Must = append(f.Must, Eq("tenant", tenant))
	}
	hits, err := ix.Search(ctx, collection, v, k, f)
	if err != nil {
		return TypeGuess{}, err
	}
	votes := map[string]float64{}
	var total float64
	for _, h := range hits {
		t, _ := h.Payload["type"].(string)
		w := float64(max(h.Score, 0)) + 1e-6
		votes[t] += w
		total += w
	}
	best, bestW := Unknown, 0.0
	types := make([]string, 0, len(votes))
	for t := range votes {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		if votes[t] > bestW {
			best, bestW = t, votes[t]
		}
	}
	g := TypeGuess{Type: best, Neighbours: len(hits)}
	if total > 0 {
		g.Confidence = bestW / total
	}
	if g.Confidence < minConfidence || len(hits) == 0 {
		g.Type = Unknown
	}
	return g, nil
}

// NearDuplicates returns the points at least threshold similar to v
// (cosine), best first, among the k nearest passing f.
func NearDuplicates(ctx context.Context, ix Index, collection string, v []float32, k int, threshold float32, f Filter) ([]Hit, error) {
	hits, err := ix.Search(ctx, collection, v, k, f)
	if err != nil {
		return nil, err
	}
	out := hits[:0]
	for _, h := range hits {
		if h.Score >= threshold {
			out = append(out, h)
		}
	}
	return out, nil
}

// Exemplars returns the best-graded points near v of the same tenant and
// type with reward at least minReward, best reward first among the k
// nearest.
func Exemplars(ctx context.Context, ix Index, collection, tenant, typ string, v []float32, k int, minReward float64) ([]Hit, error) {
	f := Filter{Must: []Condition{Eq("type", typ), Range("reward", minReward, 1)}}
	if tenant != "" {
		f.Must = append(f.Must, Eq("tenant", tenant))
	}
	hits, err := ix.Search(ctx, collection, v, k, f)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(hits, func(i, j int) bool {
		ri, _ := hits[i].Payload["reward"].(float64)
		rj, _ := hits[j].Payload["reward"].(float64)
		return ri > rj
	})
	return hits, nil
}
