package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Tensor is a tensor to write: its directory entry (Offset is ignored; Encode lays tensors out
// in order) and its raw bytes, exactly Info.Size() of them.
type Tensor struct {
	Info TensorInfo
	Data []byte
}

// Encode writes a GGUF version 3 file with the metadata kvs (in order) and the tensors (in
// order, each aligned to general.alignment when kvs sets it, else to DefaultAlignment). Keys and
// tensor names must be unique.
func Encode(w io.Writer, kvs []KV, tensors []Tensor) error {
	align := uint64(DefaultAlignment)
	keys := map[string]bool{}
	for _, kv := range kvs {
		if keys[kv.Key] {
			return fmt.Errorf("%w: duplicate key %q", ErrFormat, kv.Key)
		}
		keys[kv.Key] = true
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.Any().(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("%w: general.alignment %v must be a power of two uint32", ErrFormat, kv.Value)
			}
			align = uint64(a)
		}
	}
	var h bytes.Buffer
	h.WriteString(Magic)
	le := binary.LittleEndian
	put32 := func(x uint32) { h.Write(le.AppendUint32(nil, x)) }
	put64 := func(x uint64) { h.Write(le.AppendUint64(nil, x)) }
	putStr := func(s string) { put64(uint64(len(s))); h.WriteString(s) }
	put32(3)
	put64(uint64(len(tensors)))
	put64(uint64(len(kvs)))
	for _, kv := range kvs {
		putStr(kv.Key)
		put32(uint32(kv.Value.Type))
		if err := encodeValue(&h, kv.Value, 0); err != nil {
			return fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	names := map[string]bool{}
	var off uint64
	offsets := make([]uint64, len(tensors))
	for i, t := range tensors {
		ti := t.Info
		if names[ti.Name] {
			return fmt.Errorf("%w: duplicate tensor %q", ErrFormat, ti.Name)
		}
		names[ti.Name] = true
		if len(ti.Dims) < 1 || len(ti.Dims) > MaxDims || !ti.Type.Known() || ti.Dims[0]%uint64(ti.Type.BlockSize()) != 0 {
			return fmt.Errorf("%w: tensor %q: dims %v of type %s", ErrFormat, ti.Name, ti.Dims, ti.Type)
		}
		if uint64(len(t.Data)) != ti.Size() {
			return fmt.Errorf("%w: tensor %q: %d bytes, %v %s needs %d", ErrFormat, ti.Name, len(t.Data), ti.Dims, ti.Type, ti.Size())
		}
		putStr(ti.Name)
		put32(uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			put64(d)
		}
		put32(uint32(ti.Type))
		offsets[i] = off
		put64(off)
		off = pad(off+ti.Size(), align)
	}
	h.Write(make([]byte, pad(uint64(h.Len()), align)-uint64(h.Len())))
	if _, err := w.Write(h.Bytes()); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	var pos uint64
	for i, t := range tensors {
		if gap := offsets[i] - pos; gap > 0 {
			if _, err := w.Write(make([]byte, gap)); err != nil {
				return fmt.Errorf("gguf: write: %w", err)
			}
		}
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("gguf: write: %w", err)
		}
		pos = offsets[i] + uint64(len(t.Data))
	}
	if gap := off - pos; gap > 0 && len(tensors) > 0 {
		if _, err := w.Write(make([]byte, gap)); err != nil {
			return fmt.Errorf("gguf: write: %w", err)
		}
	}
	return nil
}

// Marshal is Encode into memory.
func Marshal(kvs []KV, tensors []Tensor) ([]byte, error) {
	var b bytes.Buffer
	if err := Encode(&b, kvs, tensors); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteFile writes the file atomically (a temporary file in the same folder, synced, renamed).
func WriteFile(path string, kvs []KV, tensors []Tensor) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = Encode(f, kvs, tensors); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

func encodeValue(w *bytes.Buffer, v Value, depth int) error {
	le := binary.LittleEndian
	var b [8]byte
	switch x := v.v.(type) {
	case uint8:
		w.WriteByte(x)
	case int8:
		w.WriteByte(byte(x))
	case bool:
		if x {
			w.WriteByte(1)
		} else {
			w.WriteByte(0)
		}
	case uint16:
		w.Write(le.AppendUint16(b[:0], x))
	case int16:
		w.Write(le.AppendUint16(b[:0], uint16(x)))
	case uint32:
		w.Write(le.AppendUint32(b[:0], x))
	case int32:
		w.Write(le.AppendUint32(b[:0], uint32(x)))
	case float32:
		w.Write(le.AppendUint32(b[:0], math.Float32bits(x)))
	case uint64:
		w.Write(le.AppendUint64(b[:0], x))
	case int64:
		w.Write(le.AppendUint64(b[:0], uint64(x)))
	case float64:
		w.Write(le.AppendUint64(b[:0], math.Float64bits(x)))
	case string:
		w.Write(le.AppendUint64(b[:0], uint64(len(x))))
		w.WriteString(x)
	default:
		if v.Type != TypeArray {
			return fmt.Errorf("%w: invalid value %v", ErrType, v.v)
		}
		if depth >= maxNesting {
			return fmt.Errorf("%w: arrays nested deeper than %d", ErrFormat, maxNesting)
		}
		w.Write(le.AppendUint32(b[:0], uint32(v.Elem)))
		w.Write(le.AppendUint64(b[:0], uint64(v.Len())))
		return encodeElems(w, v, depth)
	}
	return nil
}

func encodeElems(w *bytes.Buffer, v Value, depth int) error {
	each := func(n int, at func(int) any) error {
		for i := 0; i < n; i++ {
			if err := encodeValue(w, Value{Type: v.Elem, v: at(i)}, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	switch s := v.v.(type) {
	case []uint8:
		w.Write(s)
		return nil
	case []Value:
		for _, e := range s {
			if e.Type != TypeArray {
				return fmt.Errorf("%w: an array of arrays holds a %s", ErrType, e.Type)
			}
			w.Write(binary.LittleEndian.AppendUint32(nil, uint32(e.Elem)))
			w.Write(binary.LittleEndian.AppendUint64(nil, uint64(e.Len())))
			if depth+1 >= maxNesting {
				return fmt.Errorf("%w: arrays nested deeper than %d", ErrFormat, maxNesting)
			}
			if err := encodeElems(w, e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case []int8:
		return each(len(s), func(i int) any { return s[i] })
	case []uint16:
		return each(len(s), func(i int) any { return s[i] })
	case []int16:
		return each(len(s), func(i int) any { return s[i] })
	case []uint32:
		return each(len(s), func(i int) any { return s[i] })
	case []int32:
		return each(len(s), func(i int) any { return s[i] })
	case []float32:
		return each(len(s), func(i int) any { return s[i] })
	case []bool:
		return each(len(s), func(i int) any { return s[i] })
	case []string:
		return each(len(s), func(i int) any { return s[i] })
	case []uint64:
		return each(len(s), func(i int) any { return s[i] })
	case []int64:
		return each(len(s), func(i int) any { return s[i] })
	case []float64:
		return each(len(s), func(i int) any { return s[i] })
	}
	return fmt.Errorf("%w: invalid array %T", ErrType, v.v)
}
