package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"citizen/events/memstore"
)

// A client that sends its headers and then only part of its body is cut
// off after BodyReadTimeout, with or without a valid key, and a long
// generation whose body arrived in time is not (the body deadline is
// lifted once the body is read).
func TestSlowBodyIsCutOff(t *testing.T) {
	eng := &gateEngine{StubEngine: NewStubEngine(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := New(Config{DevMode: "on", BodyReadTimeout: 200 * time.Millisecond}, Deps{Store: memstore.New(memstore.Config{}), Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	addr := ln.Addr().String()
	for _, auth := range []string{"", "Authorization: Bearer " + DevKey + "\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":", auth)
		// the server answers (408 or 401) and closes, or just closes
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		io.Copy(io.Discard, c)
		c.Close()
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("auth %q: connection held %v", auth, d)
		}
	}
	// a generation that outlasts the body timeout still completes
	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"citizen","messages":[{"role":"user","content":"slow"}]}`))
		req.Header.Set("Authorization", "Bearer "+DevKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- -1
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	<-eng.entered
	time.Sleep(3 * srv.cfg.BodyReadTimeout) // outlast the body deadline on purpose
	close(eng.release)
	if code := <-got; code != 200 {
		t.Fatalf("long generation: %d", code)
	}
}

// One interaction accepts at most MaxFeedbackPerInteraction feedbacks; a
// retry of a stored one still succeeds, and nothing past the cap is stored.
func TestFeedbackCapPerInteraction(t *testing.T) {
	e := newEnv(t, func(c *Config, _ *Deps) { c.MaxFeedbackPerInteraction = 3 })
	resp, body := e.post("/v1/chat/completions", keyA, `{"model":"citizen","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode, string(body))
	}
	var comp struct{ ID string }
	json.Unmarshal(body, &comp)
	fb := func(id string) int {
		resp, body := e.post("/v1/chat/completions/"+comp.ID+"/feedback", keyA, fmt.Sprintf(`{"text":"ok","feedback_id":%q}`, id))
		if resp.StatusCode != 200 && !strings.Contains(string(body), "feedback_limit_reached") {
			t.Fatalf("feedback %s: %d %s", id, resp.StatusCode, body)
		}
		return resp.StatusCode
	}
	for i := range 3 {
		if code := fb(fmt.Sprint("f", i)); code != 200 {
			t.Fatalf("feedback %d: %d", i, code)
		}
	}
	if code := fb("f3"); code != 409 {
		t.Fatalf("the fourth feedback: %d, want 409", code)
	}
	if code := fb("f1"); code != 200 {
		t.Fatalf("a retry of a stored feedback: %d", code)
	}
	n, _ := e.mem.LastPosition(context.Background())
	if n != 4 { // the interaction and three feedbacks
		t.Fatalf("%d events stored, want 4", n)
	}
}
