package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"

	"gopkg.in/yaml.v3"
)

// gateEngine blocks every Generate until release is closed.
type gateEngine struct {
	*StubEngine
	entered chan struct{}
	release chan struct{}
}

func (g *gateEngine) Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.StubEngine.Generate(ctx, req, emit)
}

func TestRunDrainsInFlightRequests(t *testing.T) {
	eng := &gateEngine{StubEngine: NewStubEngine(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	store := memstore.New(memstore.Config{})
	srv, err := New(Config{DevMode: "on"}, Deps{Store: store, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	shutdown := make(chan struct{})
	srv.onShutdown = func() { close(shutdown) }
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Serve(ctx, ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"citizen","messages":[{"role":"user","content":"drain"}]}`))
		req.Header.Set("Authorization", "Bearer "+DevKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-eng.entered // the request is in flight
	cancel()      // begin shutdown
	<-shutdown    // the listener is closed; let the in-flight request finish
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("listener still open during shutdown")
	}
	close(eng.release)
	r := <-got
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, "echo: drain") {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if n, _ := store.LastPosition(context.Background()); n != 1 {
		t.Fatalf("the drained request was not recorded: %d events", n)
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{MaxBodyBytes: 10, DevMode: "on"}, {MaxBodyBytes: 1 << 20, DevMode: "maybe"}, {MaxBodyBytes: 1 << 20, DevMode: "on", Limits: Limits{RequestsPerMinute: -1}}} {
		if err := c.Validate(); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Fatal("New without store and engine")
	}
	if !IsLoopback("[::1]:80") || IsLoopback("10.0.0.1:80") || IsLoopback(":80") {
		t.Fatal("IsLoopback")
	}
}

func TestLimiterRefills(t *testing.T) {
	l := newLimiter()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := 0; i < 60; i++ {
		if ok, _, _ := l.admit("k", 60, 0); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	ok, wait, what := l.admit("k", 60, 0)
	if ok || what != "requests" || wait <= 0 || wait > time.Second {
		t.Fatalf("61st: %v %v %s", ok, wait, what)
	}
	now = now.Add(time.Second)
	if ok, _, _ := l.admit("k", 60, 0); !ok {
		t.Fatal("no refill after a second")
	}
	l.charge("t", 600, 1200) // two minutes' worth
	if ok, wait, _ := l.admit("t", 0, 600); ok || wait < 59*time.Second {
		t.Fatalf("token debt: %v %v", ok, wait)
	}
}

func TestStickyFraction(t *testing.T) {
	n := 20000
	below := 0
	for i := 0; i < n; i++ {
		f := StickyFraction("user-" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + strconv.Itoa(i))
		if f < 0 || f >= 1 {
			t.Fatal(f)
		}
		if f < 0.1 {
			below++
		}
	}
	if below < n/10-300 || below > n/10+300 {
		t.Fatalf("%d of %d below 0.1", below, n)
	}
	if StickyFraction("abc") != StickyFraction("abc") {
		t.Fatal("not stable")
	}
	r := NewRouter("v1")
	r.SetRollout("v1", "v2", 2)
	if got := r.Rollout().Weight; got != 1 {
		t.Fatal(got)
	}
	if v, err := r.Route("citizen", "x", "", func(string) bool { return false }); err != nil || v != "v2" {
		t.Fatal(v, err)
	}
	if _, err := r.Route("citizen@v3", "x", "", func(string) bool { return false }); !errors.Is(err, errUnknownModel) {
		t.Fatal(err)
	}
}

func TestConfigYAML(t *testing.T) {
	var c Config
	src := "listen: 0.0.0.0:9000\nmax_body_bytes: 1048576\ndev_mode: off\nkeys_file: /data/keys.json\nlimits:\n  requests_per_minute: 60\n  tokens_per_minute: 100000\n"
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{Listen: "0.0.0.0:9000", MaxBodyBytes: 1 << 20, DevMode: "off", KeysFile: "/data/keys.json",
		Limits: Limits{RequestsPerMinute: 60, TokensPerMinute: 100000}}
	if c != want {
		t.Fatalf("%+v", c)
	}
	c = c.withDefaults()
	if c.RequestTimeout != DefaultConfig().RequestTimeout || c.Validate() != nil || c.DevKeyEnabled() {
		t.Fatalf("%+v", c)
	}
}

// The candidate's share of a step's new conversations stays within one
// conversation of the weight at every point of the step, where a hash alone
// drifts by the binomial spread; keys keep their arm across steps; a new
// candidate starts a new assignment.
func TestRouterQuotaShare(t *testing.T) {
	known := func(string) bool { return false }
	for _, w := range []float64{0.04, 0.05, 0.25, 0.5} {
		r := NewRouter("v1")
		r.SetRollout("v1", "v2", w)
		cand, hashCand, worst := 0, 0, 0.0
		for n := 1; n <= 5000; n++ {
			key := fmt.Sprintf("conv-%d-%g", n, w)
			v, err := r.Route(ModelName, key, "", known)
			if err != nil {
				t.Fatal(err)
			}
			if v == "v2" {
				cand++
			}
			if StickyFraction(key) < w {
				hashCand++
			}
			if d := float64(cand) - w*float64(n); d > 1 || d < -1 {
				t.Fatalf("weight %g: %d of %d conversations on the candidate", w, cand, n)
			}
			if n >= 50 {
				worst = max(worst, math.Abs(float64(hashCand)/float64(n)-w))
			}
		}
		// The hash rule this replaced: its realised share over the same
		// keys strays further than one conversation in 50 (so the check
		// above is not trivially met by any assignment).
		if worst < 1.0/50 {
			t.Fatalf("weight %g: hash share never strayed more than %.4f", w, worst)
		}
	}

	r := NewRouter("v1")
	r.SetRollout("v1", "v2", 0.1)
	arm := map[string]string{}
	for i := range 300 {
		k := fmt.Sprintf("c%d", i)
		arm[k], _ = r.Route(ModelName, k, "", known)
	}
	r.SetRollout("v1", "v2", 0.1) // resumed at the same weight: nothing changes
	r.SetRollout("v1", "v2", 0.5)
	for k, v := range arm {
		if got, _ := r.Route(ModelName, k, "", known); got != v {
			t.Fatalf("%s moved from %s to %s when the step rose", k, v, got)
		}
	}
	newCand := 0
	for i := range 100 {
		if v, _ := r.Route(ModelName, fmt.Sprintf("n%d", i), "", known); v == "v2" {
			newCand++
		}
	}
	if newCand < 49 || newCand > 51 {
		t.Fatalf("second step: %d of 100 new conversations on the candidate at 50%%", newCand)
	}
	r.SetRollout("v1", "", 0) // rolled back
	for k := range arm {
		if got, _ := r.Route(ModelName, k, "", known); got != "v1" {
			t.Fatalf("%s on %s after the rollback", k, got)
		}
	}
	r.SetRollout("v1", "v3", 0.05) // a new candidate: fresh assignment
	n3 := 0
	for k := range arm {
		if got, _ := r.Route(ModelName, k, "", known); got == "v3" {
			n3++
		}
	}
	if n3 < 14 || n3 > 16 {
		t.Fatalf("new candidate got %d of 300 returning conversations at 5%%", n3)
	}
	// Requests without a key are assigned one by one, by the same quota.
	keyless := 0
	for range 200 {
		if v, _ := r.Route(ModelName, "", "", known); v == "v3" {
			keyless++
		}
	}
	if keyless < 8 || keyless > 12 {
		t.Fatalf("keyless: %d of 200 at 5%%", keyless)
	}
}

// The quota is kept per declared type: in every type the candidate's count
// stays within two conversations of the weight at every point of the step
// (never more than one ahead), where one quota over all types lets a type's
// count stray further (a canary with no evidence of a type holds its step);
// over all types it never exceeds ⌈weight·N⌉, which quotas per type alone
// did (each ran up to one ahead); a gateway that rebuilds its memory from
// the recorded interactions continues each type's quota; client-made types
// beyond maxStrata share one quota.
func TestRouterQuotaPerType(t *testing.T) {
	known := func(string) bool { return false }
	types := []string{"refund", "arithmetic", "order_status", "unit", "policy", "other"}
	share := []float64{0.40, 0.17, 0.15, 0.12, 0.10, 0.06}
	typeOf := func(n int) string { // a fixed, well-mixed draw of the types
		u := StickyFraction("type-draw-" + strconv.Itoa(n))
		for i, p := range share {
			if u < p {
				return types[i]
			}
			u -= p
		}
		return types[len(types)-1]
	}
	const w, total = 0.04, 3000
	typed, single := NewRouter("v1"), NewRouter("v1")
	typed.SetRollout("v1", "v2", w)
	single.SetRollout("v1", "v2", w)
	n, c, cs := map[string]int{}, map[string]int{}, map[string]int{}
	worstSingle := 0.0
	all := 0
	var recorded []recordedRoute
	for i := 1; i <= total; i++ {
		key, typ := fmt.Sprintf("conv-%d", i), typeOf(i)
		v, err := typed.Route(ModelName, key, typ, known)
		if err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, recordedRoute{Model: ModelName, ModelVersion: v, Conversation: key, Stratum: typ})
		vs, _ := single.Route(ModelName, key, "", known)
		n[typ]++
		if v == "v2" {
			c[typ]++
			all++
		}
		if vs == "v2" {
			cs[typ]++
		}
		if d := float64(c[typ]) - w*float64(n[typ]); d > 1 || d < -2 {
			t.Fatalf("%s: %d of %d conversations on the candidate at %g", typ, c[typ], n[typ], w)
		}
		if all > int(math.Ceil(w*float64(i)-1e-9)) {
			t.Fatalf("%d of the step's first %d conversations on the candidate at %g", all, i, w)
		}
		worstSingle = max(worstSingle, math.Abs(float64(cs[typ])-w*float64(n[typ])))
	}
	if worstSingle < 3 {
		t.Fatalf("one quota over all types never strayed by 3 conversations in a type (%.2f): the check above is trivial", worstSingle)
	}

	// A restart half way: the memory rebuilt from the first half's records
	// keeps each type's quota where it was.
	again := NewRouter("v1")
	again.SetRollout("v1", "v2", w)
	n, c = map[string]int{}, map[string]int{}
	for _, rec := range recorded[:total/2] {
		again.observe(rec)
		n[rec.Stratum]++
		if rec.ModelVersion == "v2" {
			c[rec.Stratum]++
		}
	}
	for i := total + 1; i <= total+1000; i++ {
		key, typ := fmt.Sprintf("conv-%d", i), typeOf(i)
		v, _ := again.Route(ModelName, key, typ, known)
		n[typ]++
		if v == "v2" {
			c[typ]++
		}
		if d := float64(c[typ]) - w*float64(n[typ]); d > 1 || d < -2 {
			t.Fatalf("after the restart, %s: %d of %d conversations on the candidate", typ, c[typ], n[typ])
		}
	}

	// Types made up by clients do not grow the router's memory per step.
	many := NewRouter("v1")
	many.SetRollout("v1", "v2", 0.5)
	for i := range 10 * maxStrata {
		_, _ = many.Route(ModelName, fmt.Sprintf("c%d", i), fmt.Sprintf("type-%d", i), known)
	}
	if got := len(many.step); got > maxStrata+1 {
		t.Fatalf("%d quotas for %d types; at most %d", got, 10*maxStrata, maxStrata+1)
	}
}

// BenchmarkRoute: routing cost per request with no rollout, and during a
// 4% rollout for new and for returning conversations (the quota's
// memory); parallel, as the gateway calls it.
func BenchmarkRoute(b *testing.B) {
	known := func(string) bool { return false }
	for _, c := range []struct {
		name      string
		candidate string
		keys      int // distinct conversations cycled through; 0: a new one per request
	}{{"stable-only", "", 1000}, {"rollout-new", "v2", 0}, {"rollout-returning", "v2", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			r := NewRouter("v1")
			r.SetRollout("v1", c.candidate, 0.04)
			keys := make([]string, max(c.keys, 1))
			for i := range keys {
				keys[i] = fmt.Sprintf("conv-%d", i)
			}
			var n atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					key := keys[int(i)%len(keys)]
					if c.keys == 0 {
						key = "new-" + strconv.FormatInt(i, 10)
					}
					if _, err := r.Route(ModelName, key, "", known); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkRouterApplyRecorded: what following the store costs the router
// per recorded interaction (a 60-token prompt, a 40-token answer with its
// logprobs): nothing without a rollout, a decoding of the routing fields
// during one.
func BenchmarkRouterApplyRecorded(b *testing.B) {
	rec := &events.InteractionRecorded{InteractionID: "chatcmpl-1", Tenant: "t", User: "alice", Model: ModelName, ModelVersion: "v2",
		Messages:     []events.ChatMessage{{Role: "system", Content: strings.Repeat("You answer briefly. ", 5)}, {Role: "user", Content: strings.Repeat("What is the refund window? ", 4)}},
		PromptTokens: make([]int, 60)}
	ch := events.Choice{Message: events.ChatMessage{Role: "assistant", Content: strings.Repeat("The refund window is 30 days. ", 5)}, FinishReason: "stop",
		CompletionTokens: make([]int, 40)}
	for i := range 40 {
		ch.Logprobs = append(ch.Logprobs, events.TokenLogprob{Token: 1000 + i, Logprob: -0.25})
	}
	rec.Choices = []events.Choice{ch}
	for _, c := range []struct{ name, candidate string }{{"no-rollout", ""}, {"rollout", "v2"}} {
		b.Run(c.name, func(b *testing.B) {
			r := NewRouter("v1")
			r.SetRollout("v1", c.candidate, 0.04)
			evs := make([]events.Event, 1000)
			for i := range evs {
				rec.Conversation = fmt.Sprintf("conv-%d", i)
				rec.TaskType, rec.Metadata = "refund", map[string]string{"type": "refund", "user": "alice", "conversation_id": rec.Conversation}
				ev, err := events.Encode(rec, events.Meta{Stream: "interaction-" + rec.Conversation})
				if err != nil {
					b.Fatal(err)
				}
				evs[i] = ev
			}
			b.SetBytes(int64(len(evs[0].Data)))
			b.ResetTimer()
			for i := range b.N {
				if err := r.Apply(&evs[i%len(evs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// routeOf reads the same routing fields as a full decoding of any
// interaction the gateway's encoder writes, whatever their values (the
// messages after them may hold anything), and never panics on other bytes.
func FuzzRouteOf(f *testing.F) {
	f.Add("alice", "conv-1", ModelName, "v2", "refund", "", `{"x":"}"}`, []byte(`{"user":"a","model_version":"v"}`))
	f.Add("", "", "citizen@v1", "v1", "", "arithmetic", "\"\\\x00", []byte(`{"model":1}`))
	f.Add("ü", "c\"", "", "", "a", "b", "", []byte(`[`))
	f.Add("u", "c", ModelName, "v", "", "", "", []byte(`{"metadata":{"type":7},"model_version":"v"}`))
	f.Fuzz(func(t *testing.T, user, conv, model, version, taskType, typ, content string, raw []byte) {
		meta := map[string]string{"conversation_id": conv, content: content}
		if taskType != "" {
			meta["task_type"] = taskType
		}
		if typ != "" {
			meta["type"] = typ
		}
		rec := &events.InteractionRecorded{InteractionID: "i", Tenant: "t", User: user, Conversation: conv, Model: model, ModelVersion: version,
			TaskType: DeclaredType(meta), Metadata: meta, Messages: []events.ChatMessage{{Role: "user", Content: content}}}
		ev, err := events.Encode(rec, events.Meta{Stream: "interaction-i"})
		if err != nil {
			t.Skip(err)
		}
		var want struct {
			User         string            `json:"user"`
			Conversation string            `json:"conversation"`
			TaskType     string            `json:"task_type"`
			Metadata     map[string]string `json:"metadata"`
			Model        string            `json:"model"`
			ModelVersion string            `json:"model_version"`
		}
		if err := json.Unmarshal(ev.Data, &want); err != nil {
			t.Fatal(err)
		}
		if want.TaskType != DeclaredType(want.Metadata) {
			t.Fatalf("recorded task_type %q, metadata %v", want.TaskType, want.Metadata)
		}
		got, err := routeOf(ev.Data)
		if err != nil || got != (recordedRoute{want.User, want.Conversation, want.Model, want.ModelVersion, want.TaskType}) {
			t.Fatalf("routeOf(%s) = %+v, %v; want %+v", ev.Data, got, err, want)
		}
		// A store written before the gateway recorded task_type from
		// metadata "type": the stratum is read from the metadata.
		rec.TaskType = ""
		if ev, err = events.Encode(rec, events.Meta{Stream: "interaction-i"}); err != nil {
			t.Fatal(err)
		}
		if got, err := routeOf(ev.Data); err != nil || got.Stratum != want.TaskType {
			t.Fatalf("without task_type: routeOf(%s) = %+v, %v; want stratum %q", ev.Data, got, err, want.TaskType)
		}
		_, _ = routeOf(raw)
	})
}
