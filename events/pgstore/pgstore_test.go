package pgstore

import (
	"sync"
	"testing"

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
		Gapless:    true,
		Persistent: true,
		Reopen: func(t *testing.T, old events.Store) events.Store {
			mu.Lock()
			schema := schemas[old]
			mu.Unlock()
			return open(t, schema)
		},
	})
}
