package statement

import "testing"

func TestContains(t *testing.T) {
	for _, c := range []struct {
		text, span string
		want       bool
	}{
		{"the window is 30 days.", "30 days", true},
		{"the window is 130 days.", "30 days", false},
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
	if got := Normalize("  The Opening\thours\n are 9AM  to 5PM. "); got != "the opening hours are 9am to 5pm." {
		t.Errorf("Normalize: %q", got)
	}
}
