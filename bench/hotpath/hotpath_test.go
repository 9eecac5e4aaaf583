package hotpath

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"citizen/gateway"
)

// TestMain lets the runner's test start the mock in a child process: the
// test binary re-executed with HOTPATH_TEST_MOCK=ADDR.
func TestMain(m *testing.M) {
	if addr := os.Getenv("HOTPATH_TEST_MOCK"); addr != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		if err := ServeMock(ctx, addr, MockConfig{}, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func post(t *testing.T, url string, body any) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// The mock answers in the OpenAI chat completion shape: the object, the
// choice and message fields the SDKs read, usage, and logprobs and token
// ids only when asked.
func TestMockAnswersTheOpenAIShape(t *testing.T) {
	srv := httptest.NewServer(NewMock(MockConfig{Tokens: 3}))
	defer srv.Close()
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	resp, b := post(t, srv.URL+"/v1/chat/completions", map[string]any{"model": "m", "messages": msgs})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var c struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string           `json:"finish_reason"`
			Logprobs     *json.RawMessage `json:"logprobs"`
			TokenIDs     []int            `json:"token_ids"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.ID == "" || c.Created == 0 || len(c.Choices) != 1 {
		t.Fatalf("not a chat.completion: %s", b)
	}
	ch := c.Choices[0]
	if ch.Message.Role != "assistant" || ch.Message.Content != " ok ok ok" || ch.FinishReason != "stop" || ch.TokenIDs != nil {
		t.Fatalf("choice %+v", ch)
	}
	if ch.Logprobs != nil && string(*ch.Logprobs) != "null" {
		t.Fatalf("logprobs without asking: %s", *ch.Logprobs)
	}
	var u map[string]map[string]int
	json.Unmarshal(b, &u)
	if u["usage"]["completion_tokens"] != 3 || u["usage"]["total_tokens"] != 3+u["usage"]["prompt_tokens"] {
		t.Fatalf("usage %v", u["usage"])
	}

	for _, bad := range []string{`{`, `{"messages":"x"}`, `{"messages":[],"n":2}`, `[]`} {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", bad, resp.StatusCode)
		}
	}
	if resp, _ := post(t, srv.URL+"/v1/nothing", map[string]any{}); resp.StatusCode != 404 {
		t.Errorf("unknown path: status %d", resp.StatusCode)
	}
}

// citizen's upstream engine reads the mock's answers, plain and streamed,
// with the logprobs and (when it asks) the token ids it records.
func TestMockServesCitizensUpstreamEngine(t *testing.T) {
	mock := NewMock(MockConfig{Tokens: 4, PromptTokens: 5})
	srv := httptest.NewServer(mock)
	defer srv.Close()
	for _, ids := range []bool{false, true} {
		up, err := gateway.NewUpstream(gateway.UpstreamConfig{BaseURL: srv.URL + "/v1", Model: "mock", RequestTokenIDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{false, true} {
			req := &gateway.GenerateRequest{Version: "base", N: 1, Stream: stream, Messages: []gateway.Message{{Role: "user", Content: "hi"}}}
			var deltas strings.Builder
			res, err := up.Generate(context.Background(), req, func(d gateway.Delta) error { deltas.WriteString(d.Text); return nil })
			if err != nil {
				t.Fatalf("ids=%v stream=%v: %v", ids, stream, err)
			}
			c := res.Choices[0]
			if c.Content != " ok ok ok ok" || len(c.Tokens) != 4 || c.FinishReason != "stop" {
				t.Fatalf("ids=%v stream=%v: %+v", ids, stream, c)
			}
			if stream && deltas.String() != c.Content {
				t.Fatalf("streamed %q, assembled %q", deltas.String(), c.Content)
			}
			for i, tok := range c.Tokens {
				if tok.Logprob != -0.125 || tok.Text != mockWord {
					t.Fatalf("token %d: %+v", i, tok)
				}
				if want := -1; ids {
					want = 1000 + i
					if tok.ID != want {
						t.Fatalf("ids=%v token %d id %d, want %d", ids, i, tok.ID, want)
					}
				} else if tok.ID != want {
					t.Fatalf("ids=%v token %d id %d, want %d", ids, i, tok.ID, want)
				}
			}
			if ids != (len(res.PromptTokens) == 5) {
				t.Fatalf("ids=%v stream=%v: prompt ids %v", ids, stream, res.PromptTokens)
			}
			if res.Usage.CompletionTokens != 4 || res.Usage.PromptTokens != 5 {
				t.Fatalf("usage %+v", res.Usage)
			}
		}
	}
	if mock.Requests() != 4 {
		t.Fatalf("mock counted %d requests, want 4", mock.Requests())
	}
}

// The load generator sends exactly the requests asked for, counts every
// answer, times the first chunk of a stream, and counts failures.
func TestLoadCounts(t *testing.T) {
	mock := NewMock(MockConfig{})
	srv := httptest.NewServer(mock)
	defer srv.Close()
	url := srv.URL + "/v1/chat/completions"
	plain := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	r, err := Load(context.Background(), nil, LoadConfig{URL: url, Body: plain, Conns: 4, Requests: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 50 || r.Errors != 0 || mock.Requests() != 50 || r.Latency.N != 50 || r.TTFC.N != 0 {
		t.Fatalf("result %+v, mock saw %d", r, mock.Requests())
	}
	if !(r.Latency.P50 > 0 && r.Latency.P50 <= r.Latency.P99) || r.ReqPerSec <= 0 {
		t.Fatalf("latency %+v, %v req/s", r.Latency, r.ReqPerSec)
	}
	stream := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	r, err = Load(context.Background(), nil, LoadConfig{URL: url, Body: stream, Stream: true, Conns: 2, Requests: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 10 || r.TTFC.N != 10 || r.TTFC.P50 > r.Latency.P99 || r.TTFC.P50 <= 0 {
		t.Fatalf("stream result %+v", r)
	}
	// A duration-bound load stops on time.
	r, err = Load(context.Background(), nil, LoadConfig{URL: url, Body: plain, Conns: 3, Duration: 100 * time.Millisecond})
	if err != nil || r.OK == 0 || r.Wall > 5 {
		t.Fatalf("duration load %+v, %v", r, err)
	}

	var n atomic.Int64
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		mock.ServeHTTP(w, r)
	}))
	defer failing.Close()
	r, err = Load(context.Background(), nil, LoadConfig{URL: failing.URL + "/v1/chat/completions", Body: plain, Conns: 1, Requests: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 5 || r.Errors != 5 || !strings.Contains(r.FirstError, "503") {
		t.Fatalf("failing server: %+v", r)
	}
	// A 503 with Retry-After is shed, not failed, and the connection waits
	// it out before its next request.
	var shedN atomic.Int64
	shedding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if shedN.Add(1)%2 == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error":{"code":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		mock.ServeHTTP(w, r)
	}))
	defer shedding.Close()
	t0 := time.Now()
	r, err = Load(context.Background(), nil, LoadConfig{URL: shedding.URL + "/v1/chat/completions", Body: plain, Conns: 1, Requests: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK != 2 || r.Shed != 2 || r.Errors != 0 || time.Since(t0) < 2*time.Second {
		t.Fatalf("shedding server: %+v after %v", r, time.Since(t0))
	}
	// A stream cut before [DONE] is a failure.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {}\n\n")
	}))
	defer cut.Close()
	r, _ = Load(context.Background(), nil, LoadConfig{URL: cut.URL, Body: stream, Stream: true, Requests: 2})
	if r.OK != 0 || r.Errors != 2 {
		t.Fatalf("cut stream: %+v", r)
	}
	if _, err := Load(context.Background(), nil, LoadConfig{URL: url, Body: plain}); err == nil {
		t.Fatal("a load without a count or a duration was accepted")
	}
}

func TestQuantiles(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(101-i)*time.Millisecond)
	}
	q := quantiles(d)
	if q.P50 != 50 || q.P99 != 99 || q.N != 100 || q.Mean != 50.5 {
		t.Fatalf("%+v", q)
	}
	if q := quantiles(nil); q != (Quantiles{}) {
		t.Fatalf("empty: %+v", q)
	}
}

func TestParseStat(t *testing.T) {
	line := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 10 18446744073709551615\n"
	d, err := parseStat([]byte(line))
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("%v, %v", d, err)
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2 3", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 1 0"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	self, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	if after, _ := ProcessCPU(os.Getpid()); after <= self {
		t.Fatalf("50 ms of work did not show (%v then %v, %d loops)", self, after, x)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1234 (cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 100 1000 10"))
	f.Add([]byte("1 ()) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseStat(b)
		if err == nil && d < 0 {
			t.Fatalf("negative time %v", d)
		}
	})
}

func TestParseMetric(t *testing.T) {
	text := "# HELP x_total things\n# TYPE x_total counter\nx_total_more 9\nx_total{a=\"b\"} 7\nx_total 42\n"
	if v, ok := parseMetric(strings.NewReader(text), "x_total"); !ok || v != 42 {
		t.Fatalf("%v %v", v, ok)
	}
	if _, ok := parseMetric(strings.NewReader(text), "y_total"); ok {
		t.Fatal("found a missing metric")
	}
	if v, ok := parseMetric(strings.NewReader(text), `x_total{a="b"}`); !ok || v != 7 {
		t.Fatalf("labelled sample: %v %v", v, ok)
	}
}

func FuzzParseMetric(f *testing.F) {
	f.Add("x_total 42\n")
	f.Add("x_total NaN\nx_total")
	f.Fuzz(func(t *testing.T, s string) { parseMetric(strings.NewReader(s), "x_total") })
}

// A tiny run of the runner: the mock in a child process, direct-to-mock
// and a peer (another mock, standing in for a gateway), two rounds.
func TestRunTiny(t *testing.T) {
	peerMock := NewMock(MockConfig{})
	peer := httptest.NewServer(peerMock)
	defer peer.Close()
	var progress bytes.Buffer
	cfg := RunConfig{
		Mock: func(addr string) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "HOTPATH_TEST_MOCK="+addr)
			return cmd
		},
		Targets: []string{TargetDirect}, Peers: []Peer{{Name: "peer", URL: peer.URL + "/v1", PID: os.Getpid()}},
		Rounds: 2, Serial: 10, Warmup: 8, Conns: 3, Duration: 200 * time.Millisecond, Progress: &progress,
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Runs) != 4 || len(rep.Summary) != 2 {
		t.Fatalf("%d runs, %d summaries", len(rep.Runs), len(rep.Summary))
	}
	var peerAcked int
	for _, r := range rep.Runs {
		if r.Serial.OK != 10 || r.SerialSSE.OK != 10 || r.SerialSSE.TTFC.N != 10 || r.Concurrent.OK == 0 {
			t.Fatalf("run %+v", r)
		}
		if r.Target == "peer" {
			peerAcked += r.Acknowledged
			if r.CPUSerial < 0 || r.Recorded != -1 {
				t.Fatalf("peer run %+v", r)
			}
		} else if r.CPUSerial != -1 || r.MockCPUSerial < 0 {
			t.Fatalf("direct run %+v", r)
		}
	}
	if got := peerMock.Requests(); got != int64(peerAcked) {
		t.Fatalf("peer acknowledged %d, its mock answered %d", peerAcked, got)
	}
	md := rep.Markdown()
	for _, want := range []string{"| direct |", "| peer |", "nproc", "req/s at 3 conns"} {
		if !strings.Contains(md, want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md)
		}
	}
	if rep.Summary[1].VsDirect <= 0 {
		t.Fatalf("peer summary %+v", rep.Summary[1])
	}
}
