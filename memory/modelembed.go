package memory

import (
	"context"
	"math"

	"citizen/model"
	"citizen/model/tokenizer"
)

// ModelEmbedder embeds text as the mean-pooled final hidden states of the
// embedded model (L2-normalised). Texts longer than MaxTokens (default
// 256) keep their last MaxTokens tokens.
type ModelEmbedder struct {
	Model     *model.Model
	Tok       *tokenizer.Tokenizer
	MaxTokens int
}

func (e *ModelEmbedder) Dim() int     { return e.Model.Config.HiddenSize }
func (e *ModelEmbedder) Name() string { return "model-mean-hidden-v1:" + e.Tok.Fingerprint() }

// Embed implements Embedder.
func (e *ModelEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	maxT := e.MaxTokens
	if maxT <= 0 {
		maxT = 256
	}
	maxT = min(maxT, e.Model.Config.MaxPositionEmbeddings)
	seqs := make([][]int, len(texts))
	for i, t := range texts {
		ids := append([]int{tokenizer.TokenBOS}, e.Tok.Encode(t)...)
		if len(ids) > maxT {
			ids = append([]int{tokenizer.TokenBOS}, ids[len(ids)-maxT+1:]...)
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
