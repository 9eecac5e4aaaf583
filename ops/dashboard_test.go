package ops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"
)

// chromiumPath finds a Chromium. Missing: the test fails when CI=true
// (ops/testdata/install-chromium.sh installs it) and skips otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on PATH (chromium, chromium-browser, google-chrome): run ops/testdata/install-chromium.sh"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// cdp speaks the Chrome DevTools Protocol over --remote-debugging-pipe:
// JSON messages separated by NUL bytes, commands on the browser's fd 3,
// answers and events on its fd 4. Just enough for one page test.
type cdp struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     *os.File // we write commands
	mu     sync.Mutex
	nextID int
	calls  map[int]chan cdpMsg
	events chan cdpMsg
	stderr bytes.Buffer
}

type cdpMsg struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

func startChromium(t *testing.T, path string) *cdp {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &cdp{t: t, in: cmdW, calls: map[int]chan cdpMsg{}, events: make(chan cdpMsg, 256)}
	c.cmd = exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
		"--user-data-dir="+t.TempDir(), "about:blank")
	c.cmd.ExtraFiles = []*os.File{cmdR, outW} // fd 3, fd 4
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	outW.Close()
	go c.read(outR)
	t.Cleanup(func() {
		c.in.Close()
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
		outR.Close()
	})
	return c
}

func (c *cdp) read(r *os.File) {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			close(c.events)
			c.mu.Lock()
			for id, ch := range c.calls {
				close(ch)
				delete(c.calls, id)
			}
			c.mu.Unlock()
			return
		}
		var m cdpMsg
		if json.Unmarshal(b[:len(b)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			c.mu.Lock()
			ch := c.calls[m.ID]
			delete(c.calls, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case c.events <- m:
		default: // nobody waits for this event
		}
	}
}

// call sends a command and waits for its answer.
func (c *cdp) call(session, method string, params any, result any) {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan cdpMsg, 1)
	c.calls[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.in.Write(append(b, 0)); err != nil {
		c.t.Fatalf("%s: %v (stderr: %s)", method, err, c.stderr.String())
	}
	select {
	case m, ok := <-ch:
		if !ok {
			c.t.Fatalf("%s: the browser went away (stderr: %s)", method, c.stderr.String())
		}
		if m.Error != nil {
			c.t.Fatalf("%s: %s", method, m.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				c.t.Fatalf("%s: %v", method, err)
			}
		}
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s: no answer from the browser", method)
	}
}

// waitEvent waits for a protocol event.
func (c *cdp) waitEvent(method string) {
	c.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-c.events:
			if !ok {
				c.t.Fatalf("waiting for %s: the browser went away", method)
			}
			if m.Method == method {
				return
			}
		case <-timeout:
			c.t.Fatalf("no %s", method)
		}
	}
}

// eval evaluates a JavaScript expression in the page, awaiting a promise,
// and decodes its value into out.
func (c *cdp) eval(session, expr string, out any) {
	c.t.Helper()
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	c.call(session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
	if res.ExceptionDetails != nil {
		c.t.Fatalf("page script %s: %s %s", expr, res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if out != nil {
		if err := json.Unmarshal(res.Result.Value, out); err != nil {
			c.t.Fatalf("page script %s: %v (%s)", expr, err, res.Result.Value)
		}
	}
}

// waitFor is a page-side wait: a promise that resolves when cond (a JS
// expression) is truthy, re-checked on every DOM change, rejected after
// 10 s.
func waitFor(cond string) string {
	return fmt.Sprintf(`new Promise((resolve, reject) => {
  const check = () => { try { return (%s); } catch (e) { return false; } };
  if (check()) return resolve(true);
  const obs = new MutationObserver(() => { if (check()) { obs.disconnect(); resolve(true); } });
  obs.observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
  setTimeout(() => { obs.disconnect(); reject(new Error("timed out waiting for: " + %q)); }, 10000);
})`, cond, cond)
}

func TestDashboardInChromium(t *testing.T) {
	path := chromiumPath(t)
	e := newEnv(t, nil, 0) // the page test runs without auth
	e.startRollout()
	e.evaluated("before-load", "v2", "acme", 0.75)

	c := startChromium(t, path)
	var target struct {
		TargetID string `json:"targetId"`
	}
	c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	s := att.SessionID
	c.call(s, "Page.enable", map[string]any{}, nil)
	c.call(s, "Page.navigate", map[string]any{"url": e.srv.URL + "/ops"}, nil)
	c.waitEvent("Page.loadEventFired")
	// this server has no authentication: the operator says so once
	c.eval(s, waitFor(`document.getElementById('key-dialog').open`), nil)
	c.eval(s, `document.getElementById('key-none').click(); true`, nil)

	// the stream renders the event stored before the page loaded (backlog)
	c.eval(s, waitFor(`document.querySelectorAll('#events li.event[data-type="interaction.evaluated"]').length >= 1`), nil)
	// and one appended while it is open
	e.append(events.VersionStream("v2"), "", &events.AnomalyDetected{Kind: "length_drift", Version: "v2", Value: 0.4, Baseline: 1, Detector: "d"})
	// an evaluation's failed check is named on its row, a passed one not
	e.append(events.InteractionStream("checked"), "acme", &events.InteractionEvaluated{InteractionID: "checked", Seq: 1, TaskType: "policy",
		ModelVersion: "v2", Reward: 0.9, AnswerLength: 33, RubricVersion: "r", EvaluatorVersion: "e",
		Checks: []events.GraderResult{{Name: "verdict", Score: 0, Label: "fail"}, {Name: "window", Score: 1, Label: "pass"}}})
	var row string
	c.eval(s, waitFor(`[...document.querySelectorAll('#events li.event[data-type="interaction.evaluated"]')].some(li => li.textContent.includes(' policy '))`), nil)
	c.eval(s, `[...document.querySelectorAll('#events li.event[data-type="interaction.evaluated"]')].find(li => li.textContent.includes(' policy ')).textContent`, &row)
	if !strings.Contains(row, "check failed: verdict") || strings.Contains(row, "window") {
		t.Fatalf("evaluation row %q; want the failed verdict check named, the passed one not", row)
	}
	c.eval(s, waitFor(`document.querySelector('#events li.event[data-type="anomaly.detected"]')`), nil)
	var text string
	c.eval(s, `document.querySelector('#events li.event[data-type="anomaly.detected"]').textContent`, &text)
	if !bytes.Contains([]byte(text), []byte("length_drift")) {
		t.Fatalf("anomaly row %q", text)
	}
	// the rollout state and its buttons
	c.eval(s, waitFor(`document.getElementById('rollout-kv').textContent.includes('v2') && !document.getElementById('pause').disabled`), nil)
	var buttons map[string]bool
	c.eval(s, `Object.fromEntries(['pause','resume','promote','abort'].map(id => [id, !!document.getElementById(id) && document.getElementById(id).tagName === 'BUTTON']))`, &buttons)
	for _, id := range []string{"pause", "resume", "promote", "abort"} {
		if !buttons[id] {
			t.Fatalf("no %s button: %v", id, buttons)
		}
	}
	// pressing Pause appends rollout.paused with the operator as actor
	paused := make(chan events.Event, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.store.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeRolloutPaused}}, func(_ context.Context, ev events.Event) error {
		paused <- ev
		return errDone
	})
	c.eval(s, `document.getElementById('reason').value = 'from the dashboard'; document.getElementById('pause').click(); true`, nil)
	select {
	case ev := <-paused:
		p, err := events.Decode(&ev)
		if err != nil {
			t.Fatal(err)
		}
		if x := p.(*events.RolloutPaused); x.Actor != "operator" || x.Reason != "from the dashboard" {
			t.Fatalf("paused %+v", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pressing Pause appended nothing")
	}
	// the page shows it: the event in the stream and the resume button
	c.eval(s, waitFor(`document.querySelector('#events li.event[data-type="rollout.paused"]') && !document.getElementById('resume').disabled && document.getElementById('pause').disabled`), nil)
}
