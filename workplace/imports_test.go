package workplace

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The workplace is a client: no file under workplace/ may import a citizen package other than
// citizen/workplace and its subpackages.
func TestImportIsolation(t *testing.T) {
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImport(p) {
				t.Errorf("%s imports %s; the workplace may only use citizen over HTTP", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("walked only %d Go files; is the test running in workplace/?", files)
	}
}

func forbiddenImport(p string) bool {
	if p != "citizen" && !strings.HasPrefix(p, "citizen/") {
		return false
	}
	return p != "citizen/workplace" && !strings.HasPrefix(p, "citizen/workplace/")
}

func TestForbiddenImport(t *testing.T) {
	for p, want := range map[string]bool{
		"citizen/events": true, "citizen": true, "citizen/gateway/api": true,
		"citizen/workplace": false, "citizen/workplace/x": false, "citizenship": false,
		"citizen/workplacex": true, "fmt": false, "github.com/x/citizen": false,
	} {
		if got := forbiddenImport(p); got != want {
			t.Errorf("forbiddenImport(%q) = %v, want %v", p, got, want)
		}
	}
}
