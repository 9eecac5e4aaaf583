package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"citizen/bench/hotpath"
	"citizen/bench/learn"
	"citizen/services"
)

// Summary is the bench command's line in citizen's usage.
const Summary = "bench learn | gateway: learning with drift and faults; the per-interaction hot path against a mock upstream"

// Command is `citizen bench`: learn (package bench/learn) or gateway
// (package bench/hotpath against this binary).
func Command(ctx context.Context, args []string, env services.Env) error {
	if len(args) > 0 {
		switch args[0] {
		case "gateway":
			return cmdBenchGateway(ctx, args[1:], env)
		case "learn":
			return learn.Command(ctx, args[1:], env)
		}
	}
	return services.UsageError{Msg: "usage: citizen bench learn|gateway [flags]"}
}

// cmdBenchGateway runs the hot-path harness (package bench/hotpath)
// against this binary: `citizen bench gateway [flags]`. Its child
// processes re-execute the binary: `bench gateway mock` is the mock
// upstream, `bench gateway serve --pprof ADDR` is `citizen serve` with
// net/http/pprof on ADDR (only when profiling).
func cmdBenchGateway(ctx context.Context, args []string, env services.Env) error {
	if len(args) > 0 {
		switch args[0] {
		case "mock":
			return benchMock(ctx, args[1:], env)
		case "serve":
			return benchServe(ctx, args[1:], env)
		}
	}
	fs := flag.NewFlagSet("bench gateway", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var c hotpath.RunConfig
	targets := fs.String("targets", "direct,all", "what to measure besides peers: direct (to the mock), all (citizen serve), gateway (citizen serve --target=gateway, on the embedded store unless --gateway-store-args), gateway-shared (the same on --shared-store-args)")
	fs.IntVar(&c.Rounds, "rounds", 3, "interleaved rounds; the report gives medians")
	fs.IntVar(&c.Serial, "serial", 1000, "requests of each concurrency-1 load (non-streaming, then streaming)")
	fs.IntVar(&c.Warmup, "warmup", 200, "warm-up requests at 4 connections before each target's loads")
	fs.IntVar(&c.Conns, "conns", 64, "connections of the concurrent load")
	fs.DurationVar(&c.Duration, "duration", 15*time.Second, "length of the concurrent load")
	fs.DurationVar(&c.Drain, "drain", 60*time.Second, "longest wait after the load for reflection to evaluate every recorded interaction")
	fs.StringVar(&c.MockAddr, "mock-listen", "127.0.0.1:0", "address of the mock upstream (fix it when peers forward to it)")
	var peers peerFlags
	fs.Var(&peers, "peer", "another OpenAI-compatible gateway forwarding to the mock, NAME=URL of its API root (repeatable)")
	peerKey := fs.String("peer-key", "", "bearer token sent to peers")
	peerModel := fs.String("peer-model", "mock", "model name sent to peers")
	serveArgs := fs.String("serve-args", "", "extra flags for every citizen serve, space separated")
	sharedArgs := fs.String("shared-store-args", "", "store flags of the gateway-shared target (citizen serve --target=gateway on a shared store, beside gateway on the embedded one), e.g. \"--store.backend=postgres --store.pg-url=postgres://...\"")
	gatewayArgs := fs.String("gateway-store-args", "", "store flags of the gateway target, space separated: a gateway-only process needs a shared store, e.g. \"--store.backend=postgres --store.pg-url=postgres://...\"")
	fs.StringVar(&c.ProfileDir, "profile", "", "directory for CPU profiles of citizen: TARGET-roundN-c1.pprof from the start of the concurrency-1 loads, TARGET-roundN.pprof under the concurrent load (costs CPU: not for the figures)")
	fs.DurationVar(&c.SerialProfile, "profile-c1", 5*time.Second, "length of the concurrency-1 profile (--serial should make those loads last as long)")
	out := fs.String("out", "bench-gateway", "directory for report.json, report.md and the processes' logs")
	keep := fs.Bool("keep", false, "keep the data directories under OUT/work")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return services.UsageError{Msg: "usage: citizen bench gateway [flags] (unexpected: " + strings.Join(fs.Args(), " ") + ")"}
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.Targets = append(c.Targets, t)
		}
	}
	for _, p := range peers {
		p.Key, p.Model = *peerKey, *peerModel
		c.Peers = append(c.Peers, p)
	}
	c.ServeArgs = strings.Fields(*serveArgs)
	c.StoreArgs = map[string][]string{hotpath.TargetGateway: strings.Fields(*gatewayArgs)}
	if *sharedArgs != "" {
		c.StoreArgs[hotpath.TargetGatewayShared] = strings.Fields(*sharedArgs)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	c.Citizen = func(args ...string) *exec.Cmd { return exec.Command(exe, args...) }
	c.Serve = func(pprofAddr string, args []string) *exec.Cmd {
		if pprofAddr == "" {
			return exec.Command(exe, append([]string{"serve"}, args...)...)
		}
		return exec.Command(exe, append([]string{"bench", "gateway", "serve", "--pprof", pprofAddr}, args...)...)
	}
	c.Mock = func(addr string) *exec.Cmd { return exec.Command(exe, "bench", "gateway", "mock", "--listen", addr) }
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	c.WorkDir = filepath.Join(*out, "work")
	if err := os.RemoveAll(c.WorkDir); err != nil {
		return err
	}
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return err
	}
	if !*keep {
		defer func() {
			// Keep the logs, drop the stores.
			dirs, _ := filepath.Glob(filepath.Join(c.WorkDir, "*", "data"))
			for _, d := range dirs {
				os.RemoveAll(d)
			}
		}()
	}
	c.Progress = env.Stderr
	ctx, stop := services.SignalContext(ctx)
	defer stop()
	rep, err := hotpath.Run(ctx, c)
	if rep != nil {
		if b, jerr := json.MarshalIndent(rep, "", "  "); jerr == nil {
			os.WriteFile(filepath.Join(*out, "report.json"), append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		return err
	}
	md := rep.Markdown()
	if err := os.WriteFile(filepath.Join(*out, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, md)
	return nil
}

// peerFlags collects --peer NAME=URL.
type peerFlags []hotpath.Peer

func (p *peerFlags) String() string { return fmt.Sprint(len(*p), " peers") }

func (p *peerFlags) Set(v string) error {
	name, url, ok := strings.Cut(v, "=")
	name, url = strings.TrimSpace(name), strings.TrimSpace(url)
	if !ok || name == "" || !(strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) {
		return fmt.Errorf("want NAME=http://HOST:PORT/v1, got %q", v)
	}
	switch name {
	case hotpath.TargetDirect, hotpath.TargetAll, hotpath.TargetGateway:
		return fmt.Errorf("peer name %q is a target's", name)
	}
	for _, q := range *p {
		if q.Name == name {
			return fmt.Errorf("peer %q given twice", name)
		}
	}
	*p = append(*p, hotpath.Peer{Name: name, URL: url})
	return nil
}

func benchMock(ctx context.Context, args []string, env services.Env) error {
	fs := flag.NewFlagSet("bench gateway mock", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (prints \"listening ADDR\")")
	var mc hotpath.MockConfig
	fs.IntVar(&mc.Tokens, "tokens", 16, "completion tokens of every answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := services.SignalContext(ctx)
	defer stop()
	return hotpath.ServeMock(ctx, *listen, mc, env.Stdout)
}

// benchServe is `citizen serve` with net/http/pprof served on --pprof.
func benchServe(ctx context.Context, args []string, env services.Env) error {
	if len(args) < 2 || args[0] != "--pprof" {
		return services.UsageError{Msg: "usage: citizen bench gateway serve --pprof ADDR [serve flags]"}
	}
	ln, err := net.Listen("tcp", args[1])
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	err = services.Serve(ctx, args[2:], env)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
