package services

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
