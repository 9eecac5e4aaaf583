// Package statement owns how an answer is matched against a value it
// should state ("9am", "$4.99", "Leonardo da Vinci"): text is normalised
// (lower case, runs of white space as one space) and a value is found only
// number-bounded, so that "15 minutes" is not read in "115 minutes" nor "3" in
// "3.5". The lessons module decides with it whether an answer states a
// fact lesson's value, the distiller which answers a lesson contradicts
// and whether a candidate's answer carries a lesson, with the same rules.
package statement

import "strings"

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
		if numberBounded(text, off+i, off+i+len(span)) {
			return true
		}
		off += i + 1
	}
	return false
}

// numberBounded reports whether s[lo:hi] cuts no number out of a longer
// one: no digit (or decimal point or separator) right before it, no digit
// right after.
func numberBounded(s string, lo, hi int) bool {
	digit := func(b byte) bool { return b >= '0' && b <= '9' }
	if lo > 0 && (digit(s[lo-1]) || s[lo-1] == '.' || s[lo-1] == ',') {
		return false
	}
	return hi >= len(s) || !digit(s[hi])
}
