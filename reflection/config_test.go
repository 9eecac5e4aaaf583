package reflection

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each bad value is refused with an error naming its key.
func TestConfigRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"reward: {graders: -1}\n", "reward.graders"},
		{"reward: {self: .nan}\n", "reward.self"},
		{"reward: {outcome: .inf}\n", "reward.outcome"},
		{"reward: {graders: 0, self: 0, feedback: 0, outcome: 0}\n", "all 0"},
		{"reward: {min_feedback_confidence: 1.5}\n", "reward.min_feedback_confidence"},
		{"reward: {min_feedback_confidence: .nan}\n", "reward.min_feedback_confidence"},
		{"policy: {timeout: maybe}\n", "policy.timeout"},
		{"policy: {abandoned: later}\n", "policy.abandoned"},
		{"policy: {environment_faults: sometimes}\n", "policy.environment_faults"},
		{"self_eval: {floor: 0}\n", "self_eval.floor"},
		{"self_eval: {floor: .nan}\n", "self_eval.floor"},
		{"detectors: {window: -1}\n", "detectors.window"},
		{"detectors: {drop_rate: .nan}\n", "detectors.drop_rate"},
		{"detectors: {correlation_rise: -0.1}\n", "detectors.correlation_rise"},
		{"detectors: {correlation_z: .inf}\n", "detectors.correlation_z"},
		{"detectors: {window: 40, min_count: 50}\n", "detectors.min_count 50 exceeds detectors.window 40"},
		{"detectors: {stable: v1}\n", "stable"}, // rollout.stable's, not a key here
		{"rubric: x.yaml\n", "rubric"},
	} {
		_, err := ParseConfig([]byte(c.yaml))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrConfig naming %q", c.yaml, err, c.want)
		}
	}
	c, err := ParseConfig([]byte("rubrics: my.yaml\nreward: {self: 0}\ndetectors: {window: 80, min_count: 80, correlation_z: -1}\n"))
	if err != nil || c.Rubrics != "my.yaml" || c.Reward.Self != 0 || c.Detectors.Window != 80 || c.Detectors.CorrelationZ != -1 {
		t.Fatalf("%+v %v", c, err)
	}
}

// The defaults are explicit: every detector threshold is the value the
// detectors would fill in, so the configuration reference shows it.
func TestDefaultConfigDetectorsFilled(t *testing.T) {
	d := DefaultConfig().Detectors
	filled := d
	filled.defaults()
	if d != filled || d.Window == 0 || d.DropRate == 0 {
		t.Fatalf("%+v vs %+v", d, filled)
	}
}

func TestOpenRubrics(t *testing.T) {
	s, err := DefaultConfig().OpenRubrics()
	if err != nil || s.Current().Version != DefaultRubrics().Version {
		t.Fatalf("default rubrics: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rubrics.yaml")
	if err := os.WriteFile(path, []byte("version: mine-1\ntypes:\n  a:\n    graders:\n      - {name: g, kind: regex, pattern: ok}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Rubrics = path
	if s, err = c.OpenRubrics(); err != nil || s.Current().Version != "mine-1" {
		t.Fatalf("file rubrics: %v", err)
	}
	c.Rubrics = filepath.Join(dir, "missing.yaml")
	if _, err := c.OpenRubrics(); err == nil || !strings.Contains(err.Error(), "reflection.rubrics") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte("types:\n  a:\n    graders:\n      - {name: g, kind: telepathy}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Rubrics = path
	if _, err := c.OpenRubrics(); !errors.Is(err, ErrRubric) || !strings.Contains(err.Error(), "reflection.rubrics") {
		t.Errorf("bad file: %v", err)
	}
}
