package settings

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testConfig struct {
	Name  string        `yaml:"name" help:"a name"`
	Wait  time.Duration `yaml:"wait" help:"a wait"`
	Inner struct {
		N    int      `yaml:"n" help:"a count"`
		Tags []string `yaml:"tags" help:"tags"`
		Key  string   `yaml:"key" secret:"true" help:"a key"`
	} `yaml:"inner"`
}

// default < file < environment < flag, each leaf on its own.
func TestRegisterPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(file, []byte("name: file\nwait: 3s\ninner:\n  n: 3\n"), 0o644)
	env := map[string]string{"T_INNER_N": "4", "T_WAIT": "4s"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	build := Register(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		func() testConfig { var c testConfig; c.Name = "default"; return c }, Options{Prefix: "T_"})
	if err := fs.Parse([]string{"--config", file, "--inner.n", "5", "--inner.tags", "a, b,"}); err != nil {
		t.Fatal(err)
	}
	c, err := build()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "file" || c.Wait != 4*time.Second || c.Inner.N != 5 || strings.Join(c.Inner.Tags, "|") != "a|b" {
		t.Fatalf("%+v", c)
	}
}

// An unknown key is refused with its line, a removed one with what
// replaces it, and a bad value with its setting; Print redacts secrets.
func TestRefusalsAndRedaction(t *testing.T) {
	o := Options{Prefix: "T_", Removed: []Removed{{Path: "inner.old", Instead: "inner.n"}}}
	var c testConfig
	for doc, want := range map[string]string{
		"nmae: x\n":          "line 1: field nmae not found",
		"inner:\n  old: 1\n": "line 2: inner.old was removed: set inner.n",
	} {
		if err := DecodeYAML("c.yaml", []byte(doc), &c, o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	for _, f := range Fields(&c) {
		if f.Path == "inner.n" {
			if err := f.Set("many"); err == nil || !strings.Contains(err.Error(), "inner.n") {
				t.Errorf("bad int: %v", err)
			}
		}
	}
	c.Inner.Key = "sk-secret"
	if out := Print(&c, o); strings.Contains(out, "sk-secret") || !strings.Contains(out, "T_INNER_KEY") {
		t.Errorf("print:\n%s", out)
	}
}
