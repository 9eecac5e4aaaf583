package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventlog"
	"citizen/events/memstore"
	"citizen/internal/cputime"
)

// timedEngine measures the wrapped engine's own time per call: the whole
// Generate and the time to its first emit.
type timedEngine struct {
	Engine
	total, first atomic.Int64 // ns of the last call
}

func (t *timedEngine) Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error) {
	start := time.Now()
	var once bool
	wrapped := emit
	if emit != nil {
		wrapped = func(d Delta) error {
			if !once {
				once = true
				t.first.Store(int64(time.Since(start)))
			}
			return emit(d)
		}
	}
	res, err := t.Engine.Generate(ctx, req, wrapped)
	t.total.Store(int64(time.Since(start)))
	return res, err
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

const benchBody = `{"model":"citizen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is the capital of France? Answer in one word."}],"max_completion_tokens":64,"logprobs":true,"metadata":{"conversation_id":"bench"}}`

// BenchmarkAddedLatency measures, at concurrency 1 over loopback HTTP, the
// latency the gateway adds to an engine that answers at once: per request,
// the client-observed time minus the stub's own time (whole generation for
// non-streaming; time to its first token for time-to-first-chunk). The
// client's own HTTP cost is counted as gateway cost; mode=bare-http shows
// that floor (a handler that only calls the stub and writes its text).
func BenchmarkAddedLatency(b *testing.B) {
	for _, mode := range []string{"nonstream", "stream-ttfc", "bare-http"} {
		b.Run("mode="+mode, func(b *testing.B) {
			te := &timedEngine{Engine: NewStubEngine(VersionInfo{ID: "v1"})}
			var url string
			var client *http.Client
			if mode == "bare-http" {
				ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					res, _ := te.Generate(r.Context(), &GenerateRequest{Version: "v1", N: 1, Messages: []Message{{Role: "user", Content: "x"}}}, nil)
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"content":%q}`, res.Choices[0].Content)
				}))
				defer ts.Close()
				url, client = ts.URL+"/v1/chat/completions", ts.Client()
			} else {
				e := newEnv(b, func(c *Config, d *Deps) { d.Engine = te })
				url, client = e.ts.URL+"/v1/chat/completions", e.ts.Client()
			}
			body := benchBody
			if mode == "stream-ttfc" {
				body = strings.Replace(body, `"logprobs":true`, `"logprobs":true,"stream":true`, 1)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest("POST", url, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+keyA)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var took time.Duration
				if mode == "stream-ttfc" {
					br := bufio.NewReader(resp.Body)
					for {
						line, err := br.ReadBytes('\n')
						if err != nil {
							b.Fatalf("no chunk: %v", err)
						}
						if bytes.HasPrefix(line, []byte("data: ")) {
							break
						}
					}
					took = time.Since(start) - time.Duration(te.first.Load())
					io.Copy(io.Discard, br)
				} else {
					io.Copy(io.Discard, resp.Body)
					took = time.Since(start) - time.Duration(te.total.Load())
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
				lat = append(lat, took)
			}
			b.StopTimer()
			b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "ms-p99")
		})
	}
}

// rawClient is a minimal HTTP/1.1 keep-alive client (like wrk): it writes
// a prepared request and reads the status line, headers and a
// Content-Length or chunked body, so the load generator costs little of the
// 2 cores it shares with the gateway.
type rawClient struct {
	conn net.Conn
	br   *bufio.Reader
	head string
	buf  []byte
}

func newRawClient(addr, key string) (*rawClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &rawClient{conn: conn, br: bufio.NewReaderSize(conn, 64<<10),
		head: "Host: " + addr + "\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json\r\n"}, nil
}

func (c *rawClient) Close() error { return c.conn.Close() }

func (c *rawClient) post(path, body string) (int, error) {
	c.buf = append(c.buf[:0], "POST "...)
	c.buf = append(c.buf, path...)
	c.buf = append(c.buf, " HTTP/1.1\r\n"...)
	c.buf = append(c.buf, c.head...)
	c.buf = append(c.buf, "Content-Length: "...)
	c.buf = strconv.AppendInt(c.buf, int64(len(body)), 10)
	c.buf = append(c.buf, "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return 0, err
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil || len(line) < 12 {
		return 0, fmt.Errorf("status line: %q %v", line, err)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, err
	}
	length, chunked := -1, false
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(bytes.TrimSpace(h), []byte(":")); ok {
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				chunked = bytes.Contains(bytes.ToLower(v), []byte("chunked"))
			}
		}
	}
	if !chunked {
		if length < 0 {
			return 0, errors.New("no Content-Length")
		}
		_, err = c.br.Discard(length)
		return status, err
	}
	for {
		l, err := c.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(l)), 16, 64)
		if err != nil {
			return 0, err
		}
		if _, err := c.br.Discard(int(n) + 2); err != nil {
			return 0, err
		}
		if n == 0 {
			return status, nil
		}
	}
}

// BenchmarkThroughput sends b.N non-streaming completions over 64
// concurrent keep-alive connections and reports recorded completions per
// second; every one must be in the store (memstore, or the durable eventlog
// that fsyncs before acknowledging). check=strict is the stores' default
// (every append is decoded again against its payload type); check=lax only
// validates the envelope, which is enough for events the gateway encodes
// from typed payloads.
func BenchmarkThroughput(b *testing.B) {
	for _, bc := range []struct {
		store string
		lax   bool
	}{{"memstore", false}, {"memstore", true}, {"eventlog", false}, {"eventlog", true}} {
		check := "strict"
		if bc.lax {
			check = "lax"
		}
		storeName := bc.store
		b.Run("store="+storeName+"/check="+check+"/conns=64", func(b *testing.B) {
			var closeStore func()
			e := newEnv(b, func(c *Config, d *Deps) {
				if storeName == "memstore" {
					d.Store = &faultyStore{Store: memstore.New(memstore.Config{Check: events.AppendCheck{Lax: bc.lax}})}
				}
				if storeName == "eventlog" {
					st, err := eventlog.Open(eventlog.Config{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler), Check: events.AppendCheck{Lax: bc.lax}})
					if err != nil {
						b.Fatal(err)
					}
					closeStore = func() { st.Close() }
					d.Store = &faultyStore{Store: st}
				}
			})
			if closeStore != nil {
				defer closeStore()
			}
			counted := e.srv.store.(*faultyStore)
			before := counted.appended.Load()
			addr := strings.TrimPrefix(e.ts.URL, "http://")
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cputime.Process()
			start := time.Now()
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := newRawClient(addr, keyA)
					if err != nil {
						failed.Add(1)
						return
					}
					defer c.Close()
					for next.Add(1) <= int64(b.N) {
						status, err := c.post("/v1/chat/completions", benchBody)
						if err != nil || status != 200 {
							failed.Add(1)
							if err != nil {
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d requests failed", f)
			}
			if got := counted.appended.Load() - before; got != int64(b.N) {
				b.Fatalf("%d acknowledged, %d recorded", b.N, got)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			// CPU per request (gateway, store and the load generator, all in
			// this process): a load-independent view on a shared machine.
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-us/req")
		})
	}
}

// BenchmarkHandler is the gateway's own CPU cost per completion without
// the network: decode, route, stub engine, record (memstore, lax check),
// encode.
func BenchmarkHandler(b *testing.B) {
	for _, logprobs := range []bool{false, true} {
		b.Run(fmt.Sprintf("logprobs=%v", logprobs), func(b *testing.B) {
			e := newEnv(b, func(c *Config, d *Deps) {
				d.Store = &faultyStore{Store: memstore.New(memstore.Config{Check: events.AppendCheck{Lax: true}})}
			})
			h := e.srv.Handler()
			body := benchBody
			if !logprobs {
				body = strings.Replace(body, `"logprobs":true`, `"logprobs":false`, 1)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+keyA)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
