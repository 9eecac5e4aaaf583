package template

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "with CITIZEN_PY_INTEROP=1: rewrite testdata/reference.json from the Python reference")

// parityPerTemplate is how many generated conversations each chat template
// is rendered with.
const parityPerTemplate = 48

// goldenFile holds the Python reference's renders of every case, so that
// parity is checked on machines without Python too.
const goldenFile = "testdata/reference.json"

type golden struct {
	Case   refCase   `json:"case"`
	Result refResult `json:"result"`
}

func allCases(t *testing.T) []refCase {
	t.Helper()
	cases, err := parityCases(parityPerTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return append(cases, featureCases()...)
}

// comparison counts agreement between this package and the reference.
type comparison struct {
	same, bothFailed, differ int
	perGroup                 map[string][3]int
}

func compareResults(t *testing.T, cases []refCase, want []refResult) comparison {
	t.Helper()
	c := comparison{perGroup: map[string][3]int{}}
	shown := 0
	for i, cs := range cases {
		got := renderGo(cs)
		group := cs.Name[:strings.IndexByte(cs.Name, '/')]
		g := c.perGroup[group]
		switch {
		case got.OK && want[i].OK && got.Text == want[i].Text:
			c.same++
			g[0]++
		case !got.OK && !want[i].OK:
			c.bothFailed++
			g[1]++
		default:
			c.differ++
			g[2]++
			if shown < 30 {
				shown++
				t.Errorf("%s differs\ntemplate: %q\n  go: ok=%v %q %s\n  py: ok=%v %q %s", cs.Name, abbreviate(cs.Template),
					got.OK, got.Text, got.Error, want[i].OK, want[i].Text, want[i].Error)
			}
		}
		c.perGroup[group] = g
	}
	for name, g := range c.perGroup {
		t.Logf("%-24s identical %3d, both raise %3d, differ %d", name, g[0], g[1], g[2])
	}
	t.Logf("total: identical %d, both raise %d, differ %d (of %d)", c.same, c.bothFailed, c.differ, len(cases))
	return c
}

func abbreviate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// TestPythonParity renders every case with transformers' chat-template
// code and with this package and requires byte-identical output (or both
// failing). It runs only with CITIZEN_PY_INTEROP=1 and needs
// python3 -m pip install transformers jinja2 (torch is not needed).
func TestPythonParity(t *testing.T) {
	if os.Getenv("CITIZEN_PY_INTEROP") != "1" {
		t.Skip("set CITIZEN_PY_INTEROP=1 to run (needs python3 -m pip install transformers jinja2)")
	}
	cases := allCases(t)
	dir := t.TempDir()
	in, out := filepath.Join(dir, "cases.json"), filepath.Join(dir, "results.json")
	data, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "testdata/render_reference.py", in, out)
	cmd.Env = append(os.Environ(), "TRANSFORMERS_VERBOSITY=error")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var want []refResult
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(cases) {
		t.Fatalf("python returned %d results for %d cases", len(want), len(cases))
	}
	compareResults(t, cases, want)
	if *update {
		var b bytes.Buffer
		b.WriteString("[\n")
		for i := range cases {
			data, err := json.Marshal(golden{Case: stripTemplate(cases[i]), Result: want[i]})
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
			if i < len(cases)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString("]\n")
		if err := os.WriteFile(goldenFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stripTemplate drops the text of a template that lives in its own file.
func stripTemplate(c refCase) refCase {
	if c.TemplateFile != "" {
		c.Template = ""
	}
	return c
}

// TestReferenceRenders checks this package against the Python reference's
// recorded renders (testdata/reference.json, written by
// TestPythonParity -update), and that the recorded cases are still the
// ones the generators produce.
func TestReferenceRenders(t *testing.T) {
	raw, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var g []golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	cases := allCases(t)
	if len(g) != len(cases) {
		t.Fatalf("%s has %d cases, the generators %d: rerun CITIZEN_PY_INTEROP=1 go test -run TestPythonParity -update", goldenFile, len(g), len(cases))
	}
	want := make([]refResult, len(g))
	for i := range g {
		a, _ := json.Marshal(g[i].Case)
		b, _ := json.Marshal(stripTemplate(cases[i]))
		if string(a) != string(b) {
			t.Fatalf("case %s changed since %s was written: rerun with -update", cases[i].Name, goldenFile)
		}
		want[i] = g[i].Result
	}
	c := compareResults(t, cases, want)
	if c.same < len(chatTemplates)*30 {
		t.Errorf("only %d identical renders", c.same)
	}
}
