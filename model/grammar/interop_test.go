package grammar

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonInterop validates outputs of the strict-mode examples, tool-call arguments and
// random schemas with the reference validator (Python's jsonschema, Draft 2020-12). It runs
// only with CITIZEN_PY_INTEROP=1 and needs python3 with jsonschema.
func TestPythonInterop(t *testing.T) {
	if os.Getenv("CITIZEN_PY_INTEROP") != "1" {
		t.Skip("set CITIZEN_PY_INTEROP=1 to run (needs python3 -m pip install jsonschema)")
	}
	type item struct {
		Schema  json.RawMessage   `json:"schema"`
		Outputs []json.RawMessage `json:"outputs"`
	}
	var items []item
	r := rand.New(rand.NewPCG(21, 21))
	v := bpeVocab(t)
	add := func(schema []byte, n int) {
		g, err := Compile(schema)
		if err != nil {
			if errors.Is(err, ErrSchema) {
				return
			}
			t.Fatalf("%s: %v", schema, err)
		}
		it := item{Schema: schema}
		for i := 0; i < n; i++ {
			budget := g.Start(v).MinBytesToComplete() + 1 + r.IntN(150)
			out, done := generate(t, g, v, r, budget, genCheck{})
			if !done {
				t.Fatalf("%s: %q: no EOS", schema, out)
			}
			it.Outputs = append(it.Outputs, out)
		}
		items = append(items, it)
	}
	for _, c := range strictSchemas {
		add([]byte(c.schema), 20)
	}
	for i := 0; i < 200; i++ {
		add(randomSchema(r), 5)
	}
	data, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys
from jsonschema import Draft202012Validator
cases = json.load(open(sys.argv[1]))
n, bad = 0, []
for c in cases:
    v = Draft202012Validator(c["schema"])
    for o in c["outputs"]:
        n += 1
        errs = [e.message for e in v.iter_errors(o)]
        if errs:
            bad.append({"schema": c["schema"], "output": o, "errors": errs[:3]})
print(json.dumps({"checked": n, "bad": bad[:5], "nbad": len(bad)}))
`
	out, err := exec.Command("python3", "-c", script, path).Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var res struct {
		Checked int               `json:"checked"`
		NBad    int               `json:"nbad"`
		Bad     []json.RawMessage `json:"bad"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.NBad > 0 {
		var b strings.Builder
		for _, x := range res.Bad {
			b.Write(x)
			b.WriteByte('\n')
		}
		t.Fatalf("%d of %d outputs invalid for jsonschema:\n%s", res.NBad, res.Checked, b.String())
	}
	t.Logf("jsonschema (Draft 2020-12) accepted all %d outputs of %d schemas", res.Checked, len(items))
}
