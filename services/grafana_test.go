package services

import (
	"citizen/internal/modules"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// grafanaPanel is what the check reads of a dashboard panel; rows nest
// their panels when collapsed.
type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardExprs returns every PromQL expression of a Grafana dashboard,
// by panel title; a panel other than a row without one is a problem.
func dashboardExprs(b []byte) (map[string][]string, []string) {
	var d struct {
		Title  string         `json:"title"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, []string{"the dashboard is not JSON: " + err.Error()}
	}
	var problems []string
	exprs := map[string][]string{}
	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				problems = append(problems, fmt.Sprintf("panel id %d is used twice", p.ID))
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					exprs[p.Title] = append(exprs[p.Title], t.Expr)
				}
			}
			if len(exprs[p.Title]) == 0 {
				problems = append(problems, fmt.Sprintf("panel %q has no PromQL expression", p.Title))
			}
		}
	}
	walk(d.Panels)
	if len(exprs) == 0 {
		problems = append(problems, "the dashboard has no panels")
	}
	return exprs, problems
}

var (
	promStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promModifier = regexp.MustCompile(`\boffset\s+-?[0-9A-Za-z]+|@\s*(start\(\)|end\(\)|[0-9.]+)`)
	promGrafana  = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_]+`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promNumber   = regexp.MustCompile(`\b\d+(\.\d+)?(e[+-]?\d+)?\b`)
	// PromQL keywords and aggregation operators (followed by a grouping
	// clause, not always by a parenthesis).
	promKeywords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"offset": true, "bool": true, "and": true, "or": true, "unless": true, "atan2": true,
		"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true,
	}
)

// promMetrics returns the metric names a PromQL expression selects, in
// order of first use: strings, label matchers, ranges, offset and @
// modifiers, Grafana variables and grouping clauses are dropped, then every identifier that is not a
// keyword, an aggregation or a function call is a metric name.
func promMetrics(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promGrafana.ReplaceAllString(s, "1")
	for {
		t := promMatchers.ReplaceAllString(s, " ")
		if t == s {
			break
		}
		s = t
	}
	s = promRanges.ReplaceAllString(s, " ")
	s = promModifier.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if promKeywords[name] || strings.HasPrefix(rest, "(") {
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// metricRegistered reports whether reg holds a metric named name. A
// registry refuses a second descriptor of a name it holds with other
// labels or help, so a probe that registers is a name reg lacks (and is
// unregistered at once). Gather alone would miss the vectors nothing has
// observed yet (no fallback happened, no error was answered).
func metricRegistered(reg *prometheus.Registry, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "grafana_test probe of " + name})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

// missingMetrics checks the names the dashboard's expressions use against
// reg: a name is registered, or it is a histogram's series (_bucket, _sum,
// _count) whose family reg gathers as a histogram (a summary for _sum and
// _count).
func missingMetrics(reg *prometheus.Registry, exprs map[string][]string) []string {
	types := map[string]string{} // HISTOGRAM, SUMMARY, ...
	if mfs, err := reg.Gather(); err == nil {
		for _, mf := range mfs {
			types[mf.GetName()] = mf.GetType().String()
		}
	}
	var problems []string
	for title, es := range exprs {
		for _, e := range es {
			if strings.Contains(e, "__name__") {
				problems = append(problems, fmt.Sprintf("panel %q: %s selects by __name__, which this check cannot follow", title, e))
			}
			for _, name := range promMetrics(e) {
				if metricRegistered(reg, name) {
					continue
				}
				base, suffix := name, ""
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, s); ok {
						base, suffix = b, s
					}
				}
				if suffix != "" && metricRegistered(reg, base) {
					typ, gathered := types[base]
					if gathered && (typ == "HISTOGRAM" || suffix != "_bucket" && typ == "SUMMARY") {
						continue
					}
					problems = append(problems, fmt.Sprintf("panel %q: %s: %s is not a histogram citizen exposes", title, name, base))
					continue
				}
				problems = append(problems, fmt.Sprintf("panel %q: metric %s is not registered by citizen", title, name))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// servingRegistry runs `citizen serve` in process (every module, the tiny
// model on the embedded engine), answers one completion so the generation
// histograms have series, and returns its metrics registry.
func servingRegistry(t *testing.T) *describing {
	t.Helper()
	addr := freeAddr(t)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := ParseConfig(fs, []string{"--data-dir", t.TempDir(), "--model.name", "tiny", "--gateway.listen", addr, "--log.level", "error"},
		Env{Stderr: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	logs := newSyncBuffer()
	reg := &describing{Registry: prometheus.NewRegistry()}
	a := &App{Config: cfg, Log: NewLogger(cfg.Log, logs), Metrics: reg}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- modules.New(a.Log, a.Modules()...).Run(ctx, cfg.Target, cfg.ShutdownTimeout) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + addr
	waitServing(t, base, logs)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions",
		strings.NewReader(`{"model":"citizen","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
	req.Header.Set("Authorization", "Bearer sk-citizen-dev")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	return reg
}

// TestGrafanaDashboard: every metric deploy/grafana/citizen.json queries
// is one a running citizen registers, so a renamed metric fails here; the
// mutations keep the check honest.
func TestGrafanaDashboard(t *testing.T) {
	dash := readDeployFile(t, "grafana/citizen.json")
	exprs, problems := dashboardExprs(dash)
	for _, p := range problems {
		t.Error(p)
	}
	reg := servingRegistry(t).Registry
	for _, p := range missingMetrics(reg, exprs) {
		t.Error(p)
	}
	t.Run("mutations", func(t *testing.T) {
		cases := []struct{ name, old, new, want string }{
			{"a misspelt metric", "citizen_worker_backlog_messages", "citizen_worker_backlog_mesages",
				"metric citizen_worker_backlog_mesages is not registered"},
			{"a histogram suffix on a counter", "rate(citizen_gateway_errors_total[", "rate(citizen_gateway_errors_total_count[",
				"citizen_gateway_errors_total is not a histogram"},
			{"a bucket of a metric that does not exist", "citizen_time_to_first_token_seconds_bucket", "citizen_time_to_first_tokens_seconds_bucket",
				"metric citizen_time_to_first_tokens_seconds_bucket is not registered"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ex, _ := dashboardExprs(mutate(t, c.name, dash, c.old, c.new))
				got := missingMetrics(reg, ex)
				if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
					t.Errorf("problems %q lack %q", got, c.want)
				}
			})
		}
		if _, p := dashboardExprs(mutate(t, "a panel without a query", dash, `"expr": "max(citizen_memory_indexer_lag_seconds)"`, `"expr": ""`)); !slices.ContainsFunc(p,
			func(p string) bool { return strings.Contains(p, `"Memory indexer lag" has no PromQL expression`) }) {
			t.Errorf("a panel without a query is not reported: %q", p)
		}
	})
}

// TestPromMetrics pins what counts as a metric name in an expression.
func TestPromMetrics(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (le, route) (rate(citizen_x_seconds_bucket{route=~"/v1/(chat|x)", a!="}"}[$__rate_interval])))`,
			[]string{"citizen_x_seconds_bucket"}},
		{`sum(rate(a_total[5m])) / ignoring(instance) sum without (job) (rate(b_total[${interval}] offset 1h))`, []string{"a_total", "b_total"}},
		{`max by (group) (citizen_worker_backlog_messages) > bool 1e3 and on (instance) up`, []string{"citizen_worker_backlog_messages", "up"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)") or vector(0)`, []string{"m"}},
		{`rate(e_total[1h:5m] @ end()) - f offset -30m`, []string{"e_total", "f"}},
		{`topk(5, sum by (type) (increase(c_total[1h]))) unless count(d) == 0`, []string{"c_total", "d"}},
		{`{__name__="x"}`, nil},
	}
	for _, c := range cases {
		if got := promMetrics(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("promMetrics(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}
