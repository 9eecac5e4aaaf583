package ops

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"citizen/events"
)

func TestCLI(t *testing.T) {
	e := newEnv(t, bearer, 0)
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb, e.srv.URL, testKey)
		return code, out.String(), errb.String()
	}
	if code, out, _ := run("rollout", "status"); code != 0 || !strings.Contains(out, "stable     v1") || !strings.Contains(out, "none running") {
		t.Fatalf("status: %d %q", code, out)
	}
	if code, _, errs := run("rollout", "pause"); code != 1 || !strings.Contains(errs, "no rollout is running") {
		t.Fatalf("pause without rollout: %d %q", code, errs)
	}
	e.startRollout()
	if code, out, _ := run("rollout", "status"); code != 0 || !strings.Contains(out, "candidate  v2: step 1 of 4, 5% of traffic") {
		t.Fatalf("status: %d %q", code, out)
	}
	if code, out, errs := run("rollout", "pause", "--reason", "night"); code != 0 || !strings.Contains(out, "rollout.paused") || !strings.Contains(out, "paused since") {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("--json", "rollout", "resume"); code != 0 || !strings.Contains(out, `"type":"rollout.resumed"`) {
		t.Fatalf("resume --json: %d %q", code, out)
	}
	if code, out, _ := run("rollout", "abort"); code != 0 || !strings.Contains(out, "rolled_back") {
		t.Fatalf("abort: %d %q", code, out)
	}
	if code, out, _ := run("versions"); code != 0 || !strings.Contains(out, "v2") || !strings.Contains(out, "rolled_back") {
		t.Fatalf("versions: %d %q", code, out)
	}
	if code, _, errs := run("rollout", "start", "v9"); code != 1 || !strings.Contains(errs, "no such trained version") {
		t.Fatalf("start of an unknown version: %d %q", code, errs)
	}
	e.append(events.VersionStream("v3"), "", &events.WeightsTrained{Version: "v3", Parent: "v1", Accepted: false, Reason: "gate: x regressed",
		Artifact: &events.Artifact{Format: "peft-lora", Path: "weights/v3", SHA256: "00"}})
	if code, out, errs := run("rollout", "start", "v3", "--reason", "show it"); code != 0 || !strings.Contains(out, "rollout.started") ||
		!strings.Contains(out, "candidate  v3: step 1 of 4") {
		t.Fatalf("start: %d %q %q", code, out, errs)
	}
	if code, out, _ := run("rollout", "abort"); code != 0 || !strings.Contains(out, "rolled_back") {
		t.Fatalf("abort: %d %q", code, out)
	}
	if code, _, _ := run("rollout", "explode"); code != 2 {
		t.Fatalf("unknown command: %d", code)
	}
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"rollout", "status"}, &out, &errb, e.srv.URL, "wrong"); code != 1 || !strings.Contains(errb.String(), "401") {
		t.Fatalf("wrong key: %d %q", code, errb.String())
	}
	// stream: the events so far, then stop by cancelling
	ctx, cancel := context.WithCancel(context.Background())
	pr := &lineWriter{lines: make(chan string, 16)}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"stream", "--type", "rollout", "--after", "0"}, pr, &errb, e.srv.URL, testKey)
	}()
	for _, want := range []string{events.TypeRolloutStarted, events.TypeRolloutPaused, events.TypeRolloutResumed, events.TypeRolloutRolledBack,
		events.TypeRolloutStarted, events.TypeRolloutRolledBack} {
		if line := <-pr.lines; !strings.Contains(line, want) {
			t.Fatalf("stream line %q, want %s", line, want)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("stream exit %d: %s", code, errb.String())
	}
}

// lineWriter hands each written line to a channel.
type lineWriter struct {
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.lines <- line
	}
}
