package reflection

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestScoreboardHandler(t *testing.T) {
	sb := NewScoreboard()
	sb.Apply(evalEvent(t, 0, evalSpec{id: "1", version: "v1", typ: "a", reward: 1}))
	sb.Apply(evalEvent(t, 1, evalSpec{id: "2", version: "v2", typ: "a", reward: -1}))
	srv := httptest.NewServer(ScoreboardHandler(sb))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "?version=v2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Rows []Row }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(body.Rows) != 1 || body.Rows[0].Version != "v2" || body.Rows[0].MeanReward != -1 {
		t.Errorf("%d %+v", resp.StatusCode, body)
	}
	resp2, _ := http.Post(srv.URL, "text/plain", nil)
	if resp2.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp2.StatusCode)
	}
	resp2.Body.Close()
}
