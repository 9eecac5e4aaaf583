package workplace

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

const usage = `usage:
  workplace run --target URL --api-key KEY [flags]   drive simulated customers against citizen
  workplace corpus [--n N] [--seed S] [--out FILE]   write the base model's training corpus (JSONL)

Run "workplace run -h" or "workplace corpus -h" for the flags.
`

// Main is the workplace command: Main(os.Args[1:], os.Stdout, os.Stderr) runs it; it returns the
// exit status (0 ok, 1 failure, 2 usage). Progress goes to stderr, results to stdout and files.
// SIGINT stops a run early and still writes the summary.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return mainRun(args[1:], stdout, stderr)
	case "corpus":
		return mainCorpus(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "workplace: unknown command %q\n%s", args[0], usage)
	return 2
}

func mainRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("workplace run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Target, "target", "", "citizen base URL, e.g. http://localhost:8080 (required)")
	fs.StringVar(&cfg.APIKey, "api-key", os.Getenv("CITIZEN_API_KEY"), "API key (default $CITIZEN_API_KEY)")
	fs.StringVar(&cfg.Model, "model", "citizen", "model name sent in requests")
	fs.IntVar(&cfg.Users, "users", 12, "simulated users")
	fs.IntVar(&cfg.Interactions, "interactions", 0, "conversations to run (0: until --duration; default 200 when neither is set)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop starting conversations after this long")
	fs.IntVar(&cfg.Concurrency, "concurrency", 4, "conversations in flight")
	fs.Float64Var(&cfg.Rate, "rate", 0, "conversations started per second at most (0: as fast as --concurrency allows)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "random seed")
	fs.Float64Var(&cfg.FeedbackRate, "feedback-rate", 0.3, "probability a user writes feedback")
	fs.Float64Var(&cfg.AbandonRate, "abandon-rate", 0.05, "probability a user leaves before each follow-up")
	fs.Float64Var(&cfg.OutcomeRate, "outcome-rate", 0.5, "probability of reporting an outcome without feedback")
	fs.Float64Var(&cfg.ToolFailRate, "tool-fail-rate", 0.05, "probability a valid tool call fails")
	fs.Float64Var(&cfg.ToolTimeoutRate, "tool-timeout-rate", 0.02, "probability a valid tool call times out")
	fs.IntVar(&cfg.TurnBudget, "turn-budget", 8, "most model calls per conversation")
	fs.DurationVar(&cfg.TimeBudget, "time-budget", 60*time.Second, "most wall time per conversation (0: none)")
	fs.IntVar(&cfg.Window, "window", 0, "conversations per summary window (default max(interactions/10, 50))")
	drift := fs.String("drift", "", `drift schedule "AT:key=value,...;AT:..." or "default"`)
	families := fs.String("families", "", "comma-separated families to use (default: all active)")
	fs.StringVar(&cfg.LogPath, "log", "", "write a JSONL record per conversation here")
	summaryPath := fs.String("summary", "", "write the summary as JSON here")
	quiet := fs.Bool("quiet", false, "no progress bar")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "workplace run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if cfg.Target == "" {
		fmt.Fprintln(stderr, "workplace run: --target is required")
		return 2
	}
	if cfg.Interactions == 0 && cfg.Duration == 0 {
		cfg.Interactions = 200
	}
	switch *drift {
	case "":
	case "default":
		n := cfg.Interactions
		if n == 0 {
			n = 1000
		}
		cfg.Drift = DefaultDrift(n)
	default:
		d, err := ParseDrift(*drift)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.Drift = d
	}
	if *families != "" {
		cfg.Families = strings.Split(*families, ",")
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	sum, err := Run(ctx, cfg, progress)
	fmt.Fprint(stdout, sum.Table())
	if *summaryPath != "" {
		if werr := writeJSON(*summaryPath, sum); werr != nil {
			fmt.Fprintln(stderr, werr)
			return 1
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func mainCorpus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("workplace corpus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 1000, "conversations")
	seed := fs.Int64("seed", 1, "random seed")
	families := fs.String("families", "", "comma-separated families (default: those active at time zero)")
	hint := fs.Float64("hint-rate", 0, "share of hinted conversations (default 0.15; negative for none)")
	fault := fs.Float64("fault-rate", 0, "share of failed tool calls (default 0.1; negative for none)")
	out := fs.String("out", "", "output file (default stdout)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts := CorpusOptions{HintRate: *hint, FaultRate: *fault}
	if *families != "" {
		opts.Families = strings.Split(*families, ",")
		for _, f := range opts.Families {
			if FamilyByName(f) == nil {
				fmt.Fprintf(stderr, "workplace corpus: unknown family %q\n", f)
				return 2
			}
		}
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, c := range Corpus(*seed, *n, opts) {
		if err := enc.Encode(c); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("workplace: %w", err)
	}
	return nil
}
