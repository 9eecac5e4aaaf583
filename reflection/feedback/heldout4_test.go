package feedback

import "testing"

// heldOut4SHA256 is the digest of the fourth frozen held-out set
// (testdata/general/HELDOUT4.md).
const heldOut4SHA256 = "9322a78f752779c889b65230f8c891a3cfd0bf93274f00aa63bbf73981910523"

// TestFourthHeldOut scores the embedded interpreter on heldout4.jsonl,
// written from GUIDE.md and HELDOUT3.md's procedure alone by another
// labeller who saw none of the interpreter, its data or its results, in
// domains apart from the other sets', and never used for tuning (336
// comments, 12 of each of the guide's 28 kinds, 7 languages).
//
//	go test ./reflection/feedback -run TestFourthHeldOut -v
func TestFourthHeldOut(t *testing.T) {
	scoreSet(t, "testdata/general/heldout4.jsonl", heldOut4SHA256, "held out (never trained or tuned on)", heldOut4PolarityFloor, heldOut4F1Floor)
}

// Floors on heldout4, slightly under what embedded-8 scores there
// (polarity 0.961, correction F1 0.876 with P 0.914, R 0.842; ECE 0.052;
// its first evaluation, RESULTS.md), so that a regression fails. HELDOUT4.md
// allows three evaluations in all, each recorded in RESULTS.md.
const (
	heldOut4PolarityFloor = 0.95
	heldOut4F1Floor       = 0.86
)
