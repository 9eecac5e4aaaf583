package eventlog

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"

	"github.com/google/uuid"
)

// crashDirEnv makes TestCrashChild the child process of TestCrash.
const crashDirEnv = "CITIZEN_EVENTLOG_CRASH_DIR"

// crashZeroEnv tells the child to zero-fill ahead ("1").
const crashZeroEnv = "CITIZEN_EVENTLOG_CRASH_ZERO_FILL"

const crashSegmentSize = 1 << 20 // small, so that kills land during segment rolls too

func payload1K(t testing.TB, rng *rand.Rand) events.Event {
	text := strings.Repeat(strconv.Itoa(rng.IntN(10)), 900)
	ev, err := events.Encode(&events.FeedbackReceived{InteractionID: "i", FeedbackID: events.NewID().String(),
		Source: "harness", Text: text}, events.Meta{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestCrashChild is not a test on its own: TestCrash runs the test binary
// with crashDirEnv set and this test appends under load until it is
// killed, printing "ACK position id stream" once each append returned.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrash")
	}
	s, err := Open(Config{Dir: dir, SegmentSize: crashSegmentSize, Logger: quiet, ZeroFill: os.Getenv(crashZeroEnv) == "1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a parent that never kills
	defer cancel()
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for ctx.Err() == nil {
				stream := fmt.Sprintf("crash-%d", rng.IntN(40))
				evs := make([]events.Event, 1+rng.IntN(3))
				for i := range evs {
					evs[i] = payload1K(t, rng)
				}
				r, err := s.Append(ctx, stream, events.Any, evs...)
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintln(os.Stderr, "append:", err)
						os.Exit(4)
					}
					return
				}
				var b strings.Builder
				for i, ev := range evs {
					fmt.Fprintf(&b, "ACK %d %s %s\n", r.FirstPosition+uint64(i), ev.ID, stream)
				}
				mu.Lock()
				os.Stdout.WriteString(b.String())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

type ack struct {
	id     uuid.UUID
	stream string
}

// TestCrash kills a child process that appends under concurrent load with
// SIGKILL at random moments, then reopens the store and checks that every
// acknowledged append survived in place, that positions are 1..N without
// gaps or duplicates and revisions contiguous, and that appending goes on.
// A SIGKILL keeps what the child wrote in the page cache, so every other
// round also simulates losing the unsynced tail, as a power cut would: the
// last segment is cut at a random point after the last acknowledged record
// and sometimes followed by garbage.
func TestCrash(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in the child")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	acked := map[uint64]ack{}
	kills := 24
	if testing.Short() {
		kills = 5
	}
	deadline := time.Now().Add(50 * time.Second)
	var truncated int64
	for round := 0; round < kills; round++ {
		if time.Now().After(deadline) && round >= 20 {
			break
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		// Zero-filling ahead (Config.ZeroFill) in two rounds of four: both
		// ways of writing crash, and each reopens what the other wrote.
		zero := "0"
		if round%4 >= 2 {
			zero = "1"
		}
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashZeroEnv+"="+zero)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of acknowledged events: sometimes at
		// once, sometimes after thousands.
		killAfter := 1 + rng.IntN(4000)
		if rng.IntN(4) == 0 {
			killAfter = 1 + rng.IntN(20)
		}
		sc := bufio.NewScanner(out)
		n, killed := 0, false
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "ACK ") {
				continue
			}
			f := strings.Fields(line)
			if len(f) != 4 {
				continue // a line cut by the kill is not an acknowledgement we rely on
			}
			pos, err1 := strconv.ParseUint(f[1], 10, 64)
			id, err2 := uuid.Parse(f[2])
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", line)
			}
			if prev, dup := acked[pos]; dup && prev.id != id {
				t.Fatalf("round %d: position %d acknowledged twice: %s and %s", round, pos, prev.id, id)
			}
			acked[pos] = ack{id: id, stream: f[3]}
			if n++; n == killAfter && !killed {
				cmd.Process.Kill() // SIGKILL
				killed = true
			}
		}
		if !killed {
			cmd.Process.Kill()
		}
		werr := cmd.Wait()
		if !killed || !strings.Contains(fmt.Sprint(werr), "killed") {
			t.Fatalf("round %d: child ended by itself after %d acks (%v): %s", round, n, werr, stderr.String())
		}
		if round%2 == 1 {
			losePageCache(t, dir, acked, rng)
		}
		truncated += verifyAfterCrash(t, dir, acked, rng)
	}
	t.Logf("%d acknowledged events survived %d kills; %d torn bytes truncated in total", len(acked), kills, truncated)
}

func verifyAfterCrash(t *testing.T, dir string, acked map[uint64]ack, rng *rand.Rand) int64 {
	t.Helper()
	ctx := context.Background()
	s, err := Open(Config{Dir: dir, SegmentSize: crashSegmentSize, Logger: quiet})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer s.Close()
	all, err := s.ReadAll(ctx, 0, events.Filter{}, 0) // verifies every checksum
	if err != nil {
		t.Fatalf("read after kill: %v", err)
	}
	last, _ := s.LastPosition(ctx)
	if uint64(len(all)) != last {
		t.Fatalf("%d events but LastPosition %d", len(all), last)
	}
	revs := map[string]uint64{}
	ids := map[uuid.UUID]bool{}
	for i, ev := range all {
		if ev.Position != uint64(i+1) {
			t.Fatalf("event %d has position %d", i, ev.Position)
		}
		if ev.Revision != revs[ev.Stream] {
			t.Fatalf("%s: revision %d at position %d, want %d", ev.Stream, ev.Revision, ev.Position, revs[ev.Stream])
		}
		revs[ev.Stream]++
		if ids[ev.ID] {
			t.Fatalf("id %s stored twice", ev.ID)
		}
		ids[ev.ID] = true
	}
	for pos, a := range acked {
		if pos > last {
			t.Fatalf("acknowledged position %d lost (store ends at %d)", pos, last)
		}
		if ev := all[pos-1]; ev.ID != a.id || ev.Stream != a.stream {
			t.Fatalf("position %d: %s in %s, acknowledged %s in %s", pos, ev.ID, ev.Stream, a.id, a.stream)
		}
	}
	// Appending goes on where the log ends.
	ev := payload1K(t, rng)
	r, err := s.Append(ctx, "crash-parent", events.Any, ev)
	if err != nil || r.FirstPosition != last+1 {
		t.Fatalf("append after recovery: %+v, %v (last %d)", r, err, last)
	}
	acked[r.FirstPosition] = ack{id: ev.ID, stream: "crash-parent"}
	return s.Stats().TruncatedBytes
}

// losePageCache loses what follows the last acknowledged record in the
// last segment from a random offset on (what an fsync did not cover may be
// lost), in one of four ways: the file is cut there, sometimes followed by
// random bytes (a torn sector); the lost bytes read back as zeros, as in a
// zero-filled preallocated tail, which goes on beyond the data; a torn
// record inside that zero tail (some bytes from the offset on survive,
// then zeros); or lost pages (whole 4 KiB pages of zeros, except what was
// synced before), followed by unacknowledged records that did reach the
// disk.
func losePageCache(t *testing.T, dir string, acked map[uint64]ack, rng *rand.Rand) {
	t.Helper()
	var maxAck uint64
	for p := range acked {
		maxAck = max(maxAck, p)
	}
	s, err := Open(Config{Dir: dir, SegmentSize: crashSegmentSize, Logger: quiet})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	s.mu.RLock()
	last := s.segs[len(s.segs)-1]
	lo := int64(segHeaderSize)
	if maxAck > 0 {
		if e := s.entry(maxAck); int(e.seg) == last.index {
			lo = int64(e.off + e.size)
		}
	}
	path, hi := last.path, last.size
	s.mu.RUnlock()
	s.Close()
	cut := lo + rng.Int64N(hi-lo+1)
	zeroTail := func(from, to, extra int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(make([]byte, to-from+extra), from); err != nil {
			t.Fatal(err)
		}
	}
	switch rng.IntN(4) {
	case 1: // the lost writes read back as zeros; the zero tail goes on
		zeroTail(cut, hi, rng.Int64N(64<<10))
		return
	case 2: // a torn record inside the zero tail
		keep := min(hi-cut, 1+rng.Int64N(2048))
		zeroTail(cut+keep, hi, rng.Int64N(64<<10))
		return
	case 3: // lost pages: zeros, then unacknowledged data that survived
		// A page is lost whole: what reads back as zeros is the pages
		// around cut, except the bytes before lo, which were synced
		// before the page was written again.
		const page = 4096
		from := max(lo, cut&^(page-1))
		to := min(hi, cut&^(page-1)+page*(1+rng.Int64N(2)))
		if to > from {
			zeroTail(from, to, 0)
		}
		return
	}
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	if rng.IntN(2) == 0 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]byte, 1+rng.IntN(2000))
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		f.Write(junk)
		f.Close()
	}
}
