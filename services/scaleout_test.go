package services

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventlog"
	"citizen/events/memstore"
	"citizen/events/pgstore"

	"github.com/jackc/pgx/v5"
)

// A deployment whose processes could not see each other's events is
// refused at start, and the message says what to use.
func TestInconsistentDeploymentsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string // in the error output
	}{
		{"split workers on the embedded store", []string{"--target=reflection"},
			[]string{"--target=reflection runs only part of citizen", "store.backend=embedded", "store.backend=postgres", "--target=all"}},
		{"split workers on the in-process bus", []string{"--target=reflection,feedback", "--store.backend=postgres", "--store.pg-url=postgres://nobody@127.0.0.1:1/none"},
			[]string{"bus.backend=inprocess", "bus.backend=kafka", "runs bus, reflection, feedback, memory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, _, errs := run(t, append([]string{"serve", "--data-dir", t.TempDir(), "--model.engine=stub", "--log.level=error"}, c.args...)...)
			if rc != 1 {
				t.Fatalf("rc %d, want 1; stderr:\n%s", rc, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, errs)
				}
			}
		})
	}
}

// A second process on an embedded data dir is refused with a message
// that says so and what to use.
func TestSecondProcessOnEmbeddedDataDir(t *testing.T) {
	dir := t.TempDir()
	st, err := eventlog.Open(eventlog.Config{Dir: filepath.Join(dir, "events")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rc, _, errs := run(t, "serve", "--data-dir", dir, "--model.engine=stub", "--log.level=error")
	if rc != 1 {
		t.Fatalf("rc %d, want 1:\n%s", rc, errs)
	}
	for _, w := range []string{"directory in use", "another citizen process has data_dir " + dir, "store.backend=postgres"} {
		if !strings.Contains(errs, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, errs)
		}
	}
}

// What is consistent is accepted: every role in one process on any
// store; a gateway alone on a shared store with the in-process bus (it
// uses no bus); split workers on a shared store with Kafka.
func TestConsistentDeploymentsAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*Config)
	}{
		{"all embedded", func(*Config) {}},
		{"gateway alone embedded (a later full process grades its interactions)", func(c *Config) { c.Target = []string{"gateway"} }},
		{"gateway on postgres", func(c *Config) { c.Target, c.Store.Backend = []string{"gateway"}, "postgres" }},
		{"workers on postgres and kafka", func(c *Config) {
			c.Target, c.Store.Backend, c.Bus.Backend = []string{"reflection", "feedback", "memory"}, "postgres", "kafka"
		}},
		{"memory store (tests)", func(c *Config) { c.Target, c.Store.Backend = []string{"reflection"}, "memory" }},
	} {
		cfg := DefaultConfig()
		c.mut(&cfg)
		a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler)}
		if err := a.checkDeployment(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A shared store that offers no lease (esdb) cannot elect: a split
// deployment's elected roles are refused; with every role in one
// process they run under a lease of this process.
func TestNoLeaseAcrossProcessesRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Store.Backend, cfg.Target = "esdb", []string{"rollout"}
	a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler), Store: memstore.New(memstore.Config{})}
	if _, err := a.leaser(); !errors.Is(err, ErrInconsistentDeployment) || !strings.Contains(err.Error(), "store.backend=postgres") {
		t.Fatalf("split esdb deployment: %v", err)
	}
	a.Config.Target = []string{"all"}
	l, err := a.leaser()
	if err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(context.Background(), "rollout")
	if err != nil {
		t.Fatal(err)
	}
	ls.Release(context.Background())
}

// proc is one citizen process of a scale-out deployment.
type proc struct {
	name string
	cmd  *exec.Cmd
	base string // "" when it runs no gateway
	logs *syncBuffer
	done chan struct{}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// TestScaleOut runs citizen as a deployment of five processes on one
// PostgreSQL store and one Kafka cluster: two gateways, two workers
// (reflection, feedback, memory) and a trainer (distiller, rollout).
// Completions and feedback go to both gateways (feedback often to the
// other one). Under load it kills -9 one gateway and the relay's
// holder; a new relay must be elected within 10 s, nothing acknowledged
// may be lost, and every interaction must end evaluated once in effect
// (one evaluation per cause), with the same scoreboard in both gateways.
func TestScaleOut(t *testing.T) {
	pgURL, brokers := os.Getenv("CITIZEN_PG_URL"), os.Getenv("KAFKA_BROKERS")
	if pgURL == "" || brokers == "" {
		t.Skip("CITIZEN_PG_URL and KAFKA_BROKERS must both be set: export CITIZEN_PG_URL=$(events/pgstore/testdata/start-postgres.sh) KAFKA_BROKERS=$(events/bus/kafka/testdata/start-kafka.sh)")
	}
	if testing.Short() {
		t.Skip("-short: five citizen processes on PostgreSQL and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := newDeployment(t, pgURL, brokers, "--model.engine=stub")
	ns, start := d.ns, d.start
	began := time.Now()
	workers := []*proc{start("worker-1", "reflection,feedback,memory"), start("worker-2", "reflection,feedback,memory"),
		start("trainer", "distiller,rollout")}
	g1, g2 := start("gateway-1", "gateway"), start("gateway-2", "gateway")
	t.Logf("five processes started in %v", time.Since(began).Round(time.Millisecond))

	st, err := pgstore.Open(ctx, pgstore.Config{URL: pgURL, Schema: ns, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	holderProc := func() *proc {
		h, ok, err := st.LeaseHolder(ctx, leaseRelay)
		if err != nil || !ok {
			return nil
		}
		for _, p := range workers {
			if p.cmd.Process != nil && strings.HasSuffix(h, ":"+strconv.Itoa(p.cmd.Process.Pid)) {
				return p
			}
		}
		t.Fatalf("the relay lease is held by %q, none of the workers", h)
		return nil
	}

	// load: completions to both gateways, feedback on every other one,
	// often through the other gateway
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(base, path, body string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var mu sync.Mutex
	acked := map[string]int{} // completion id -> feedbacks acknowledged
	via := map[int]int{}      // gateway index -> completions acknowledged
	gws := []*proc{g1, g2}
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; load.Err() == nil; i++ {
				gi := (w + i) % 2
				code, body := post(gws[gi].base, "/v1/chat/completions", fmt.Sprintf(
					`{"model":"citizen","messages":[{"role":"user","content":"worker %d item %d"}],"metadata":{"type":"policy"}}`, w, i))
				if code != 200 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				var comp struct{ ID string }
				json.Unmarshal(body, &comp)
				mu.Lock()
				acked[comp.ID] += 0
				via[gi]++
				mu.Unlock()
				if i%2 == 0 {
					fi := (gi + i/2) % 2 // the same or the other gateway
					if code, _ := post(gws[fi].base, "/v1/feedback", fmt.Sprintf(`{"interaction_id":%q,"text":"wrong, it is 60 days","feedback_id":"f"}`, comp.ID)); code == 200 {
						mu.Lock()
						acked[comp.ID] = 1
						mu.Unlock()
					}
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitCond(t, ctx, 60*time.Second, "load flowing", func() bool { return count() >= 300 })

	// kill -9 a gateway and the relay's holder, under load
	var holder *proc
	waitCond(t, ctx, 30*time.Second, "a relay elected", func() bool { holder = holderProc(); return holder != nil })
	g1.kill()
	holder.kill()
	killed := time.Now()
	var successor *proc
	waitCond(t, ctx, 30*time.Second, "a new relay", func() bool {
		successor = holderProc()
		return successor != nil && successor != holder
	})
	takeover := time.Since(killed)
	t.Logf("killed gateway-1 and the relay holder %s; %s holds the relay %v later", holder.name, successor.name, takeover.Round(time.Millisecond))
	if takeover > 10*time.Second {
		t.Errorf("a new relay took %v (want within 10 s)", takeover)
	}
	n0 := count()
	waitCond(t, ctx, 60*time.Second, "load flowing after the kills", func() bool { return count() >= n0+300 })
	stopLoad()
	wg.Wait()
	if via[0] == 0 || via[1] == 0 {
		t.Fatalf("completions acknowledged per gateway: %v", via)
	}

	// every acknowledged interaction recorded; every recorded one graded
	// once in effect: one evaluation of the interaction and one of each
	// feedback and interpretation, one interpretation per feedback
	g3 := start("gateway-3", "gateway") // stands in for gateway-1
	drain := time.Now()
	var perStream map[string]map[string]int
	var perCause map[string]int
	waitCond(t, ctx, 90*time.Second, "every interaction graded", func() bool {
		all, err := st.ReadAll(ctx, 0, events.Filter{}, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		perStream, perCause = map[string]map[string]int{}, map[string]int{}
		for _, ev := range all {
			if perStream[ev.CorrelationID] == nil {
				perStream[ev.CorrelationID] = map[string]int{}
			}
			perStream[ev.CorrelationID][ev.Type]++
			if ev.CausationID != "" && (ev.Type == events.TypeInteractionEvaluated || ev.Type == events.TypeFeedbackInterpreted) {
				perCause[ev.Type+"/"+ev.CausationID]++
			}
		}
		for _, n := range perStream {
			fb := n[events.TypeFeedbackReceived]
			if n[events.TypeInteractionRecorded] == 1 && (n[events.TypeFeedbackInterpreted] != fb || n[events.TypeInteractionEvaluated] != 1+2*fb) {
				return false
			}
		}
		return true
	})
	t.Logf("%d acknowledged interactions (per gateway %v), all graded %v after the load", len(acked), via, time.Since(drain).Round(time.Millisecond))
	recorded := 0
	for _, n := range perStream {
		recorded += n[events.TypeInteractionRecorded]
	}
	mu.Lock()
	for cid, fb := range acked {
		id := strings.TrimPrefix(cid, "chatcmpl-")
		if perStream[id][events.TypeInteractionRecorded] != 1 {
			t.Errorf("acknowledged completion %s is not recorded once: %v", id, perStream[id])
		}
		if fb == 1 && perStream[id][events.TypeFeedbackReceived] != 1 {
			t.Errorf("acknowledged feedback on %s is not recorded once: %v", id, perStream[id])
		}
	}
	mu.Unlock()
	for k, n := range perCause {
		if n != 1 {
			t.Errorf("%s: %d events for one cause", k, n)
		}
	}

	// the scoreboard agrees in both gateways and counts every interaction
	// once
	var boards [2]string
	waitCond(t, ctx, 30*time.Second, "the gateways' scoreboards agree", func() bool {
		for i, g := range []*proc{g2, g3} {
			var sb struct {
				Rows []struct {
					Count int `json:"count"`
				} `json:"rows"`
			}
			getJSON(t, g.base+"/v1/ops/scoreboard", &sb)
			total := 0
			for _, r := range sb.Rows {
				total += r.Count
			}
			b, _ := json.Marshal(sb)
			boards[i] = fmt.Sprintf("%d %s", total, b)
			if total != recorded {
				return false
			}
		}
		return boards[0] == boards[1]
	})
	t.Logf("scoreboards agree on %d interactions; whole run %v", recorded, time.Since(began).Round(time.Second))
}

// waitCond polls cond every 50 ms for up to d.
func waitCond(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// deployment starts citizen processes sharing one PostgreSQL schema and
// one Kafka namespace (fresh per test, dropped after it) and stops them at
// the end of the test, printing their logs if it failed.
type deployment struct {
	t      *testing.T
	ns     string
	common []string
	procs  []*proc
}

func newDeployment(t *testing.T, pgURL, brokers string, extra ...string) *deployment {
	var rnd [6]byte
	crand.Read(rnd[:])
	d := &deployment{t: t, ns: "t_" + hex.EncodeToString(rnd[:])}
	d.common = append([]string{"serve", "--log.level=info",
		"--store.backend=postgres", "--store.pg-url=" + pgURL, "--store.pg-schema=" + d.ns,
		"--bus.backend=kafka", "--bus.kafka-brokers=" + brokers, "--bus.kafka-namespace=" + d.ns + ".",
		"--bus.kafka-partitions=4", "--bus.kafka-consumers=2", "--bus.kafka-session-timeout=6s"}, extra...)
	t.Cleanup(func() {
		for _, p := range d.procs {
			if !p.exited() {
				p.stop()
			}
		}
		if t.Failed() {
			for _, p := range d.procs {
				t.Logf("--- %s logs:\n%s", p.name, lastLines(p.logs.String(), 40))
			}
		}
		conn, err := pgx.Connect(context.Background(), pgURL)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+d.ns+" CASCADE")
			conn.Close(context.Background())
		}
	})
	return d
}

// start runs `citizen serve --target=target` with the deployment's
// settings and args (a fresh data dir unless args name one), and waits for
// its gateway, if it runs one, to be ready.
func (d *deployment) start(name, target string, args ...string) *proc {
	t := d.t
	t.Helper()
	all := append(append(append([]string(nil), d.common...), "--target="+target), args...)
	if !slices.Contains(all, "--data-dir") {
		all = append(all, "--data-dir", t.TempDir())
	}
	p := &proc{name: name, logs: newSyncBuffer(), done: make(chan struct{})}
	if strings.Contains(target, "gateway") {
		addr := freeAddr(t)
		all = append(all, "--gateway.listen", addr)
		p.base = "http://" + addr
	}
	p.cmd = exec.Command(os.Args[0], all...)
	p.cmd.Env = append(os.Environ(), "CITIZEN_TEST_MAIN=1")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	d.procs = append(d.procs, p)
	if p.base != "" {
		deadline := time.Now().Add(60 * time.Second)
		for {
			if resp, err := http.Get(p.base + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if p.exited() || time.Now().After(deadline) {
				t.Fatalf("%s not ready; logs:\n%s", name, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return p
}
