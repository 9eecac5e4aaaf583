package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"citizen/events"

	"github.com/google/uuid"
)

// Config configures Open.
type Config struct {
	// Dir holds the segments and checkpoints; created if missing.
	Dir string
	// SegmentSize is the size at which a new segment file is started
	// (default 256 MiB, at least 4 KiB). A batch never spans two segments;
	// one larger than SegmentSize gets a segment of its own.
	SegmentSize int64
	// Check validates appends; its zero value checks types strictly
	// against events.Types.
	Check events.AppendCheck
	// Logger reports recovery on open (default slog.Default()).
	Logger *slog.Logger
	// ZeroFill keeps the space ahead of the writer zero-filled and synced
	// (zero.go), so that a group's fdatasync has no metadata to commit.
	// Off by default: on the 2-core machine of BENCHMARKS.md it halves
	// the time of a group fdatasync but writes every byte twice, and the
	// CPU costs more than the sync saves (1 KB appends, 256 writers:
	// 372k-388k/s without, 233k-307k/s with; docs/benchmarks/store.md).
	// A store written either way opens either way.
	ZeroFill bool

	// fs is the filesystem (osFS when nil); tests inject faults through it.
	fs vfs
	// retryMin and retryMax bound the wait between recovery attempts
	// after a failed write or sync (defaults 100 ms and 5 s).
	retryMin, retryMax time.Duration
}

// Stats are counters since Open.
type Stats struct {
	// Appends is the number of Append calls committed (retries included);
	// Events the events written; Groups the group commits (one write
	// each); Syncs the fdatasync calls.
	Appends, Events, Groups, Syncs uint64
	// SyncTime is the time spent in fdatasync by the syncer.
	SyncTime time.Duration
	// Recovered is the number of events found on Open; TruncatedBytes what
	// was cut from a torn tail.
	Recovered      uint64
	TruncatedBytes int64
	// Written is the bytes the writer wrote since Open; Unzeroed those
	// of them that landed beyond the zero-filled region (zero.go), so
	// that their fdatasync had metadata to commit.
	Written, Unzeroed int64
	// Failures counts the times a write or sync failed and the store
	// stopped recording; Recoveries the times it recovered by itself
	// (see Ready).
	Failures, Recoveries uint64
}

// entry locates one event; entries[p-1] is position p.
type entry struct {
	seg, off, size uint32
	stream, typ    uint32
}

const chunkBits = 16

type streamInfo struct {
	name      string
	positions []uint64 // by revision
}

// request is one Append on its way through the writer and syncer.
type request struct {
	ctx      context.Context
	stream   string
	expected events.ExpectedRevision
	ids      []uuid.UUID
	buf      []byte // records, unsealed
	offs     []int  // record offsets in buf
	res      events.AppendResult
	err      error
	done     chan struct{} // capacity 1: finish sends once

}

type syncJob struct {
	segs    []*segment
	last    uint64 // last position written by the job
	reqs    []*request
	nEvents int
	bytes   int64 // written by the job, not yet synced
	// barrier, if set, is closed once the syncer has answered every job
	// sent before this one (which carries nothing else).
	barrier chan struct{}
}

// maxUnsynced bounds the bytes written but not yet synced. The writer
// waits before exceeding it, so after a crash a torn tail is never longer;
// Open uses that to tell a torn tail from damage to synced data. A
// variable for tests.
var maxUnsynced int64 = 128 << 20

// Store is the embedded durable events.Store: append-only segment files of
// checksummed records, a single writer goroutine that commits groups of
// appends with one write and one fdatasync, and in-memory indexes rebuilt
// by scanning on Open. Safe for concurrent use; one Store per directory.
type Store struct {
	dir   string
	cfg   Config
	fs    vfs
	log   *slog.Logger
	lockF file

	// mu guards the index below. The writer goroutine is its only
	// mutator; readers take it shared.
	mu         sync.RWMutex
	entries    [][]entry
	streams    map[string]uint32
	streamList []*streamInfo
	types      map[string]uint32
	typeList   []string
	ids        map[uuid.UUID]uint64
	segs       []*segment
	next       uint64 // next position the writer assigns

	// pendIDs are the ids of positions pendFrom, pendFrom+1, ... up to
	// next-1: assigned but perhaps not durable, what a recovery takes back
	// out of the index (heal.go). Writer-owned.
	pendIDs  []uuid.UUID
	pendFrom uint64
	// retired are files a recovery replaced; readers may still hold
	// them, so Close closes them.
	retired []file

	durable atomic.Uint64 // last position that is synced and visible
	// unsynced counts bytes written and not yet synced; synced is
	// signalled (without blocking) after every fdatasync.
	unsynced atomic.Int64
	synced   chan struct{}
	// unavail is set from a failed write or sync until the writer has
	// recovered (heal.go); Append and Ready return its error meanwhile.
	unavail atomic.Pointer[unavailable]

	notifyMu sync.Mutex
	notify   chan struct{}

	// closeMu orders Close against calls in flight: calls hold it shared
	// while they use files or submit requests.
	closeMu sync.RWMutex
	closed  bool
	reqs    chan *request
	syncs   chan *syncJob
	wdone   chan struct{} // writer and syncer have exited
	done    chan struct{} // closed by Close for subscribers

	ckMu        sync.Mutex
	checkpoints map[string]uint64
	// ahead: checkpoints beyond the log's end that the log once reached
	// (checkpoint.go), with their error; highWater the furthest position
	// the log is known to have reached (the checkpoint file's log_end).
	ahead     map[string]error
	highWater uint64

	// zero keeps the space ahead of the writer zero-filled (zero.go);
	// zeroTo is where the last segment's zero tail ends after recover.
	zero   *zeroer
	zeroTo int64

	stats struct {
		appends, events, groups, syncs atomic.Uint64
		syncNanos                      atomic.Int64
		failures, recoveries           atomic.Uint64
	}
	recovered uint64
	truncated int64
}

var _ events.Store = (*Store)(nil)

// Open opens or creates the store in cfg.Dir (created 0700, files 0600).
// It scans every segment, verifying every record's checksum and the
// positions and revisions they carry. A torn tail of the newest segment
// (an append that crashed before its fsync returned) is cut at the last
// complete batch and logged (Stats.TruncatedBytes); any other damage
// (recover.go says how the two are told apart) fails with a
// *CorruptError, which matches ErrCorrupt and names the segment, the byte
// offset and the way to repair (Repair). ErrLocked if the directory is in
// use.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("events: eventlog: Config.Dir is empty")
	}
	if cfg.SegmentSize <= 0 {
		cfg.SegmentSize = 256 << 20
	}
	// A batch larger than a segment gets a segment of its own, so offsets
	// stay below SegmentSize + MaxBatchSize.
	if cfg.SegmentSize < 4096 || cfg.SegmentSize > math.MaxUint32-2*events.MaxBatchSize {
		return nil, fmt.Errorf("events: eventlog: SegmentSize %d out of range", cfg.SegmentSize)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.fs == nil {
		cfg.fs = osFS{}
	}
	if cfg.retryMin <= 0 {
		cfg.retryMin = 100 * time.Millisecond
	}
	if cfg.retryMax < cfg.retryMin {
		cfg.retryMax = max(cfg.retryMin, 5*time.Second)
	}
	s, err := lockStore(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.recover(recoverOpen); err != nil {
		s.closeFiles()
		return nil, err
	}
	if len(s.segs) == 0 {
		seg, err := createSegment(s.fs, s.dir, s.next, 0)
		if err != nil {
			s.closeFiles()
			return nil, err
		}
		s.segs = append(s.segs, seg)
	}
	if err := s.loadCheckpoints(); err != nil {
		s.closeFiles()
		return nil, err
	}
	s.durable.Store(s.next - 1)
	s.pendFrom = s.next
	s.zero = newZeroer(s.fs, s.dir, s.cfg.SegmentSize, s.segs[len(s.segs)-1], s.zeroTo, s.cfg.ZeroFill, s.log.Warn)
	go s.writer()
	return s, nil
}

// lockStore creates cfg.Dir if needed, takes its lock and returns a
// Store with an empty index.
func lockStore(cfg Config) (*Store, error) {
	if err := cfg.fs.MkdirAll(cfg.Dir, dirPerm); err != nil {
		return nil, fmt.Errorf("events: eventlog: %w", err)
	}
	lockF, err := cfg.fs.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("events: eventlog: %w", err)
	}
	if err := lockF.Lock(); err != nil {
		lockF.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, cfg.Dir, err)
	}
	return &Store{
		dir: cfg.Dir, cfg: cfg, fs: cfg.fs, log: cfg.Logger.With("component", "eventlog"), lockF: lockF,
		streams: map[string]uint32{}, types: map[string]uint32{}, ids: map[uuid.UUID]uint64{},
		next: 1, notify: make(chan struct{}), synced: make(chan struct{}, 1),
		reqs: make(chan *request, 1024), syncs: make(chan *syncJob, 64),
		wdone: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

func (s *Store) closeFiles() {
	for _, seg := range s.segs {
		seg.f.Close()
	}
	for _, f := range s.retired {
		f.Close()
	}
	s.lockF.Close()
}

func (s *Store) typeIndex(t string) uint32 {
	ti, ok := s.types[t]
	if !ok {
		ti = uint32(len(s.typeList))
		s.types[t] = ti
		s.typeList = append(s.typeList, t)
	}
	return ti
}

func (s *Store) addEntry(e entry) {
	n := s.next - 1 // index of position s.next
	c := n >> chunkBits
	if int(c) == len(s.entries) {
		s.entries = append(s.entries, make([]entry, 0, 1<<chunkBits))
	}
	s.entries[c] = append(s.entries[c], e)
}

func (s *Store) entry(pos uint64) entry {
	n := pos - 1
	return s.entries[n>>chunkBits][n&(1<<chunkBits-1)]
}

// Stats returns counters since Open.
func (s *Store) Stats() Stats {
	s.zero.mu.Lock()
	w, u := s.zero.written, s.zero.unzeroed
	s.zero.mu.Unlock()
	return Stats{
		Appends: s.stats.appends.Load(), Events: s.stats.events.Load(),
		Groups: s.stats.groups.Load(), Syncs: s.stats.syncs.Load(), SyncTime: time.Duration(s.stats.syncNanos.Load()),
		Recovered: s.recovered, TruncatedBytes: s.truncated,
		Written: w, Unzeroed: u,
		Failures: s.stats.failures.Load(), Recoveries: s.stats.recoveries.Load(),
	}
}

// Append implements events.Store. Validation and encoding happen on the
// caller's goroutine; the writer goroutine checks the expected revision
// and ids against the index, assigns positions and commits the request
// with everything else pending in one write and one fdatasync.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, err
	}
	if err := s.cfg.Check.Validate(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	req := reqPool.Get().(*request)
	req.ctx, req.stream, req.expected = ctx, stream, expected
	req.ids, req.offs = req.ids[:0], req.offs[:0]
	size := 0
	for i := range evs {
		size += encodedSize(stream, &evs[i])
	}
	req.buf = slices.Grow(req.buf[:0], size)
	for i := range evs {
		ev := evs[i]
		ev.Time = ev.Time.UTC()
		req.ids = append(req.ids, ev.ID)
		req.offs = append(req.offs, len(req.buf))
		req.buf = appendRecord(req.buf, stream, &ev)
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		req.release()
		return events.AppendResult{}, events.ErrClosed
	}
	if u := s.unavail.Load(); u != nil && time.Now().Before(u.next) {
		// Not recording, and no recovery attempt is due: fail fast.
		s.closeMu.RUnlock()
		req.release()
		return events.AppendResult{}, u.err
	}
	s.reqs <- req
	s.closeMu.RUnlock()
	select {
	case <-req.done:
		res, err := req.res, req.err
		req.release()
		return res, err
	case <-ctx.Done():
		// The writer or syncer still holds req: it is not reused.
		return events.AppendResult{}, ctx.Err()
	}
}

// reqPool recycles requests with their encode buffers and done channel,
// so an append allocates no request state of its own. A request goes
// back only after its done signal was received.
var reqPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// maxPooledBuf: larger encode buffers are not kept.
const maxPooledBuf = 64 << 10

func (r *request) release() {
	r.ctx, r.stream, r.res, r.err = nil, "", events.AppendResult{}, nil
	if cap(r.buf) > maxPooledBuf {
		r.buf = nil
	}
	if cap(r.ids) > 1024 {
		r.ids, r.offs = nil, nil
	}
	reqPool.Put(r)
}

const (
	maxGroupBytes = 8 << 20
	maxGroupReqs  = 4096
)

// writer is the single goroutine that orders appends. It gathers every
// request that is waiting, checks and places them against the index,
// writes them with one call and hands the group to the syncer, so the next
// group is prepared while the previous one is being synced.
func (s *Store) writer() {
	syncDone := make(chan struct{})
	go s.syncer(syncDone)
	defer func() {
		close(s.syncs)
		<-syncDone
		close(s.wdone)
	}()
	var group []*request
	var buf []byte
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	var retryC <-chan time.Time
	for {
		if u := s.unavail.Load(); u != nil && retryC == nil {
			// Not recording: try to recover in the background too, so
			// that Ready turns healthy without appends (a load balancer
			// sends none to an instance that is not ready).
			retry.Reset(max(time.Until(u.next), 0))
			retryC = retry.C
		}
		var req *request
		var ok bool
		select {
		case req, ok = <-s.reqs:
		case <-retryC:
			retryC = nil
			s.heal(time.Now())
			continue
		}
		if !ok {
			return
		}
		group = append(group[:0], req)
		bytes := len(req.buf)
	gather:
		for len(group) < maxGroupReqs && bytes < maxGroupBytes {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break gather
				}
				group = append(group, r)
				bytes += len(r.buf)
			default:
				break gather
			}
		}
		if s.unavail.Load() != nil && !s.heal(time.Now()) {
			err := s.unavailErr()
			for _, r := range group {
				finish(r, err)
			}
			continue
		}
		// Back-pressure: a group adds at most maxGroupBytes plus one batch.
		for s.unsynced.Load() > max(maxUnsynced-maxGroupBytes-events.MaxBatchSize, 0) && s.unavail.Load() == nil {
			<-s.synced
		}
		buf = s.commit(group, buf[:0])
	}
}

// commit places a group against the index, writes it and hands it to the
// syncer. buf is scratch space; it returns it for reuse.
func (s *Store) commit(group []*request, buf []byte) []byte {
	if err := s.unavailErr(); err != nil {
		for _, r := range group {
			finish(r, err)
		}
		return buf
	}
	// Forget the ids of durable positions: a recovery never takes those
	// back.
	if d := s.durable.Load(); d >= s.pendFrom {
		k := min(d+1-s.pendFrom, uint64(len(s.pendIDs)))
		s.pendIDs = s.pendIDs[k:]
		s.pendFrom += k
	}
	job := &syncJob{}
	seg := s.segs[len(s.segs)-1]
	start := seg.size // file offset of buf[0]
	var ioErr error

	s.mu.Lock()
	for gi, r := range group {
		if err := r.ctx.Err(); err != nil {
			finish(r, err)
			continue
		}
		st, lastNew, err := s.check(r)
		if err != nil {
			finish(r, err)
			continue
		}
		if lastNew < 0 { // every event stored already: acknowledge with this group
			job.reqs = append(job.reqs, r)
			continue
		}
		// Start a new segment if this request does not fit; the old one is
		// written and synced first so that only the last segment can ever
		// have a torn tail.
		if start+int64(len(buf)+len(r.buf)) > s.cfg.SegmentSize && start+int64(len(buf)) > segHeaderSize {
			ns, err := s.roll(seg, start, buf)
			if err != nil {
				ioErr = err
				ferr := s.fail(err)
				for _, r := range group[gi:] {
					finish(r, ferr)
				}
				break
			}
			seg, start, buf = ns, ns.size, buf[:0]
		}
		if st == nil {
			si := uint32(len(s.streamList))
			st = &streamInfo{name: r.stream}
			s.streams[r.stream] = si
			s.streamList = append(s.streamList, st)
		}
		si := s.streams[r.stream]
		first := true
		for i, id := range r.ids {
			pos, stored := s.ids[id]
			if !stored {
				end := len(r.buf)
				if i+1 < len(r.ids) {
					end = r.offs[i+1]
				}
				rec := r.buf[r.offs[i]:end]
				pos = s.next
				var flags byte
				if i == lastNew {
					flags = flagBatchEnd
				}
				sealRecord(rec, pos, uint64(len(st.positions)), flags)
				s.addEntry(entry{seg: uint32(seg.index), off: uint32(start + int64(len(buf))), size: uint32(len(rec)),
					stream: si, typ: s.typeIndex(recordType(rec))})
				buf = append(buf, rec...)
				st.positions = append(st.positions, pos)
				s.ids[id] = pos
				s.pendIDs = append(s.pendIDs, id)
				s.next++
				job.nEvents++
			}
			if first {
				r.res.FirstPosition = pos
				first = false
			}
			r.res.LastPosition = pos
		}
		r.res.NextRevision = uint64(len(st.positions) - 1)
		job.reqs = append(job.reqs, r)
	}
	job.last = s.next - 1
	s.mu.Unlock()

	if ioErr == nil && len(buf) > 0 {
		s.zero.claim(seg, start, start+int64(len(buf)))
		if _, err := seg.f.WriteAt(buf, start); err != nil {
			ioErr = err
		}
		seg.size = start + int64(len(buf))
		job.segs = append(job.segs, seg)
		job.bytes = int64(len(buf))
		s.unsynced.Add(job.bytes)
	}
	if ioErr != nil {
		err := s.fail(ioErr)
		for _, r := range job.reqs {
			finish(r, err)
		}
		return buf
	}
	s.stats.groups.Add(1)
	s.syncs <- job
	return buf
}

func finish(r *request, err error) {
	r.err = err
	r.done <- struct{}{} // buffered: one signal per use
}

// recordType returns the type field of an encoded record (the writer's
// own bytes, so well formed).
func recordType(rec []byte) string {
	var h header
	decodeHeader(rec[frameHeader:], &h) //nolint:errcheck // sealed by us
	return string(h.typ)
}

// check decides r against the index (writer, under mu). lastNew is the
// index of r's last event that is not stored yet, -1 if all are (then
// r.res holds the stored copies' result). st is nil for a new stream.
func (s *Store) check(r *request) (st *streamInfo, lastNew int, err error) {
	if si, ok := s.streams[r.stream]; ok {
		st = s.streamList[si]
	}
	lastNew = -1
	for i, id := range r.ids {
		p, ok := s.ids[id]
		if !ok {
			lastNew = i
			continue
		}
		if got := s.streamList[s.entry(p).stream]; got != st {
			return nil, 0, fmt.Errorf("%w: id %s is already stored in stream %q", events.ErrMalformed, id, got.name)
		}
	}
	if lastNew < 0 {
		first, last := s.ids[r.ids[0]], s.ids[r.ids[len(r.ids)-1]]
		rev, _ := slices.BinarySearch(st.positions, last)
		r.res = events.AppendResult{FirstPosition: first, LastPosition: last, NextRevision: uint64(rev)}
		return st, -1, nil
	}
	cur, exists := uint64(0), st != nil && len(st.positions) > 0
	if exists {
		cur = uint64(len(st.positions) - 1)
	}
	if !r.expected.Check(cur, exists) {
		return nil, 0, &events.WrongRevisionError{Stream: r.stream, Expected: r.expected, Actual: cur, Exists: exists}
	}
	return st, lastNew, nil
}

// roll writes and syncs buf at off in seg, then starts the next segment.
func (s *Store) roll(seg *segment, off int64, buf []byte) (*segment, error) {
	if len(buf) > 0 {
		s.zero.claim(seg, off, off+int64(len(buf)))
		if _, err := seg.f.WriteAt(buf, off); err != nil {
			return nil, err
		}
		seg.size = off + int64(len(buf))
	}
	if err := seg.f.Datasync(); err != nil {
		return nil, err
	}
	var ns *segment
	var err error
	f, path, zeroed := s.zero.take()
	if f != nil {
		ns, err = adoptSegment(s.fs, s.dir, f, path, s.next, len(s.segs))
	} else {
		ns, err = createSegment(s.fs, s.dir, s.next, len(s.segs))
	}
	if err != nil {
		s.zero.switchTo(seg, 0)
		return nil, err
	}
	s.segs = append(s.segs, ns)
	s.zero.switchTo(ns, zeroed)
	return ns, nil
}

// syncer makes groups durable: it takes every job waiting, fdatasyncs
// their segments once, publishes the new durable position, acknowledges
// the requests and wakes subscribers.
//
// Cohorts. Appenders that wait for their fsync come back with their next
// append right after it; if the next fsync started at once it would cover
// only the appends queued meanwhile, and two half-size groups would
// alternate for good (measured: 8 events per fsync with 16 writers). So
// before syncing, the syncer waits until as many appends are written as
// were in flight after the previous fsync (those just acknowledged plus
// those already queued), but never longer than half the previous fsync's
// duration (at most 2 ms). A lone appender never waits: it is the whole
// cohort.
func (s *Store) syncer(done chan<- struct{}) {
	defer close(done)
	var jobs, carry []*syncJob
	var segs []*segment
	target := 0
	var lastSync time.Duration
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	open := true
	for open {
		jobs = append(jobs[:0], carry...)
		carry = carry[:0]
		if len(jobs) == 0 {
			j, ok := <-s.syncs
			if !ok {
				return
			}
			jobs = append(jobs, j)
		}
		count := 0
		for _, j := range jobs {
			count += len(j.reqs)
		}
		linger := min(lastSync/2, 2*time.Millisecond)
		waiting := false
	gather:
		for {
			select {
			case j, ok := <-s.syncs:
				if !ok {
					open = false
					break gather
				}
				jobs = append(jobs, j)
				count += len(j.reqs)
				continue
			default:
			}
			if count >= target || linger <= 0 {
				break
			}
			if !waiting {
				timer.Reset(linger)
				waiting = true
			}
			select {
			case j, ok := <-s.syncs:
				if !ok {
					open = false
					break gather
				}
				jobs = append(jobs, j)
				count += len(j.reqs)
			case <-timer.C:
				waiting = false
				break gather
			}
		}
		if waiting && !timer.Stop() {
			<-timer.C
		}
		segs = segs[:0]
		for _, j := range jobs {
			for _, sg := range j.segs {
				if !slices.Contains(segs, sg) {
					segs = append(segs, sg)
				}
			}
		}
		err := s.unavailErr()
		start := time.Now()
		for _, sg := range segs {
			if err != nil {
				break
			}
			if serr := sg.f.Datasync(); serr != nil {
				err = s.fail(serr)
			}
			s.stats.syncs.Add(1)
		}
		if len(segs) > 0 {
			lastSync = time.Since(start)
			s.stats.syncNanos.Add(int64(lastSync))
		}
		nEvents, nReqs := 0, 0
		if err == nil {
			s.publish(jobs)
		}
		for _, j := range jobs {
			nEvents += j.nEvents
			nReqs += len(j.reqs)
			s.unsynced.Add(-j.bytes)
			for _, r := range j.reqs {
				finish(r, err)
			}
			if j.barrier != nil {
				close(j.barrier)
			}
		}
		select {
		case s.synced <- struct{}{}:
		default:
		}
		if err == nil {
			s.stats.events.Add(uint64(nEvents))
			s.stats.appends.Add(uint64(nReqs))
			s.notifyMu.Lock()
			close(s.notify)
			s.notify = make(chan struct{})
			s.notifyMu.Unlock()
		}
		// The next cohort: those just acknowledged and those queued.
		target = nReqs
	queued:
		for open {
			select {
			case j, ok := <-s.syncs:
				if !ok {
					open = false
					break queued
				}
				carry = append(carry, j)
				target += len(j.reqs)
			default:
				break queued
			}
		}
	}
	// Closed: sync what was carried.
	if len(carry) > 0 {
		s.finalSync(carry)
	}
}

// finalSync syncs the last jobs once the writer has exited.
func (s *Store) finalSync(jobs []*syncJob) {
	err := s.unavailErr()
	seen := map[*segment]bool{}
	for _, j := range jobs {
		for _, sg := range j.segs {
			if err == nil && !seen[sg] {
				seen[sg] = true
				if serr := sg.f.Datasync(); serr != nil {
					err = s.fail(serr)
				}
			}
		}
	}
	if err == nil {
		s.publish(jobs)
	}
	for _, j := range jobs {
		for _, r := range j.reqs {
			finish(r, err)
		}
		if j.barrier != nil {
			close(j.barrier)
		}
	}
}

// publish makes the positions of synced jobs durable (visible).
func (s *Store) publish(jobs []*syncJob) {
	for i := len(jobs) - 1; i >= 0; i-- {
		if jobs[i].barrier == nil {
			s.durable.Store(jobs[i].last)
			return
		}
	}
}

func (s *Store) notifyChan() chan struct{} {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	return s.notify
}

// Close implements events.Store: appends already submitted are committed,
// subscribers return ErrClosed, files are closed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return events.ErrClosed
	}
	s.closed = true
	close(s.reqs)
	s.closeMu.Unlock()
	<-s.wdone
	close(s.done)
	s.zero.close()
	// Cut the last segment's zero tail, so that the next Open need not
	// read it (and starts zero-filling from the end of the data).
	if s.unavailErr() == nil {
		last := s.segs[len(s.segs)-1]
		if err := last.f.Truncate(last.size); err != nil {
			s.log.Warn("cutting the zero tail", "path", last.path, "err", err)
		}
	}
	s.closeFiles()
	return nil
}
