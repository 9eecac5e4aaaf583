package hotpath

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig configures one closed-loop load: Conns connections, each
// sending its next request as soon as the previous answer has been read,
// until Requests have been sent (in all) or Duration has passed, whichever
// comes first (at least one of them must be set). Requests in flight when
// the load ends are answered and counted: every request sent is either
// acknowledged or an error.
type LoadConfig struct {
	// URL is the chat completions endpoint.
	URL string
	// Key is sent as a bearer token if set.
	Key string
	// Body is the request body; Stream must say whether it asks for a
	// stream (then the first chunk's arrival is timed too).
	Body   []byte
	Stream bool
	// Conns is the number of connections (default 1).
	Conns    int
	Requests int
	Duration time.Duration
}

// LoadResult is what one load measured. Latencies are of answered
// requests (status 200, body read to the end; a stream must end with
// [DONE]).
type LoadResult struct {
	OK     int `json:"ok"`
	Errors int `json:"errors"`
	// Shed counts requests refused with 503 and Retry-After (the
	// target's back-pressure); after one the connection waits the
	// Retry-After, as the OpenAI SDKs do, before its next request.
	Shed int     `json:"shed,omitempty"`
	Wall float64 `json:"wall_s"`
	// ReqPerSec is OK per wall second.
	ReqPerSec float64   `json:"req_per_s"`
	Latency   Quantiles `json:"latency_ms"`
	// TTFC is the time to the first SSE data event (streams only).
	TTFC Quantiles `json:"ttfc_ms,omitzero"`
	// FirstError says what the first failed request got.
	FirstError string `json:"first_error,omitempty"`
}

// Quantiles of a latency sample, in milliseconds.
type Quantiles struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	N    int     `json:"n"`
}

// quantiles sorts d in place.
func quantiles(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(len(d)-1, i))
		return float64(d[i]) / 1e6
	}
	return Quantiles{P50: at(0.50), P99: at(0.99), Mean: float64(sum) / float64(len(d)) / 1e6, N: len(d)}
}

// NewClient returns an HTTP client for conns keep-alive connections to one
// host.
func NewClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// Load runs one closed-loop load with client (nil: NewClient(Conns)).
func Load(ctx context.Context, client *http.Client, cfg LoadConfig) (LoadResult, error) {
	if cfg.Conns <= 0 {
		cfg.Conns = 1
	}
	if cfg.Requests <= 0 && cfg.Duration <= 0 {
		return LoadResult{}, errors.New("hotpath: load needs a request count or a duration")
	}
	if cfg.URL == "" || len(cfg.Body) == 0 {
		return LoadResult{}, errors.New("hotpath: load needs a URL and a body")
	}
	if client == nil {
		client = NewClient(cfg.Conns)
	}
	var (
		issued   atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		ttfc     []time.Duration
		errs     int
		shed     int
		firstErr string
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for range cfg.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myLat, myTTFC []time.Duration
			myErrs, myShed := 0, 0
			myFirst := ""
			for ctx.Err() == nil {
				if cfg.Requests > 0 && issued.Add(1) > int64(cfg.Requests) {
					break
				}
				if cfg.Duration > 0 && time.Now().After(deadline) {
					break
				}
				l, f, err := one(ctx, client, &cfg)
				var sh shedError
				if errors.As(err, &sh) {
					myShed++
					wait := sh.retryAfter
					if cfg.Duration > 0 {
						wait = min(wait, time.Until(deadline))
					}
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
					continue
				}
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					myErrs++
					if myFirst == "" {
						myFirst = err.Error()
					}
					continue
				}
				myLat = append(myLat, l)
				if cfg.Stream {
					myTTFC = append(myTTFC, f)
				}
			}
			mu.Lock()
			lat = append(lat, myLat...)
			ttfc = append(ttfc, myTTFC...)
			errs += myErrs
			shed += myShed
			if firstErr == "" {
				firstErr = myFirst
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	r := LoadResult{OK: len(lat), Errors: errs, Shed: shed, Wall: wall.Seconds(), Latency: quantiles(lat), FirstError: firstErr}
	if cfg.Stream {
		r.TTFC = quantiles(ttfc)
	}
	if wall > 0 {
		r.ReqPerSec = float64(r.OK) / wall.Seconds()
	}
	return r, nil
}

var dataPrefix = []byte("data:")

// shedError is a 503 with Retry-After: the target refused the request for
// now (back-pressure), which is not a failure of the target.
type shedError struct{ retryAfter time.Duration }

func (e shedError) Error() string { return fmt.Sprintf("status 503, retry after %v", e.retryAfter) }

// one sends one request and reads the whole answer: its latency and, for
// a stream, the time to its first data event.
func one(ctx context.Context, client *http.Client, cfg *LoadConfig) (time.Duration, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(cfg.Body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Key)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && ra > 0 && resp.StatusCode == http.StatusServiceUnavailable {
			return 0, 0, shedError{time.Duration(ra) * time.Second}
		}
		return 0, 0, fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	if !cfg.Stream {
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return 0, 0, err
		}
		if n == 0 {
			return 0, 0, errors.New("empty answer")
		}
		return time.Since(start), 0, nil
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	var first time.Duration
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && bytes.HasPrefix(line, dataPrefix) {
			if first == 0 {
				first = time.Since(start)
			}
			if bytes.Equal(bytes.TrimSpace(line[len(dataPrefix):]), []byte("[DONE]")) {
				done = true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) { // a long line: skip the rest
				_, err = br.ReadSlice('\n')
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if !done {
		return 0, 0, errors.New("stream ended without [DONE]")
	}
	return time.Since(start), first, nil
}
