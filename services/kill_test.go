package services

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/stores"
)

// TestMain lets a test start `citizen serve` in a child process (the test
// binary re-executed with CITIZEN_TEST_MAIN=1 and the serve arguments), so
// that the child can be killed with SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("CITIZEN_TEST_MAIN") == "1" {
		os.Exit(serveMain(context.Background(), os.Args[1:], Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

// serveMain is the command line's `citizen serve ARGS` (args[0] is
// "serve"): its exit code, and on failure the error on stderr, as the
// binary reports them.
func serveMain(ctx context.Context, args []string, env Env) int {
	if len(args) == 0 || args[0] != "serve" {
		fmt.Fprintf(env.Stderr, "test main: want serve, got %q\n", args)
		return 2
	}
	err := Serve(ctx, args[1:], env)
	var ue UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "citizen serve: %v\n", err)
		return 2
	default:
		fmt.Fprintf(env.Stderr, "citizen serve: %v\n", err)
		return 1
	}
}

// run is serveMain in this process with an empty environment, returning
// the exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := serveMain(context.Background(), args, Env{Stdout: &out, Stderr: &errb, LookupEnv: func(string) (string, bool) { return "", false }})
	return rc, out.String(), errb.String()
}

// child is `citizen serve` in a child process.
type child struct {
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(os.Args[0], "serve", "--data-dir", dir, "--model.engine", "stub", "--gateway.listen", addr, "--log.level", "warn")
	cmd.Env = append(os.Environ(), "CITIZEN_TEST_MAIN=1")
	logs := newSyncBuffer()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, base: "http://" + addr, logs: logs}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(c.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return c
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child not ready; logs:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) kill()  { c.cmd.Process.Signal(syscall.SIGKILL); c.cmd.Wait() }
func (c *child) close() { c.cmd.Process.Signal(syscall.SIGTERM); c.cmd.Wait() }

// TestKillNineLosesNoGrading kills the whole service with SIGKILL 20 times
// under load (completions and feedback from several clients), restarts it
// on the same data dir each time, and then checks that every recorded
// interaction was evaluated and every feedback interpreted, once in effect
// (one event per cause, whatever the redeliveries).
func TestKillNineLosesNoGrading(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 20 process restarts")
	}
	dir := t.TempDir()
	var mu sync.Mutex
	acked := map[string]int{} // completion id -> feedbacks acknowledged
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(base, path, body string) (int, []byte) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
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
	for round := range 20 {
		c := startChild(t, dir)
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					code, body := post(c.base, "/v1/chat/completions", fmt.Sprintf(
						`{"model":"citizen","messages":[{"role":"user","content":"round %d worker %d item %d"}],"metadata":{"type":"policy"}}`, round, w, i))
					if code != 200 {
						continue
					}
					var comp struct{ ID string }
					json.Unmarshal(body, &comp)
					mu.Lock()
					acked[comp.ID] += 0
					mu.Unlock()
					if i%2 == 0 {
						if code, _ := post(c.base, "/v1/feedback", fmt.Sprintf(`{"interaction_id":%q,"text":"wrong, it is 60 days","feedback_id":"f"}`, comp.ID)); code == 200 {
							mu.Lock()
							acked[comp.ID] = 1
							mu.Unlock()
						}
					}
				}
			}()
		}
		time.Sleep(time.Duration(150+rand.IntN(400)) * time.Millisecond) // load for a random while, then kill
		c.kill()
		stop()
		wg.Wait()
	}
	// A clean run drains every backlog; every recorded interaction (acked
	// or not) shows its evaluations and interpretations.
	c := startChild(t, dir)
	ids := listCompletions(t, c.base)
	mu.Lock()
	for id := range acked {
		if !ids[id] {
			t.Errorf("acknowledged completion %s is not recorded", id)
		}
	}
	nAcked := len(acked)
	mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute)
	for id := range ids {
		for {
			evs := interactionEvents(t, c.base, id)
			fb := evs[events.TypeFeedbackReceived]
			if evs[events.TypeFeedbackInterpreted] == fb && evs[events.TypeInteractionEvaluated] == 1+2*fb {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("interaction %s never fully graded: %v; logs:\n%s", id, evs, c.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c.close()
	// Exactly once in effect: one derived event per cause and type.
	st, err := stores.Open(stores.DefaultConfig(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.ReadAll(context.Background(), 0, events.Filter{}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	perCause := map[string]int{}
	recorded := 0
	for _, ev := range all {
		if ev.Type == events.TypeInteractionRecorded {
			recorded++
		}
		if ev.CausationID != "" && (ev.Type == events.TypeInteractionEvaluated || ev.Type == events.TypeFeedbackInterpreted) {
			perCause[ev.Type+"/"+ev.CausationID]++
		}
	}
	for k, n := range perCause {
		if n != 1 {
			t.Errorf("%s: %d events for one cause", k, n)
		}
	}
	t.Logf("%d recorded (%d acknowledged) over 20 kills, all evaluated", recorded, nAcked)
	if recorded != len(ids) {
		t.Errorf("the store holds %d recorded interactions, the list %d", recorded, len(ids))
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer sk-citizen-dev")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func listCompletions(t *testing.T, base string) map[string]bool {
	ids := map[string]bool{}
	after := ""
	for {
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			HasMore bool `json:"has_more"`
		}
		url := base + "/v1/chat/completions?limit=100&order=asc"
		if after != "" {
			url += "&after=" + after
		}
		getJSON(t, url, &page)
		for _, d := range page.Data {
			ids[d.ID] = true
			after = d.ID
		}
		if !page.HasMore || len(page.Data) == 0 {
			return ids
		}
	}
}

func interactionEvents(t *testing.T, base, id string) map[string]int {
	var out struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	getJSON(t, base+"/v1/interactions/"+id, &out)
	n := map[string]int{}
	for _, e := range out.Events {
		n[e.Type]++
	}
	return n
}
