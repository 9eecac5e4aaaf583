package feedback

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
)

// generalRecord is one record of the general labelled set
// (testdata/general, see GUIDE.md).
type generalRecord struct {
	ID         string `json:"id"`
	Lang       string `json:"lang"`
	Kind       string `json:"kind"`
	Question   string `json:"question"`
	Answer     string `json:"answer"`
	Text       string `json:"text"`
	Polarity   int    `json:"polarity"`
	Correction string `json:"correction"`
	Split      string `json:"split"`
}

func loadGeneral(t testing.TB, path string) []generalRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []generalRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r generalRecord
		dec := json.NewDecoder(bytesReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		if r.Polarity < -1 || r.Polarity > 1 {
			t.Fatalf("%s:%d: polarity %d", path, line, r.Polarity)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
