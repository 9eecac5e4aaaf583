package workplace

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMainRun(t *testing.T) {
	m := newScripted(t, Config{Seed: 4, Users: 12, Interactions: 30, Drift: DefaultDrift(30)}, 1)
	srv := httptest.NewServer(m)
	defer srv.Close()
	dir := t.TempDir()
	logPath, sumPath := filepath.Join(dir, "log.jsonl"), filepath.Join(dir, "sum.json")
	var out, errb bytes.Buffer
	code := Main([]string{"run", "--target", srv.URL, "--api-key", "test-key", "--interactions", "30", "--seed", "4",
		"--tool-fail-rate", "0", "--tool-timeout-rate", "0", "--abandon-rate", "0", "--drift", "default",
		"--feedback-rate", "1", "--log", logPath, "--summary", sumPath}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sum Summary
	b, err := os.ReadFile(sumPath)
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary file: %v %s", err, b)
	}
	if sum.Total.Count != 30 || sum.Total.Accuracy != 1 || len(readLog(t, logPath)) != 30 {
		t.Errorf("summary %+v", sum.Total)
	}
	if sum.Total.Feedback[Negative] != 0 || len(m.feedbacks) != 30 {
		t.Errorf("feedback %v posts %d", sum.Total.Feedback, len(m.feedbacks))
	}
	if !strings.Contains(out.String(), "total") || !strings.Contains(errb.String(), "30/30") {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"fly"}, {"run"}, {"run", "--target", "http://x", "--tool-fail-rate", "2"},
		{"run", "--target", "http://x", "--drift", "10:nope=1"}, {"run", "--bogus"}, {"corpus", "--families", "poetry"}} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 2 {
			t.Errorf("Main(%q) = %d, want 2", args, code)
		}
	}
}

func TestMainCorpus(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"corpus", "--n", "25", "--seed", "3"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 25 {
		t.Fatalf("%d lines", len(lines))
	}
	want := Corpus(3, 25, CorpusOptions{})
	for i, l := range lines {
		var c Conversation
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatal(err)
		}
		if c.Type != want[i].Type || len(c.Messages) != len(want[i].Messages) {
			t.Errorf("line %d differs from Corpus", i)
		}
	}
}
