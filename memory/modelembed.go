package memory

import (
	"context"
	"math"

	"citizen/model"
)

// TextTokenizer is what ModelEmbedder needs of a tokenizer (model/chat's
// Format has it).
type TextTokenizer interface {
	Encode(text string) []int
	BOS() int // -1: none
	Name() string
}

// ModelEmbedder embeds text as the mean-pooled final hidden states of the
// embedded model (L2-normalised). Texts longer than MaxTokens (default
// 256) keep their last MaxTokens tokens.
type ModelEmbedder struct {
	Model     *model.Model
	Tok       TextTokenizer
	MaxTokens int
}

func (e *ModelEmbedder) Dim() int     { return e.Model.Config.HiddenSize }
func (e *ModelEmbedder) Name() string { return "model-mean-hidden-v1:" + e.Tok.Name() }

// Embed implements Embedder.
func (e *ModelEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	maxT := e.MaxTokens
	if maxT <= 0 {
		maxT = 256
	}
	maxT = min(maxT, e.Model.Config.MaxPositionEmbeddings)
	seqs := make([][]int, len(texts))
	var prefix []int
	if b := e.Tok.BOS(); b >= 0 {
		prefix = []int{b}
	}
	for i, t := range texts {
		ids := append(append([]int(nil), prefix...), e.Tok.Encode(t)...)
		if len(ids) > maxT {
			ids = append(append([]int(nil), prefix...), ids[len(ids)-maxT+len(prefix):]...)
		}
		seqs[i] = ids
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vecs, err := e.Model.MeanHidden(seqs, nil)
	if err != nil {
		return nil, err
	}
	for _, v := range vecs {
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		if ss == 0 {
			v[0] = 1
			continue
		}
		inv := float32(1 / math.Sqrt(ss))
		for k := range v {
			v[k] *= inv
		}
	}
	return vecs, nil
}
