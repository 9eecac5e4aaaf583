package reflection

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"citizen/events"
)

// fakeSub delivers its events after the position, then waits for ctx.
type fakeSub struct {
	evs       []events.Event
	lastAfter chan uint64
}

func (f *fakeSub) Subscribe(ctx context.Context, after uint64, flt events.Filter, h events.Handler) error {
	f.lastAfter <- after
	for _, ev := range f.evs {
		if ev.Position > after && flt.Match(&ev) {
			if err := h(ctx, ev); err != nil {
				return err
			}
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

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

func TestStreamHandler(t *testing.T) {
	var evs []events.Event
	for i, v := range []string{"v1", "v2", "v1", "v2", "v1"} {
		ev := evalEvent(t, i, evalSpec{id: fmt.Sprint(i), version: v, typ: "a", reward: 0})
		ev.Position = uint64(i + 1)
		evs = append(evs, ev)
	}
	an, _ := events.Encode(&events.AnomalyDetected{Kind: KindLengthDrift, Version: "v1", TaskType: "a"}, events.Meta{Stream: "version-v1"})
	an.Position = 6
	evs = append(evs, an)
	sub := &fakeSub{evs: evs, lastAfter: make(chan uint64, 4)}
	srv := httptest.NewServer(StreamHandler(sub, nil))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"?version=v1", nil)
	req.Header.Set("Last-Event-ID", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	if after := <-sub.lastAfter; after != 1 {
		t.Errorf("subscribed after %d, want 1", after)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ids, types []string
	data := 0
	for data < 3 && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			ids = append(ids, strings.TrimPrefix(line, "id: "))
		case strings.HasPrefix(line, "event: "):
			types = append(types, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data++
			var ev events.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				t.Errorf("data: %v", err)
			}
		}
	}
	if strings.Join(ids, ",") != "3,5,6" || len(types) != 3 || types[2] != events.TypeAnomalyDetected {
		t.Errorf("ids %v types %v (want v1 events after 1 and the anomaly)", ids, types)
	}
	cancel()

	// bad parameters
	for _, q := range []string{"?types=weights.trained", "?last_event_id=abc"} {
		resp, err := http.Get(srv.URL + q)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d", q, resp.StatusCode)
		}
		resp.Body.Close()
	}
}
