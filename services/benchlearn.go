package services

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"citizen/events"
	"citizen/workplace"
)

func init() {
	extraCommands["bench"] = extraCommand{summary: "bench learn: run citizen and the workplace with drift and faults, report learning", run: cmdBench}
}

// LearnConfig are the settings of `citizen bench learn`.
type LearnConfig struct {
	Interactions    int
	Concurrency     int
	Seed            int64
	Drift           string
	ToolFailRate    float64
	ToolTimeoutRate float64
	FeedbackRate    float64
	Window          int
	Out             string
	DataDir         string
	Checkpoint      string
	// BadCandidate trains the first candidate on inverted rewards and
	// forces it past the offline gate (a test hook for the rollback check).
	BadCandidate bool
	MinNewGraded int
}

func cmdBench(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 || args[0] != "learn" {
		return usageError{"usage: citizen bench learn [flags]"}
	}
	fs := flag.NewFlagSet("bench learn", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var c LearnConfig
	fs.IntVar(&c.Interactions, "interactions", 3000, "workplace conversations to run")
	fs.IntVar(&c.Concurrency, "concurrency", 8, "conversations in flight")
	fs.Int64Var(&c.Seed, "seed", 1, "workplace seed")
	fs.StringVar(&c.Drift, "drift", "800:refund_days=60", "drift schedule (workplace syntax: AT:key=value;...)")
	fs.Float64Var(&c.ToolFailRate, "tool-fail-rate", 0, "probability a tool call fails regardless of the model")
	fs.Float64Var(&c.ToolTimeoutRate, "tool-timeout-rate", 0, "probability a tool call times out")
	fs.Float64Var(&c.FeedbackRate, "feedback-rate", 0.5, "probability a user writes feedback")
	fs.IntVar(&c.Window, "window", 200, "conversations per report window")
	fs.StringVar(&c.Out, "out", "bench-learn", "directory for report.json, report.txt, accuracy.png and the logs")
	fs.StringVar(&c.DataDir, "data-dir", "", "citizen's data directory (default: OUT/data, emptied first)")
	fs.StringVar(&c.Checkpoint, "checkpoint", "model/base", "the base checkpoint")
	fs.BoolVar(&c.BadCandidate, "bad-candidate", false, "test hook: the first candidate is trained on inverted rewards and forced past the gate")
	fs.IntVar(&c.MinNewGraded, "min-new-graded", 32, "graded interactions that start a training cycle")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	rep, err := BenchLearn(ctx, c, env.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, rep.Text)
	return nil
}

// LearnReport is what `citizen bench learn` measures.
type LearnReport struct {
	Config          LearnConfig                  `json:"config"`
	Windows         []LearnWindow                `json:"windows"`
	Versions        []VersionEvent               `json:"versions"`
	Trained         int                          `json:"versions_trained"`
	Rejected        int                          `json:"versions_rejected"`
	Promoted        int                          `json:"versions_promoted"`
	RolledBack      int                          `json:"versions_rolled_back"`
	DriftAt         []int                        `json:"drift_at"`
	FeedbackToFixS  *float64                     `json:"feedback_to_canary_fix_s,omitempty"`
	FixDetail       string                       `json:"fix_detail,omitempty"`
	FinalAccuracy   map[string]float64           `json:"final_window_accuracy"`
	ByVersion       map[string]map[string]Ratio  `json:"accuracy_by_version_and_type"`
	LengthByVersion map[string]float64           `json:"mean_answer_chars_by_version"`
	ToolsByVersion  map[string]float64           `json:"tool_calls_per_conversation_by_version"`
	Summary         workplace.Summary            `json:"workplace_summary"`
	ElapsedS        float64                      `json:"elapsed_s"`
	Text            string                       `json:"-"`
	perVersionTypes map[string]map[string][2]int `json:"-"`
}

// Ratio is a count of correct answers out of a total.
type Ratio struct {
	Correct int     `json:"correct"`
	Total   int     `json:"total"`
	Rate    float64 `json:"rate"`
}

// LearnWindow is one window of conversations.
type LearnWindow struct {
	Start, End int
	// Accuracy per type of the served mix (-1: no conversation of the type).
	Accuracy map[string]float64
	N        map[string]int
	Versions map[string]int
}

// VersionEvent is a version's life event placed on the conversation axis.
type VersionEvent struct {
	Kind    string  `json:"kind"` // trained, rejected, started, advanced, promoted, rolled_back
	Version string  `json:"version"`
	At      int     `json:"at_conversation"`
	Time    string  `json:"time"`
	Reason  string  `json:"reason,omitempty"`
	Weight  float64 `json:"weight,omitempty"`
}

// BenchLearn starts citizen on embedded defaults in this process, drives it
// with the workplace (drift and faults as configured), and reports how it
// learned.
func BenchLearn(ctx context.Context, c LearnConfig, progress io.Writer) (*LearnReport, error) {
	start := time.Now()
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return nil, err
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(c.Out, "data")
		if err := os.RemoveAll(c.DataDir); err != nil {
			return nil, err
		}
	}
	drift, err := workplace.ParseDrift(c.Drift)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()

	cfg := DefaultConfig()
	cfg.DataDir = c.DataDir
	cfg.Model.Checkpoint = c.Checkpoint
	cfg.Gateway.Listen = addr
	cfg.Distill.MinNewGraded = c.MinNewGraded
	cfg.Distill.Interval = 30 * time.Second
	logf, err := os.Create(filepath.Join(c.Out, "citizen.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	app := &App{Config: cfg, Log: NewLogger(LogConfig{Level: "info", Format: "text"}, logf), benchBad: c.BadCandidate}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- NewManager(app.Log, app.Modules()...).Run(sctx, []string{"all"}, 30*time.Second) }()
	base := "http://" + addr
	if err := waitReady(ctx, base, done); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "bench learn: citizen serving at %s (data %s, log %s)\n", base, c.DataDir, logf.Name())

	logPath := filepath.Join(c.Out, "workplace.jsonl")
	wcfg := workplace.Config{Target: base, APIKey: "sk-citizen-dev", Interactions: c.Interactions, Concurrency: c.Concurrency,
		Seed: c.Seed, FeedbackRate: c.FeedbackRate, OutcomeRate: 0.5, AbandonRate: 0.02, ToolFailRate: c.ToolFailRate,
		ToolTimeoutRate: c.ToolTimeoutRate, Drift: drift, Window: c.Window, LogPath: logPath}
	sum, werr := workplace.Run(ctx, wcfg, progress)
	cancel()
	if err := <-done; err != nil {
		return nil, fmt.Errorf("bench learn: citizen stopped with: %w", err)
	}
	if werr != nil {
		return nil, fmt.Errorf("bench learn: workplace: %w", werr)
	}
	recs, err := readRecords(logPath)
	if err != nil {
		return nil, err
	}
	st, err := OpenStore(cfg, app.Log)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rep, err := analyseLearning(ctx, c, drift, recs, st)
	if err != nil {
		return nil, err
	}
	rep.Summary = sum
	rep.ElapsedS = time.Since(start).Seconds()
	rep.Text = rep.render()
	if err := rep.write(c.Out); err != nil {
		return nil, err
	}
	return rep, nil
}

func waitReady(ctx context.Context, base string, done <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("bench learn: citizen did not start: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("bench learn: citizen not ready after 2 minutes")
}

func readRecords(path string) ([]workplace.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []workplace.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r workplace.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("bench learn: workplace log: %w", err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, sc.Err()
}

// servedBy is the version that answered a conversation's last turn.
func servedBy(r workplace.Record) string {
	if len(r.Versions) == 0 {
		return "?"
	}
	return r.Versions[len(r.Versions)-1]
}

func analyseLearning(ctx context.Context, c LearnConfig, drift workplace.Drift, recs []workplace.Record, st events.Store) (*LearnReport, error) {
	rep := &LearnReport{Config: c, ByVersion: map[string]map[string]Ratio{}, LengthByVersion: map[string]float64{},
		ToolsByVersion: map[string]float64{}, FinalAccuracy: map[string]float64{}}
	for _, d := range drift {
		rep.DriftAt = append(rep.DriftAt, d.At)
	}
	// Interaction id -> conversation index, and interaction times.
	convOf := map[string]int{}
	for _, r := range recs {
		for _, t := range r.Turns {
			for _, id := range t.InteractionIDs {
				if iid, ok := strings.CutPrefix(id, "chatcmpl-"); ok {
					id = iid
				}
				convOf[id] = r.Index
			}
		}
	}
	recTime := map[int]time.Time{}
	type timed struct {
		t   time.Time
		idx int
	}
	var timeline []timed
	var all []events.Event
	var after uint64
	for {
		batch, err := st.ReadAll(ctx, after, events.Filter{}, 4096)
		if err != nil {
			return nil, err
		}
		if len(batch) == 0 {
			break
		}
		for _, ev := range batch {
			if ev.Type == events.TypeInteractionRecorded {
				id := strings.TrimPrefix(ev.Stream, "interaction-")
				if idx, ok := convOf[id]; ok {
					if _, seen := recTime[idx]; !seen {
						recTime[idx] = ev.Time
						timeline = append(timeline, timed{ev.Time, idx})
					}
				}
			}
			switch ev.Type {
			case events.TypeWeightsTrained, events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPromoted,
				events.TypeRolloutRolledBack, events.TypeFeedbackReceived:
				all = append(all, ev)
			}
		}
		after = batch[len(batch)-1].Position
	}
	sort.Slice(timeline, func(i, j int) bool { return timeline[i].t.Before(timeline[j].t) })
	// atConv places a time on the conversation axis: the highest index
	// recorded by then.
	atConv := func(t time.Time) int {
		best := 0
		for _, x := range timeline {
			if x.t.After(t) {
				break
			}
			best = max(best, x.idx)
		}
		return best
	}
	var firstCorrection time.Time
	var firstCorrectionConv int
	driftStart := -1
	if len(rep.DriftAt) > 0 {
		driftStart = rep.DriftAt[0]
	}
	for _, ev := range all {
		p, err := events.Decode(&ev)
		if err != nil {
			continue
		}
		add := func(kind, version, reason string, w float64) {
			rep.Versions = append(rep.Versions, VersionEvent{Kind: kind, Version: version, At: atConv(ev.Time), Time: ev.Time.Format(time.RFC3339Nano), Reason: reason, Weight: w})
		}
		switch x := p.(type) {
		case *events.WeightsTrained:
			if x.Accepted {
				rep.Trained++
				add("trained", x.Version, x.Reason, 0)
			} else {
				rep.Rejected++
				add("rejected", x.Version, x.Reason, 0)
			}
		case *events.RolloutStarted:
			add("canary", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutAdvanced:
			add("advanced", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutPromoted:
			rep.Promoted++
			add("promoted", x.Candidate, x.Reason, x.Weight)
		case *events.RolloutRolledBack:
			rep.RolledBack++
			add("rolled_back", x.Candidate, x.Reason, x.Weight)
		case *events.FeedbackReceived:
			idx, ok := convOf[x.InteractionID]
			if !ok || driftStart < 0 || idx < driftStart || !firstCorrection.IsZero() {
				continue
			}
			if x.Correction != "" || strings.Contains(strings.ToLower(x.Text), "days") {
				if r := recs[min(idx, len(recs)-1)]; r.Index == idx && r.Type == "policy" && !r.Correct {
					firstCorrection, firstCorrectionConv = ev.Time, idx
				}
			}
		}
	}
	// Windows, per version accuracy, behaviour per version.
	win := max(c.Window, 1)
	lengthSum, lengthN, toolSum := map[string]float64{}, map[string]int{}, map[string]float64{}
	for _, r := range recs {
		w := r.Index / win
		for len(rep.Windows) <= w {
			s := len(rep.Windows) * win
			rep.Windows = append(rep.Windows, LearnWindow{Start: s, End: s + win, Accuracy: map[string]float64{}, N: map[string]int{}, Versions: map[string]int{}})
		}
		lw := &rep.Windows[w]
		v := servedBy(r)
		lw.Versions[v]++
		if r.Dropped || r.Error != "" {
			continue
		}
		lw.N[r.Type]++
		if r.Correct {
			lw.Accuracy[r.Type]++
		}
		if rep.ByVersion[v] == nil {
			rep.ByVersion[v] = map[string]Ratio{}
		}
		ra := rep.ByVersion[v][r.Type]
		ra.Total++
		if r.Correct {
			ra.Correct++
		}
		ra.Rate = float64(ra.Correct) / float64(ra.Total)
		rep.ByVersion[v][r.Type] = ra
		lengthSum[v] += float64(len(r.Answer))
		lengthN[v]++
		toolSum[v] += float64(r.ToolCalls)
	}
	for i := range rep.Windows {
		for t, n := range rep.Windows[i].N {
			rep.Windows[i].Accuracy[t] /= float64(n)
		}
	}
	for v, n := range lengthN {
		rep.LengthByVersion[v] = lengthSum[v] / float64(n)
		rep.ToolsByVersion[v] = toolSum[v] / float64(n)
	}
	if len(rep.Windows) > 0 {
		rep.FinalAccuracy = rep.Windows[len(rep.Windows)-1].Accuracy
	}
	// Feedback to a canary that serves the fix: the first correct policy
	// answer after the drift served by a trained version, timed from the
	// first corrective feedback after the drift.
	if !firstCorrection.IsZero() {
		for _, r := range recs {
			if r.Index <= firstCorrectionConv || r.Type != "policy" || !r.Correct || servedBy(r) == "base" || r.PolicyVersion == 0 {
				continue
			}
			if t, ok := recTime[r.Index]; ok && t.After(firstCorrection) {
				d := t.Sub(firstCorrection).Seconds()
				rep.FeedbackToFixS = &d
				rep.FixDetail = fmt.Sprintf("first corrective feedback on conversation %d; conversation %d answered correctly by %s %.1f s later", firstCorrectionConv, r.Index, servedBy(r), d)
				break
			}
		}
		if rep.FeedbackToFixS == nil {
			rep.FixDetail = fmt.Sprintf("first corrective feedback on conversation %d; no canary served a correct drifted answer afterwards", firstCorrectionConv)
		}
	}
	return rep, nil
}

func (rep *LearnReport) types() []string {
	set := map[string]bool{}
	for _, w := range rep.Windows {
		for t := range w.N {
			set[t] = true
		}
	}
	var ts []string
	for t := range set {
		ts = append(ts, t)
	}
	sort.Strings(ts)
	return ts
}

func (rep *LearnReport) render() string {
	var b strings.Builder
	types := rep.types()
	fmt.Fprintf(&b, "citizen bench learn: %d conversations, drift %q, tool failures %.0f%%, timeouts %.0f%%, seed %d (%.0f s)\n\n",
		rep.Config.Interactions, rep.Config.Drift, 100*rep.Config.ToolFailRate, 100*rep.Config.ToolTimeoutRate, rep.Config.Seed, rep.ElapsedS)
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "window\t")
	for _, t := range types {
		fmt.Fprintf(tw, "%s\t", t)
	}
	fmt.Fprintln(tw, "versions served\t")
	for _, w := range rep.Windows {
		fmt.Fprintf(tw, "[%d,%d)\t", w.Start, w.End)
		for _, t := range types {
			if w.N[t] == 0 {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%.2f (%d)\t", w.Accuracy[t], w.N[t])
			}
		}
		fmt.Fprintf(tw, "%s\t\n", fmtCounts(w.Versions))
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nversions: %d trained and accepted, %d rejected by the offline gate, %d promoted, %d rolled back\n", rep.Trained, rep.Rejected, rep.Promoted, rep.RolledBack)
	for _, v := range rep.Versions {
		fmt.Fprintf(&b, "  conv %5d  %-11s %-8s %s\n", v.At, v.Kind, v.Version, truncate(v.Reason, 110))
	}
	fmt.Fprintf(&b, "\naccuracy by version and type (served answers):\n")
	vs := make([]string, 0, len(rep.ByVersion))
	for v := range rep.ByVersion {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		fmt.Fprintf(&b, "  %-8s", v)
		for _, t := range types {
			if r, ok := rep.ByVersion[v][t]; ok {
				fmt.Fprintf(&b, "  %s %.2f/%d", t, r.Rate, r.Total)
			}
		}
		fmt.Fprintf(&b, "  | answer chars %.1f, tool calls/conv %.2f\n", rep.LengthByVersion[v], rep.ToolsByVersion[v])
	}
	if rep.FixDetail != "" {
		fmt.Fprintf(&b, "\nfeedback to canary fix: %s\n", rep.FixDetail)
	}
	return b.String()
}

func fmtCounts(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s:%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (rep *LearnReport) write(dir string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(rep.Text), 0o644); err != nil {
		return err
	}
	var xs []float64
	series := map[string][]float64{}
	for _, w := range rep.Windows {
		xs = append(xs, float64(w.End))
	}
	for _, t := range rep.types() {
		for _, w := range rep.Windows {
			if w.N[t] == 0 {
				series[t] = append(series[t], -1)
			} else {
				series[t] = append(series[t], w.Accuracy[t])
			}
		}
	}
	var marks []PlotMark
	for _, d := range rep.DriftAt {
		marks = append(marks, PlotMark{At: float64(d), Label: "drift", Color: color.RGBA{120, 120, 120, 255}})
	}
	for _, v := range rep.Versions {
		switch v.Kind {
		case "promoted":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " promoted", Color: color.RGBA{0, 150, 0, 255}})
		case "rolled_back":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " rolled back", Color: color.RGBA{200, 0, 0, 255}})
		case "canary":
			marks = append(marks, PlotMark{At: float64(v.At), Label: v.Version + " canary", Color: color.RGBA{230, 160, 0, 255}})
		}
	}
	png, err := Plot("citizen bench learn: served accuracy per type (window end)", "conversations", xs, series, marks)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "accuracy.png"), png, 0o644)
}
