package services

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"citizen/internal/modules"
	"citizen/internal/settings"
	"citizen/model/catalog"

	"gopkg.in/yaml.v3"
)

// Checks of the deployment files under deploy/ (the compose file and the
// Kubernetes manifests), without Docker or a cluster: every citizen
// process they describe names only roles and settings that exist, is a
// configuration citizen accepts (valid, and not refused as inconsistent
// by checkDeployment), and together they run every module.

// deployImage is the image of the citizen containers, the one
// deploy/Dockerfile builds.
const deployImage = "citizen:dev"

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

// settingEnv is the set of environment names of Config's settings.
func settingEnv() map[string]bool {
	known := map[string]bool{}
	for _, f := range settings.Fields(&Config{}) {
		known[f.EnvName("CITIZEN_")] = true
	}
	return known
}

// checkEnvNames reports the names in env that configure nothing in
// citizen: not a setting, not one of envOutsideConfig. A name without the
// CITIZEN_ prefix is reported too, so a misspelt prefix does not pass as
// some other program's variable.
func checkEnvNames(t *testing.T, where string, env map[string]string) []string {
	known := settingEnv()
	var problems []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if known[k] {
			continue
		}
		if check, ok := envOutsideConfig[k]; ok {
			check(t, env[k])
			continue
		}
		if !strings.HasPrefix(k, "CITIZEN_") {
			problems = append(problems, fmt.Sprintf("%s: %s is not a CITIZEN_ setting (only those configure citizen)", where, k))
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: %s is no setting of citizen", where, k))
	}
	return problems
}

// citizenProcess builds the configuration of `citizen serve args...` in
// environment env, as citizen does at start, and returns it with the
// modules it runs.
func citizenProcess(t *testing.T, args []string, env map[string]string) (Config, []string, error) {
	cfg, err := buildConfig(t, args, env)
	if err != nil {
		return Config{}, nil, err
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, err
	}
	a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler)}
	if err := a.checkDeployment(); err != nil {
		return Config{}, nil, err
	}
	order, err := modules.New(nil, a.Modules()...).Order(cfg.Target)
	if err != nil {
		return Config{}, nil, err
	}
	return cfg, order, nil
}

// uncovered reports the modules no process runs.
func uncovered(covered map[string]bool) []string {
	var problems []string
	for _, m := range (&App{}).Modules() {
		if !covered[m.Name] && !m.NotInAll { // the inference tier is optional
			problems = append(problems, "no process runs "+m.Name)
		}
	}
	return problems
}

func readDeployFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate returns b with the first old replaced by new; the test fails
// when b has no old (the case no longer tests anything).
func mutate(t *testing.T, name string, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q: update the case", name, old)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

// wantProblem fails unless one of problems contains want.
func wantProblem(t *testing.T, problems []string, want string) {
	t.Helper()
	for _, p := range problems {
		if strings.Contains(p, want) {
			return
		}
	}
	t.Errorf("no problem mentions %q; got %q", want, problems)
}

// ---- deploy/compose.yaml

// checkCompose reports what is wrong with compose file b.
func checkCompose(t *testing.T, b []byte) []string {
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Profiles    []string          `yaml:"profiles"`
			Ports       []string          `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return []string{"deploy/compose.yaml: " + err.Error()}
	}
	var problems []string
	covered := map[string]bool{}
	citizens := 0
	for _, name := range slices.Sorted(maps.Keys(doc.Services)) {
		svc := doc.Services[name]
		if svc.Image != deployImage {
			continue
		}
		citizens++
		where := "service " + name
		problems = append(problems, checkEnvNames(t, where, svc.Environment)...)
		if len(svc.Command) == 0 {
			problems = append(problems, where+": no command")
			continue
		}
		if svc.Command[0] != "serve" {
			if !slices.Contains(svc.Profiles, "tools") {
				problems = append(problems, fmt.Sprintf("%s runs %q, not serve, outside the tools profile", where, svc.Command[0]))
			}
			continue
		}
		cfg, order, err := citizenProcess(t, svc.Command[1:], svc.Environment)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			continue
		}
		for _, m := range order {
			covered[m] = true
		}
		// A published port reaches the gateway only on its listen port.
		for _, p := range svc.Ports {
			inner := p[strings.LastIndex(p, ":")+1:]
			if !slices.Contains(order, "gateway") {
				problems = append(problems, fmt.Sprintf("%s publishes %s but runs no gateway", where, p))
				continue
			}
			if _, port, err := net.SplitHostPort(cfg.Gateway.Listen); err != nil || port != inner {
				problems = append(problems, fmt.Sprintf("%s publishes container port %s, the gateway listens on %s", where, inner, cfg.Gateway.Listen))
			}
		}
	}
	if citizens == 0 {
		return append(problems, "no citizen service in deploy/compose.yaml")
	}
	problems = append(problems, uncovered(covered)...)
	for _, want := range []string{"postgres", "kafka"} {
		if _, ok := doc.Services[want]; !ok {
			problems = append(problems, "no "+want+" service")
		}
	}
	return problems
}

// deploy/compose.yaml names only roles and settings that exist, each
// citizen service is a configuration citizen accepts, and together they
// run every role.
func TestComposeFileNamesRealRolesAndSettings(t *testing.T) {
	for _, p := range checkCompose(t, readDeployFile(t, "compose.yaml")) {
		t.Error(p)
	}
}

// The compose check catches a misspelt setting, an unknown role and a
// published port the gateway does not listen on.
func TestComposeCheckCatchesMistakes(t *testing.T) {
	b := readDeployFile(t, "compose.yaml")
	cases := []struct{ old, new, want string }{
		{"CITIZEN_BUS_KAFKA_BROKERS:", "CITIZEN_BUS_KAFKA_BROKER:", "CITIZEN_BUS_KAFKA_BROKER is no setting"},
		{"--target=gateway", "--target=gateways", `"gateways"`},
		{`"8080-8089:8080"`, `"8080-8089:8081"`, "container port 8081"},
	}
	for _, c := range cases {
		t.Run(c.new, func(t *testing.T) {
			wantProblem(t, checkCompose(t, mutate(t, "compose.yaml", b, c.old, c.new)), c.want)
		})
	}
}
