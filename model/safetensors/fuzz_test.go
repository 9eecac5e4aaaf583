package safetensors

import (
	"bytes"
	"testing"
)

// FuzzRead checks that Read never panics on hostile input, that every
// allocation it makes is bounded by the input, and that whatever it accepts
// can be read completely and re-written into a file that reads back the same.
func FuzzRead(f *testing.F) {
	f.Add(fixture)
	f.Add(build(`{}`, 0))
	f.Add(build(`{"a":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]}}`, 4))
	f.Add(build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}`, 6))
	f.Add(build(`{"__metadata__":{"k":"v"},"x":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := ReadBytes(data)
		if err != nil {
			return
		}
		tensors, err := file.Tensors()
		if err != nil {
			t.Fatalf("accepted file but Tensors failed: %v", err)
		}
		total := 0
		for _, tn := range tensors {
			total += len(tn.Data)
			if _, err := tn.Float32(); err != nil && tn.DType.Size() == 0 {
				t.Fatalf("accepted unknown dtype %q", tn.DType)
			}
		}
		if total > len(data) {
			t.Fatalf("tensor bytes %d exceed file size %d", total, len(data))
		}
		out, err := Marshal(tensors, file.Metadata)
		if err != nil {
			t.Fatalf("re-marshal of accepted file failed: %v", err)
		}
		again, err := ReadBytes(out)
		if err != nil {
			t.Fatalf("re-read failed: %v", err)
		}
		t2, _ := again.Tensors()
		out2, err := Marshal(t2, again.Metadata)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("save/load/save not bit-exact (%v)", err)
		}
	})
}
