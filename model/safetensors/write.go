package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Write writes tensors and optional metadata to w in safetensors format.
// Tensors are laid out in name order; the input slice is not modified. The
// output is deterministic (see the package doc). It fails with
// ErrDuplicateName, ErrInvalidName, ErrUnknownDType or ErrSizeMismatch before
// writing anything if a tensor is invalid.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, order, err := encodeHeader(tensors, metadata)
	if err != nil {
		return err
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(header)))
	if _, err := w.Write(prefix[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, i := range order {
		if len(tensors[i].Data) == 0 {
			continue
		}
		if _, err := w.Write(tensors[i].Data); err != nil {
			return fmt.Errorf("safetensors: write: %w", err)
		}
	}
	return nil
}

// Marshal returns the bytes that Write would write.
func Marshal(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	if err := Write(&buf, tensors, metadata); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes the tensors to path atomically: it writes a temporary file
// in the same directory, syncs it and renames it over path.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = Write(f, tensors, metadata); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// encodeHeader validates the tensors and returns the padded JSON header and
// the order (indices into tensors) in which their data is laid out.
func encodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, []int, error) {
	order := make([]int, len(tensors))
	for i := range tensors {
		if err := tensors[i].validate(); err != nil {
			return nil, nil, err
		}
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return tensors[order[a]].Name < tensors[order[b]].Name })
	for k := 1; k < len(order); k++ {
		if tensors[order[k]].Name == tensors[order[k-1]].Name {
			return nil, nil, fmt.Errorf("%w: %q", ErrDuplicateName, tensors[order[k]].Name)
		}
	}

	var h bytes.Buffer
	h.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("%w: metadata %q is not valid UTF-8", ErrInvalidName, k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.WriteString(`"__metadata__":{`)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeJSONString(&h, k)
			h.WriteByte(':')
			writeJSONString(&h, metadata[k])
		}
		h.WriteByte('}')
		first = false
	}
	var off uint64
	for _, i := range order {
		t := &tensors[i]
		if !first {
			h.WriteByte(',')
		}
		first = false
		writeJSONString(&h, t.Name)
		h.WriteString(`:{"dtype":"`)
		h.WriteString(string(t.DType))
		h.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		end := off + uint64(len(t.Data))
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatUint(off, 10))
		h.WriteByte(',')
		h.WriteString(strconv.FormatUint(end, 10))
		h.WriteString("]}")
		off = end
	}
	h.WriteByte('}')
	for (8+h.Len())%8 != 0 {
		h.WriteByte(' ')
	}
	return h.Bytes(), order, nil
}

// writeJSONString writes s (valid UTF-8) as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // cannot fail for a string
	b.Truncate(b.Len() - 1) // Encode appends a newline
}
