package gguf

import (
	"fmt"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	TokenUndefined   = 0
	TokenNormal      = 1
	TokenUnknown     = 2
	TokenControl     = 3
	TokenUserDefined = 4
	TokenUnused      = 5
	TokenByte        = 6
)

// Tokenizer is the tokenizer metadata of a file, typed. Optional ids and flags are nil when the
// file does not set them. Slices are the File's own and must not be modified.
type Tokenizer struct {
	Model string // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
	Pre   string // tokenizer.ggml.pre: the pre-tokenizer ("smollm", "llama-bpe", ...); "" if absent

	Tokens     []string  // tokenizer.ggml.tokens: the vocabulary, indexed by id
	TokenTypes []int     // tokenizer.ggml.token_type (TokenNormal, TokenControl, ...), nil if absent
	Scores     []float32 // tokenizer.ggml.scores (SentencePiece), nil if absent
	Merges     []string  // tokenizer.ggml.merges: "left right" pairs in rank order, nil if absent

	BOSID, EOSID, UnknownID, PaddingID, EOTID *int // tokenizer.ggml.{bos,eos,unknown,padding,eot}_token_id

	AddBOS, AddEOS, AddSpacePrefix *bool // tokenizer.ggml.{add_bos_token,add_eos_token,add_space_prefix}

	ChatTemplate string // tokenizer.chat_template (Jinja), "" if absent
}

// Tokenizer returns the tokenizer metadata. tokenizer.ggml.model and tokenizer.ggml.tokens are
// required; every id given must index Tokens, and token_type and scores, when present, must have
// one entry per token.
func (f *File) Tokenizer() (*Tokenizer, error) {
	var t Tokenizer
	var err error
	if t.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return nil, err
	}
	if t.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return nil, err
	}
	n := len(t.Tokens)
	if t.Pre, err = f.optString("tokenizer.ggml.pre"); err != nil {
		return nil, err
	}
	if t.ChatTemplate, err = f.optString("tokenizer.chat_template"); err != nil {
		return nil, err
	}
	if _, ok := f.Get("tokenizer.ggml.merges"); ok {
		if t.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
	}
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		if t.TokenTypes, ok = v.Ints(); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.token_type is %s of %s, want integers", ErrType, v.Type, v.Elem)
		}
		if len(t.TokenTypes) != n {
			return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrFormat, len(t.TokenTypes), n)
		}
	}
	if v, ok := f.Get("tokenizer.ggml.scores"); ok {
		if t.Scores, ok = v.Float32s(); !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.scores is %s of %s, want floats", ErrType, v.Type, v.Elem)
		}
		if len(t.Scores) != n {
			return nil, fmt.Errorf("%w: %d token scores for %d tokens", ErrFormat, len(t.Scores), n)
		}
	}
	for _, id := range []struct {
		key string
		dst **int
	}{
		{"tokenizer.ggml.bos_token_id", &t.BOSID},
		{"tokenizer.ggml.eos_token_id", &t.EOSID},
		{"tokenizer.ggml.unknown_token_id", &t.UnknownID},
		{"tokenizer.ggml.padding_token_id", &t.PaddingID},
		{"tokenizer.ggml.eot_token_id", &t.EOTID},
	} {
		if _, ok := f.Get(id.key); !ok {
			continue
		}
		v, err := f.Int(id.key)
		if err != nil {
			return nil, err
		}
		if v < 0 || v >= n {
			return nil, fmt.Errorf("%w: %s %d is not a token id (vocabulary of %d)", ErrFormat, id.key, v, n)
		}
		*id.dst = &v
	}
	for _, fl := range []struct {
		key string
		dst **bool
	}{
		{"tokenizer.ggml.add_bos_token", &t.AddBOS},
		{"tokenizer.ggml.add_eos_token", &t.AddEOS},
		{"tokenizer.ggml.add_space_prefix", &t.AddSpacePrefix},
	} {
		if _, ok := f.Get(fl.key); !ok {
			continue
		}
		b, err := f.Bool(fl.key)
		if err != nil {
			return nil, err
		}
		*fl.dst = &b
	}
	return &t, nil
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.Str()
	if !ok {
		return "", typeErr(key, v, "a string")
	}
	return s, nil
}

// Strings returns the string-array value of key (the File's own slice).
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.Strings()
	if !ok {
		return nil, typeErr(key, v, "an array of strings")
	}
	return s, nil
}

// Int returns an integer value of key (any width or signedness) that fits in an int.
func (f *File) Int(key string) (int, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.Int()
	if !ok {
		return 0, typeErr(key, v, "an integer that fits an int")
	}
	return i, nil
}

// Float returns a float32 or float64 value of key.
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, typeErr(key, v, "a float")
	}
	return x, nil
}

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.Bool()
	if !ok {
		return false, typeErr(key, v, "a bool")
	}
	return b, nil
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("%w: key %q", ErrNotFound, key)
	}
	return v, nil
}

func (f *File) optString(key string) (string, error) {
	if _, ok := f.Get(key); !ok {
		return "", nil
	}
	return f.String(key)
}

func typeErr(key string, v Value, want string) error {
	t := v.Type.String()
	if v.Type == TypeArray {
		t = "array of " + v.Elem.String()
	}
	return fmt.Errorf("%w: %s is %s %v, want %s", ErrType, key, t, v, want)
}
