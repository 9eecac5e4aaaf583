package grammar

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// ggufVocab reads the token strings of a GGUF file's GPT-2 byte-level tokenizer (metadata only)
// for the benchmark: control tokens get no bytes, byte-level strings are decoded to raw bytes.
func ggufVocab(path string) ([][]byte, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	return readGGUFVocab(bufio.NewReaderSize(f, 1<<20))
}

func readGGUFVocab(r io.Reader) ([][]byte, int, error) {
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KVs     uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, 0, err
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version < 2 || hdr.KVs > 1<<16 {
		return nil, 0, errors.New("not a GGUF v2+ file")
	}
	u32 := func() (uint32, error) {
		var x uint32
		err := binary.Read(r, binary.LittleEndian, &x)
		return x, err
	}
	u64 := func() (uint64, error) {
		var x uint64
		err := binary.Read(r, binary.LittleEndian, &x)
		return x, err
	}
	str := func() ([]byte, error) {
		n, err := u64()
		if err != nil {
			return nil, err
		}
		if n > 1<<20 {
			return nil, errors.New("string too long")
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	size := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	// value reads one value of type typ: its strings, or its integers.
	var value func(typ uint32) (strs [][]byte, ints []int64, err error)
	value = func(typ uint32) ([][]byte, []int64, error) {
		switch {
		case typ == 8:
			s, err := str()
			return [][]byte{s}, nil, err
		case typ == 9:
			et, err := u32()
			if err != nil {
				return nil, nil, err
			}
			n, err := u64()
			if err != nil || n > 1<<24 {
				return nil, nil, fmt.Errorf("array: %v (%d)", err, n)
			}
			var ss [][]byte
			var is []int64
			for i := uint64(0); i < n; i++ {
				s, x, err := value(et)
				if err != nil {
					return nil, nil, err
				}
				ss, is = append(ss, s...), append(is, x...)
			}
			return ss, is, nil
		case size[typ] > 0:
			b := make([]byte, size[typ])
			if _, err := io.ReadFull(r, b); err != nil {
				return nil, nil, err
			}
			var x int64
			switch len(b) {
			case 1:
				x = int64(b[0])
			case 2:
				x = int64(binary.LittleEndian.Uint16(b))
			case 4:
				x = int64(int32(binary.LittleEndian.Uint32(b)))
			case 8:
				x = int64(binary.LittleEndian.Uint64(b))
			}
			return nil, []int64{x}, nil
		}
		return nil, nil, fmt.Errorf("unknown value type %d", typ)
	}
	var tokens [][]byte
	var types []int64
	eos := -1
	for i := uint64(0); i < hdr.KVs; i++ {
		key, err := str()
		if err != nil {
			return nil, 0, err
		}
		typ, err := u32()
		if err != nil {
			return nil, 0, err
		}
		ss, is, err := value(typ)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", key, err)
		}
		switch string(key) {
		case "tokenizer.ggml.tokens":
			tokens = ss
		case "tokenizer.ggml.token_type":
			types = is
		case "tokenizer.ggml.eos_token_id":
			if len(is) == 1 {
				eos = int(is[0])
			}
		}
	}
	if len(tokens) == 0 {
		return nil, 0, errors.New("no tokenizer.ggml.tokens")
	}
	dec := byteDecoder()
	out := make([][]byte, len(tokens))
	for i, t := range tokens {
		if i < len(types) && types[i] == 3 { // control
			continue
		}
		var b []byte
		for _, c := range string(t) {
			if x, ok := dec[c]; ok {
				b = append(b, x)
			} else {
				b = append(b, string(c)...)
			}
		}
		out[i] = b
	}
	if eos >= len(out) {
		eos = -1
	}
	return out, eos, nil
}

// byteDecoder inverts GPT-2's bytes_to_unicode.
func byteDecoder() map[rune]byte {
	m := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			m[rune(b)] = byte(b)
		} else {
			m[rune(256+n)] = byte(b)
			n++
		}
	}
	return m
}

func TestGGUFVocab(t *testing.T) {
	path := os.Getenv("CITIZEN_SMOLLM2_GGUF")
	if path == "" {
		t.Skip("set CITIZEN_SMOLLM2_GGUF to SmolLM2's GGUF file to run")
	}
	toks, eos, err := ggufVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 49152 || eos != 2 {
		t.Fatalf("%d tokens, eos %d", len(toks), eos)
	}
	v, err := NewVocab(toks, eos)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 11))
	g, err := Compile([]byte(nestedSchema))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		for _, gr := range []*Grammar{JSON(), g} {
			out, done := generate(t, gr, v, r, 300, genCheck{reference: true, advance: 5, closing: true})
			if !done {
				t.Fatalf("%q: no EOS", out)
			}
			if gr == g {
				if err := validateJSON([]byte(nestedSchema), out); err != nil {
					t.Fatalf("%q: %v", out, err)
				}
			}
		}
	}
	t.Logf("%d tokens, %d trie nodes, longest %d bytes", v.Size(), v.Nodes(), v.maxLen)
}

func FuzzGGUFVocab(f *testing.F) {
	var b bytes.Buffer
	w := func(vals ...any) {
		for _, v := range vals {
			_ = binary.Write(&b, binary.LittleEndian, v)
		}
	}
	b.WriteString("GGUF")
	w(uint32(3), uint64(0), uint64(2))
	writeStr := func(s string) {
		w(uint64(len(s)))
		b.WriteString(s)
	}
	writeStr("tokenizer.ggml.tokens")
	w(uint32(9), uint32(8), uint64(2))
	writeStr("Ġa")
	writeStr("{\"")
	writeStr("tokenizer.ggml.eos_token_id")
	w(uint32(4), uint32(1))
	seed := b.Bytes()
	toks, eos, err := readGGUFVocab(bytes.NewReader(seed))
	if err != nil || len(toks) != 2 || string(toks[0]) != " a" || eos != 1 {
		f.Fatalf("seed: %q %d %v", toks, eos, err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, eos, err := readGGUFVocab(bytes.NewReader(data))
		if err == nil {
			if _, err := NewVocab(toks, eos); err != nil {
				t.Fatal(err)
			}
		}
	})
}
