package eventlog

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"citizen/events"
	"citizen/events/eventstest"
)

func openT(t testing.TB, dir string, segSize int64) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir, SegmentSize: segSize, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	for _, seg := range []struct {
		name string
		size int64
	}{{"default", 0}, {"small-segments", 64 << 10}} {
		t.Run(seg.name, func(t *testing.T) {
			var mu sync.Mutex
			dirs := map[events.Store]string{}
			eventstest.Run(t, func(t *testing.T) events.Store {
				dir := t.TempDir()
				s := openT(t, dir, seg.size)
				mu.Lock()
				dirs[s] = dir
				mu.Unlock()
				return s
			}, eventstest.Features{
				Gapless:    true,
				Persistent: true,
				Reopen: func(t *testing.T, old events.Store) events.Store {
					mu.Lock()
					dir := dirs[old]
					mu.Unlock()
					s := openT(t, dir, seg.size)
					mu.Lock()
					dirs[s] = dir
					mu.Unlock()
					return s
				},
			})
		})
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir, 0)
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTornTail cuts the last segment at every offset inside its last
// batch and checks that Open drops exactly that batch.
func TestTornTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	r1, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "1"), eventstest.Feedback(t, "2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "3"), eventstest.Feedback(t, "4")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	seg := segFiles(t, dir)[0]
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	cut := int(s.entry(r1.LastPosition).off + s.entry(r1.LastPosition).size)
	s.mu.RUnlock()
	for n := cut; n < len(full); n += 7 {
		if err := os.WriteFile(seg, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		s2, err := Open(Config{Dir: dir, Logger: quiet})
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		evs, err := s2.ReadAll(ctx, 0, events.Filter{}, 0)
		if err != nil || len(evs) != 2 {
			t.Fatalf("cut at %d: %d events, %v", n, len(evs), err)
		}
		if got := s2.Stats().TruncatedBytes; got != int64(n-cut) {
			t.Fatalf("cut at %d: truncated %d bytes, want %d", n, got, n-cut)
		}
		if _, err := s2.Append(ctx, "a", events.Exact(1), eventstest.Feedback(t, "5")); err != nil {
			t.Fatalf("cut at %d: append after recovery: %v", n, err)
		}
		s2.Close()
	}
}

// TestCorruptMiddle: a damaged record in a segment that is not the last
// fails Open with ErrCorrupt instead of silently dropping data.
func TestCorruptMiddle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 64<<10)
	for i := 0; len(segFiles(t, dir)) < 3; i++ {
		if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, string(rune('a'+i%26)))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	seg := segFiles(t, dir)[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[segHeaderSize+frameHeader+60] ^= 0x40
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// quiet keeps recovery warnings out of test output.
var quiet = slog.New(slog.DiscardHandler)

// TestIncompleteSegment: a last segment whose header never reached the
// disk (a crash while starting it) is removed, also when it is the only
// one, and the store works.
func TestIncompleteSegment(t *testing.T) {
	ctx := context.Background()
	for _, withData := range []bool{false, true} {
		dir := t.TempDir()
		next := uint64(1)
		if withData {
			s := openT(t, dir, 0)
			if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "1")); err != nil {
				t.Fatal(err)
			}
			s.Close()
			next = 2
		}
		if err := os.WriteFile(filepath.Join(dir, segName(next)), []byte("czlog"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := openT(t, dir, 0)
		r, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "2"))
		if err != nil || r.FirstPosition != next {
			t.Fatalf("append: %+v, %v; want position %d", r, err, next)
		}
		s.Close()
	}
}

// TestReadDetectsCorruption: a record damaged while the store is open is
// reported by reads as ErrCorrupt, not returned.
func TestReadDetectsCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	r, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "1"), eventstest.Feedback(t, "2"))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	e := s.entry(r.LastPosition)
	path := s.segs[e.seg].path
	s.mu.RUnlock()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'#'}, int64(e.off+e.size-3)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.ReadAll(ctx, 0, events.Filter{}, 0); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("ReadAll: %v, want ErrCorrupt", err)
	}
	if _, err := s.ReadStream(ctx, "a", 1, events.Forward, 1); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("ReadStream: %v, want ErrCorrupt", err)
	}
	if evs, err := s.ReadStream(ctx, "a", 0, events.Forward, 1); err != nil || len(evs) != 1 {
		t.Fatalf("undamaged record: %d events, %v", len(evs), err)
	}
}

// TestCorruptLastSegment: damage to a record in the last segment followed
// by more bytes than can ever be unsynced is not taken for a torn tail.
func TestCorruptLastSegment(t *testing.T) {
	old := maxUnsynced
	maxUnsynced = 4096
	defer func() { maxUnsynced = old }()
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	for i := range 40 {
		if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, strings.Repeat("x", 200)+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	seg := segFiles(t, dir)[0]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 3*4096 {
		t.Fatalf("segment only %d bytes", len(b))
	}
	b[segHeaderSize+frameHeader+60] ^= 0x40
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{Dir: dir, Logger: quiet}); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// TestZeroTail: the zero-filled tail that preallocation leaves after the
// last record ends the log without being taken for damage, and whatever
// non-zero bytes follow the last complete batch (a torn record inside the
// zeros, or unacknowledged records behind a lost page of zeros) are cut,
// so they can neither come back to life when later appends reach them nor
// make Open fail once the segment is no longer the last.
func TestZeroTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir, 0)
	var ends []int64 // end offset of each batch
	for i, n := range []int{2, 2, 1} {
		evs := make([]events.Event, n)
		for k := range evs {
			evs[k] = eventstest.Feedback(t, strconv.Itoa(i*10+k))
		}
		r, err := s.Append(ctx, "a", events.Any, evs...)
		if err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		e := s.entry(r.LastPosition)
		s.mu.RUnlock()
		ends = append(ends, int64(e.off+e.size))
	}
	s.Close()
	seg := segFiles(t, dir)[0]
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(full)) != ends[2] {
		t.Fatalf("closed segment is %d bytes, data ends at %d", len(full), ends[2])
	}
	zeros := func(n int64) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return slices.Concat(parts...) }
	for _, tc := range []struct {
		name      string
		file      []byte
		events    int
		truncated bool
	}{
		{"zero tail", cat(full, zeros(64<<10)), 5, false},
		{"short zero tail", cat(full, zeros(5)), 5, false},
		{"torn record in zero tail", cat(full[:ends[1]+30], zeros(64<<10)), 4, true},
		{"torn batch in zero tail", cat(full[:ends[1]], full[ends[1]:ends[2]-1], zeros(4096)), 4, true},
		{"lost page", cat(full[:ends[0]], zeros(ends[1]-ends[0]), full[ends[1]:], zeros(4096)), 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(seg, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			s := openT(t, dir, 0)
			if got := s.Stats().Recovered; got != uint64(tc.events) {
				t.Fatalf("recovered %d events, want %d", got, tc.events)
			}
			if got := s.Stats().TruncatedBytes; (got > 0) != tc.truncated {
				t.Fatalf("truncated %d bytes", got)
			}
			// Append batches the size of the lost ones: they end where the
			// lost batches ended, which must not bring those back.
			want := uint64(tc.events)
			if tc.events == 2 {
				if _, err := s.Append(ctx, "a", events.Any, eventstest.Feedback(t, "10"), eventstest.Feedback(t, "11")); err != nil {
					t.Fatal(err)
				}
				want += 2
			}
			s.Close()
			s2 := openT(t, dir, 0)
			evs, err := s2.ReadAll(ctx, 0, events.Filter{}, 0)
			if err != nil || uint64(len(evs)) != want {
				t.Fatalf("after reopen: %d events, %v; want %d", len(evs), err, want)
			}
			s2.Close()
		})
	}
}
