package eventlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/internal/cputime"

	"golang.org/x/sys/unix"
)

// Benchmarks. The headline figures are reported with b.ReportMetric:
// appends/s, events/s, ms-p50/ms-p99, fsyncs/s, MB/s. Recorded runs and
// the command are in docs/benchmarks/store.md.

// benchEvent returns an event whose record is about size bytes.
func benchEvent(b testing.TB, size int) events.Event {
	ev, err := events.Encode(&events.FeedbackReceived{InteractionID: "i-bench", FeedbackID: "f", Source: "harness",
		Text: strings.Repeat("x", size-200)}, events.Meta{Tenant: "tenant-a", CorrelationID: "corr"})
	if err != nil {
		b.Fatal(err)
	}
	return ev
}

func openB(b *testing.B, check events.AppendCheck, zero bool) *Store {
	s, err := Open(Config{Dir: b.TempDir(), Check: check, Logger: quiet, ZeroFill: zero})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// runWriters makes b.N appends of one event from writers goroutines, to
// 1024 streams, and returns the elapsed time.
func runWriters(b *testing.B, s *Store, writers int, tmpl events.Event) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := tmpl
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				ev.ID = events.NewID()
				if _, err := s.Append(ctx, fmt.Sprintf("bench-%d", (int(i)*7+w)%1024), events.Any, ev); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	return el
}

// cpuTime is the user + system CPU time of this process so far.
func cpuTime(b *testing.B) time.Duration {
	d := cputime.Process()
	if d == 0 {
		b.Fatal("no process CPU time on this system")
	}
	return d
}

var (
	diskOnce sync.Once
	diskBW   float64 // bytes/s, large writes + fdatasync
)

// diskBandwidth measures the disk's sequential write limit once per run
// (256 MiB in 8 MiB writes, each followed by fdatasync).
func diskBandwidth(b *testing.B) float64 {
	diskOnce.Do(func() {
		dir, err := os.MkdirTemp("", "diskbw")
		if err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
		f, err := os.Create(filepath.Join(dir, "bw"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 8<<20)
		for i := range buf {
			buf[i] = byte(i * 31)
		}
		start := time.Now()
		for range 32 {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
			if err := fdatasync(f); err != nil {
				b.Fatal(err)
			}
		}
		diskBW = float64(32*len(buf)) / time.Since(start).Seconds()
	})
	return diskBW
}

// BenchmarkAppend: durable appends (each returns after its fdatasync) of
// one event per call, from 1, 16 and 256 goroutines. bw-fraction is the
// bytes written per second over the disk's sequential write limit
// measured in the same run.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 8 << 10} {
		for _, writers := range []int{1, 16, 256} {
			for _, v := range []struct{ lax, zero bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				if (v.lax || v.zero) && (size != 1<<10 || writers != 256) {
					continue
				}
				lax := v.lax
				check := "strict"
				if lax {
					check = "lax"
				}
				name := fmt.Sprintf("size=%dKB/writers=%d/check=%s", size>>10, writers, check)
				if v.zero {
					// The same with zero-filling ahead (Config.ZeroFill,
					// zero.go), to compare in one run.
					name += "/zero=on"
				}
				b.Run(name, func(b *testing.B) {
					bw := diskBandwidth(b)
					s := openB(b, events.AppendCheck{Lax: lax}, v.zero)
					tmpl := benchEvent(b, size)
					rec := encodedSize("bench-1000", &tmpl)
					b.SetBytes(int64(rec))
					b.ReportAllocs()
					cpu0 := cpuTime(b)
					el := runWriters(b, s, writers, tmpl)
					// CPU time of the whole process (appenders, writer,
					// syncer, zeroer, GC) per append: 2 cores divided by it
					// bound the rate on this machine whatever the disk does.
					b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
					rate := float64(b.N) / el.Seconds()
					st := s.Stats()
					b.ReportMetric(rate, "appends/s")
					b.ReportMetric(rate*float64(rec)/bw, "bw-fraction")
					b.ReportMetric(float64(st.Events)/float64(max(st.Syncs, 1)), "events/fsync")
					b.ReportMetric(st.SyncTime.Seconds()*1e3/float64(max(st.Syncs, 1)), "ms/fsync")
					b.ReportMetric(float64(st.Unzeroed)/float64(max(st.Written, 1)), "unzeroed")
					// Share of the wall time the syncer spent inside fdatasync:
					// near 1, the disk is the limit.
					b.ReportMetric(st.SyncTime.Seconds()/el.Seconds(), "fsync-busy")
				})
			}
		}
	}
}

// fillStore writes n events of size bytes with 256 writers and closes the
// store; it returns the directory.
func fillStore(b *testing.B, n, size int) string {
	dir := b.TempDir()
	s, err := Open(Config{Dir: dir, Check: events.AppendCheck{Lax: true}, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	tmpl := benchEvent(b, size)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := tmpl
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ev.ID = events.NewID()
				if _, err := s.Append(ctx, fmt.Sprintf("replay-%d", (int(i)+w)%4096), events.Any, ev); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// dropCache asks the kernel to drop dir's segment files from the page
// cache, so the next read comes from the disk.
func dropCache(b *testing.B, dir string) {
	segs, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	for _, p := range segs {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

const replayEvents = 200_000

// BenchmarkReplay measures reading the log back, b.N times over a store of
// replayEvents 1 KB events: open (every record read and checksum-verified,
// index rebuilt), ReadAll (records read, verified and decoded into
// envelopes) and, separately, decoding the JSON payloads into typed
// events. cache=cold drops the files from the page cache first.
func BenchmarkReplay(b *testing.B) {
	dir := fillStore(b, replayEvents, 1<<10)
	for _, cold := range []bool{false, true} {
		cache := "warm"
		if cold {
			cache = "cold"
		}
		b.Run("open/cache="+cache, func(b *testing.B) {
			var el time.Duration
			for range b.N {
				if cold {
					dropCache(b, dir)
				}
				start := time.Now()
				s, err := Open(Config{Dir: dir, Logger: quiet})
				if err != nil {
					b.Fatal(err)
				}
				el += time.Since(start)
				if got := s.Stats().Recovered; got != replayEvents {
					b.Fatalf("recovered %d events", got)
				}
				s.Close()
			}
			b.ReportMetric(float64(b.N*replayEvents)/el.Seconds(), "events/s")
		})
		b.Run("readall/cache="+cache, func(b *testing.B) {
			s, err := Open(Config{Dir: dir, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var el time.Duration
			for range b.N {
				if cold {
					dropCache(b, dir)
				}
				start := time.Now()
				n := 0
				for after := uint64(0); ; {
					evs, err := s.ReadAll(ctx, after, events.Filter{}, 8192)
					if err != nil {
						b.Fatal(err)
					}
					if len(evs) == 0 {
						break
					}
					n += len(evs)
					after = evs[len(evs)-1].Position
				}
				el += time.Since(start)
				if n != replayEvents {
					b.Fatalf("read %d events", n)
				}
			}
			b.ReportMetric(float64(b.N*replayEvents)/el.Seconds(), "events/s")
		})
	}
	b.Run("json-decode", func(b *testing.B) {
		s, err := Open(Config{Dir: dir, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		evs, err := s.ReadAll(context.Background(), 0, events.Filter{}, 20_000)
		s.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			if _, err := events.Decode(&evs[i%len(evs)]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	})
}

// BenchmarkDelivery measures the time from the start of Append to the
// subscriber's handler, for 1 KB events appended by 16 goroutines; b.N
// events in all. ms-p99-append is the p99 of the Append calls themselves
// (which return after the fdatasync): the difference is what delivery
// adds after the commit.
func BenchmarkDelivery(b *testing.B) {
	for _, zero := range []bool{true, false} {
		name := "zero=on"
		if !zero {
			name = "zero=off"
		}
		b.Run(name, func(b *testing.B) {
			benchDelivery(b, zero)
		})
	}
}

func benchDelivery(b *testing.B, zero bool) {
	s := openB(b, events.AppendCheck{}, zero)
	tmpl := benchEvent(b, 1<<10)
	lat := make([]time.Duration, 0, b.N)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan struct{})
	subErr := make(chan error, 1)
	go func() {
		subErr <- s.Subscribe(ctx, 0, events.Filter{}, func(_ context.Context, ev events.Event) error {
			lat = append(lat, time.Since(ev.Time))
			if len(lat) == b.N {
				close(got)
			}
			return nil
		})
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	appendLat := make([][]time.Duration, 16)
	b.ResetTimer()
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := tmpl
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				ev.ID = events.NewID()
				ev.Time = time.Now()
				if _, err := s.Append(ctx, fmt.Sprintf("d-%d", w), events.Any, ev); err != nil {
					b.Error(err)
					return
				}
				appendLat[w] = append(appendLat[w], time.Since(ev.Time))
			}
		}()
	}
	wg.Wait()
	<-got
	b.StopTimer()
	cancel()
	<-subErr
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.5), "ms-p50")
	b.ReportMetric(ms(0.99), "ms-p99")
	al := slices.Concat(appendLat...)
	slices.Sort(al)
	b.ReportMetric(float64(al[int(0.99*float64(len(al)-1))])/1e6, "ms-p99-append")
}

// BenchmarkDiskFsync is the disk's own limit for one small write followed
// by fdatasync (what an unbatched durable append costs).
func BenchmarkDiskFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1024)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
}

// BenchmarkDiskSeqWrite is the disk's sequential write limit: 8 MiB
// writes, each followed by fdatasync.
func BenchmarkDiskSeqWrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(buf))/1e6/time.Since(start).Seconds(), "MB/s")
}

// BenchmarkDiskGroupSync is the disk's limit for group commits of about
// the size the store writes with 256 writers (160 KB) followed by
// fdatasync: appended to a growing file (size and extents change every
// time) and overwriting a region written with zeros and synced before (no
// metadata to commit), the case zero.go arranges.
func BenchmarkDiskGroupSync(b *testing.B) {
	const group = 160 << 10
	for _, mode := range []string{"append", "overwrite"} {
		b.Run("mode="+mode, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "f"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if mode == "overwrite" {
				if err := zeroFill(osFile{f}, 0, int64(b.N)*group, nil); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, group)
			for i := range buf {
				buf[i] = byte(i*31) | 1
			}
			b.SetBytes(group)
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				t0 := time.Now()
				if _, err := f.WriteAt(buf, int64(i)*group); err != nil {
					b.Fatal(err)
				}
				if err := fdatasync(f); err != nil {
					b.Fatal(err)
				}
				lat[i] = time.Since(t0)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "ms-p50")
			b.ReportMetric(float64(lat[int(0.99*float64(len(lat)-1))])/1e6, "ms-p99")
		})
	}
}
