package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"citizen/events"

	"github.com/google/uuid"
)

// A record frames one event in a segment:
//
//	len   u32 LE   length of the payload
//	crc   u32 LE   CRC-32C (Castagnoli) of the payload
//	payload:
//	  flags    u8      bit 0: last event of its Append batch
//	  position u64 LE
//	  revision u64 LE
//	  id       [16]byte
//	  time     i64 LE seconds, u32 LE nanoseconds (UTC)
//	  schema   uvarint
//	  stream, type, correlation, causation, tenant, data:
//	           uvarint length + bytes each
//
// Data stays the event's raw JSON; only the envelope is binary, so replay
// checks a checksum and walks a few varints per event.
const (
	frameHeader = 8
	offFlags    = 0
	offPosition = 1
	offRevision = 9
	offID       = 17
	offTime     = 33
	offSchema   = 45
	// maxPayload bounds a record so a corrupt length cannot make a reader
	// allocate or skip arbitrarily: the largest event plus the envelope.
	maxPayload = events.MaxEventSize + 256

	flagBatchEnd = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errShort: the bytes end inside a record (a torn tail, or a read that
// needs more bytes).
var errShort = errors.New("eventlog: short record")

// encodedSize is the exact length of ev's record (frame included).
func encodedSize(stream string, ev *events.Event) int {
	n := frameHeader + offSchema + uvarintLen(uint64(ev.Schema))
	for _, l := range [...]int{len(stream), len(ev.Type), len(ev.CorrelationID), len(ev.CausationID), len(ev.Tenant), len(ev.Data)} {
		n += uvarintLen(uint64(l)) + l
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendRecord appends ev's record to dst with position and revision zero
// and no checksum; sealRecord fills them in.
func appendRecord(dst []byte, stream string, ev *events.Event) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameHeader+offSchema)...)
	p := dst[start+frameHeader:]
	copy(p[offID:], ev.ID[:])
	binary.LittleEndian.PutUint64(p[offTime:], uint64(ev.Time.Unix()))
	binary.LittleEndian.PutUint32(p[offTime+8:], uint32(ev.Time.Nanosecond()))
	dst = binary.AppendUvarint(dst, uint64(ev.Schema))
	for _, s := range [...]string{stream, ev.Type, ev.CorrelationID, ev.CausationID, ev.Tenant} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ev.Data)))
	dst = append(dst, ev.Data...)
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeader))
	return dst
}

// sealRecord sets the position, revision and flags of the record at the
// start of rec and computes its checksum.
func sealRecord(rec []byte, pos, rev uint64, flags byte) {
	p := rec[frameHeader:]
	p[offFlags] = flags
	binary.LittleEndian.PutUint64(p[offPosition:], pos)
	binary.LittleEndian.PutUint64(p[offRevision:], rev)
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(p, castagnoli))
}

// header is what the index needs from a record; stream and typ alias the
// input bytes.
type header struct {
	flags    byte
	position uint64
	revision uint64
	id       uuid.UUID
	stream   []byte
	typ      []byte
}

// frame checks the frame at the start of b and returns the payload and
// the record's total length. errShort: b ends inside the record;
// events.ErrCorrupt: bad length or checksum.
func frame(b []byte) (payload []byte, n int, err error) {
	if len(b) < frameHeader {
		return nil, 0, errShort
	}
	l := binary.LittleEndian.Uint32(b)
	if l < offSchema+7 || l > maxPayload {
		return nil, 0, fmt.Errorf("%w: record length %d", events.ErrCorrupt, l)
	}
	n = frameHeader + int(l)
	if len(b) < n {
		return nil, 0, errShort
	}
	payload = b[frameHeader:n]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", events.ErrCorrupt)
	}
	return payload, n, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("%w: bad varint", events.ErrCorrupt)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	l := r.uvarint()
	if r.err != nil {
		return nil
	}
	if l > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: field length %d beyond record", events.ErrCorrupt, l)
		return nil
	}
	v := r.b[:l:l]
	r.b = r.b[l:]
	return v
}

// decodeHeader parses the fixed fields, stream and type of a payload.
func decodeHeader(p []byte, h *header) (rest reader, err error) {
	h.flags = p[offFlags]
	h.position = binary.LittleEndian.Uint64(p[offPosition:])
	h.revision = binary.LittleEndian.Uint64(p[offRevision:])
	copy(h.id[:], p[offID:])
	r := reader{b: p[offSchema:]}
	if s := r.uvarint(); r.err == nil && (s == 0 || s > math.MaxInt32) {
		r.err = fmt.Errorf("%w: schema %d", events.ErrCorrupt, s)
	}
	h.stream = r.bytes()
	h.typ = r.bytes()
	if r.err == nil && (h.flags&^flagBatchEnd != 0 || h.position == 0) {
		r.err = fmt.Errorf("%w: bad flags %#x or position %d", events.ErrCorrupt, h.flags, h.position)
	}
	return r, r.err
}

// decodeEvent parses a payload into ev. The stream and type strings are
// knownStream and knownType when the record holds those (no allocation).
// Data is copied into slab when it has room (then ev.Data aliases slab),
// else into a fresh slice; slab's remainder is returned.
func decodeEvent(p []byte, ev *events.Event, knownStream, knownType string, slab []byte) (flags byte, rest []byte, err error) {
	var h header
	r, err := decodeHeader(p, &h)
	if err != nil {
		return 0, slab, err
	}
	corr, caus, tenant, data := r.bytes(), r.bytes(), r.bytes(), r.bytes()
	if r.err != nil {
		return 0, slab, r.err
	}
	if len(r.b) != 0 {
		return 0, slab, fmt.Errorf("%w: %d trailing bytes in record", events.ErrCorrupt, len(r.b))
	}
	ev.Stream, ev.Type = knownStream, knownType
	if string(h.stream) != knownStream {
		ev.Stream = string(h.stream)
	}
	if string(h.typ) != knownType {
		ev.Type = string(h.typ)
	}
	schema, _ := binary.Uvarint(p[offSchema:])
	ev.ID = h.id
	ev.Position, ev.Revision = h.position, h.revision
	sec := int64(binary.LittleEndian.Uint64(p[offTime:]))
	nsec := binary.LittleEndian.Uint32(p[offTime+8:])
	if nsec >= 1e9 {
		return 0, slab, fmt.Errorf("%w: nanoseconds %d", events.ErrCorrupt, nsec)
	}
	ev.Time = time.Unix(sec, int64(nsec)).UTC()
	ev.Schema = int(schema)
	ev.CorrelationID, ev.CausationID, ev.Tenant = string(corr), string(caus), string(tenant)
	if len(data) <= len(slab) {
		n := copy(slab, data)
		ev.Data, slab = slab[:n:n], slab[n:]
	} else {
		ev.Data = append([]byte(nil), data...)
	}
	return h.flags, slab, nil
}

// DecodeRecord decodes the record at the start of b: the event, its flags
// and the record's length. Errors wrap events.ErrCorrupt, or report that b
// ends inside the record. It never panics, whatever b holds.
func DecodeRecord(b []byte) (ev events.Event, flags byte, n int, err error) {
	p, n, err := frame(b)
	if err != nil {
		return events.Event{}, 0, 0, err
	}
	flags, _, err = decodeEvent(p, &ev, "", "", nil)
	if err != nil {
		return events.Event{}, 0, 0, err
	}
	return ev, flags, n, nil
}
