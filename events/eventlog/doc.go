// Package eventlog is citizen's embedded, durable events.Store: a
// directory of append-only segment files that one process owns, with
// Repair for a log that Open refuses because it is damaged.
//
// # Design, and why
//
// Pebble (an LSM) measured 90-110k durable 1 KB appends/s here, bounded by
// its own write path, and an event log needs none of an LSM's features:
// keys are dense positions, nothing is updated or deleted. So the log is
// the data structure:
//
//   - Segments (default 256 MiB, named by their first position) hold
//     records [len u32 | crc32c u32 | payload] whose payload is a compact
//     binary envelope (flags, position, revision, id, time, schema, then
//     length-prefixed stream, type, correlation, causation, tenant and the
//     raw JSON data). See record.go. Replay checks a checksum and walks a
//     few varints per event; JSON is decoded only by whoever wants the
//     payload.
//   - One writer goroutine orders all appends. Callers validate and encode
//     their events on their own goroutines and queue them; the writer
//     takes every queued request, checks expected revisions and event ids
//     against the in-memory index (so a group is decided serially, with no
//     locks held across I/O), assigns positions, and writes the whole
//     group with one pwrite. A syncer goroutine then fdatasyncs once for
//     every group written meanwhile, publishes the new durable position,
//     releases the waiting Appends and wakes subscribers. Writing group
//     k+1 overlaps syncing group k. An Append returns only after the
//     fdatasync that covers it. Before an fdatasync the syncer waits, at
//     most half the previous fdatasync's duration, for the appenders it
//     just released to come back, so one fdatasync covers all concurrent
//     writers instead of two alternating halves (measured: 7 -> 13 events
//     per fdatasync with 16 writers, 95 -> 165 with 256).
//   - Segments are zero-filled ahead of the writer (zero.go): a zeroer
//     goroutine writes and syncs zeros in the current segment up to a
//     window ahead of the writer (growing with what was written, at most
//     32 MiB, in 1 MiB chunks) and then prepares the next segment file,
//     which a roll renames into place. Appends then overwrite blocks that
//     are allocated, written and synced already, so their fdatasync has no
//     size or extent change to commit to the journal (see BenchmarkDiskGroupSync).
//     A frame header of eight zero bytes marks the end of the written log.
//     Close cuts the zero tail of the last segment, so Open need not read it.
//   - Append requests, with their encode buffers, are pooled.
//   - The last record of every Append batch carries a flag, so a batch is
//     all or nothing: on Open a torn tail of the newest segment (a write
//     the crash interrupted, never acknowledged) is truncated back to the
//     last complete batch and logged. Before starting a new segment the
//     old one is written and synced, so only the newest segment can have a
//     torn tail. A torn write leaves a record cut short, zeros where a
//     page never reached the disk, or garbage with nothing valid after it;
//     a failing record with a valid record after it (not explained by a
//     lost page of zeros), a record whose checksum holds but whose content
//     is wrong, any damage in an older segment and a missing segment are
//     corruption: Open refuses with a *CorruptError (ErrCorrupt) naming
//     the file, the byte offset and the repair (recover.go). Repair (the
//     `citizen events repair` command) moves everything from the last
//     complete batch before the damage into quarantine/<time>/, never
//     deleting, and resets checkpoints beyond the new end (repair.go).
//   - The index lives in memory and is rebuilt on Open by scanning every
//     record (checksums verified): position -> (segment, offset, size,
//     stream, type) in 20 bytes per event, stream -> positions, id ->
//     position. ReadAll and Subscribe filter on the index without reading
//     records; reads fetch adjacent records with one pread.
//   - Subscribe catches up by reading the log in steps of at most 64k index
//     entries, then waits on a channel the syncer closes and replaces on
//     every commit (a broadcast): no polling, no sleeps.
//   - Checkpoints are one small JSON file replaced atomically (temporary
//     file, fsync, rename, fsync of the directory). It also records how
//     far the log has reached, so a checkpoint (or a read or subscription
//     start) beyond the end of a log that lost events is ErrAheadOfLog,
//     never a silent skip of the new events that reuse those positions.
//   - A write or fdatasync error stops recording: what was written but
//     not synced is in doubt, so the appends in flight fail and later ones
//     get ErrUnavailable (ErrNoSpace on a full disk), which Ready reports.
//     The writer then recovers by itself (heal.go), on the next Append or
//     on a backoff timer: it cuts the files back to the last durable
//     record, reopens the segment, checks that a write and fdatasync work,
//     and takes the failed positions back out of the index.
//   - Every file operation goes through an internal interface (fs.go), so
//     that tests inject short writes, failed syncs, a full disk, flipped
//     bits and power cuts (faultfs_test.go). The directory is created
//     0700 and its files 0600: the log holds customers' text.
//
// # Numbers
//
// docs/benchmarks/store.md has the recorded runs and the command. On the
// shared 2-vCPU development machine (load average 5-18 from other
// engineers' builds): replay (open: every record read and CRC-checked,
// index rebuilt) 1-2.3 million events/s from the page cache depending on
// load, 1.3 million from disk; durable 1 KB appends with 256 writers
// 30k-85k/s (strict check) and 50k-216k/s (lax), with 115-165 events per
// fdatasync, below the 250,000/s target. The disk is not what limits:
// on its own it took about 7,000 fdatasyncs/s of a 160 KB group written
// over synced zeros. The CPU is: a strict append costs about 13 us of
// process CPU (6 us lax), so even both vCPUs would give at most about 150k
// strict appends/s, and under that load the process got about 0.4 of
// them. Delivery to a live subscriber adds nothing measurable after the
// commit; its p99 is the Append's, i.e. the fdatasync tail (3-5 ms).
//
// # Limits
//
// The writer never has more than 128 MiB written but not yet synced (it
// waits for the syncer), so a torn tail is never longer: a bad record
// followed by more data than that is corruption whatever follows it.
// Two kinds of damage cannot be told from a torn write and are cut with a
// warning (Stats.TruncatedBytes): damage to the very last records of the
// newest segment with nothing valid after them, and zeros over a whole
// sector of synced data within its last 128 MiB (they look like a lost
// page). A deleted newest segment leaves no gap for Open to see; a
// checkpoint saved after it was written is then ErrAheadOfLog. Reads
// verify every record's checksum and report events.ErrCorrupt.
//
// Memory grows with the log: about 20 bytes per event for the position
// index plus the id map (about 50 bytes per event) and per-stream position
// lists. There is no compaction, no index snapshot (Open rescans), and one
// process per directory (an flock on Dir/LOCK; ErrLocked otherwise).
package eventlog
