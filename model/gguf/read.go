package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"sync"
)

// TensorInfo describes one tensor of a File.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ggml order: the innermost (contiguous) dimension first, 1 to MaxDims of them
	Type   Type
	Offset uint64 // from the start of the data section (File.DataOffset), a multiple of the alignment
}

// NumElements is the product of Dims. Parse guarantees it fits in an int64.
func (t TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Size is the number of bytes of the tensor's data. Parse guarantees that Dims[0] is a whole
// number of blocks.
func (t TensorInfo) Size() uint64 {
	bs := uint64(t.Type.BlockSize())
	if bs == 0 {
		return 0
	}
	return t.NumElements() / bs * uint64(t.Type.TypeSize())
}

// Shape is Dims reversed, as ints: the row-major shape that Hugging Face and NumPy use, so a
// weight [out, in] in Hugging Face has Dims [in, out].
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// File is a parsed, validated GGUF file. Metadata and the tensor directory are held in memory;
// tensor bytes are views into the file's bytes (memory-mapped by Open). A File is safe for
// concurrent use; Close must not overlap with other calls that read tensor data.
type File struct {
	Version    uint32       // 2 or 3
	KV         []KV         // metadata in file order (keys unique)
	Tensors    []TensorInfo // tensor directory in file order (names unique)
	Alignment  uint64       // general.alignment, or DefaultAlignment
	DataOffset int64        // absolute offset of the data section

	kv map[string]int
	ti map[string]int

	mu     sync.RWMutex
	data   []byte // the whole file; nil after Close
	unmap  func() error
	closed bool
}

// Parse parses and validates a GGUF file held in memory. The File refers to b for tensor data;
// b must not be modified while the File is used. Parse allocates at most a small multiple of
// len(b).
func Parse(b []byte) (*File, error) {
	f, err := parse(b)
	if err != nil {
		return nil, err
	}
	f.data = b
	return f, nil
}

// Open memory-maps and validates the GGUF file at path (on systems without mmap it reads the
// file into memory). The caller must Close the File. Tensor data read from it stays valid until
// Close; the file must not be truncated meanwhile.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("%w: %s: %d bytes is too large", ErrUnsupported, path, st.Size())
	}
	data, unmap, err := mapFile(fd, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("gguf: map %s: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		if unmap != nil {
			unmap()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.data, f.unmap = data, unmap
	return f, nil
}

// Close releases the file's bytes (unmapping them when Open mapped them). Metadata and the
// tensor directory stay readable; tensor data reads return ErrClosed afterwards. Close is
// idempotent.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	f.data = nil
	if f.unmap != nil {
		err := f.unmap()
		f.unmap = nil
		if err != nil {
			return fmt.Errorf("gguf: unmap: %w", err)
		}
	}
	return nil
}

// Get returns the metadata value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kv[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the directory entry of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.ti[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// withData calls fn with the raw bytes of the named tensor, holding the file open meanwhile. fn
// must not keep the bytes.
func (f *File) withData(name string, fn func(TensorInfo, []byte) error) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("%w: tensor %q", ErrNotFound, name)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return ErrClosed
	}
	start := uint64(f.DataOffset) + t.Offset
	return fn(t, f.data[start:start+t.Size():start+t.Size()])
}

// TensorBytes returns a copy of the raw bytes of the named tensor.
func (f *File) TensorBytes(name string) ([]byte, error) {
	var out []byte
	err := f.withData(name, func(_ TensorInfo, b []byte) error {
		out = slices.Clone(b)
		return nil
	})
	return out, err
}

// Float32 returns the named tensor dequantized to float32, in ggml order (which is row-major for
// Shape). It fails with ErrUnsupported for types Dequantize does not handle.
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q", ErrNotFound, name)
	}
	if !CanDequantize(t.Type) {
		return nil, fmt.Errorf("%w: tensor %q has type %s, which cannot be dequantized", ErrUnsupported, name, t.Type)
	}
	out := make([]float32, t.NumElements())
	if err := f.ReadFloat32(name, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadFloat32 dequantizes the named tensor into dst, which must have exactly NumElements
// elements.
func (f *File) ReadFloat32(name string, dst []float32) error {
	return f.withData(name, func(t TensorInfo, b []byte) error {
		if uint64(len(dst)) != t.NumElements() {
			return fmt.Errorf("gguf: tensor %q has %d elements, destination %d", name, t.NumElements(), len(dst))
		}
		if err := Dequantize(dst, b, t.Type); err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", name, err)
		}
		return nil
	})
}

// reader is a bounds-checked little-endian cursor.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) need(n int, what string) error {
	if n < 0 || n > r.left() {
		return fmt.Errorf("%w: truncated at byte %d reading %s", ErrFormat, r.off, what)
	}
	return nil
}

func (r *reader) u32(what string) (uint32, error) {
	if err := r.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) u64(what string) (uint64, error) {
	if err := r.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

// count reads a uint64 count of items that take at least minSize bytes each and checks that
// they can fit in what is left of the file.
func (r *reader) count(minSize int, what string) (int, error) {
	at := r.off
	n, err := r.u64(what)
	if err != nil {
		return 0, err
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(r.left()/minSize) {
		return 0, fmt.Errorf("%w: %s %d at byte %d exceeds the %d bytes left", ErrFormat, what, n, at, r.left())
	}
	return int(n), nil
}

func (r *reader) str(what string) (string, error) {
	n, err := r.count(1, what+" length")
	if err != nil {
		return "", err
	}
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s, nil
}

func (r *reader) valueType(what string) (ValueType, error) {
	at := r.off
	t, err := r.u32(what)
	if err != nil {
		return 0, err
	}
	if ValueType(t).minSize() == 0 {
		return 0, fmt.Errorf("%w: unknown value type %d at byte %d", ErrFormat, t, at)
	}
	return ValueType(t), nil
}

func (r *reader) scalar(t ValueType) (any, error) {
	at := r.off
	if t == TypeString {
		return r.str("string")
	}
	n := t.size()
	if err := r.need(n, t.String()); err != nil {
		return nil, err
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, fmt.Errorf("%w: bool %d at byte %d", ErrFormat, b[0], at)
		}
		return b[0] == 1, nil
	case TypeUint16:
		return binary.LittleEndian.Uint16(b), nil
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case TypeUint32:
		return binary.LittleEndian.Uint32(b), nil
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case TypeUint64:
		return binary.LittleEndian.Uint64(b), nil
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case TypeFloat64:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	return nil, fmt.Errorf("%w: value type %s is not a scalar", ErrFormat, t)
}

func (r *reader) value(t ValueType, depth int) (Value, error) {
	if t != TypeArray {
		x, err := r.scalar(t)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: t, v: x}, nil
	}
	if depth >= maxNesting {
		return Value{}, fmt.Errorf("%w: arrays nested deeper than %d at byte %d", ErrFormat, maxNesting, r.off)
	}
	elem, err := r.valueType("array element type")
	if err != nil {
		return Value{}, err
	}
	n, err := r.count(elem.minSize(), "array length")
	if err != nil {
		return Value{}, err
	}
	out := Value{Type: TypeArray, Elem: elem}
	if sz := elem.size(); sz > 0 && elem != TypeBool {
		out.v = decodeFixed(elem, r.b[r.off:r.off+n*sz], n)
		r.off += n * sz
		return out, nil
	}
	switch elem {
	case TypeBool:
		s := make([]bool, n)
		for i := range s {
			x, err := r.scalar(TypeBool)
			if err != nil {
				return Value{}, err
			}
			s[i] = x.(bool)
		}
		out.v = s
	case TypeString:
		s := make([]string, n)
		for i := range s {
			if s[i], err = r.str("string"); err != nil {
				return Value{}, err
			}
		}
		out.v = s
	case TypeArray:
		s := make([]Value, n)
		for i := range s {
			if s[i], err = r.value(TypeArray, depth+1); err != nil {
				return Value{}, err
			}
		}
		out.v = s
	}
	return out, nil
}

// decodeFixed decodes n little-endian numbers of type t from b (len n·size).
func decodeFixed(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return slices.Clone(b)
	case TypeInt8:
		s := make([]int8, n)
		for i := range s {
			s[i] = int8(b[i])
		}
		return s
	case TypeUint16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = le.Uint16(b[2*i:])
		}
		return s
	case TypeInt16:
		s := make([]int16, n)
		for i := range s {
			s[i] = int16(le.Uint16(b[2*i:]))
		}
		return s
	case TypeUint32:
		s := make([]uint32, n)
		for i := range s {
			s[i] = le.Uint32(b[4*i:])
		}
		return s
	case TypeInt32:
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(le.Uint32(b[4*i:]))
		}
		return s
	case TypeFloat32:
		s := make([]float32, n)
		for i := range s {
			s[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return s
	case TypeUint64:
		s := make([]uint64, n)
		for i := range s {
			s[i] = le.Uint64(b[8*i:])
		}
		return s
	case TypeInt64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(le.Uint64(b[8*i:]))
		}
		return s
	case TypeFloat64:
		s := make([]float64, n)
		for i := range s {
			s[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return s
	}
	return nil
}

// tensorInfoMin is the fewest bytes a tensor directory entry takes: name length, n_dims, one
// dimension, type and offset.
const tensorInfoMin = 8 + 4 + 8 + 4 + 8

func parse(b []byte) (*File, error) {
	r := &reader{b: b}
	if err := r.need(4, "magic"); err != nil {
		return nil, err
	}
	if string(b[:4]) != Magic {
		return nil, fmt.Errorf("%w: magic %q, want %q", ErrFormat, b[:4], Magic)
	}
	r.off = 4
	version, err := r.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version&0xffff == 0 && bits.ReverseBytes32(version) <= 3:
		return nil, fmt.Errorf("%w: big-endian GGUF (version %d)", ErrUnsupported, bits.ReverseBytes32(version))
	case version == 1:
		return nil, fmt.Errorf("%w: GGUF version 1", ErrUnsupported)
	default:
		return nil, fmt.Errorf("%w: version %d (want 2 or 3)", ErrFormat, version)
	}
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	if nKV > uint64(r.left()/(8+4+1)) {
		return nil, fmt.Errorf("%w: %d metadata entries cannot fit in %d bytes", ErrFormat, nKV, r.left())
	}
	f := &File{Version: version, Alignment: DefaultAlignment, kv: map[string]int{}, ti: map[string]int{}}
	f.KV = make([]KV, 0, nKV)
	for i := 0; i < int(nKV); i++ {
		at := r.off
		key, err := r.str("key")
		if err != nil {
			return nil, err
		}
		if _, dup := f.kv[key]; dup {
			return nil, fmt.Errorf("%w: duplicate key %q at byte %d", ErrFormat, key, at)
		}
		t, err := r.valueType("value type of " + key)
		if err != nil {
			return nil, err
		}
		v, err := r.value(t, 0)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		f.kv[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.Any().(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("%w: general.alignment %v (%s) must be a power of two uint32", ErrFormat, v, v.Type)
		}
		f.Alignment = uint64(a)
	}
	if nTensors > uint64(r.left()/tensorInfoMin) {
		return nil, fmt.Errorf("%w: %d tensors cannot fit in %d bytes", ErrFormat, nTensors, r.left())
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := 0; i < int(nTensors); i++ {
		t, err := r.tensorInfo(f.Alignment)
		if err != nil {
			return nil, err
		}
		if _, dup := f.ti[t.Name]; dup {
			return nil, fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
		}
		f.ti[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	// The data section starts at the next multiple of the alignment.
	start := (uint64(r.off) + f.Alignment - 1) / f.Alignment * f.Alignment
	f.DataOffset = int64(start)
	if len(f.Tensors) == 0 {
		return f, nil
	}
	if start > uint64(len(b)) {
		return nil, fmt.Errorf("%w: data section at byte %d is beyond the end of the file (%d bytes)", ErrFormat, start, len(b))
	}
	dataLen := uint64(len(b)) - start
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int {
		a, b := f.Tensors[i].Offset, f.Tensors[j].Offset
		switch {
		case a < b:
			return -1
		case a > b:
			return 1
		}
		return 0
	})
	var end uint64
	var prev string
	for _, i := range order {
		t := f.Tensors[i]
		size := t.Size()
		if t.Offset > dataLen || size > dataLen-t.Offset {
			return nil, fmt.Errorf("%w: tensor %q (%d bytes at data offset %d) extends beyond the file (%d data bytes)", ErrFormat, t.Name, size, t.Offset, dataLen)
		}
		if size > 0 && t.Offset < end {
			return nil, fmt.Errorf("%w: tensors %q and %q overlap", ErrFormat, prev, t.Name)
		}
		if size > 0 {
			end, prev = t.Offset+size, t.Name
		}
	}
	return f, nil
}

func (r *reader) tensorInfo(align uint64) (TensorInfo, error) {
	name, err := r.str("tensor name")
	if err != nil {
		return TensorInfo{}, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: tensor %q: "+format, append([]any{ErrFormat, name}, a...)...)
	}
	nd, err := r.u32("n_dims")
	if err != nil {
		return TensorInfo{}, err
	}
	if nd < 1 || nd > MaxDims {
		return TensorInfo{}, bad("%d dimensions (1 to %d)", nd, MaxDims)
	}
	t := TensorInfo{Name: name, Dims: make([]uint64, nd)}
	n := uint64(1)
	for i := range t.Dims {
		d, err := r.u64("dimension")
		if err != nil {
			return TensorInfo{}, err
		}
		hi, lo := bits.Mul64(n, d)
		if d > math.MaxInt64 || hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, bad("dimensions %v overflow", append(t.Dims[:i:i], d))
		}
		if d != 0 { // a zero dimension must not hide an overflow of the others
			n = lo
		}
		t.Dims[i] = d
	}
	typ, err := r.u32("tensor type")
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = Type(typ)
	if !t.Type.Known() {
		return TensorInfo{}, bad("unknown type %d", typ)
	}
	if t.Dims[0]%uint64(t.Type.BlockSize()) != 0 {
		return TensorInfo{}, bad("innermost dimension %d is not a multiple of the %s block size %d", t.Dims[0], t.Type, t.Type.BlockSize())
	}
	if hi, lo := bits.Mul64(n/uint64(t.Type.BlockSize()), uint64(t.Type.TypeSize())); hi != 0 || lo > math.MaxInt64 {
		return TensorInfo{}, bad("%v %s is too large", t.Dims, t.Type)
	}
	if t.Offset, err = r.u64("tensor offset"); err != nil {
		return TensorInfo{}, err
	}
	if t.Offset%align != 0 {
		return TensorInfo{}, bad("offset %d is not a multiple of the alignment %d", t.Offset, align)
	}
	return t, nil
}
