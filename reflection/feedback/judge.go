package feedback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
)

// JudgeConfig configures a Judge.
type JudgeConfig struct {
	// LLM is the upstream judge (required).
	LLM *LLM
	// Reference is the interpreter the votes are compared with (default
	// NewEmbedded()).
	Reference Interpreter
	// Votes is the number of readings asked of the judge (default 3).
	Votes int
	// Temperature of each vote when Votes > 1 (default 0.7); a single vote
	// is read at the LLM's own temperature.
	Temperature float64
}

// Judge is the LLM interpreter path: it asks the upstream model for
// Votes readings (in parallel, each with its own seed), takes the
// majority polarity sign and, among the votes with that sign, the
// majority correction, and combines the result with the reference
// interpreter (the embedded one):
//
//   - the votes and the reference agree (polarity sign and correction):
//     the judge's reading, with confidence 1-(1-c_judge)(1-c_reference),
//     where c_judge is the vote share times the votes' mean confidence;
//   - they disagree: the judge's reading when its votes were unanimous
//     and the reference was itself uncertain, the reference's otherwise;
//     either way marked Uncertain (two judges that disagree are recorded,
//     never used for rewards or lessons);
//   - no vote was usable: the reference's reading, Note "unparsable".
//
// Every result carries an Agreement. Bad input is not sent upstream (the
// LLM's rule); an upstream failure on every vote is an error wrapping
// ErrUpstream (a retry may succeed). Safe for concurrent use.
type Judge struct {
	llm   *LLM
	ref   Interpreter
	votes int
	temp  float64
}

// Agreement is how a Judge's votes and its reference agreed on one
// feedback (events.InterpreterAgreement when recorded).
type Agreement struct {
	Votes, Valid        int
	Share               float64
	Reference           string
	ReferencePolarity   float64
	ReferenceCorrection string
	Polarity            bool
	Correction          bool
}

// NewJudge validates cfg, fills defaults and returns the Judge.
func NewJudge(cfg JudgeConfig) (*Judge, error) {
	if cfg.LLM == nil {
		return nil, errors.New("feedback: judge needs an LLM")
	}
	if cfg.Reference == nil {
		cfg.Reference = NewEmbedded()
	}
	if cfg.Votes == 0 {
		cfg.Votes = 3
	}
	if cfg.Votes < 1 || cfg.Votes > 15 {
		return nil, fmt.Errorf("feedback: judge votes %d must be in [1, 15]", cfg.Votes)
	}
	if cfg.Temperature == 0 {
		cfg.Temperature = 0.7
	}
	if math.IsNaN(cfg.Temperature) || cfg.Temperature < 0 || cfg.Temperature > 2 {
		return nil, fmt.Errorf("feedback: judge temperature %v must be in [0, 2]", cfg.Temperature)
	}
	return &Judge{llm: cfg.LLM, ref: cfg.Reference, votes: cfg.Votes, temp: cfg.Temperature}, nil
}

// Interpret implements Interpreter.
func (j *Judge) Interpret(ctx context.Context, in Input) (Interpretation, error) {
	ref, err := j.ref.Interpret(ctx, in)
	if err != nil {
		return Interpretation{}, fmt.Errorf("feedback: judge reference: %w", err)
	}
	votes := make([]Interpretation, j.votes)
	errs := make([]error, j.votes)
	var wg sync.WaitGroup
	for i := range votes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			temp := j.llm.cfg.Temperature
			var seed *int
			if j.votes > 1 {
				temp = j.temp
				s := i + 1
				seed = &s
			}
			votes[i], errs[i] = j.llm.read(ctx, in, temp, seed)
		}(i)
	}
	wg.Wait()
	var valid []Interpretation
	failed := 0
	for i, v := range votes {
		switch {
		case errs[i] != nil:
			failed++
		case v.Note == "":
			valid = append(valid, v)
		}
	}
	if failed == j.votes {
		return Interpretation{}, errors.Join(errs...)
	}
	return combineVotes(j.llm.version(), j.votes, valid, ref), nil
}

// combineVotes is the Judge's rule (see Judge) over the usable votes and
// the reference's reading.
func combineVotes(version string, asked int, valid []Interpretation, ref Interpretation) Interpretation {
	ag := &Agreement{Votes: asked, Valid: len(valid), Reference: ref.Version, ReferencePolarity: ref.Polarity, ReferenceCorrection: ref.Correction}
	version += "+" + ref.Version
	if len(valid) == 0 {
		out := ref
		out.Version, out.Note, out.Agreement = version, "unparsable", ag
		return out
	}
	// the majority sign; ties go to the sign nearer neutral, then to the
	// reference's
	bySign := map[int][]Interpretation{}
	for _, v := range valid {
		s := polaritySign(v.Polarity)
		bySign[s] = append(bySign[s], v)
	}
	refSign := polaritySign(ref.Polarity)
	signs := []int{-1, 0, 1}
	sort.SliceStable(signs, func(a, b int) bool {
		na, nb := len(bySign[signs[a]]), len(bySign[signs[b]])
		if na != nb {
			return na > nb
		}
		if (signs[a] == refSign) != (signs[b] == refSign) {
			return signs[a] == refSign
		}
		return signs[a] == 0
	})
	major := bySign[signs[0]]
	// the majority correction among them (normal forms); ties to the
	// first vote's
	count := map[string]int{}
	for _, v := range major {
		count[NormalizeCorrection(v.Correction)]++
	}
	best := NormalizeCorrection(major[0].Correction)
	for _, v := range major {
		if k := NormalizeCorrection(v.Correction); count[k] > count[best] {
			best = k
		}
	}
	var pick Interpretation
	var pol, str, conf float64
	n := 0
	for _, v := range major {
		if NormalizeCorrection(v.Correction) != best {
			continue
		}
		if n == 0 {
			pick = v
		}
		n++
		pol += v.Polarity
		str += v.Strength
		conf += v.Confidence
	}
	pick.Polarity, pick.Strength = pol/float64(n), str/float64(n)
	ag.Share = float64(n) / float64(len(valid))
	judgeConf := clamp(ag.Share*conf/float64(n), 0, 1)
	ag.Polarity = signs[0] == refSign
	ag.Correction = best == NormalizeCorrection(ref.Correction)
	var out Interpretation
	switch {
	case ag.Polarity && ag.Correction:
		out = pick
		out.Confidence = clamp(1-(1-judgeConf)*(1-ref.Confidence), 0, 0.999)
		out.Uncertain = out.Confidence < UncertainBelow
	case ag.Share == 1 && len(valid) >= 2 && ref.Uncertain:
		out = pick
		out.Confidence = judgeConf
		out.Uncertain = true
	default:
		out = ref
		out.Uncertain = true
	}
	out.Version, out.Note, out.Agreement = version, "", ag
	return out
}

// polaritySign is the sign of p with PolaritySignThreshold as neutral.
func polaritySign(p float64) int {
	switch {
	case p >= PolaritySignThreshold:
		return 1
	case p <= -PolaritySignThreshold:
		return -1
	}
	return 0
}
