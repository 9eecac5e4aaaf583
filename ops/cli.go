package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"citizen/events"
	"citizen/ops/rollout"
)

// Defaults of the command line.
const (
	DefaultURL    = "http://127.0.0.1:8080"
	DefaultAPIKey = "sk-citizen-dev"
)

const usage = `usage: citizen ops [flags] <command>

commands:
  rollout status                    the running rollout, its evidence, waiting candidates, recent rollouts
  rollout pause|resume|promote|abort [--reason TEXT]
                                    operator actions on the running rollout
  rollout start VERSION [--reason TEXT]
                                    start the canary of a trained version (one the
                                    offline gate rejected too: held in its first step)
  versions                          the lineage of trained versions
  stream [--type T] [--version V] [--tenant X] [--after POS]
                                    follow the operator event stream (Ctrl-C stops)

flags (before or after the command):
`

// Main runs "citizen ops" with args (the arguments after "ops"). baseURL
// and apiKey are the defaults of --url and --api-key; empty means the
// environment (CITIZEN_URL, CITIZEN_API_KEY) or DefaultURL and
// DefaultAPIKey. It returns the exit status: 0 done, 1 failed (the server
// refused or could not be reached), 2 usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, baseURL, apiKey string) int {
	if baseURL == "" {
		baseURL = envOr("CITIZEN_URL", DefaultURL)
	}
	if apiKey == "" {
		apiKey = envOr("CITIZEN_API_KEY", DefaultAPIKey)
	}
	fs := flag.NewFlagSet("citizen ops", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &client{}
	fs.StringVar(&c.base, "url", baseURL, "base URL of a running citizen")
	fs.StringVar(&c.key, "api-key", apiKey, "API key (env CITIZEN_API_KEY)")
	asJSON := fs.Bool("json", false, "print the server's JSON")
	reason := fs.String("reason", "", "reason recorded with an operator action")
	typ := fs.String("type", "", "stream: event types (comma-separated; a prefix such as rollout selects a family)")
	version := fs.String("version", "", "stream: only events about this version")
	tenant := fs.String("tenant", "", "stream: only events of this tenant")
	after := fs.String("after", "", "stream: start after this store position (default: new events only)")
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var words []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	c.http = &http.Client{}
	c.base = strings.TrimRight(c.base, "/")
	out := &printer{w: stdout, json: *asJSON}
	var err error
	switch {
	case slices.Equal(words, []string{"rollout", "status"}) || slices.Equal(words, []string{"rollout"}):
		var st rollout.Status
		if err = c.call(ctx, http.MethodGet, "/v1/ops/rollout", nil, &st, out); err == nil && !out.json {
			printStatus(stdout, st)
		}
	case len(words) == 2 && words[0] == "rollout" && slices.Contains([]string{"pause", "resume", "promote", "abort"}, words[1]):
		var ar ActionResponse
		body, _ := json.Marshal(ActionRequest{Reason: *reason})
		if err = c.call(ctx, http.MethodPost, "/v1/ops/rollout/"+words[1], body, &ar, out); err == nil && !out.json {
			fmt.Fprintf(stdout, "%s: appended %s at position %d\n\n", words[1], ar.Event.Type, ar.Event.Position)
			printStatus(stdout, ar.Status)
		}
	case len(words) == 3 && words[0] == "rollout" && words[1] == "start":
		var ar ActionResponse
		body, _ := json.Marshal(StartRequest{Candidate: words[2], Reason: *reason})
		if err = c.call(ctx, http.MethodPost, "/v1/ops/rollout/start", body, &ar, out); err == nil && !out.json {
			fmt.Fprintf(stdout, "start: appended %s at position %d\n\n", ar.Event.Type, ar.Event.Position)
			printStatus(stdout, ar.Status)
		}
	case slices.Equal(words, []string{"versions"}):
		var vr VersionsResponse
		if err = c.call(ctx, http.MethodGet, "/v1/ops/versions", nil, &vr, out); err == nil && !out.json {
			printVersions(stdout, vr)
		}
	case slices.Equal(words, []string{"stream"}):
		q := url.Values{}
		for k, v := range map[string]string{"type": *typ, "version": *version, "tenant": *tenant, "after": *after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		err = c.stream(ctx, q, stdout, *asJSON)
	default:
		fmt.Fprintf(stderr, "citizen ops: unknown command %q\n", strings.Join(words, " "))
		fs.Usage()
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "citizen ops: %v\n", err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

type client struct {
	base, key string
	http      *http.Client
}

type printer struct {
	w    io.Writer
	json bool
}

// call does one request; a non-2xx answer is an error carrying the
// server's message.
func (c *client) call(ctx context.Context, method, path string, body []byte, out any, p *printer) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := c.http.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, serverMessage(resp.Status, b))
	}
	if p.json {
		_, err := p.w.Write(append(b, '\n'))
		return err
	}
	return json.Unmarshal(b, out)
}

func serverMessage(status string, b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return status + ": " + e.Error.Message
	}
	return status + ": " + strings.TrimSpace(string(b))
}

// stream prints the event stream until ctx ends or the server closes it.
func (c *client) stream(ctx context.Context, q url.Values, w io.Writer, raw bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/ops/stream?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return fmt.Errorf("stream: %s", serverMessage(resp.Status, b))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), events.MaxEventSize+1024)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if raw {
			fmt.Fprintln(w, data)
			continue
		}
		var ev events.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			fmt.Fprintln(w, data)
			continue
		}
		fmt.Fprintf(w, "%8d  %s  %-22s %s\n", ev.Position, ev.Time.Local().Format("15:04:05"), ev.Type, Summary(&ev))
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("stream: the server closed the stream")
}

// Summary is a one-line description of a stream event.
func Summary(ev *events.Event) string {
	p, err := events.Decode(ev)
	if err != nil {
		return string(ev.Data)
	}
	switch x := p.(type) {
	case *events.InteractionEvaluated:
		s := fmt.Sprintf("%s %s reward=%.3f length=%d tools=%d", x.ModelVersion, x.TaskType, x.Reward, x.AnswerLength, x.ToolCalls)
		if x.Outcome != "" {
			s += " outcome=" + x.Outcome
		}
		return s
	case *events.FeedbackInterpreted:
		return fmt.Sprintf("%s polarity=%.2f aspects=%s", x.InteractionID, x.Polarity, strings.Join(x.Aspects, ","))
	case *events.AnomalyDetected:
		return fmt.Sprintf("%s %s %s value=%.3g baseline=%.3g", x.Version, x.Kind, x.TaskType, x.Value, x.Baseline)
	case *events.WeightsTrained:
		if x.Accepted {
			return fmt.Sprintf("%s <- %s accepted", x.Version, x.Parent)
		}
		return fmt.Sprintf("%s <- %s rejected: %s", x.Version, x.Parent, x.Reason)
	}
	var ch events.RolloutChange
	if json.Unmarshal(ev.Data, &ch) == nil && ch.Candidate != "" {
		return fmt.Sprintf("%s vs %s step %d weight %.2f by %s: %s", ch.Candidate, ch.Stable, ch.Step, ch.Weight, ch.Actor, ch.Reason)
	}
	return string(ev.Data)
}

func printStatus(w io.Writer, st rollout.Status) {
	fmt.Fprintf(w, "stable     %s\n", st.Stable)
	if a := st.Active; a != nil {
		state := "running"
		if a.Paused {
			state = "paused"
		}
		fmt.Fprintf(w, "rollout    %s (%s since %s)\n", a.RolloutID, state, a.StartedAt.Local().Format(time.DateTime))
		fmt.Fprintf(w, "candidate  %s: step %d of %d, %.0f%% of traffic\n", a.Candidate, a.Step+1, len(st.Steps), 100*a.Weight)
		if e := a.Evidence; e != nil {
			fmt.Fprintf(w, "evidence   candidate %d evaluations (%d this step), stable %d (%d this step)\n",
				e.Counts["candidate"], e.Counts["candidate.step"], e.Counts["stable"], e.Counts["stable.step"])
			var names []string
			for k := range e.Means {
				if n, ok := strings.CutSuffix(k, ".candidate"); ok {
					names = append(names, n)
				}
			}
			slices.Sort(names)
			for _, n := range names {
				fmt.Fprintf(w, "  %-14s %10.3f vs %10.3f", n, e.Means[n+".candidate"], e.Means[n+".stable"])
				if lo, ok := e.Intervals[n+".lo"]; ok {
					fmt.Fprintf(w, "   diff %+.3f [%+.3f, %+.3f]", e.Means[n+".diff"], lo, e.Intervals[n+".hi"])
				}
				fmt.Fprintln(w)
			}
		}
	} else {
		fmt.Fprintln(w, "rollout    none running")
	}
	if len(st.Waiting) > 0 {
		fmt.Fprintf(w, "waiting    %s\n", strings.Join(st.Waiting, ", "))
	}
	for i, f := range st.History {
		if i == 5 {
			break
		}
		if i == 0 {
			fmt.Fprintln(w, "recent")
		}
		fmt.Fprintf(w, "  %s  %-12s %-11s by %-10s %s\n", f.EndedAt.Local().Format(time.DateTime), f.Candidate, f.Outcome, f.Actor, f.Reason)
	}
}

func printVersions(w io.Writer, vr VersionsResponse) {
	fmt.Fprintf(w, "%-16s %-16s %-12s %s\n", "VERSION", "PARENT", "STATUS", "TRAINED")
	for _, v := range vr.Versions {
		fmt.Fprintf(w, "%-16s %-16s %-12s %s\n", v.Version, v.Parent, v.Status, v.TrainedAt.Local().Format(time.DateTime))
	}
	if len(vr.Versions) == 0 {
		fmt.Fprintf(w, "(no trained versions; stable is %s)\n", vr.Stable)
	}
}
