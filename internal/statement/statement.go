// Package statement owns how answers are matched against statements of
// fact such as "30 days" or "the refund window is 30 days": text is
// normalised (lower case, runs of white space as one space) and a
// statement is found only number-bounded, so that "30 days" is not read
// in "130 days" nor "3" in "3.5". The distiller derives the statements
// that customers' corrections contradicted with these rules
// (distill.contradicted), and the rollout controller scores answers that
// still state one (ops/rollout) with the same rules; Fact is how both
// write a task type's statement ("policy: 30 days").
package statement

import "strings"

// Fact is how a task type's statement is written where it is recorded
// (weights.trained contradicted, a dataset manifest's contradicted and
// replaced): "policy: 30 days".
func Fact(taskType, span string) string { return taskType + ": " + span }

// ParseFact splits a Fact into its task type and statement (ok false
// when f has no ": ").
func ParseFact(f string) (taskType, span string, ok bool) { return strings.Cut(f, ": ") }

// Normalize lower-cases x and joins its runs of white space with one space.
func Normalize(x string) string { return strings.Join(strings.Fields(strings.ToLower(x)), " ") }

// Contains reports whether text contains span number-bounded (both as
// Normalize leaves them).
func Contains(text, span string) bool {
	for off := 0; off < len(text); {
		i := strings.Index(text[off:], span)
		if i < 0 {
			return false
		}
		if NumberBounded(text, off+i, off+i+len(span)) {
			return true
		}
		off += i + 1
	}
	return false
}

// NumberBounded reports whether s[lo:hi] cuts no number out of a longer
// one: no digit (or decimal point or separator) right before it, no digit
// right after.
func NumberBounded(s string, lo, hi int) bool {
	digit := func(b byte) bool { return b >= '0' && b <= '9' }
	if lo > 0 && (digit(s[lo-1]) || s[lo-1] == '.' || s[lo-1] == ',') {
		return false
	}
	return hi >= len(s) || !digit(s[hi])
}
