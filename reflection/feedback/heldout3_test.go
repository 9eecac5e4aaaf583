package feedback

import "testing"

// heldOut3SHA256 is the digest of the third frozen held-out set
// (testdata/general/HELDOUT3.md).
const heldOut3SHA256 = "2801174bd190355bc5ab79b2f9000c46c8278cb8a8e55f53deaf52ab646d9247"

// TestThirdHeldOut scores the embedded interpreter on heldout3.jsonl,
// written from GUIDE.md alone by another labeller who saw none of the
// interpreter, its data or its results, and never used for tuning (500
// comments, 7 languages, every kind of the guide).
//
//	go test ./reflection/feedback -run TestThirdHeldOut -v
func TestThirdHeldOut(t *testing.T) {
	scoreFrozen(t, "testdata/general/heldout3.jsonl", heldOut3SHA256, heldOut3PolarityFloor, heldOut3F1Floor)
}

// Floors on heldout3, slightly under what embedded-6 scores there
// (polarity 0.906, correction F1 0.823 with P 0.884, R 0.770; ECE 0.067),
// so that a regression fails. HELDOUT3.md allows three evaluations in all,
// each recorded in RESULTS.md.
const (
	heldOut3PolarityFloor = 0.89
	heldOut3F1Floor       = 0.80
)
