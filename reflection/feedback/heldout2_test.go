package feedback

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// heldOut2SHA256 is the digest of the second frozen held-out set
// (testdata/general/HELDOUT2.md).
const heldOut2SHA256 = "f4d8163e0e6848d28e979b8a9a3a74f24502a8d90610835d7ef4f4bdf07477bc"

// TestSecondHeldOut scores the embedded interpreter on heldout2.jsonl, a
// set written from GUIDE.md alone by a labeller who saw none of the
// interpreter, its data or its results, and never used for tuning:
// polarity accuracy, correction precision, recall and F1 with Wilson 95%
// intervals, overall, per kind and per language, and the calibration of
// the confidence.
//
//	go test ./reflection/feedback -run TestSecondHeldOut -v
func TestSecondHeldOut(t *testing.T) {
	scoreFrozen(t, "testdata/general/heldout2.jsonl", heldOut2SHA256, heldOut2PolarityFloor, heldOut2F1Floor)
}

// Floors on heldout2, slightly under what embedded-6 scores there
// (polarity 0.903, correction F1 0.802 with P 0.845, R 0.763; ECE 0.069;
// embedded-5: 0.903, 0.790, ECE 0.077; embedded-4: 0.879, 0.786, ECE
// 0.091), so that a regression fails. The targets are 0.92 and
// 0.85. HELDOUT2.md allows three evaluations in all and all three are
// recorded in RESULTS.md: a later interpreter is measured on a new set.
const (
	heldOut2PolarityFloor = 0.89
	heldOut2F1Floor       = 0.79
)

// scoreFrozen checks a frozen held-out set's digest, scores the embedded
// interpreter on it, logs the report (overall, per kind and per language
// with Wilson intervals, and the calibration) and fails when a record
// went unscored or the overall polarity accuracy or correction F1 is
// under its floor.
func scoreFrozen(t *testing.T, path, digest string, polarityFloor, f1Floor float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != digest {
		t.Fatalf("%s has sha256 %s, the frozen set is %s", path, got, digest)
	}
	recs := loadGeneral(t, path)
	outs := evalGeneral(t, NewEmbedded(), recs)
	var rep strings.Builder
	table := func(title string, key func(generalRecord) string) {
		g := groupScores(recs, outs, key)
		ks := make([]string, 0, len(g))
		for k := range g {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		fmt.Fprintf(&rep, "\n%s\n%-30s | n polarity, correction P, R, F1 [Wilson 95%%]\n", title, "")
		for _, k := range ks {
			fmt.Fprintf(&rep, "%-30s | %s\n", k, g[k].cells())
		}
	}
	table("overall", func(generalRecord) string { return "all" })
	table("per kind", func(r generalRecord) string { return r.Kind })
	table("per language", func(r generalRecord) string { return r.Lang })
	all := groupScores(recs, outs, func(generalRecord) string { return "all" })["all"]
	ece, bins := reliability(all.outcomes, 10)
	fmt.Fprintf(&rep, "\ncalibration (confidence vs. polarity sign and correction both right): ECE %.3f\n", ece)
	for i, bin := range bins {
		if bin[0] > 0 {
			fmt.Fprintf(&rep, "[%.1f,%.1f) %5.0f %9.3f %9.3f\n", float64(i)/10, float64(i+1)/10, bin[0], bin[1], bin[2])
		}
	}
	t.Log("\n" + rep.String())
	if all.n != len(recs) {
		t.Fatalf("scored %d of %d records", all.n, len(recs))
	}
	if all.pol() < polarityFloor {
		t.Errorf("%s: polarity %.3f < floor %.3f", path, all.pol(), polarityFloor)
	}
	if _, _, f := all.prf(); f < f1Floor {
		t.Errorf("%s: correction F1 %.3f < floor %.3f", path, f, f1Floor)
	}
}
