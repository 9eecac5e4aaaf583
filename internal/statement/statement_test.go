package statement

import "testing"

func TestContains(t *testing.T) {
	for _, c := range []struct {
		text, span string
		want       bool
	}{
		{"the refund window is 30 days.", "30 days", true},
		{"the refund window is 130 days.", "30 days", false},
		{"it is 3.5 km", "5 km", false},
		{"1,200 items", "200 items", false},
		{"30 days, not 300 days", "30 days", true},
		{"300 days, then 30 days", "30 days", true},
		{"answer 35", "3", false},
		{"", "3", false},
	} {
		if got := Contains(c.text, c.span); got != c.want {
			t.Errorf("Contains(%q, %q) = %v", c.text, c.span, got)
		}
	}
	if got := Normalize("  The Refund\twindow\n is 30  DAYS. "); got != "the refund window is 30 days." {
		t.Errorf("Normalize: %q", got)
	}
	if f := Fact("policy", "30 days"); f != "policy: 30 days" {
		t.Errorf("Fact: %q", f)
	}
	if typ, span, ok := ParseFact("policy: the refund window is 30 days"); !ok || typ != "policy" || span != "the refund window is 30 days" {
		t.Errorf("ParseFact: %q %q %v", typ, span, ok)
	}
	if _, _, ok := ParseFact("no separator"); ok {
		t.Error("ParseFact of a text without \": \"")
	}
}
