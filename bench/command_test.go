package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"citizen/bench/hotpath"
	"citizen/cli"
	"citizen/services"
)

// A tiny `citizen bench gateway`: the mock and citizen with every
// component (this test binary re-executed as citizen), one round of a few
// requests. Every acknowledged interaction is in the store, and
// reflection evaluated every one.
func TestBenchGatewayTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts citizen twice")
	}
	t.Setenv("CITIZEN_TEST_MAIN", "1") // children run cli.Main (see TestMain)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	rc := cli.Main(context.Background(), []string{"bench", "gateway", "--rounds", "1", "--serial", "5", "--warmup", "4",
		"--conns", "2", "--duration", "300ms", "--drain", "60s", "--out", out}, services.Env{Stdout: &stdout, Stderr: &stderr})
	if rc != 0 {
		t.Fatalf("exit %d\n%s", rc, stderr.String())
	}
	for _, want := range []string{"| direct |", "| all |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep hotpath.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs", len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if r.Target == hotpath.TargetDirect {
			continue
		}
		if r.Acknowledged == 0 || r.Recorded != r.Acknowledged || r.CPUSerial <= 0 {
			t.Errorf("%s: acknowledged %d, recorded %d, cpu %v µs", r.Target, r.Acknowledged, r.Recorded, r.CPUSerial)
		}
		if r.Target == hotpath.TargetAll && (r.Evaluated != r.Recorded || r.DrainS < 0) {
			t.Errorf("all: recorded %d, evaluated %d, drain %v s", r.Recorded, r.Evaluated, r.DrainS)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "work", "round1-all", "citizen.log")); err != nil {
		t.Errorf("no citizen log: %v", err)
	}
}

func TestPeerFlag(t *testing.T) {
	var p peerFlags
	if err := p.Set("bifrost=http://127.0.0.1:8081/v1"); err != nil || len(p) != 1 || p[0].Name != "bifrost" || p[0].URL != "http://127.0.0.1:8081/v1" {
		t.Fatalf("%v %+v", err, p)
	}
	for _, bad := range []string{"", "x", "=http://a", "y=ftp://a", "bifrost=http://b", "all=http://c"} {
		if err := p.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzPeerFlag(f *testing.F) {
	f.Add("a=http://h/v1")
	f.Add("=")
	f.Fuzz(func(t *testing.T, s string) {
		var p peerFlags
		if p.Set(s) == nil && (len(p) != 1 || p[0].Name == "") {
			t.Fatalf("%q: %+v", s, p)
		}
	})
}
