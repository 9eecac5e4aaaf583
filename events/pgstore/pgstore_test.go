package pgstore

import (
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"
)

func TestConformance(t *testing.T) {
	url := serverURL(t)
	var mu sync.Mutex
	schemas := map[events.Store]string{}
	open := func(t *testing.T, schema string) events.Store {
		s := openT(t, Config{URL: url, Schema: schema})
		mu.Lock()
		schemas[s] = schema
		mu.Unlock()
		return s
	}
	eventstest.Run(t, func(t *testing.T) events.Store {
		return open(t, newSchema(t, url))
	}, eventstest.Features{
		// A fresh schema per store: positions start at 1, and the head
		// row makes them gapless.
		Gapless:    true,
		Persistent: true,
		Reopen: func(t *testing.T, old events.Store) events.Store {
			mu.Lock()
			schema := schemas[old]
			mu.Unlock()
			return open(t, schema)
		},
		// Refusals appends a 4 MB event (about 0.3 s of strict JSON
		// validation and 0.2 s of server time here); under -race on a
		// loaded machine that passed the default 10 s.
		Timeout: 30 * time.Second,
	})
}
