package tokenizer

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// goSource returns about n bytes of real, varied text: the Go distribution's
// own source files (English comments and code), in a fixed order, or nil if
// they are not installed.
func goSource(n int) []string {
	root := filepath.Join(runtime.GOROOT(), "src")
	var docs []string
	total := 0
	errStop := fmt.Errorf("enough")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.Contains(p, "testdata") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		docs = append(docs, string(data))
		total += len(data)
		if total >= n {
			return errStop
		}
		return nil
	})
	if err != errStop {
		return nil
	}
	return docs
}

func joinedLen(docs []string) int {
	n := 0
	for _, d := range docs {
		n += len(d)
	}
	return n
}

// BenchmarkEncode measures encoding throughput with a warm word cache (the
// steady state of a server) and a cold one, on synthetic chat-like text and on
// real Go source.
func BenchmarkEncode(b *testing.B) {
	corpora := map[string]string{"synthetic": strings.Join(synthCorpus(1<<20, 11), "")}
	var tokGo *Tokenizer
	if docs := goSource(6 << 20); docs != nil {
		var err error
		// Train on the first 5 MB, encode the next 1 MB.
		train, test := splitDocs(docs, 5<<20)
		if tokGo, err = Train(train, 8192, nil); err != nil {
			b.Fatal(err)
		}
		corpora["gosrc"] = strings.Join(test, "")
	}
	for _, name := range []string{"synthetic", "gosrc"} {
		text, ok := corpora[name]
		if !ok {
			continue
		}
		tok := trained(b)
		if name == "gosrc" {
			tok = tokGo
		}
		saved := saveString(b, tok)
		for _, mode := range []string{"warm", "cold"} {
			b.Run(fmt.Sprintf("text=%s/cache=%s", name, mode), func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				tokens := 0
				for i := 0; i < b.N; i++ {
					t := tok
					if mode == "cold" {
						b.StopTimer()
						t, _ = Load(strings.NewReader(saved))
						b.StartTimer()
					} else if i == 0 {
						b.StopTimer()
						t.Encode(text)
						b.StartTimer()
					}
					tokens += len(t.Encode(text))
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(float64(len(text))*float64(b.N)/float64(tokens), "bytes/token")
			})
		}
	}
}

func splitDocs(docs []string, n int) (first, rest []string) {
	total := 0
	for i, d := range docs {
		if total >= n {
			return docs[:i], docs[i:]
		}
		total += len(d)
	}
	return docs, nil
}

func saveString(b *testing.B, t *Tokenizer) string {
	var sb strings.Builder
	if err := t.Save(&sb); err != nil {
		b.Fatal(err)
	}
	return sb.String()
}

// BenchmarkTrain measures training time for a corpus size and vocabulary, on
// synthetic text (few distinct words) and on real Go source (many).
func BenchmarkTrain(b *testing.B) {
	for _, c := range []struct {
		text  string
		mb    int
		vocab int
	}{
		{"synthetic", 5, 4096},
		{"gosrc", 5, 8192},
		{"gosrc", 20, 8192},
	} {
		b.Run(fmt.Sprintf("text=%s/size=%dMB/vocab=%d", c.text, c.mb, c.vocab), func(b *testing.B) {
			var docs []string
			if c.text == "synthetic" {
				docs = synthCorpus(c.mb<<20, 12)
			} else {
				docs = goSource(c.mb << 20)
			}
			if docs == nil {
				b.Skip("Go source not installed")
			}
			b.SetBytes(int64(joinedLen(docs)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Train(docs, c.vocab, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/op")
		})
	}
}
