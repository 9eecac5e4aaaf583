package learn

import (
	"fmt"
	"strings"

	"citizen/workplace"
)

// PreferenceCheck follows one segment's satisfaction after a drift of its
// preferences (segment.NAME.verbosity, .tone or .format): the share of its
// users' feedback verdicts that are positive (workplace Verdict, the
// ground truth the interpreter should recover), before the drift and per
// window after it, and the first point within 1,000 conversations where
// the last satisfactionSpan conversations reach the level before it.
type PreferenceCheck struct {
	At      int    `json:"at"`
	Segment string `json:"segment"`
	Change  string `json:"change"`
	Before  Ratio  `json:"before"`
	// Windows are the segment's satisfaction per report window after the
	// drift.
	Windows []SegmentWindow `json:"windows"`
	// RecoveredAt is the conversation at which the trailing span first
	// reached Before (-1: not within 1,000).
	RecoveredAt int `json:"recovered_at"`
}

// SegmentWindow is a segment's satisfaction over conversations [Start, End).
type SegmentWindow struct {
	Start int `json:"start"`
	End   int `json:"end"`
	Ratio `json:"ratio"`
}

// satisfactionSpan is the trailing span of conversations a recovery is
// measured over: a segment writes feedback on about a sixth of all
// conversations, so 300 hold about 50 verdicts.
const satisfactionSpan = 300

// preferenceChecks computes a PreferenceCheck for every drift event that
// changes a segment's preferences.
func preferenceChecks(drift workplace.Drift, recs []workplace.Record, window int) []PreferenceCheck {
	if window <= 0 {
		window = 100
	}
	n := 0
	for _, r := range recs {
		n = max(n, r.Index+1)
	}
	var out []PreferenceCheck
	for k, d := range drift {
		seg, changes := "", []string{}
		for key, v := range d.Set {
			if rest, ok := strings.CutPrefix(key, "segment."); ok {
				name, attr, _ := strings.Cut(rest, ".")
				seg = name
				changes = append(changes, attr+"="+v)
			}
		}
		if seg == "" {
			continue
		}
		end := n
		if k+1 < len(drift) {
			end = drift[k+1].At
		}
		satisfied := func(from, to int) Ratio {
			var r Ratio
			for _, x := range recs {
				if x.Index < from || x.Index >= to || x.Segment != seg || x.Feedback == nil {
					continue
				}
				r.Total++
				if x.Feedback.Verdict.Polarity == workplace.Positive {
					r.Correct++
				}
			}
			if r.Total > 0 {
				r.Rate = float64(r.Correct) / float64(r.Total)
			}
			return r
		}
		pc := PreferenceCheck{At: d.At, Segment: seg, Change: strings.Join(changes, ","), RecoveredAt: -1,
			Before: satisfied(max(0, d.At-satisfactionSpan), d.At)}
		for s := d.At; s < end; s += window {
			pc.Windows = append(pc.Windows, SegmentWindow{Start: s, End: min(s+window, end), Ratio: satisfied(s, min(s+window, end))})
		}
		for e := d.At + window; e <= min(end, d.At+1000); e += window {
			if r := satisfied(max(d.At, e-satisfactionSpan), e); r.Total >= 10 && pc.Before.Total > 0 && r.Rate >= pc.Before.Rate {
				pc.RecoveredAt = e
				break
			}
		}
		out = append(out, pc)
	}
	return out
}

func renderPreferences(b *strings.Builder, pcs []PreferenceCheck) {
	for _, p := range pcs {
		fmt.Fprintf(b, "\npreference drift at %d, segment %s (%s): satisfied %.2f (%d/%d) in the %d conversations before; per window after:",
			p.At, p.Segment, p.Change, p.Before.Rate, p.Before.Correct, p.Before.Total, satisfactionSpan)
		for _, w := range p.Windows {
			fmt.Fprintf(b, " %d:%d/%d", w.Start, w.Correct, w.Total)
		}
		if p.RecoveredAt >= 0 {
			fmt.Fprintf(b, "; back to the level before at %d (%d after the drift)\n", p.RecoveredAt, p.RecoveredAt-p.At)
		} else {
			fmt.Fprintf(b, "; not back to the level before within 1,000 conversations\n")
		}
	}
}
