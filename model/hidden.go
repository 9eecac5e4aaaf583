package model

import "fmt"

// MeanHidden runs the base model (with lora, or nil) over each sequence
// and returns the mean of its final-norm hidden states over the
// sequence's tokens: one vector of HiddenSize per sequence, for use as a
// text embedding. Safe for concurrent use with other readers of m.
func (m *Model) MeanHidden(seqs [][]int, lora *Adapter) ([][]float32, error) {
	b := &Batch{}
	for _, s := range seqs {
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: empty sequence", ErrBatch)
		}
		b.SeqLens = append(b.SeqLens, len(s))
		b.Tokens = append(b.Tokens, s...)
	}
	b.Targets = make([]int, len(b.Tokens))
	for i := range b.Targets {
		b.Targets[i] = -1
	}
	if err := m.check(b, lora, false); err != nil {
		return nil, err
	}
	var a acts
	m.forward(&a, b, lora, false, false)
	C := m.Config.HiddenSize
	out := make([][]float32, len(seqs))
	t := 0
	for i, s := range seqs {
		v := make([]float32, C)
		for j := 0; j < len(s); j++ {
			row := a.lnf[(t+j)*C : (t+j+1)*C]
			for k := range v {
				v[k] += row[k]
			}
		}
		inv := 1 / float32(len(s))
		for k := range v {
			v[k] *= inv
		}
		out[i] = v
		t += len(s)
	}
	return out, nil
}
