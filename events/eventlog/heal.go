package eventlog

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// Recovering from a failed write or sync without a restart.
//
// After a write or fdatasync error (a full disk, an I/O error) the bytes
// written since the last successful fdatasync are in doubt, and every
// Append not yet acknowledged fails (fail). The writer goroutine then
// recovers, on the next Append or when a backoff timer fires (so that a
// store nobody appends to turns ready again too): it waits until the
// syncer has answered every job sent before, cuts the files back to the
// last durable record (removing segments started since), reopens that
// segment, checks that a write and an fdatasync succeed there (a probe of
// zeros, cut again), and takes the positions after the durable end back
// out of the index. Nothing that was acknowledged is touched; nothing
// that failed stays, so its positions are assigned again to the next
// appends and nobody ever saw them. Until an attempt succeeds the store
// answers ErrUnavailable (ErrNoSpace for ENOSPC/EDQUOT), and attempts
// back off from Config.retryMin to retryMax.

// probeSize is what a recovery writes and syncs after the log's end to
// check that the filesystem accepts writes again.
const probeSize = 64 << 10

// heal tries to recover if an attempt is due (writer goroutine only). It
// reports whether the store records again.
func (s *Store) heal(now time.Time) bool {
	u := s.unavail.Load()
	if u == nil {
		return true
	}
	if now.Before(u.next) {
		return false
	}
	err := s.recoverWrites()
	if err == nil {
		s.unavail.Store(nil)
		s.stats.recoveries.Add(1)
		s.log.Info("store recovered: recording again", "unavailable_for", time.Since(u.since).Round(time.Millisecond),
			"log_end", s.durable.Load())
		return true
	}
	nu := &unavailable{err: unavailableErr(err), since: u.since, wait: min(2*u.wait, s.cfg.retryMax)}
	nu.next = time.Now().Add(nu.wait)
	s.unavail.Store(nu)
	s.log.Warn("store still cannot record", "err", err, "retry_in", nu.wait)
	return false
}

// recoverWrites cuts the files and the index back to the durable end.
func (s *Store) recoverWrites() error {
	// Every job sent before the failure has been answered (with the
	// error), so none can be acknowledged after the cut.
	ch := make(chan struct{})
	s.syncs <- &syncJob{barrier: ch}
	<-ch
	s.unsynced.Store(0)

	s.zero.pause()
	resumed := s.segs[len(s.segs)-1]
	defer func() { s.zero.resume(resumed) }()

	d := s.durable.Load()
	keep, off := 0, int64(segHeaderSize)
	if d > 0 {
		e := s.entry(d)
		keep, off = int(e.seg), int64(e.off+e.size)
	}
	if keep+1 < len(s.segs) && s.segs[keep+1].first == d+1 {
		// The next segment starts right after the durable end: keep it,
		// empty.
		keep, off = keep+1, segHeaderSize
	}
	if len(s.segs) > keep+1 {
		for _, sg := range s.segs[keep+1:] {
			if err := s.fs.Remove(sg.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		if err := s.fs.SyncDir(s.dir); err != nil {
			return err
		}
	}
	seg := s.segs[keep]
	f, err := s.fs.OpenFile(seg.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := cutAndProbe(f, off); err != nil {
		f.Close()
		return err
	}

	ns := &segment{index: keep, first: seg.first, path: seg.path, f: f, size: off}
	s.mu.Lock()
	s.rollback(d)
	for _, sg := range s.segs[keep:] {
		s.retired = append(s.retired, sg.f)
	}
	// A new slice: views taken by readers keep the old one intact.
	segs := make([]*segment, keep+1, keep+8)
	copy(segs, s.segs[:keep])
	segs[keep] = ns
	s.segs = segs
	s.mu.Unlock()
	resumed = ns
	return nil
}

// cutAndProbe truncates f to off, then writes and syncs probeSize zeros
// there and truncates again: it fails unless the filesystem takes writes.
func cutAndProbe(f file, off int64) error {
	if err := f.Truncate(off); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	_, err := f.WriteAt(zeroBuf[:probeSize], off)
	if err == nil {
		err = f.Datasync()
	}
	if terr := f.Truncate(off); err == nil {
		err = terr
	}
	if err == nil {
		err = f.Sync()
	}
	return err
}

// rollback takes positions after d out of the index (writer, under mu).
func (s *Store) rollback(d uint64) {
	for p := s.next - 1; p > d; p-- {
		st := s.streamList[s.entry(p).stream]
		st.positions = st.positions[:len(st.positions)-1]
	}
	for _, id := range s.pendIDs[d+1-s.pendFrom:] {
		delete(s.ids, id)
	}
	s.pendIDs = s.pendIDs[:d+1-s.pendFrom]
	chunks := int((d + 1<<chunkBits - 1) >> chunkBits)
	s.entries = s.entries[:chunks]
	if chunks > 0 {
		s.entries[chunks-1] = s.entries[chunks-1][:d-uint64(chunks-1)<<chunkBits]
	}
	s.next = d + 1
}
