package hotpath

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The targets a run can measure besides peers.
const (
	TargetDirect  = "direct"  // the load generator straight to the mock
	TargetAll     = "all"     // citizen serve, every component
	TargetGateway = "gateway" // citizen serve --target=gateway
	// TargetGatewayShared is citizen serve --target=gateway on the store
	// its StoreArgs name (a shared one, PostgreSQL), beside TargetGateway
	// on the embedded store: the store's cost in one run.
	TargetGatewayShared = "gateway-shared"
)

// Peer is another OpenAI-compatible gateway, already running and
// forwarding to the run's mock (so RunConfig.MockAddr is fixed).
type Peer struct {
	Name string
	// URL is its API root, e.g. http://127.0.0.1:8081/v1.
	URL   string
	Key   string
	Model string
	// PID, if set, is its process, whose CPU time is then reported.
	PID int
}

// RunConfig configures a run of the harness.
type RunConfig struct {
	// Citizen returns the command that runs the citizen binary with args
	// (for "keys create" and "events stats").
	Citizen func(args ...string) *exec.Cmd
	// Serve returns the command that runs `citizen serve` with args; with
	// a non-empty pprof address the process also serves net/http/pprof
	// there (the runner then takes a CPU profile of the concurrent load).
	Serve func(pprof string, args []string) *exec.Cmd
	// Mock returns the command that runs the mock upstream on addr (see
	// ServeMock: it prints "listening ADDR").
	Mock func(addr string) *exec.Cmd
	// MockAddr is where the mock listens (default 127.0.0.1:0).
	MockAddr string
	// Targets to measure, in order (default direct, all, gateway).
	Targets []string
	Peers   []Peer
	// Rounds of every target, interleaved (default 3).
	Rounds int
	// Serial is the number of requests of each concurrency-1 load,
	// non-streaming and streaming (default 1000); Warmup requests at 4
	// connections precede them (default 200).
	Serial int
	Warmup int
	// Conns and Duration shape the concurrent load (default 64, 15 s).
	Conns    int
	Duration time.Duration
	// Drain bounds the wait, after the concurrent load, for reflection to
	// have evaluated every recorded interaction (default 60 s).
	Drain time.Duration
	// ServeArgs are added to every `citizen serve`; StoreArgs[target] to
	// that target's `citizen serve` and to the commands that read its
	// store afterwards (a gateway-only process must share a store that
	// other processes can open: --store.backend=postgres --store.pg-url=...).
	ServeArgs []string
	StoreArgs map[string][]string
	// WorkDir holds the data directories and logs (default: a temporary
	// directory, removed after the run).
	WorkDir string
	// ProfileDir, if set, receives two CPU profiles of each citizen
	// process: TARGET-roundN-c1.pprof of the first SerialProfile of the
	// concurrency-1 loads (they should last at least that long) and
	// TARGET-roundN.pprof of the concurrent load (profiling costs CPU: a
	// profiled run's figures are not the benchmark's).
	ProfileDir string
	// SerialProfile is the length of the concurrency-1 profile (default
	// 5 s).
	SerialProfile time.Duration
	// Body is the chat completion request (default DefaultBody); its
	// "model" is replaced per target and "stream" added for streams.
	Body     map[string]any
	Progress io.Writer
}

// DefaultBody is a short chat: a system prompt and a question.
func DefaultBody() map[string]any {
	return map[string]any{
		"messages": []map[string]string{
			{"role": "system", "content": "You are a helpful assistant. Answer briefly."},
			{"role": "user", "content": "What is the capital of France? Answer in one word, then say why in a short sentence."},
		},
		"max_tokens": 16,
	}
}

func (c RunConfig) withDefaults() RunConfig {
	if c.MockAddr == "" {
		c.MockAddr = "127.0.0.1:0"
	}
	if len(c.Targets) == 0 {
		c.Targets = []string{TargetDirect, TargetAll, TargetGateway}
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	if c.Serial <= 0 {
		c.Serial = 1000
	}
	if c.Warmup < 0 {
		c.Warmup = 0
	} else if c.Warmup == 0 {
		c.Warmup = 200
	}
	if c.Conns <= 0 {
		c.Conns = 64
	}
	if c.Duration <= 0 {
		c.Duration = 15 * time.Second
	}
	if c.Drain <= 0 {
		c.Drain = 60 * time.Second
	}
	if c.SerialProfile <= 0 {
		c.SerialProfile = 5 * time.Second
	}
	if c.Body == nil {
		c.Body = DefaultBody()
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// Machine describes where a run ran.
type Machine struct {
	NProc    int       `json:"nproc"`
	CPUModel string    `json:"cpu_model"`
	Go       string    `json:"go"`
	Load     []float64 `json:"loadavg_samples"`
}

// TargetRun is one target's measurement in one round.
type TargetRun struct {
	Target string `json:"target"`
	Round  int    `json:"round"`
	// Loads: concurrency 1 non-streaming and streaming, then Conns
	// connections for Duration.
	Serial     LoadResult `json:"c1"`
	SerialSSE  LoadResult `json:"c1_stream"`
	Concurrent LoadResult `json:"concurrent"`
	// CPU per answered request of the target process (citizen, or a peer
	// with a PID) and of the mock, in µs; -1 where not measured.
	CPUSerial      float64 `json:"cpu_us_c1"`
	CPUConcurrent  float64 `json:"cpu_us_concurrent"`
	MockCPUSerial  float64 `json:"mock_cpu_us_c1"`
	MockCPUConcurr float64 `json:"mock_cpu_us_concurrent"`
	// Acknowledged: answered requests of every load, warm-up included;
	// Shed: those the target refused with 503 and Retry-After.
	Acknowledged int `json:"acknowledged"`
	Shed         int `json:"shed"`
	// Recorded and Evaluated are read from the store after the process
	// stopped (interaction.recorded, and distinct interactions with an
	// interaction.evaluated); -1 where the target has no store.
	Recorded  int `json:"recorded"`
	Evaluated int `json:"evaluated"`
	// At the end of the concurrent load (live, from /metrics and the
	// scoreboard): recorded and evaluated interactions; -1 where unknown.
	RecordedAtStop  int `json:"recorded_at_stop"`
	EvaluatedAtStop int `json:"evaluated_at_stop"`
	// DrainS is the time from the end of the load until evaluated =
	// recorded (-1: not reached within Drain, or no reflection).
	DrainS float64 `json:"drain_s"`
	// Profile is the CPU profile's path, if one was taken.
	Profile string `json:"profile,omitempty"`
}

// Report is a run's result.
type Report struct {
	Machine Machine      `json:"machine"`
	Config  ReportConfig `json:"config"`
	Runs    []TargetRun  `json:"runs"`
	Summary []Summary    `json:"summary"`
}

// ReportConfig is the part of RunConfig a reader needs.
type ReportConfig struct {
	Rounds     int      `json:"rounds"`
	Serial     int      `json:"serial_requests"`
	Conns      int      `json:"conns"`
	DurationS  float64  `json:"duration_s"`
	Targets    []string `json:"targets"`
	MockTokens int      `json:"mock_tokens"`
}

// Run measures every target for cfg.Rounds interleaved rounds.
func Run(ctx context.Context, cfg RunConfig) (*Report, error) {
	cfg = cfg.withDefaults()
	for _, t := range cfg.Targets {
		switch t {
		case TargetDirect:
		case TargetAll, TargetGateway, TargetGatewayShared:
			if cfg.Serve == nil || cfg.Citizen == nil {
				return nil, fmt.Errorf("hotpath: target %s needs the Serve and Citizen commands", t)
			}
		default:
			return nil, fmt.Errorf("hotpath: unknown target %q (want %s, %s, %s or %s)", t, TargetDirect, TargetAll, TargetGateway, TargetGatewayShared)
		}
	}
	if cfg.Mock == nil {
		return nil, errors.New("hotpath: a run needs the Mock command")
	}
	if cfg.WorkDir == "" {
		d, err := os.MkdirTemp("", "hotpath-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		cfg.WorkDir = d
	}
	mock, err := startMock(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer mock.stop()
	rep := &Report{Machine: machine(), Config: ReportConfig{Rounds: cfg.Rounds, Serial: cfg.Serial, Conns: cfg.Conns,
		DurationS: cfg.Duration.Seconds(), MockTokens: MockConfig{}.withDefaults().Tokens}}
	names := append([]string(nil), cfg.Targets...)
	for _, p := range cfg.Peers {
		names = append(names, p.Name)
	}
	rep.Config.Targets = names
	rep.Machine.Load = append(rep.Machine.Load, loadAvg())
	for round := 1; round <= cfg.Rounds; round++ {
		// Rotate the order so that no target always runs first.
		for i := range names {
			name := names[(i+round-1)%len(names)]
			fmt.Fprintf(cfg.Progress, "round %d/%d: %s\n", round, cfg.Rounds, name)
			var tr TargetRun
			var err error
			switch name {
			case TargetDirect:
				tr, err = runDirect(ctx, cfg, mock)
			case TargetAll, TargetGateway, TargetGatewayShared:
				tr, err = runCitizen(ctx, cfg, mock, name, round)
			default:
				p := cfg.Peers[slices.IndexFunc(cfg.Peers, func(p Peer) bool { return p.Name == name })]
				tr, err = runPeer(ctx, cfg, mock, p)
			}
			if err != nil {
				return rep, fmt.Errorf("hotpath: round %d, %s: %w", round, name, err)
			}
			tr.Target, tr.Round = name, round
			rep.Runs = append(rep.Runs, tr)
			fmt.Fprintf(cfg.Progress, "  c1 p50 %.3f ms p99 %.3f ms, ttfc p50 %.3f ms, %d conns %.0f req/s, cpu %.0f µs/req (c1) %.0f µs/req (c%d), acked %d recorded %d evaluated %d\n",
				tr.Serial.Latency.P50, tr.Serial.Latency.P99, tr.SerialSSE.TTFC.P50, cfg.Conns, tr.Concurrent.ReqPerSec,
				tr.CPUSerial, tr.CPUConcurrent, cfg.Conns, tr.Acknowledged, tr.Recorded, tr.Evaluated)
			rep.Machine.Load = append(rep.Machine.Load, loadAvg())
		}
	}
	rep.Summary = summarise(rep.Runs, names)
	return rep, nil
}

// process is a started child whose CPU time is read.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	logs *bytes.Buffer
	mu   *sync.Mutex
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) cpu() time.Duration {
	d, err := ProcessCPU(p.pid())
	if err != nil {
		return -1
	}
	return d
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (p *process) stop() error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

func (p *process) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.logs.String()
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func start(cmd *exec.Cmd, logPath string, stdout io.Writer) (*process, error) {
	p := &process{cmd: cmd, done: make(chan struct{}), logs: new(bytes.Buffer), mu: new(sync.Mutex)}
	var sinks []io.Writer
	sinks = append(sinks, lockedWriter{p.mu, p.logs})
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, f)
		defer func() {
			go func() { <-p.done; f.Close() }()
		}()
	}
	errw := io.MultiWriter(sinks...)
	cmd.Stderr = errw
	if stdout != nil {
		cmd.Stdout = stdout
	} else {
		cmd.Stdout = errw
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

type mockProc struct {
	*process
	addr string
}

func startMock(ctx context.Context, cfg RunConfig) (*mockProc, error) {
	cmd := cfg.Mock(cfg.MockAddr)
	pr, pw := io.Pipe()
	p, err := start(cmd, filepath.Join(cfg.WorkDir, "mock.log"), pw)
	if err != nil {
		return nil, fmt.Errorf("hotpath: starting the mock: %w", err)
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening "); ok && !sent {
				addrc <- a
				sent = true
			}
		}
	}()
	go func() { <-p.done; pw.Close() }()
	select {
	case a := <-addrc:
		return &mockProc{process: p, addr: a}, nil
	case <-p.done:
		return nil, fmt.Errorf("hotpath: the mock exited: %v: %s", p.err, p.tail())
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, errors.New("hotpath: the mock did not start within 30 s")
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

func body(cfg RunConfig, model string, stream bool) []byte {
	b := make(map[string]any, len(cfg.Body)+2)
	for k, v := range cfg.Body {
		b[k] = v
	}
	b["model"] = model
	if stream {
		b["stream"] = true
	}
	out, _ := json.Marshal(b)
	return out
}

// endpoint is what the loads are sent to.
type endpoint struct {
	url, key, model string
	proc            func() time.Duration // the target's CPU time; nil: unknown
}

// loads runs the warm-up, the two concurrency-1 loads and the concurrent
// one; profile (if set) runs from the start of the concurrency-1 loads
// (phase "c1", for cfg.SerialProfile) and during the concurrent load
// (phase "", for its duration less a second). The concurrent load starts
// once the first profile has ended.
func loads(ctx context.Context, cfg RunConfig, mock *mockProc, ep endpoint, profile func(phase string, d time.Duration)) (TargetRun, error) {
	tr := TargetRun{CPUSerial: -1, CPUConcurrent: -1, Recorded: -1, Evaluated: -1, RecordedAtStop: -1, EvaluatedAtStop: -1, DrainS: -1}
	url := ep.url + "/chat/completions"
	plain, stream := body(cfg, ep.model, false), body(cfg, ep.model, true)
	client := NewClient(cfg.Conns)
	defer client.CloseIdleConnections()
	check := func(r LoadResult, err error, what string) error {
		if err != nil {
			return err
		}
		tr.Acknowledged += r.OK
		tr.Shed += r.Shed
		if r.Errors > 0 {
			return fmt.Errorf("%s: %d of %d requests failed; first: %s", what, r.Errors, r.Errors+r.OK, r.FirstError)
		}
		return nil
	}
	if cfg.Warmup > 0 {
		r, err := Load(ctx, client, LoadConfig{URL: url, Key: ep.key, Body: plain, Conns: 4, Requests: cfg.Warmup})
		if err := check(r, err, "warm-up"); err != nil {
			return tr, err
		}
		r, err = Load(ctx, client, LoadConfig{URL: url, Key: ep.key, Body: stream, Stream: true, Conns: 4, Requests: cfg.Warmup / 4})
		if err := check(r, err, "streaming warm-up"); err != nil {
			return tr, err
		}
	}
	per := func(d time.Duration, n int) float64 {
		if d < 0 || n == 0 {
			return -1
		}
		return float64(d.Microseconds()) / float64(n)
	}
	cpu := func() time.Duration {
		if ep.proc == nil {
			return -1
		}
		return ep.proc()
	}
	var wg sync.WaitGroup
	if profile != nil {
		wg.Add(1)
		go func() { defer wg.Done(); profile("c1", cfg.SerialProfile) }()
	}
	c0, m0 := cpu(), mock.cpu()
	r, err := Load(ctx, client, LoadConfig{URL: url, Key: ep.key, Body: plain, Conns: 1, Requests: cfg.Serial})
	if err := check(r, err, "concurrency 1"); err != nil {
		return tr, err
	}
	tr.Serial = r
	r, err = Load(ctx, client, LoadConfig{URL: url, Key: ep.key, Body: stream, Stream: true, Conns: 1, Requests: cfg.Serial})
	if err := check(r, err, "concurrency 1, streaming"); err != nil {
		return tr, err
	}
	tr.SerialSSE = r
	c1, m1 := cpu(), mock.cpu()
	if c0 >= 0 && c1 >= 0 {
		tr.CPUSerial = per(c1-c0, tr.Serial.OK+tr.SerialSSE.OK)
	}
	tr.MockCPUSerial = per(m1-m0, tr.Serial.OK+tr.SerialSSE.OK)
	wg.Wait()
	if profile != nil {
		wg.Add(1)
		go func() { defer wg.Done(); profile("", max(time.Second, cfg.Duration-time.Second)) }()
	}
	r, err = Load(ctx, client, LoadConfig{URL: url, Key: ep.key, Body: plain, Conns: cfg.Conns, Duration: cfg.Duration})
	c2, m2 := cpu(), mock.cpu()
	wg.Wait()
	if err := check(r, err, fmt.Sprintf("%d connections", cfg.Conns)); err != nil {
		return tr, err
	}
	tr.Concurrent = r
	if c1 >= 0 && c2 >= 0 {
		tr.CPUConcurrent = per(c2-c1, r.OK)
	}
	tr.MockCPUConcurr = per(m2-m1, r.OK)
	return tr, nil
}

func runDirect(ctx context.Context, cfg RunConfig, mock *mockProc) (TargetRun, error) {
	return loads(ctx, cfg, mock, endpoint{url: "http://" + mock.addr + "/v1", model: "mock"}, nil)
}

func runPeer(ctx context.Context, cfg RunConfig, mock *mockProc, p Peer) (TargetRun, error) {
	ep := endpoint{url: strings.TrimRight(p.URL, "/"), key: p.Key, model: p.Model}
	if ep.model == "" {
		ep.model = "mock"
	}
	if p.PID > 0 {
		ep.proc = func() time.Duration {
			d, err := ProcessCPU(p.PID)
			if err != nil {
				return -1
			}
			return d
		}
	}
	return loads(ctx, cfg, mock, ep, nil)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// citizenOutput runs the citizen binary and returns its stdout.
func citizenOutput(ctx context.Context, cfg RunConfig, args ...string) ([]byte, error) {
	cmd := cfg.Citizen(args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("citizen %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Bytes(), nil
}

func runCitizen(ctx context.Context, cfg RunConfig, mock *mockProc, target string, round int) (TargetRun, error) {
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("round%d-%s", round, target))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return TargetRun{}, err
	}
	data := filepath.Join(dir, "data")
	storeArgs := append([]string{"--data-dir", data}, cfg.StoreArgs[target]...)
	key, err := citizenOutput(ctx, cfg, append([]string{"keys", "create", "--tenant", "bench", "--name", "bench"}, storeArgs...)...)
	if err != nil {
		return TargetRun{}, err
	}
	opKey, err := citizenOutput(ctx, cfg, append([]string{"keys", "create", "--tenant", "operator", "--name", "bench-operator"}, storeArgs...)...)
	if err != nil {
		return TargetRun{}, err
	}
	addr, err := freeAddr()
	if err != nil {
		return TargetRun{}, err
	}
	pprofAddr := ""
	if cfg.ProfileDir != "" {
		if pprofAddr, err = freeAddr(); err != nil {
			return TargetRun{}, err
		}
	}
	// a shared store holds earlier rounds' interactions: count this run's
	recordedBefore, err := recordedInteractions(ctx, cfg, storeArgs)
	if err != nil {
		return TargetRun{}, err
	}
	role := target
	if target == TargetGatewayShared {
		role = TargetGateway
	}
	args := []string{"--target", role, "--data-dir", data, "--gateway.listen", addr, "--log.level", "warn",
		"--model.engine", "upstream", "--model.upstream-url", "http://" + mock.addr + "/v1", "--model.upstream-model", "mock"}
	args = append(args, cfg.ServeArgs...)
	args = append(args, cfg.StoreArgs[target]...)
	p, err := start(cfg.Serve(pprofAddr, args), filepath.Join(dir, "citizen.log"), nil)
	if err != nil {
		return TargetRun{}, fmt.Errorf("starting citizen: %w", err)
	}
	defer p.stop()
	base := "http://" + addr
	if err := waitReady(ctx, base, p, 120*time.Second); err != nil {
		return TargetRun{}, err
	}
	var profile func(string, time.Duration)
	var profPath string
	if pprofAddr != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return TargetRun{}, err
		}
		profile = func(phase string, d time.Duration) {
			name := fmt.Sprintf("%s-round%d.pprof", target, round)
			if phase != "" {
				name = fmt.Sprintf("%s-round%d-%s.pprof", target, round, phase)
			}
			path := filepath.Join(cfg.ProfileDir, name)
			secs := max(1, int(d.Seconds()))
			if err := fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, secs), path); err != nil {
				fmt.Fprintf(cfg.Progress, "  %s profile not taken: %v\n", name, err)
				return
			}
			if phase == "" {
				profPath = path
			}
		}
	}
	ep := endpoint{url: base + "/v1", key: string(bytes.TrimSpace(key)), model: "citizen", proc: p.cpu}
	tr, err := loads(ctx, cfg, mock, ep, profile)
	if err != nil {
		return tr, fmt.Errorf("%w (citizen log: %s)", err, p.tail())
	}
	tr.Profile = profPath
	op := string(bytes.TrimSpace(opKey))
	tr.RecordedAtStop = metricValue(ctx, base, "citizen_gateway_interactions_recorded_total")
	if target == TargetAll {
		tr.EvaluatedAtStop = scoreboardCount(ctx, base, op)
		stopped := time.Now()
		// A look at the scoreboard costs citizen milliseconds of CPU at
		// tens of thousands of interactions (polled every 20 ms it took a
		// fifth of a core from the drain it measures), so it is asked only
		// once the evaluator has handled as many events as were recorded
		// (a counter in /metrics), and at most every 100 ms.
		var asked time.Time
		for {
			v := metricValues(ctx, base, "citizen_gateway_interactions_recorded_total", evaluatorHandled)
			rec, handled := v[0], v[1]
			if rec >= 0 && (handled < 0 || handled >= rec) && time.Since(asked) >= 100*time.Millisecond {
				asked = time.Now()
				if ev := scoreboardCount(ctx, base, op); ev >= rec {
					tr.DrainS = time.Since(stopped).Seconds()
					break
				}
			}
			if time.Since(stopped) > cfg.Drain || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := p.stop(); err != nil {
		return tr, fmt.Errorf("citizen exited with %v: %s", err, p.tail())
	}
	recorded, err := recordedInteractions(ctx, cfg, storeArgs)
	if err != nil {
		return tr, err
	}
	tr.Recorded = recorded - recordedBefore
	if target == TargetAll {
		tr.Evaluated, err = evaluatedInteractions(ctx, cfg, storeArgs)
		if err != nil {
			return tr, err
		}
	}
	return tr, nil
}

// recordedInteractions counts the store's interaction.recorded events.
func recordedInteractions(ctx context.Context, cfg RunConfig, storeArgs []string) (int, error) {
	out, err := citizenOutput(ctx, cfg, append([]string{"events", "stats", "--json"}, storeArgs...)...)
	if err != nil {
		return 0, err
	}
	var st struct {
		ByType map[string]int `json:"by_type"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("events stats: %w", err)
	}
	return st.ByType["interaction.recorded"], nil
}

// evaluatedInteractions counts the distinct interactions the store holds
// an interaction.evaluated for (feedback re-grades one more than once).
func evaluatedInteractions(ctx context.Context, cfg RunConfig, storeArgs []string) (int, error) {
	out, err := citizenOutput(ctx, cfg, append([]string{"events", "tail", "--type", "interaction.evaluated"}, storeArgs...)...)
	if err != nil {
		return 0, err
	}
	seen := map[string]struct{}{}
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) >= 4 {
			seen[f[3]] = struct{}{}
		}
	}
	return len(seen), nil
}

func waitReady(ctx context.Context, base string, p *process, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("citizen exited before it was ready: %v: %s", p.err, p.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("citizen not ready within %v: %s", limit, p.tail())
		}
	}
}

func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// metricValue reads one unlabelled sample from base/metrics; -1 if absent.
// evaluatorHandled counts the events reflection's evaluator has handled.
const evaluatorHandled = `citizen_worker_event_age_seconds_count{handler="evaluator"}`

// metricValues reads the samples names from one /metrics page; -1 for
// each that cannot be read.
func metricValues(ctx context.Context, base string, names ...string) []int {
	out := make([]int, len(names))
	for i := range out {
		out[i] = -1
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return out
	}
	for i, name := range names {
		if v, ok := parseMetric(bytes.NewReader(page), name); ok {
			out[i] = int(v)
		}
	}
	return out
}

func metricValue(ctx context.Context, base, name string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	v, ok := parseMetric(resp.Body, name)
	if !ok {
		return -1
	}
	return int(v)
}

// parseMetric finds the sample "NAME VALUE" in a Prometheus text
// exposition.
func parseMetric(r io.Reader, name string) (float64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || !strings.HasPrefix(rest, " ") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		return v, true
	}
	return 0, false
}

// scoreboardCount is the number of evaluated interactions the scoreboard
// holds; -1 if it cannot be read.
func scoreboardCount(ctx context.Context, base, key string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/ops/scoreboard", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	var sb struct {
		Rows []struct {
			Count int `json:"count"`
		} `json:"rows"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&sb); err != nil {
		return -1
	}
	n := 0
	for _, r := range sb.Rows {
		n += r.Count
	}
	return n
}

func machine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the 1-minute load average (-1 where unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
