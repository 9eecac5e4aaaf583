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
	scoreSet(t, "testdata/general/heldout3.jsonl", heldOut3SHA256, "held out (never trained or tuned on)", heldOut3PolarityFloor, heldOut3F1Floor)
}

// Floors on heldout3, slightly under what embedded-8 scores there
// (polarity 0.960, correction F1 0.874 with P 0.906, R 0.843; ECE 0.053;
// embedded-7: 0.944, 0.880; embedded-6: 0.906, 0.823), so that a
// regression fails. HELDOUT3.md allows three evaluations in all, each
// recorded in RESULTS.md; all three are used, so heldout3 no longer
// measures generalisation to a model tuned after embedded-8.
const (
	heldOut3PolarityFloor = 0.95
	heldOut3F1Floor       = 0.86
)

// scoreSet checks a labelled set's digest, scores the embedded
// interpreter on it, logs the report (what the set is to the model,
// overall, per kind and per language with Wilson intervals, and the
// calibration) and fails when a record went unscored or the overall
// polarity accuracy or correction F1 is under its floor.
func scoreSet(t *testing.T, path, digest, role string, polarityFloor, f1Floor float64) {
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
	fmt.Fprintf(&rep, "%s: %s, interpreter %s\n", path, role, EmbeddedVersion)
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
