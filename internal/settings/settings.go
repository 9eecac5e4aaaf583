// Package settings turns a configuration struct into settings: every leaf
// field with a `yaml` tag is a key of a YAML file, an environment variable
// (Prefix + the dotted yaml path in upper case with dots as underscores)
// and a flag (the dotted path with underscores as dashes), set with the
// precedence default < file < environment < flag. A field's `help` tag is
// its flag's usage and its line in the reference; a `secret` tag ("true",
// or "url" to keep a URL without its password) redacts it when printed.
//
// It is written here rather than taken from a library (koanf, viper,
// dskit's flagext) because citizen's configuration is one plain struct
// tree: reflection over it gives flags, environment, the YAML file, the
// printed configuration and the Markdown reference from the same tags,
// with unknown keys refused at their line, in about 300 lines and no
// dependency beyond yaml.v3.
package settings

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Options describe a configuration's settings beyond its struct tags.
type Options struct {
	// Prefix starts every environment variable, e.g. "CITIZEN_".
	Prefix string
	// Removed are keys that no longer exist: a file or environment
	// variable that names one is refused with what replaces it, instead
	// of being refused as unknown.
	Removed []Removed
	// Expand fills placeholders in a help text (nil: none).
	Expand func(help string) string
}

// Removed is a key that no longer exists and what to set instead.
type Removed struct{ Path, Instead string }

// Field is one settable leaf of a configuration struct.
type Field struct {
	Path   string // dotted yaml path
	Help   string // the help tag, placeholders not yet filled
	Secret string // the secret tag: "" (not a secret), "true" or "url"
	v      reflect.Value
}

// FlagName is the field's flag: its path with underscores as dashes.
func (f Field) FlagName() string { return strings.ReplaceAll(f.Path, "_", "-") }

// EnvName is the field's environment variable under prefix.
func (f Field) EnvName(prefix string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(f.Path, ".", "_"))
}

// Value is the field's value as a flag would set it.
func (f Field) Value() string { return formatValue(f.v) }

// Fields lists the leaves of the struct p points to, in declaration order.
func Fields(p any) []Field {
	var out []Field
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name := strings.Split(sf.Tag.Get("yaml"), ",")[0]
			if name == "" || name == "-" {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Duration(0)) {
				walk(fv, path)
				continue
			}
			out = append(out, Field{Path: path, Help: sf.Tag.Get("help"), Secret: sf.Tag.Get("secret"), v: fv})
		}
	}
	walk(reflect.ValueOf(p).Elem(), "")
	return out
}

// Set parses s into the field.
func (f Field) Set(s string) error {
	switch f.v.Interface().(type) {
	case string:
		f.v.SetString(s)
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		f.v.SetInt(int64(d))
	case int, int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", f.Path, s)
		}
		f.v.SetInt(n)
	case float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", f.Path, s)
		}
		f.v.SetFloat(x)
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", f.Path, s)
		}
		f.v.SetBool(b)
	case []float64:
		var xs []float64
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			x, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a number", f.Path, p)
			}
			xs = append(xs, x)
		}
		f.v.Set(reflect.ValueOf(xs))
	case []string:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.v.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("%s: unsupported config type %s", f.Path, f.v.Type())
	}
	return nil
}

func (o Options) usage(f Field) string {
	if o.Expand == nil {
		return f.Help
	}
	return o.Expand(f.Help)
}

// Register adds --config and one flag per leaf of defaults() to fs. The
// function it returns, called after fs.Parse, builds the configuration
// from defaults(), the file (--config, else the environment's
// Prefix+"CONFIG"), the environment and the flags, in that precedence.
func Register[T any](fs *flag.FlagSet, lookupEnv func(string) (string, bool), defaults func() T, o Options) func() (T, error) {
	var file string
	fs.StringVar(&file, "config", "", "YAML config file (env "+o.Prefix+"CONFIG)")
	def := defaults()
	set := map[string]string{}
	for _, f := range Fields(&def) {
		f := f
		fs.Func(f.FlagName(), fmt.Sprintf("%s (env %s, default %s)", o.usage(f), f.EnvName(o.Prefix), f.Value()), func(s string) error {
			set[f.Path] = s
			return nil
		})
	}
	return func() (T, error) {
		var zero T
		cfg := defaults()
		if file == "" {
			file, _ = lookupEnv(o.Prefix + "CONFIG")
		}
		if file != "" {
			if err := LoadYAML(file, &cfg, o); err != nil {
				return zero, err
			}
		}
		for _, k := range o.Removed {
			env := Field{Path: k.Path}.EnvName(o.Prefix)
			if _, ok := lookupEnv(env); ok {
				return zero, fmt.Errorf("config: env %s: %s was removed: set %s", env, k.Path, k.Instead)
			}
		}
		for _, f := range Fields(&cfg) {
			if s, ok := lookupEnv(f.EnvName(o.Prefix)); ok {
				if err := f.Set(s); err != nil {
					return zero, fmt.Errorf("config: env %s: %w", f.EnvName(o.Prefix), err)
				}
			}
		}
		for _, f := range Fields(&cfg) {
			if s, ok := set[f.Path]; ok {
				if err := f.Set(s); err != nil {
					return zero, fmt.Errorf("config: flag --%s: %w", f.FlagName(), err)
				}
			}
		}
		return cfg, nil
	}
}

// LoadYAML decodes file over cfg; unknown keys are an error naming the key
// and its line, and a removed key one naming what replaces it.
func LoadYAML(file string, cfg any, o Options) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return DecodeYAML(file, b, cfg, o)
}

// DecodeYAML decodes b, the contents of the config file named file, over
// cfg, as LoadYAML does.
func DecodeYAML(file string, b []byte, cfg any, o Options) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("config: %s: %w", file, err)
	}
	for _, k := range o.Removed {
		if line := KeyLine(&doc, strings.Split(k.Path, ".")); line > 0 {
			return fmt.Errorf("config: %s: line %d: %s was removed: set %s", file, line, k.Path, k.Instead)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %s: %w", file, err)
	}
	return nil
}

// KeyLine returns the line of the mapping key at path in a YAML document,
// or 0 when the document has none.
func KeyLine(n *yaml.Node, path []string) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for i, name := range path {
		if n.Kind != yaml.MappingNode {
			return 0
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == name {
				if i == len(path)-1 {
					return n.Content[j].Line
				}
				next = n.Content[j+1]
				break
			}
		}
		if next == nil {
			return 0
		}
		n = next
	}
	return 0
}

func formatValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	case []float64:
		parts := make([]string, len(x))
		for i, f := range x {
			parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
		}
		return strings.Join(parts, ",")
	case string:
		if x == "" {
			return `""`
		}
		return x
	default:
		return fmt.Sprint(x)
	}
}

// redactSecret hides a secret value: kind "url" keeps the URL but its
// password (and any query string), anything else becomes "[redacted]".
func redactSecret(kind, v string) string {
	if kind == "url" {
		if u, err := url.Parse(v); err == nil && u.Host != "" {
			if u.User != nil {
				if _, has := u.User.Password(); has {
					u.User = url.UserPassword(u.User.Username(), "redacted")
				}
			}
			if u.RawQuery != "" {
				u.RawQuery = "redacted"
			}
			return u.String()
		}
	}
	return "[redacted]"
}

// Print writes *cfg (cfg is a pointer to a copy it may change) as YAML,
// followed by the environment variable and flag of each key. Secrets are
// redacted: a key prints as "[redacted]", a URL without its password.
func Print(cfg any, o Options) string {
	var b strings.Builder
	fs := Fields(cfg)
	for _, f := range fs {
		if v, ok := f.v.Interface().(string); ok && v != "" && f.Secret != "" {
			f.v.SetString(redactSecret(f.Secret, v))
		}
	}
	out, _ := yaml.Marshal(cfg)
	b.Write(out)
	b.WriteString("\n# Every key is also settable by environment and flag, e.g.\n")
	for _, f := range fs {
		fmt.Fprintf(&b, "#   %-24s %-32s --%s\n", f.Path, f.EnvName(o.Prefix), f.FlagName())
	}
	return b.String()
}

// Reference writes every setting of *def with its flag, environment
// variable, default and help as Markdown tables, one per top-level key
// (leaves at the top level form the section named top).
func Reference(def any, top string, o Options) string {
	var b strings.Builder
	var sections []string
	rows := map[string][]string{}
	for _, f := range Fields(def) {
		s := top
		if i := strings.IndexByte(f.Path, '.'); i >= 0 {
			s = f.Path[:i]
		}
		if rows[s] == nil {
			sections = append(sections, s)
		}
		d := f.Value()
		if d == "" || d == `""` {
			d = "*(empty)*"
		} else {
			d = "`" + d + "`"
		}
		help := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(o.usage(f))
		rows[s] = append(rows[s], fmt.Sprintf("| `%s` | `--%s` | `%s` | %s | %s |\n", f.Path, f.FlagName(), f.EnvName(o.Prefix), d, help))
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n| setting | flag | environment | default | help |\n|---|---|---|---|---|\n", s)
		for _, r := range rows[s] {
			b.WriteString(r)
		}
	}
	return b.String()
}
