package services

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/internal/settings"
	"citizen/reflection"

	"gopkg.in/yaml.v3"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func buildConfig(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	build := ConfigFlags(fs, envMap(env))
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	return build()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "citizen.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigPrecedence pins defaults < file < environment < flags.
func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "data_dir: /from/file\ngateway:\n  listen: file:1\n  max_body_bytes: 1111\nlog:\n  level: warn\nshutdown_timeout: 7s\n")
	env := map[string]string{
		"CITIZEN_CONFIG":                 file,
		"CITIZEN_GATEWAY_LISTEN":         "env:2",
		"CITIZEN_GATEWAY_MAX_BODY_BYTES": "2222",
		"CITIZEN_MODEL_CHECKPOINT":       "", // set but empty: a value, not "unset"
	}
	cfg, err := buildConfig(t, []string{"--gateway.max-body-bytes=3333"}, env)
	if err != nil {
		t.Fatal(err)
	}
	def := DefaultConfig()
	checks := []struct {
		name      string
		got, want any
	}{
		{"default survives", cfg.Store.Backend, def.Store.Backend},
		{"file over default", cfg.DataDir, "/from/file"},
		{"file over default (nested)", cfg.Log.Level, "warn"},
		{"file duration", cfg.ShutdownTimeout, 7 * time.Second},
		{"env over file", cfg.Gateway.Listen, "env:2"},
		{"flag over env over file", cfg.Gateway.MaxBodyBytes, int64(3333)},
		{"empty env value is a value", cfg.Model.Checkpoint, ""},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	// --config flag wins over CITIZEN_CONFIG.
	other := writeFile(t, "data_dir: /other\n")
	cfg, err = buildConfig(t, []string{"--config", other}, env)
	if err != nil || cfg.DataDir != "/other" {
		t.Fatalf("--config over env: %v %q", err, cfg.DataDir)
	}
	// Lists from env and flags.
	cfg, err = buildConfig(t, []string{"--target=store, all"}, nil)
	if err != nil || strings.Join(cfg.Target, ",") != "store,all" {
		t.Fatalf("target list: %v %v", err, cfg.Target)
	}
}

func TestConfigRefuses(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown yaml key names the key", "gateway:\n  listne: x\n", nil, nil, "listne"},
		{"unknown top key with line", "data_dir: a\nbogus: 1\n", nil, nil, "line 2"},
		{"bad yaml type names the line", "gateway:\n  max_body_bytes: lots\n", nil, nil, "line 2"},
		{"bad env int", "", nil, map[string]string{"CITIZEN_GATEWAY_MAX_BODY_BYTES": "x"}, "CITIZEN_GATEWAY_MAX_BODY_BYTES"},
		{"bad flag duration", "", []string{"--shutdown-timeout=soon"}, nil, "shutdown-timeout"},
		{"unknown backend", "", []string{"--store.backend=floppy"}, nil, "floppy"},
		{"unknown target", "", []string{"--target=gateway,toaster"}, nil, "toaster"},
		{"upstream needs url", "", []string{"--model.engine=upstream"}, nil, "upstream_url"},
		{"suite loss not a fraction", "", []string{"--distill.max-suite-loss=1.5"}, nil, "distill.max_suite_loss 1.5"},
		{"negative epochs", "", []string{"--distill.epochs=-1"}, nil, "distill.epochs -1"},
		{"suite stable margin not a number", "", []string{"--distill.suite-stable-margin=NaN"}, nil, "distill.suite_stable_margin NaN"},
		{"removed gateway.stable_version names its line and rollout.stable", "data_dir: d\ngateway:\n  listen: x:1\n  stable_version: v3\n", nil, nil, "line 4: gateway.stable_version was removed: set rollout.stable"},
		{"removed gateway.shutdown_timeout", "gateway:\n  shutdown_timeout: 5s\n", nil, nil, "gateway.shutdown_timeout was removed: set shutdown_timeout"},
		{"removed key from env", "", nil, map[string]string{"CITIZEN_GATEWAY_STABLE_VERSION": "v3"}, "CITIZEN_GATEWAY_STABLE_VERSION: gateway.stable_version was removed: set rollout.stable"},
		{"removed flag", "", []string{"--gateway.stable-version=v3"}, nil, "gateway.stable-version"},
		{"shutdown timeout not positive", "", []string{"--shutdown-timeout=0s"}, nil, "shutdown_timeout 0s"},
		{"negative reward weight", "", []string{"--reflection.reward.graders=-1"}, nil, "reward.graders weight -1"},
		{"all reward weights zero", "reflection:\n  reward: {graders: 0, self: 0, feedback: 0, outcome: 0}\n", nil, nil, "reward weights are all 0"},
		{"bad timeout policy", "", nil, map[string]string{"CITIZEN_REFLECTION_POLICY_TIMEOUT": "shrug"}, `policy.timeout "shrug"`},
		{"detector min_count above window", "", []string{"--reflection.detectors.window=40", "--reflection.detectors.min-count=50"}, nil, "detectors.min_count 50 exceeds detectors.window 40"},
		{"detectors.stable is rollout.stable's", "reflection:\n  detectors:\n    stable: v1\n", nil, nil, "line 3"},
		{"unknown reflection key", "reflection:\n  rewards: {self: 1}\n", nil, nil, "rewards"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range c.env {
				env[k] = v
			}
			if c.file != "" {
				env["CITIZEN_CONFIG"] = writeFile(t, c.file)
			}
			_, err := buildConfig(t, c.args, env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, c.want)
			}
		})
	}
}

// config print never shows a secret: the upstream key is redacted, and a
// connection URL keeps its host but not its password.
func TestConfigPrintRedactsSecrets(t *testing.T) {
	cfg, err := buildConfig(t, []string{"--model.upstream-key=sk-live-very-secret", "--store.esdb-url=esdb://admin:hunter2@db:2113?tls=false&token=abc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Print()
	for _, leak := range []string{"sk-live-very-secret", "hunter2", "token=abc"} {
		if strings.Contains(out, leak) {
			t.Errorf("config print shows %q", leak)
		}
	}
	if !strings.Contains(out, "[redacted]") || !strings.Contains(out, "db:2113") {
		t.Errorf("redaction lost the shape:\n%s", out)
	}
	if cfg.Model.UpstreamKey != "sk-live-very-secret" {
		t.Error("Print changed the configuration itself")
	}
}

// Every flag says what it sets: a setting without help fails here.
func TestFlagsHaveHelp(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	ConfigFlags(fs, envMap(nil))
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		help, _, _ := strings.Cut(f.Usage, " (env ")
		if strings.TrimSpace(help) == "" || strings.Contains(help, "{") {
			t.Errorf("--%s has no help: %q", f.Name, f.Usage)
		}
	})
	def := DefaultConfig()
	if want := len(settings.Fields(&def)) + 1; n != want { // + --config
		t.Errorf("%d flags, want %d", n, want)
	}
}

// --target's help lists exactly the modules App builds: every listed name
// is a valid target and every module is listed.
func TestFlagTargetHelpListsModules(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	ConfigFlags(fs, envMap(nil))
	usage := fs.Lookup("target").Usage
	_, list, ok := strings.Cut(usage, "comma list of ")
	if !ok {
		t.Fatalf("target help: %q", usage)
	}
	list, _, _ = strings.Cut(list, " ")
	listed := strings.Split(list, ",")
	var modules []string
	for _, m := range (&App{}).Modules() {
		modules = append(modules, m.Name)
	}
	slices.Sort(modules)
	if !slices.Equal(listed, modules) {
		t.Errorf("--target help lists %v, the modules are %v", listed, modules)
	}
	for _, name := range listed {
		if _, err := buildConfig(t, []string{"--target=" + name}, nil); err != nil {
			t.Errorf("--target=%s: %v", name, err)
		}
	}
}

// A config file's reflection section reaches the configuration.
func TestConfigReflectionFromFile(t *testing.T) {
	file := writeFile(t, "reflection:\n  rubrics: /etc/citizen/rubrics.yaml\n  reward:\n    outcome: 3\n  policy:\n    abandoned: exclude\n  detectors:\n    drop_rate: 0.3\n")
	cfg, err := buildConfig(t, []string{"--reflection.reward.self=0.5"}, map[string]string{"CITIZEN_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Reflection
	if r.Rubrics != "/etc/citizen/rubrics.yaml" || r.Reward.Outcome != 3 || r.Reward.Self != 0.5 || r.Reward.Graders != 1 ||
		r.Policy.Abandoned != "exclude" || r.Policy.Timeout != "failure" || r.Detectors.DropRate != 0.3 || r.Detectors.Window != 200 {
		t.Fatalf("%+v", r)
	}
}

// docs/configuration.md is Reference(), the output of citizen config
// print --markdown.
func TestConfigReferenceCurrent(t *testing.T) {
	out := Reference()
	def := DefaultConfig()
	for _, f := range settings.Fields(&def) {
		if !strings.Contains(out, "| `"+f.Path+"` | `--"+f.FlagName()+"` | `"+f.EnvName("CITIZEN_")+"` |") {
			t.Errorf("the reference has no row for %s", f.Path)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != out {
		t.Fatal("docs/configuration.md is stale: run go run ./cmd/citizen config print --markdown > docs/configuration.md")
	}
}

// evaluateWith records an interaction whose answer ("red") misses the
// reference in its metadata (gold: "blue") and then the harness's outcome
// "success", and returns the evaluation that the outcome gives under cfg.
func evaluateWith(t *testing.T, cfg Config) *events.InteractionEvaluated {
	t.Helper()
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	a := &App{Config: cfg, Store: st}
	ev, err := a.evaluator(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream := events.InteractionStream("i1")
	rec, err := events.Encode(&events.InteractionRecorded{InteractionID: "i1", Tenant: "acme", ModelVersion: "v1",
		Metadata: map[string]string{"type": "lookup", "gold": "blue"},
		Messages: []events.ChatMessage{{Role: "user", Content: "Which colour is the sky?"}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "red"}, FinishReason: "stop"}}},
		events.Meta{Stream: stream, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := events.Encode(&events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "harness", Outcome: "success"},
		events.Meta{Stream: stream, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, stream, events.Any, rec, fb); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ReadStream(ctx, stream, 0, events.Forward, 10)
	if err != nil || len(evs) != 2 {
		t.Fatal(evs, err)
	}
	out, err := ev.Handle(ctx, evs[1])
	if err != nil || len(out) != 1 {
		t.Fatal(out, err)
	}
	p, err := events.Decode(&out[0])
	if err != nil {
		t.Fatal(err)
	}
	return p.(*events.InteractionEvaluated)
}

// reflection.rubrics and reflection.reward reach the evaluator: a rubric
// file with a grader for the interaction's type and a heavier outcome
// weight change the reward it computes.
func TestConfigReflectionChangesEvaluation(t *testing.T) {
	off := []string{"--memory.lessons.off=true"}
	def, err := buildConfig(t, off, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The shipped rubrics have no rubric for "lookup" and the default
	// graders find no reference: the outcome alone is the reward.
	d := evaluateWith(t, def)
	if d.RubricVersion != reflection.DefaultRubrics().Version || d.Reward != 1 || d.RewardTerms["w_outcome"] != 1 {
		t.Fatalf("default config: rubrics %s, reward %v, terms %v", d.RubricVersion, d.Reward, d.RewardTerms)
	}
	rubrics := filepath.Join(t.TempDir(), "rubrics.yaml")
	if err := os.WriteFile(rubrics, []byte("version: ops-1\ntypes:\n  lookup:\n    graders:\n      - {name: gold, kind: exact, reference: gold}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "reflection:\n  rubrics: "+rubrics+"\n  reward:\n    outcome: 3\n")
	cfg, err := buildConfig(t, off, map[string]string{"CITIZEN_CONFIG": file})
	if err != nil {
		t.Fatal(err)
	}
	c := evaluateWith(t, cfg)
	// graders -1 (the exact grader fails) with weight 1, outcome +1 with
	// weight 3: (-1 + 3) / 4.
	if c.RubricVersion != "ops-1" || c.RewardTerms["graders"] != -1 || c.RewardTerms["w_outcome"] != 3 || c.Reward != 0.5 {
		t.Fatalf("file config: rubrics %s, reward %v, terms %v", c.RubricVersion, c.Reward, c.RewardTerms)
	}
}

// A rubric file that cannot be loaded stops citizen at start with an
// error naming the setting.
func TestConfigBadRubricsFailStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "rubrics.yaml")
	if err := os.WriteFile(bad, []byte("types:\n  a:\n    graders:\n      - {name: g, kind: telepathy}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing.yaml"), bad} {
		rc, _, errs := run(t, "serve", "--store.backend=memory", "--model.engine=stub", "--target=reflection",
			"--data-dir", dir, "--log.level=error", "--reflection.rubrics", path)
		if rc != 1 || !strings.Contains(errs, "init reflection: reflection.rubrics") || !strings.Contains(errs, path) {
			t.Errorf("%s: rc %d\n%s", path, rc, errs)
		}
	}
}

// Any config file decodes to a configuration or an error, never a panic;
// one that names a removed key is refused whatever else it holds.
func FuzzConfigYAML(f *testing.F) {
	for _, seed := range []string{
		"data_dir: /d\ngateway:\n  listen: x:1\nreflection:\n  rubrics: r.yaml\n  reward: {outcome: 3}\n",
		"gateway:\n  stable_version: v3\n",
		"gateway: [1, 2]\n",
		"rollout:\n  steps: [0.1, 1]\n  guardrails: {anomaly_kinds: [length_drift]}\n",
		"- a\n- b\n",
		"&a [*a]\n",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		cfg := DefaultConfig()
		err := settings.DecodeYAML("fuzz.yaml", []byte(doc), &cfg, options())
		if err == nil {
			_ = cfg.Validate()
			_ = cfg.Print()
			if strings.Contains(doc, "stable_version") {
				var n yaml.Node
				if yaml.Unmarshal([]byte(doc), &n) == nil && settings.KeyLine(&n, []string{"gateway", "stable_version"}) > 0 {
					t.Fatalf("a removed key was accepted:\n%s", doc)
				}
			}
		}
	})
}
