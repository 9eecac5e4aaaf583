package distill

import (
	"context"

	"citizen/memory"
)

// Exemplar is an earlier well-graded exchange shown to the teacher.
type Exemplar struct {
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
}

// ExemplarFunc finds exemplars for an example that self-distillation
// revises (nil result: none).
type ExemplarFunc func(ctx context.Context, ex Example) ([]Exemplar, error)

// MemoryExemplars retrieves exemplars from the memory index the memory
// indexer fills (memory.InteractionsCollection): the best-graded
// interactions of the same tenant and type near the example's text (its
// last user message and answer, embedded with emb, which must be the
// indexer's embedder), reward at least minReward, the example's own
// interaction excluded, at most k.
func MemoryExemplars(ix memory.Index, emb memory.Embedder, k int, minReward float64) ExemplarFunc {
	return func(ctx context.Context, ex Example) ([]Exemplar, error) {
		vecs, err := emb.Embed(ctx, []string{lastUser(ex.Messages) + "\n" + ex.Answer.Content})
		if err != nil {
			return nil, err
		}
		hits, err := memory.Exemplars(ctx, ix, memory.InteractionsCollection, ex.Tenant, ex.Type, vecs[0], k+1, minReward)
		if err != nil {
			return nil, err
		}
		var out []Exemplar
		for _, h := range hits {
			if id, _ := h.Payload["_interaction"].(string); id == ex.Interaction {
				continue
			}
			p, _ := h.Payload["_prompt"].(string)
			a, _ := h.Payload["_answer"].(string)
			if p == "" || a == "" {
				continue
			}
			out = append(out, Exemplar{Prompt: p, Answer: a})
			if len(out) == k {
				break
			}
		}
		return out, nil
	}
}
