package eventlog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"

	"github.com/google/uuid"
)

func openFS(t testing.TB, dir string, fsys vfs, segSize int64, zero bool) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, SegmentSize: segSize, Logger: quiet, fs: fsys, ZeroFill: zero,
		retryMin: time.Millisecond, retryMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformanceFaultFS runs the conformance suite with every file
// operation going through the fault-injecting filesystem (no faults):
// the store uses nothing but the vfs.
func TestConformanceFaultFS(t *testing.T) {
	var mu sync.Mutex
	dirs := map[events.Store]string{}
	open := func(t *testing.T, dir string) events.Store {
		s := openFS(t, dir, newFaultFS(osFS{}, false), 64<<10, false)
		mu.Lock()
		dirs[s] = dir
		mu.Unlock()
		return s
	}
	eventstest.Run(t, func(t *testing.T) events.Store { return open(t, t.TempDir()) }, eventstest.Features{
		Gapless: true, Persistent: true,
		Reopen: func(t *testing.T, old events.Store) events.Store {
			mu.Lock()
			dir := dirs[old]
			mu.Unlock()
			return open(t, dir)
		},
	})
}

// eventually waits (at most 10 s) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNoSpaceRecovers: the disk fills up while the store runs, then
// space comes back. Appends fail with ErrNoSpace meanwhile and Ready
// says so; afterwards appends succeed on the same Store, positions go on
// from the last acknowledged one, and nothing acknowledged is lost, in
// the store or after reopening. (Before: every append failed with "write
// failed, reopen the store" until the process restarted.)
func TestNoSpaceRecovers(t *testing.T) {
	for _, zero := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero=%v", zero), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			ffs := newFaultFS(osFS{}, false)
			full := &diskFull{}
			ffs.setInjector(full.inject)
			s := openFS(t, dir, ffs, 64<<10, zero)
			var acked []events.Event
			add := func(tag string) error {
				ev := eventstest.Feedback(t, tag)
				r, err := s.Append(ctx, "a", events.Any, ev)
				if err == nil {
					ev.Position = r.FirstPosition
					acked = append(acked, ev)
				}
				return err
			}
			for i := range 50 {
				if err := add(fmt.Sprint("before-", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Ready(); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			full.set(true)
			var failed []error
			for i := 0; len(failed) < 20 && i < 1000; i++ {
				// Some appends may still land in space zero-filled
				// before the disk filled up.
				if err := add(fmt.Sprint("full-", i)); err != nil {
					failed = append(failed, err)
				}
			}
			if len(failed) < 20 {
				t.Fatalf("only %d appends failed on a full disk", len(failed))
			}
			for _, err := range failed {
				if !errors.Is(err, ErrNoSpace) || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("append on a full disk: %v, want ErrNoSpace", err)
				}
			}
			if !errors.Is(failed[0], syscall.ENOSPC) {
				t.Fatalf("the first failure does not carry ENOSPC: %v", failed[0])
			}
			if err := s.Ready(); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Ready on a full disk: %v", err)
			}
			full.set(false)
			// No append needed: the store recovers in the background.
			eventually(t, "Ready", func() bool { return s.Ready() == nil })
			for i := range 50 {
				if err := add(fmt.Sprint("after-", i)); err != nil {
					t.Fatalf("append after space returned: %v", err)
				}
			}
			st := s.Stats()
			if st.Failures == 0 || st.Recoveries == 0 {
				t.Fatalf("stats: %d failures, %d recoveries", st.Failures, st.Recoveries)
			}
			check := func(s *Store) {
				t.Helper()
				all, err := s.ReadAll(ctx, 0, events.Filter{}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(all) != len(acked) {
					t.Fatalf("%d events stored, %d acknowledged", len(all), len(acked))
				}
				for i, ev := range all {
					if ev.ID != acked[i].ID || ev.Position != uint64(i+1) || ev.Position != acked[i].Position || ev.Revision != uint64(i) {
						t.Fatalf("event %d: %s at %d rev %d, acknowledged %s at %d", i, ev.ID, ev.Position, ev.Revision, acked[i].ID, acked[i].Position)
					}
				}
			}
			check(s)
			s.Close()
			check(openT(t, dir, 64<<10))
		})
	}
}

// TestWriteFaultsRecover: one failed operation of each kind on the write
// path makes the appends in flight fail with ErrUnavailable; the next
// append (after the backoff) succeeds on the same Store, with positions
// continuing after the last acknowledged event.
func TestWriteFaultsRecover(t *testing.T) {
	eio := syscall.EIO
	for _, tc := range []struct {
		name  string
		match func(fsOp) bool
		f     fault
	}{
		{"short write", onSegments(opWrite), fault{err: eio, n: 100}},
		{"write ENOSPC", onSegments(opWrite), fault{err: syscall.ENOSPC}},
		{"fdatasync", onSegments(opDatasync), fault{err: eio}},
		{"segment create", func(op fsOp) bool { return op.kind == opOpen && len(segFilesIn(op.path)) > 0 }, fault{err: syscall.ENOSPC}},
		{"directory sync", func(op fsOp) bool { return op.kind == opSyncDir }, fault{err: eio}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			ffs := newFaultFS(osFS{}, false)
			s := openFS(t, dir, ffs, 8<<10, false)
			var acked []uuid.UUID
			for i := range 10 {
				ev := eventstest.Feedback(t, fmt.Sprint(i))
				if _, err := s.Append(ctx, "a", events.Any, ev); err != nil {
					t.Fatal(err)
				}
				acked = append(acked, ev.ID)
			}
			ffs.setInjector(nth(tc.match, 1, 0, tc.f))
			sawFailure := false
			for i := 0; i < 200 && !sawFailure; i++ {
				ev := eventstest.Feedback(t, fmt.Sprint("x", i))
				_, err := s.Append(ctx, "a", events.Any, ev)
				if err == nil {
					acked = append(acked, ev.ID)
					continue
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("append: %v, want ErrUnavailable", err)
				}
				sawFailure = true
			}
			if !sawFailure {
				t.Fatal("the fault never hit an append")
			}
			var r events.AppendResult
			eventually(t, "an append to succeed", func() bool {
				ev := eventstest.Feedback(t, "after")
				var err error
				if r, err = s.Append(ctx, "a", events.Any, ev); err == nil {
					acked = append(acked, ev.ID)
					return true
				}
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("append: %v", err)
				}
				return false
			})
			if r.FirstPosition != uint64(len(acked)) {
				t.Fatalf("append after recovery at %d, want %d", r.FirstPosition, len(acked))
			}
			s.Close()
			all, err := openT(t, dir, 8<<10).ReadAll(ctx, 0, events.Filter{}, 0)
			if err != nil || len(all) != len(acked) {
				t.Fatalf("after reopen: %d events, %v; want %d", len(all), err, len(acked))
			}
			for i, ev := range all {
				if ev.ID != acked[i] {
					t.Fatalf("position %d: %s, acknowledged %s", i+1, ev.ID, acked[i])
				}
			}
		})
	}
}

// segFilesIn returns path if it names a segment file.
func segFilesIn(path string) string {
	if len(path) > len(segSuffix) && path[len(path)-len(segSuffix):] == segSuffix {
		return path
	}
	return ""
}

// TestFaultsKeepAcknowledged is the property the fault injection exists
// for: under concurrent appends, with a random fault (short write, failed
// fdatasync or directory sync, a full disk for a while, a failed segment
// creation, failures while recovering) at a random moment, and then a
// power cut at a random moment while appends are in flight (unsynced
// writes lost or torn, see faultFS.crash), every acknowledged append is
// readable after reopening at the position it was given, positions and
// revisions are gapless, and an append that was not acknowledged is
// either wholly there or not at all.
func TestFaultsKeepAcknowledged(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	rounds := 24
	if testing.Short() {
		rounds = 6
	}
	deadline := time.Now().Add(25 * time.Second)
	faults := []struct {
		name         string
		match        func(fsOp) bool
		f            fault
		within, last int // the fault hits one of the first `within` matching operations, and `last` more after it
	}{
		{"short write", onSegments(opWrite), fault{err: syscall.EIO, n: 37}, 100, 0},
		{"fdatasync", onSegments(opDatasync), fault{err: syscall.EIO}, 60, 0},
		{"ENOSPC for a while", onSegments(opWrite), fault{err: syscall.ENOSPC, n: 1000}, 100, 10},
		{"segment create", func(op fsOp) bool { return op.kind == opOpen && segFilesIn(op.path) != "" }, fault{err: syscall.ENOSPC}, 3, 1},
		{"directory sync", func(op fsOp) bool { return op.kind == opSyncDir }, fault{err: syscall.EIO}, 3, 0},
		{"failures while recovering", func(op fsOp) bool { return op.kind == opTruncate || op.kind == opDatasync }, fault{err: syscall.EIO}, 60, 3},
	}
	var total int64
	for round := 0; round < rounds && time.Now().Before(deadline); round++ {
		fc := faults[round%len(faults)]
		zero := round/len(faults)%2 == 1
		t.Run(fmt.Sprintf("%d-%s-zero=%v", round, fc.name, zero), func(t *testing.T) {
			total += faultRound(t, rng, nth(fc.match, 1+rng.IntN(fc.within), fc.last, fc.f), zero)
		})
	}
	t.Logf("%d torn bytes cut in all", total)
}

type batchRec struct {
	stream string
	ids    []uuid.UUID
	first  uint64 // acknowledged position; 0 if not acknowledged
}

// faultRound runs one round of TestFaultsKeepAcknowledged and returns the
// torn bytes the reopen cut.
func faultRound(t *testing.T, rng *rand.Rand, inj injector, zero bool) int64 {
	ctx := context.Background()
	dir := t.TempDir()
	ffs := newFaultFS(osFS{}, true)
	const segSize = 32 << 10
	s, err := Open(Config{Dir: dir, SegmentSize: segSize, Logger: quiet, fs: ffs, ZeroFill: zero,
		retryMin: time.Millisecond, retryMax: 4 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ffs.setInjector(inj)
	// The power cut comes after a random number of acknowledged batches,
	// while the writers go on: from then on nothing reaches the files.
	cutAfter := int64(20 + rng.IntN(300))
	var acks, failures atomic.Int64
	var cut atomic.Bool
	powerCut := func(op fsOp) *fault {
		if op.kind == opRead || op.kind == opStat || op.kind == opClose {
			return nil
		}
		return &fault{err: syscall.EIO}
	}
	var mu sync.Mutex
	var batches []*batchRec
	var wg sync.WaitGroup
	for w := range 8 {
		wseed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(wseed, uint64(w)))
			for i := 0; !cut.Load() && i < 2000; i++ {
				b := &batchRec{stream: fmt.Sprintf("s%d", r.IntN(5))}
				evs := make([]events.Event, 1+r.IntN(3))
				for k := range evs {
					evs[k] = eventstest.Feedback(t, fmt.Sprintf("w%d-%d-%d", w, i, k))
					b.ids = append(b.ids, evs[k].ID)
				}
				res, err := s.Append(ctx, b.stream, events.Any, evs...)
				mu.Lock()
				batches = append(batches, b)
				mu.Unlock()
				if err != nil {
					if !errors.Is(err, ErrUnavailable) {
						t.Errorf("append: %v", err)
						return
					}
					failures.Add(1)
					time.Sleep(s.RetryAfter()) // back off as a client would
					continue
				}
				b.first = res.FirstPosition
				if acks.Add(1) == cutAfter {
					// The power goes at the next fdatasync of a segment:
					// what was written for it never reaches the disk.
					ffs.setInjector(func(op fsOp) *fault {
						if cut.Load() || (op.kind == opDatasync && segFilesIn(op.path) != "") {
							cut.Store(true)
							return powerCut(op)
						}
						return nil
					})
				}
			}
		}()
	}
	wg.Wait()
	cut.Store(true)
	ffs.setInjector(powerCut)
	unsynced := ffs.unsynced()
	s.Close()
	if err := ffs.crash(rng); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Config{Dir: dir, SegmentSize: segSize, Logger: quiet})
	if err != nil {
		t.Fatalf("reopen after the cut: %v", err)
	}
	defer s2.Close()
	all, err := s2.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := map[uuid.UUID]uint64{}
	revs := map[string]uint64{}
	for i, ev := range all {
		if ev.Position != uint64(i+1) {
			t.Fatalf("event %d at position %d", i, ev.Position)
		}
		if ev.Revision != revs[ev.Stream] {
			t.Fatalf("%s revision %d at %d, want %d", ev.Stream, ev.Revision, ev.Position, revs[ev.Stream])
		}
		revs[ev.Stream]++
		at[ev.ID] = ev.Position
	}
	nAcked, nFailed := 0, 0
	for _, b := range batches {
		present := 0
		for k, id := range b.ids {
			if p, ok := at[id]; ok {
				present++
				if b.first != 0 && p != b.first+uint64(k) {
					t.Fatalf("acknowledged event %s at %d, stored at %d", id, b.first+uint64(k), p)
				}
			}
		}
		if b.first != 0 {
			nAcked++
			if present != len(b.ids) {
				t.Fatalf("acknowledged batch at %d: %d of %d events after the cut", b.first, present, len(b.ids))
			}
		} else {
			nFailed++
			if present != 0 && present != len(b.ids) {
				t.Fatalf("unacknowledged batch half visible: %d of %d events", present, len(b.ids))
			}
		}
	}
	st := s.Stats()
	if st.Failures == 0 {
		t.Fatalf("%d appends failed but Stats.Failures is 0", nFailed)
	}
	t.Logf("%d batches acknowledged, %d failed; %d unsynced bytes at the cut; %d events after it, %d torn bytes cut; %d recoveries before it",
		nAcked, nFailed, unsynced, len(all), s2.Stats().TruncatedBytes, st.Recoveries)
	return s2.Stats().TruncatedBytes
}

// TestFlippedBits: a bit flipped on its way to the disk in an
// acknowledged record with later records behind it makes Open refuse
// (not cut); one flipped on the way back makes the read fail with
// ErrCorrupt, never return different data.
func TestFlippedBits(t *testing.T) {
	ctx := context.Background()
	t.Run("write", func(t *testing.T) {
		dir := t.TempDir()
		ffs := newFaultFS(osFS{}, false)
		s := openFS(t, dir, ffs, 0, false)
		ffs.setInjector(nth(onSegments(opWrite), 5, 0, fault{flip: 8*(frameHeader+60) + 3}))
		for i := range 20 {
			if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		_, err := Open(Config{Dir: dir, Logger: quiet})
		var ce *CorruptError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Position != 5 {
			t.Fatalf("Open: %v, want a CorruptError at position 5", err)
		}
	})
	t.Run("read", func(t *testing.T) {
		dir := t.TempDir()
		ffs := newFaultFS(osFS{}, false)
		s := openFS(t, dir, ffs, 0, false)
		for i := range 20 {
			if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		ffs.setInjector(nth(onSegments(opRead), 1, 0, fault{flip: 8*(segHeaderSize+frameHeader+70) + 1}))
		if _, err := s.ReadAll(ctx, 0, events.Filter{}, 0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadAll with a flipped bit: %v, want ErrCorrupt", err)
		}
		ffs.setInjector(nil)
		if evs, err := s.ReadAll(ctx, 0, events.Filter{}, 0); err != nil || len(evs) != 20 {
			t.Fatalf("ReadAll: %d events, %v", len(evs), err)
		}
	})
}

// TestRecoversFromBadDescriptor: on the real filesystem, a write that
// fails because the segment's descriptor went bad (closed under the
// store) is recovered from by reopening the segment, with the default
// backoff. Before, every later append failed with "write failed, reopen
// the store".
func TestRecoversFromBadDescriptor(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "1")); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	s.segs[len(s.segs)-1].f.Close()
	s.mu.RUnlock()
	if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "2")); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("append to a closed file: %v, want ErrUnavailable", err)
	}
	if err := s.Ready(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Ready: %v", err)
	}
	eventually(t, "Ready", func() bool { return s.Ready() == nil })
	r, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "3"))
	if err != nil || r.FirstPosition != 2 || r.NextRevision != 1 {
		t.Fatalf("append after recovery: %+v, %v", r, err)
	}
	s.Close()
	if evs, err := openT(t, dir, 0).ReadAll(ctx, 0, events.Filter{}, 0); err != nil || len(evs) != 2 {
		t.Fatalf("after reopen: %d events, %v", len(evs), err)
	}
}
