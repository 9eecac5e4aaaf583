package services

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"citizen/model/catalog"

	"gopkg.in/yaml.v3"
)

// envOutsideConfig are the CITIZEN_ variables read outside Config, with
// a check that they still are.
var envOutsideConfig = map[string]func(t *testing.T, v string){
	"CITIZEN_MODEL_CACHE": func(t *testing.T, v string) {
		t.Setenv("CITIZEN_MODEL_CACHE", v)
		if got := catalog.CacheDir(); got != v {
			t.Errorf("CITIZEN_MODEL_CACHE=%s: the model cache is %s", v, got)
		}
	},
}

// deploy/compose.yaml names only roles and settings that exist, each
// citizen service is a configuration citizen accepts (valid, and not
// refused as inconsistent), and together they run every role.
func TestComposeFileNamesRealRolesAndSettings(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Profiles    []string          `yaml:"profiles"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	known := map[string]bool{}
	for _, f := range fields(&Config{}) {
		known[f.envName()] = true
	}
	modules := (&App{}).Modules()
	covered := map[string]bool{}
	citizens := 0
	for name, svc := range doc.Services {
		if svc.Image != "citizen:dev" {
			continue
		}
		citizens++
		for k, v := range svc.Environment {
			if !strings.HasPrefix(k, "CITIZEN_") || known[k] {
				continue
			}
			check, ok := envOutsideConfig[k]
			if !ok {
				t.Errorf("service %s: %s is no setting of citizen", name, k)
				continue
			}
			check(t, v)
		}
		if len(svc.Command) == 0 {
			t.Errorf("service %s: no command", name)
			continue
		}
		if svc.Command[0] != "serve" {
			if !slices.Contains(svc.Profiles, "tools") {
				t.Errorf("service %s runs %q, not serve, outside the tools profile", name, svc.Command[0])
			}
			continue
		}
		cfg, err := buildConfig(t, svc.Command[1:], svc.Environment)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler)}
		if err := a.checkDeployment(); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
		order, err := NewManager(nil, modules...).Order(cfg.Target)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		for _, m := range order {
			covered[m] = true
		}
	}
	if citizens == 0 {
		t.Fatal("no citizen service in deploy/compose.yaml")
	}
	for _, m := range modules {
		if !covered[m.Name] {
			t.Errorf("no service runs %s", m.Name)
		}
	}
	for _, want := range []string{"postgres", "kafka"} {
		if _, ok := doc.Services[want]; !ok {
			t.Errorf("no %s service", want)
		}
	}
}
