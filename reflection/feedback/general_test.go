package feedback

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
)

// generalRecord is one record of the general labelled set
// (testdata/general, see GUIDE.md).
type generalRecord struct {
	ID         string `json:"id"`
	Lang       string `json:"lang"`
	Kind       string `json:"kind"`
	Question   string `json:"question"`
	Answer     string `json:"answer"`
	Text       string `json:"text"`
	Polarity   int    `json:"polarity"`
	Correction string `json:"correction"`
	Split      string `json:"split"`
}

// heldOutSHA256 is the digest of the frozen held-out split (SPLIT.md).
const heldOutSHA256 = "2146eaec6766f4d3769ea87752205dd7f770d2dcda2ed3c2e149ef2fc432e737"

func loadGeneral(t testing.TB, path string) []generalRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []generalRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r generalRecord
		dec := json.NewDecoder(bytesReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		if r.Polarity < -1 || r.Polarity > 1 {
			t.Fatalf("%s:%d: polarity %d", path, line, r.Polarity)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wilson is the Wilson score 95% interval of k successes in n trials
// (n may be fractional, see setScores.f1Interval).
func wilson(k, n float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959964
	p := k / n
	den := 1 + z*z/n
	c := (p + z*z/(2*n)) / den
	h := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n)) / den
	return math.Max(0, c-h), math.Min(1, c+h)
}

// setScores are the counts of one group of comments.
type setScores struct {
	n, polOK, tp, fp, fn int
	outcomes             []outcome
}

func (s *setScores) add(o outcome) {
	s.n++
	if o.polOK {
		s.polOK++
	}
	s.tp += o.tp
	s.fp += o.fp
	s.fn += o.fn
	s.outcomes = append(s.outcomes, o)
}

func (s *setScores) pol() float64 { return float64(s.polOK) / math.Max(1, float64(s.n)) }

func (s *setScores) prf() (p, r, f float64) { return f1(s.tp, s.fp, s.fn) }

// f1Interval: F1 = tp / (tp + (fp+fn)/2), a share of tp among
// tp + (fp+fn)/2 "trials"; its Wilson interval is an approximation.
func (s *setScores) f1Interval() (lo, hi float64) {
	return wilson(float64(s.tp), float64(s.tp)+float64(s.fp+s.fn)/2)
}

// fmtCell writes "0.912 [0.88,0.94]" or "-" when there is nothing to
// score.
func fmtCell(v, lo, hi float64, ok bool) string {
	if !ok {
		return fmt.Sprintf("%17s", "-")
	}
	return fmt.Sprintf("%.3f [%.2f,%.2f]", v, lo, hi)
}

func (s *setScores) cells() string {
	plo, phi := wilson(float64(s.polOK), float64(s.n))
	p, r, f := s.prf()
	prlo, prhi := wilson(float64(s.tp), float64(s.tp+s.fp))
	rlo, rhi := wilson(float64(s.tp), float64(s.tp+s.fn))
	flo, fhi := s.f1Interval()
	return fmt.Sprintf("%4d %s %s %s %s", s.n, fmtCell(s.pol(), plo, phi, s.n > 0),
		fmtCell(p, prlo, prhi, s.tp+s.fp > 0), fmtCell(r, rlo, rhi, s.tp+s.fn > 0), fmtCell(f, flo, fhi, s.tp+s.fp+s.fn > 0))
}

// evalGeneral interprets every record with its question and answer.
func evalGeneral(t *testing.T, in Interpreter, recs []generalRecord) []outcome {
	t.Helper()
	out := make([]outcome, len(recs))
	for i, r := range recs {
		got, err := in.Interpret(context.Background(), Input{Text: r.Text, AnswerText: r.Answer, PromptText: r.Question})
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		d := decision{class: sign(got.Polarity), correction: got.Correction, confidence: got.Confidence}
		o := score(d, r.Polarity, NormalizeCorrection(r.Correction))
		o.conf = got.Confidence
		out[i] = o
	}
	return out
}

// groupScores sums outcomes per key.
func groupScores(recs []generalRecord, outs []outcome, key func(generalRecord) string) map[string]*setScores {
	m := map[string]*setScores{}
	for i, r := range recs {
		k := key(r)
		if m[k] == nil {
			m[k] = &setScores{}
		}
		m[k].add(outs[i])
	}
	return m
}

// Floors the general set must stay above: slightly under the figures
// measured when the model was committed (see the report of
// TestGeneralSet), so that a regression fails. Both of the set's splits
// train the model (since embedded-5, with heldout2.jsonl and train4.jsonl
// since embedded-7 and train5.jsonl since embedded-8), so these are
// in-sample figures; the held-out measure is heldout3.jsonl
// (TestThirdHeldOut).
//
// Measured with embedded-8 (testdata/model.json of this commit): train.jsonl
// polarity 1.000, correction F1 0.971; heldout.jsonl polarity 1.000, F1
// 0.960. 5-fold cross-validation over the training files (TestTrainModel,
// n=2,830): polarity 0.941, F1 0.902. See testdata/general/RESULTS.md.
const (
	generalTrainPolarityFloor = 0.98
	generalTrainF1Floor       = 0.94
	generalHeldPolarityFloor  = 0.98
	generalHeldF1Floor        = 0.90
)

// TestGeneralSet scores the embedded interpreter on the general labelled
// set: train.jsonl and heldout.jsonl side by side (both in-sample: the
// model is trained on both; heldout.jsonl was the held-out split until
// embedded-4, and its digest still pins it), per kind and per language, with
// polarity accuracy and correction precision, recall and F1 and their
// Wilson 95% intervals, and the calibration of the confidence on the
// held-out split (ECE and a 10-bin reliability table).
//
//	go test ./reflection/feedback -run TestGeneralSet -v
//
// FEEDBACK_TRAIN_ONLY=1 scores train.jsonl alone (for development, so
// that the held-out split is not looked at).
func TestGeneralSet(t *testing.T) {
	train := loadGeneral(t, "testdata/general/train.jsonl")
	trainOnly := os.Getenv("FEEDBACK_TRAIN_ONLY") == "1"
	var held []generalRecord
	if !trainOnly {
		b, err := os.ReadFile("testdata/general/heldout.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != heldOutSHA256 {
			t.Fatalf("testdata/general/heldout.jsonl has sha256 %s, the frozen split is %s (SPLIT.md)", got, heldOutSHA256)
		}
		held = loadGeneral(t, "testdata/general/heldout.jsonl")
		ids := map[string]bool{}
		for _, r := range train {
			ids[r.ID] = true
		}
		for _, r := range held {
			if ids[r.ID] || r.Split != "heldout" {
				t.Fatalf("%s: held-out record is also in train or has split %q", r.ID, r.Split)
			}
		}
	}
	e := NewEmbedded()
	trOut := evalGeneral(t, e, train)
	hoOut := evalGeneral(t, e, held)

	var b strings.Builder
	header := fmt.Sprintf("%-30s | %s | %s\n", "", "train (in-sample): n polarity, correction P, R, F1 [Wilson 95%]", "heldout.jsonl (in-sample): n polarity, correction P, R, F1 [Wilson 95%]")
	table := func(title string, key func(generalRecord) string) {
		tr := groupScores(train, trOut, key)
		ho := groupScores(held, hoOut, key)
		keys := map[string]bool{}
		for k := range tr {
			keys[k] = true
		}
		for k := range ho {
			keys[k] = true
		}
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		fmt.Fprintf(&b, "\n%s\n%s", title, header)
		for _, k := range ks {
			a, c := tr[k], ho[k]
			if a == nil {
				a = &setScores{}
			}
			if c == nil {
				c = &setScores{}
			}
			fmt.Fprintf(&b, "%-30s | %s | %s\n", k, a.cells(), c.cells())
		}
	}
	all := func(generalRecord) string { return "all" }
	table("overall", all)
	table("per kind", func(r generalRecord) string { return r.Kind })
	table("per language", func(r generalRecord) string { return r.Lang })

	tAll, hAll := groupScores(train, trOut, all)["all"], groupScores(held, hoOut, all)["all"]
	if hAll == nil {
		hAll = &setScores{}
	}
	// calibration and the uncertainty threshold
	calib := func(name string, s *setScores) {
		if s.n == 0 {
			return
		}
		ece, bins := reliability(s.outcomes, 10)
		fmt.Fprintf(&b, "\ncalibration on %s (confidence vs. polarity sign and correction both right): ECE %.3f\n", name, ece)
		fmt.Fprintf(&b, "%-11s %5s %9s %9s\n", "bin", "n", "mean conf", "accuracy")
		for i, bin := range bins {
			if bin[0] == 0 {
				fmt.Fprintf(&b, "[%.1f,%.1f) %5d %9s %9s\n", float64(i)/10, float64(i+1)/10, 0, "-", "-")
				continue
			}
			fmt.Fprintf(&b, "[%.1f,%.1f) %5.0f %9.3f %9.3f\n", float64(i)/10, float64(i+1)/10, bin[0], bin[1], bin[2])
		}
		kept, right := 0, 0
		for _, o := range s.outcomes {
			if o.conf >= UncertainBelow {
				kept++
				if o.polOK && o.corrOK {
					right++
				}
			}
		}
		lo, hi := wilson(float64(right), float64(kept))
		fmt.Fprintf(&b, "confidence >= UncertainBelow (%.2f): %d of %d kept (%.1f%%), fully right %.3f [%.2f,%.2f]\n",
			UncertainBelow, kept, s.n, 100*float64(kept)/float64(s.n), float64(right)/math.Max(1, float64(kept)), lo, hi)
	}
	var mf modelFile
	if err := json.Unmarshal(modelJSON, &mf); err == nil && mf.CV != nil {
		fmt.Fprintf(&b, "\ntrain, 5-fold cross-validation (testdata/model.json): polarity %.3f, correction P %.3f R %.3f F1 %.3f, ECE %.3f\n",
			mf.CV["polarity_accuracy"], mf.CV["correction_precision"], mf.CV["correction_recall"], mf.CV["correction_f1"], mf.CV["ece"])
	}
	calib("train (in-sample)", tAll)
	calib("heldout.jsonl (in-sample)", hAll)
	t.Log("\n" + b.String())

	if tAll.pol() < generalTrainPolarityFloor {
		t.Errorf("train polarity %.3f < floor %.3f", tAll.pol(), generalTrainPolarityFloor)
	}
	if _, _, f := tAll.prf(); f < generalTrainF1Floor {
		t.Errorf("train correction F1 %.3f < floor %.3f", f, generalTrainF1Floor)
	}
	if trainOnly {
		return
	}
	if hAll.pol() < generalHeldPolarityFloor {
		t.Errorf("held-out polarity %.3f < floor %.3f", hAll.pol(), generalHeldPolarityFloor)
	}
	if _, _, f := hAll.prf(); f < generalHeldF1Floor {
		t.Errorf("held-out correction F1 %.3f < floor %.3f", f, generalHeldF1Floor)
	}
}
