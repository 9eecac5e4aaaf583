package model

import (
	"math"
	"testing"
)

// TestMeanHiddenIsPerSequence: packing sequences together gives each the
// same vector as running it alone (attention never crosses sequences), and
// the result is the mean over positions.
func TestMeanHiddenIsPerSequence(t *testing.T) {
	c := Tiny3M()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 64, 32, 48, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 4, 2, 8, 64
	m, err := NewRandom(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	a, b := []int{1, 2, 3, 4, 5}, []int{9, 8, 7}
	both, err := m.MeanHidden([][]int{a, b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	alone, _ := m.MeanHidden([][]int{b}, nil)
	for k := range alone[0] {
		if d := math.Abs(float64(both[1][k] - alone[0][k])); d > 1e-5 {
			t.Fatalf("packed and alone differ at %d by %g", k, d)
		}
	}
	if len(both[0]) != c.HiddenSize {
		t.Fatalf("size %d", len(both[0]))
	}
	if _, err := m.MeanHidden([][]int{{}}, nil); err == nil {
		t.Fatal("empty sequence accepted")
	}
}
