package memstore_test

import (
	"testing"

	"citizen/events"
	"citizen/events/eventstest"
	"citizen/events/memstore"
)

func TestConformance(t *testing.T) {
	eventstest.Run(t, func(t *testing.T) events.Store {
		s := memstore.New(memstore.Config{})
		t.Cleanup(func() { s.Close() })
		return s
	}, eventstest.Features{Gapless: true})
}
