package lessons

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"regexp"
	"strings"

	"citizen/events"
)

// Question is the text that places a request in a memory cluster: its
// last user message.
func Question(msgs []events.ChatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return strings.TrimSpace(msgs[i].Content)
		}
	}
	return ""
}

var numberRe = regexp.MustCompile(`\d+(?:[.,]\d+)*`)

// numbers returns the numerals text states, normalised ("1,000" is
// "1000").
func numbers(text string) map[string]bool {
	ms := numberRe.FindAllString(text, -1)
	if len(ms) == 0 {
		return nil
	}
	out := make(map[string]bool, len(ms))
	for _, m := range ms {
		out[strings.ReplaceAll(m, ",", "")] = true
	}
	return out
}

// numbersCovered reports whether every numeral of anchor appears in q.
func numbersCovered(anchor, q map[string]bool) bool {
	for n := range anchor {
		if !q[n] {
			return false
		}
	}
	return true
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}

// normValue is the key a fact's value is compared by: case, surrounding
// space and a final full stop do not matter.
func normValue(v string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	return strings.TrimSpace(strings.TrimSuffix(v, "."))
}

// lessonID is a deterministic id for a lesson from its identifying parts.
func lessonID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// factStatement is a fact lesson's statement: the question, the value,
// and the words of the customer who first claimed it when they differ
// from the value (the value is in the graders' canonical form, "08:00-17:00";
// the customer wrote "it's 8am to 5pm now").
func factStatement(question, value, comment string) string {
	s := "For \"" + clip(question, 200) + "\": the right answer is " + strings.TrimSuffix(strings.TrimSpace(value), ".")
	if c := strings.TrimSpace(comment); c != "" && !strings.EqualFold(normValue(c), normValue(value)) {
		s += " (a customer wrote: \"" + clip(c, 160) + "\")"
	}
	return s + "."
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
