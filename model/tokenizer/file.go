package tokenizer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Identifiers written in, and required of, tokenizer.json (see the package doc).
const (
	fileFormat   = "citizen-byte-bpe"
	fileVersion  = 1
	pretokenizer = "citizen-words-v1"
)

type fileJSON struct {
	Format       string     `json:"format"`
	Version      int        `json:"version"`
	Pretokenizer string     `json:"pretokenizer"`
	Specials     []string   `json:"specials"`
	Merges       [][2]int32 `json:"merges"`
	Vocab        []string   `json:"vocab"`
}

// Save writes the tokenizer in the tokenizer.json format. The output is
// deterministic.
func (t *Tokenizer) Save(w io.Writer) error {
	f := fileJSON{
		Format:       fileFormat,
		Version:      fileVersion,
		Pretokenizer: pretokenizer,
		Specials:     t.specials,
		Merges:       t.merges,
		Vocab:        make([]string, len(t.vocab)),
	}
	if f.Merges == nil {
		f.Merges = [][2]int32{}
	}
	for i, b := range t.vocab {
		f.Vocab[i] = hex.EncodeToString(b)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("tokenizer: save: %w", err)
	}
	return nil
}

// SaveFile writes the tokenizer to path atomically (temporary file + rename).
func (t *Tokenizer) SaveFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = t.Save(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	return nil
}

// Load reads a tokenizer written by Save. A file of another format or
// version fails with ErrVersion; a malformed or inconsistent one (bad JSON,
// missing default specials, merges referring to later ids, a vocab that does
// not match the merges) fails with ErrCorrupt.
func Load(r io.Reader) (*Tokenizer, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f fileJSON
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if f.Format != fileFormat || f.Version != fileVersion || f.Pretokenizer != pretokenizer {
		return nil, fmt.Errorf("%w: format %q version %d pretokenizer %q (want %q %d %q)",
			ErrVersion, f.Format, f.Version, f.Pretokenizer, fileFormat, fileVersion, pretokenizer)
	}
	if len(f.Specials) < len(DefaultSpecials) {
		return nil, fmt.Errorf("%w: %d specials, need the %d defaults", ErrCorrupt, len(f.Specials), len(DefaultSpecials))
	}
	for i, s := range DefaultSpecials {
		if f.Specials[i] != s {
			return nil, fmt.Errorf("%w: special %d is %q, want %q", ErrCorrupt, NumBytes+i, f.Specials[i], s)
		}
	}
	t, err := build(f.Specials, f.Merges)
	if err != nil {
		return nil, err
	}
	if len(f.Vocab) != len(t.vocab) {
		return nil, fmt.Errorf("%w: vocab has %d entries, merges and specials give %d", ErrCorrupt, len(f.Vocab), len(t.vocab))
	}
	for i, h := range f.Vocab {
		b, err := hex.DecodeString(h)
		if err != nil || !bytes.Equal(b, t.vocab[i]) {
			return nil, fmt.Errorf("%w: vocab entry %d (%q) does not match its merge", ErrCorrupt, i, h)
		}
	}
	return t, nil
}

// LoadFile reads the tokenizer saved at path.
func LoadFile(path string) (*Tokenizer, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer fd.Close()
	t, err := Load(fd)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

// Fingerprint returns a short stable identifier of the tokenizer: the first
// 16 hex digits of the SHA-256 of its saved form. Events record it as the
// tokenizer version.
func (t *Tokenizer) Fingerprint() string {
	h := sha256.New()
	_ = t.Save(h) // writing to a hash cannot fail
	return hex.EncodeToString(h.Sum(nil))[:16]
}
