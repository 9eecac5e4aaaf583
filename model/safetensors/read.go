package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"unicode/utf8"
)

// TensorInfo describes one tensor of a File without its data. Begin and End
// are offsets into the data section.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// File is a parsed, validated safetensors file. Tensor data is read from the
// underlying io.ReaderAt on demand. A File is safe for concurrent use if the
// ReaderAt is (os.File and bytes.Reader are).
type File struct {
	// Metadata holds the "__metadata__" pairs (nil if absent).
	Metadata map[string]string

	infos     map[string]TensorInfo
	names     []string
	r         io.ReaderAt
	dataStart int64
	closer    io.Closer
}

// Read parses and validates the header of a safetensors file of the given
// size read through r. It reads the header only; tensor bytes are read by
// Tensor and Float32. All allocations are bounded by size.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, size)
	}
	var prefix [8]byte
	if _, err := r.ReadAt(prefix[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > uint64(size-8) || n > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header %d bytes, file %d bytes", ErrHeaderTooLarge, n, size)
	}
	header := make([]byte, n)
	if _, err := r.ReadAt(header, 8); err != nil {
		return nil, fmt.Errorf("safetensors: read header: %w", err)
	}
	f := &File{r: r, dataStart: 8 + int64(n)}
	if err := f.parseHeader(header, size-8-int64(n)); err != nil {
		return nil, err
	}
	return f, nil
}

// ReadBytes parses a safetensors file held in memory. The File refers to b,
// which must not be modified while the File is used.
func ReadBytes(b []byte) (*File, error) {
	return Read(bytes.NewReader(b), int64(len(b)))
}

// Open opens and validates the safetensors file at path. The caller must
// Close the File.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := Read(fd, st.Size())
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	f.closer = fd
	return f, nil
}

// Close releases the file opened by Open; it is a no-op for other Files.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	return err
}

type rawInfo struct {
	DType       *string
	Shape       *[]uint64
	DataOffsets *[]uint64
}

// decodeInfo decodes one tensor entry, matching the keys exactly (unlike
// encoding/json's case-insensitive struct matching); unknown keys are ignored.
func decodeInfo(dec *json.Decoder) (rawInfo, error) {
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return rawInfo{}, err
	}
	if m == nil {
		return rawInfo{}, errors.New("not an object")
	}
	var ri rawInfo
	if v, ok := m["dtype"]; ok {
		ri.DType = new(string)
		if err := json.Unmarshal(v, ri.DType); err != nil {
			return rawInfo{}, fmt.Errorf("dtype: %v", err)
		}
	}
	if v, ok := m["shape"]; ok {
		ri.Shape = new([]uint64)
		if err := json.Unmarshal(v, ri.Shape); err != nil || *ri.Shape == nil {
			return rawInfo{}, fmt.Errorf("shape: not an array of non-negative integers")
		}
	}
	if v, ok := m["data_offsets"]; ok {
		ri.DataOffsets = new([]uint64)
		if err := json.Unmarshal(v, ri.DataOffsets); err != nil || *ri.DataOffsets == nil {
			return rawInfo{}, fmt.Errorf("data_offsets: not an array of non-negative integers")
		}
	}
	return ri, nil
}

func (f *File) parseHeader(header []byte, dataLen int64) error {
	if !utf8.Valid(header) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidHeader)
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: not a JSON object", ErrInvalidHeader)
	}
	f.infos = make(map[string]TensorInfo)
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidHeader, err)
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: expected a key", ErrInvalidHeader)
		}
		if name == "__metadata__" {
			if seenMeta {
				return fmt.Errorf("%w: %q", ErrDuplicateName, name)
			}
			seenMeta = true
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return fmt.Errorf("%w: __metadata__: %v", ErrInvalidHeader, err)
			}
			f.Metadata = md
			continue
		}
		if _, dup := f.infos[name]; dup {
			return fmt.Errorf("%w: %q", ErrDuplicateName, name)
		}
		if name == "" {
			return fmt.Errorf("%w: empty name", ErrInvalidName)
		}
		ri, err := decodeInfo(dec)
		if err != nil {
			return fmt.Errorf("%w: tensor %q: %v", ErrInvalidHeader, name, err)
		}
		info, err := ri.check(name)
		if err != nil {
			return err
		}
		f.infos[name] = info
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return fmt.Errorf("%w: unterminated object", ErrInvalidHeader)
	}
	for _, c := range header[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidHeader)
		}
	}

	f.names = make([]string, 0, len(f.infos))
	for name := range f.infos {
		f.names = append(f.names, name)
	}
	sort.Strings(f.names)
	byOffset := make([]TensorInfo, 0, len(f.infos))
	for _, name := range f.names {
		byOffset = append(byOffset, f.infos[name])
	}
	sort.SliceStable(byOffset, func(a, b int) bool {
		if byOffset[a].Begin != byOffset[b].Begin {
			return byOffset[a].Begin < byOffset[b].Begin
		}
		return byOffset[a].End < byOffset[b].End
	})
	var pos int64
	for _, t := range byOffset {
		switch {
		case t.Begin < pos:
			return fmt.Errorf("%w: tensor %q [%d,%d) overlaps the previous tensor ending at %d", ErrOffsets, t.Name, t.Begin, t.End, pos)
		case t.Begin > pos:
			return fmt.Errorf("%w: gap [%d,%d) before tensor %q", ErrOffsets, pos, t.Begin, t.Name)
		case t.End > dataLen:
			return fmt.Errorf("%w: tensor %q [%d,%d) beyond the data section of %d bytes", ErrOffsets, t.Name, t.Begin, t.End, dataLen)
		}
		pos = t.End
	}
	if pos != dataLen {
		return fmt.Errorf("%w: %d unused bytes after the last tensor", ErrOffsets, dataLen-pos)
	}
	return nil
}

func (ri rawInfo) check(name string) (TensorInfo, error) {
	if ri.DType == nil || ri.Shape == nil || ri.DataOffsets == nil {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q lacks dtype, shape or data_offsets", ErrInvalidHeader, name)
	}
	dt := DType(*ri.DType)
	if !dt.Valid() {
		return TensorInfo{}, fmt.Errorf("%w: %q (tensor %q)", ErrUnknownDType, *ri.DType, name)
	}
	offs := *ri.DataOffsets
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has %d data offsets, want 2", ErrOffsets, name, len(offs))
	}
	if offs[0] > offs[1] || offs[1] > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has offsets [%d,%d]", ErrOffsets, name, offs[0], offs[1])
	}
	shape := make([]int, len(*ri.Shape))
	elems := uint64(1)
	overflow := false
	for i, d := range *ri.Shape {
		if d > 1<<62 { // no real tensor; keeps int(d) and the product safe
			overflow = true
			break
		}
		shape[i] = int(d)
		var ok bool
		if elems, ok = mulOK(elems, d); !ok {
			overflow = true
		}
	}
	size, ok := mulOK(elems, uint64(dt.Size()))
	if overflow || !ok || size != offs[1]-offs[0] {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q %s%v spans %d bytes", ErrSizeMismatch, name, dt, *ri.Shape, offs[1]-offs[0])
	}
	return TensorInfo{Name: name, DType: dt, Shape: shape, Begin: int64(offs[0]), End: int64(offs[1])}, nil
}

// Names returns the tensor names in sorted order. The caller may modify the
// returned slice.
func (f *File) Names() []string {
	return append([]string(nil), f.names...)
}

// Info returns the description of the named tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.infos[name]
	if ok {
		t.Shape = append([]int(nil), t.Shape...)
	}
	return t, ok
}

// Tensor reads the named tensor, returning a copy of its bytes. It fails with
// ErrNotFound if the file has no such tensor.
func (f *File) Tensor(name string) (Tensor, error) {
	info, ok := f.Info(name)
	if !ok {
		return Tensor{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	data := make([]byte, info.End-info.Begin)
	if len(data) > 0 {
		if _, err := f.r.ReadAt(data, f.dataStart+info.Begin); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Tensor{}, fmt.Errorf("safetensors: read tensor %q: %w", name, err)
		}
	}
	return Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: data}, nil
}

// Tensors reads every tensor, in name order.
func (f *File) Tensors() ([]Tensor, error) {
	out := make([]Tensor, 0, len(f.names))
	for _, name := range f.names {
		t, err := f.Tensor(name)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Float32 reads the named tensor converted to float32, with its shape. F32,
// F16, BF16 and F64 tensors are supported; other dtypes fail with
// ErrConversion.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, nil, err
	}
	v, err := t.Float32()
	if err != nil {
		return nil, nil, err
	}
	return v, t.Shape, nil
}

// ReadFloat32Into reads the named tensor converted to float32 into dst, which
// must have exactly as many elements as the tensor (ErrSizeMismatch
// otherwise). It lets a caller fill a view of a preallocated parameter
// buffer. Dtypes are as for Float32.
func (f *File) ReadFloat32Into(name string, dst []float32) error {
	info, ok := f.infos[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if n := NumElements(info.Shape); n != len(dst) {
		return fmt.Errorf("%w: tensor %q has %d elements, destination %d", ErrSizeMismatch, name, n, len(dst))
	}
	t, err := f.Tensor(name)
	if err != nil {
		return err
	}
	return t.float32Into(dst)
}
