package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	tok := trained(t)
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := tok.SaveFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := tok.Save(&a); err != nil {
		t.Fatal(err)
	}
	if err := back.Save(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("save/load/save differs")
	}
	if tok.Fingerprint() != back.Fingerprint() || len(tok.Fingerprint()) != 16 {
		t.Errorf("fingerprints %q %q", tok.Fingerprint(), back.Fingerprint())
	}
	for _, s := range synthCorpus(10_000, 5) {
		if !reflect.DeepEqual(tok.Encode(s), back.Encode(s)) {
			t.Fatalf("loaded tokenizer encodes %q differently", s)
		}
	}
	other, _ := Train(synthCorpus(10_000, 6), 400, nil)
	if other.Fingerprint() == tok.Fingerprint() {
		t.Error("different tokenizers share a fingerprint")
	}
}

func TestLoadRejectsCorruptFiles(t *testing.T) {
	tok, err := Train([]string{"ab ab ab cd cd ef"}, 270, []string{"<|extra|>"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tok.Save(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	if _, err := Load(strings.NewReader(good)); err != nil {
		t.Fatalf("good file rejected: %v", err)
	}
	// edit decodes the good file, applies f and re-encodes it.
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(good), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name string
		file string
		want error
	}{
		{"empty", "", ErrCorrupt},
		{"truncated", good[:len(good)/2], ErrCorrupt},
		{"not json", "hello", ErrCorrupt},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), ErrCorrupt},
		{"wrong version", edit(func(m map[string]any) { m["version"] = 2 }), ErrVersion},
		{"wrong format", edit(func(m map[string]any) { m["format"] = "gpt2" }), ErrVersion},
		{"wrong pretokenizer", edit(func(m map[string]any) { m["pretokenizer"] = "x" }), ErrVersion},
		{"missing default special", edit(func(m map[string]any) { m["specials"] = []any{"<|bos|>"} }), ErrCorrupt},
		{"reordered specials", edit(func(m map[string]any) {
			s := m["specials"].([]any)
			s[0], s[1] = s[1], s[0]
		}), ErrCorrupt},
		{"repeated special", edit(func(m map[string]any) {
			m["specials"] = append(m["specials"].([]any), "<|extra|>")
		}), ErrCorrupt},
		{"merge uses future id", edit(func(m map[string]any) {
			m["merges"].([]any)[0] = []any{97, 300}
		}), ErrCorrupt},
		{"merge uses special", edit(func(m map[string]any) {
			m["merges"].([]any)[0] = []any{97, TokenUser}
		}), ErrCorrupt},
		{"repeated merge", edit(func(m map[string]any) {
			ms := m["merges"].([]any)
			ms[1] = ms[0]
		}), ErrCorrupt},
		{"vocab edited", edit(func(m map[string]any) { m["vocab"].([]any)[266] = "7a7a" }), ErrCorrupt},
		{"vocab not hex", edit(func(m map[string]any) { m["vocab"].([]any)[5] = "zz" }), ErrCorrupt},
		{"vocab short", edit(func(m map[string]any) {
			v := m["vocab"].([]any)
			m["vocab"] = v[:len(v)-1]
		}), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(strings.NewReader(c.file))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
