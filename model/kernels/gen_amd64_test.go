package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The committed assembly and stubs must be what internal/gen writes.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/gen", "-out", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run internal/gen: %v\n%s", err, out)
	}
	for _, f := range []string{"kernels_amd64.s", "stubs_amd64.go", "quant_amd64.s", "vnni_amd64.s"} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate in model/kernels", f)
		}
	}
}

// A plain build uses the best level this CPU offers.
func TestDefaultImplementation(t *testing.T) {
	if os.Getenv("CITIZEN_KERNELS") != "" {
		t.Skip("CITIZEN_KERNELS overrides the choice")
	}
	want := "portable"
	switch {
	case hasAVX512():
		want = "avx512"
	case avx2OK():
		want = "avx2"
	}
	if got := Implementation(); got != want {
		t.Fatalf("Implementation() = %q, want %q", got, want)
	}
}
