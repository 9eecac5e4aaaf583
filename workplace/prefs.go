package workplace

import (
	"regexp"
	"strings"
)

// Preferences are a user's hidden tastes about an answer's form, independent of correctness.
// Empty fields mean "don't care".
type Preferences struct {
	Verbosity string `json:"verbosity,omitempty"` // "terse" or "detailed"
	Tone      string `json:"tone,omitempty"`      // "formal" or "casual"
	Format    string `json:"format,omitempty"`    // "plain": no markdown
}

// DefaultSegments are the user segments at time zero.
func DefaultSegments() map[string]Preferences {
	return map[string]Preferences{
		"a": {Verbosity: "terse", Format: "plain"},
		"b": {Verbosity: "detailed"},
		"c": {Tone: "formal", Format: "plain"},
	}
}

var (
	casualMarkers = []string{"hey", "gonna", "wanna", "lol", "yep", "nope", "cool", "awesome", "dude", "!!", ":)", "btw"}
	formalMarkers = []string{"dear", "kindly", "sincerely", "we regret", "please be advised", "hereby", "pursuant"}
	markdownRe    = regexp.MustCompile("(?m)(\\*\\*|^#+ |^\\s*[-*] |```|__)")
)

// Violation names the first aspect of an answer that p dislikes ("length", "tone", "format"),
// or "" when the answer suits p. canonical is the task's canonical answer, the yardstick of
// length.
func (p Preferences) Violation(answer, canonical string) string {
	n, c := len(strings.Fields(answer)), len(strings.Fields(canonical))
	switch p.Verbosity {
	case "terse":
		if n > max(12, 2*c+4) {
			return "length"
		}
	case "detailed":
		// Only where a sentence is expected: a bare label or JSON object is what was asked for.
		if c >= 4 && n < 6 {
			return "length"
		}
	}
	low := strings.ToLower(answer)
	switch p.Tone {
	case "formal":
		for _, m := range casualMarkers {
			if containsMarker(low, m) {
				return "tone"
			}
		}
	case "casual":
		for _, m := range formalMarkers {
			if containsMarker(low, m) {
				return "tone"
			}
		}
	}
	if p.Format == "plain" && markdownRe.MatchString(answer) {
		return "format"
	}
	return ""
}

func containsMarker(low, m string) bool {
	if m[0] >= 'a' && m[0] <= 'z' {
		return hasPhrase(low, m)
	}
	return strings.Contains(low, m)
}
