// Package memorytest is the conformance suite every memory.Index backend
// runs: the embedded index always, Qdrant when QDRANT_URL is set.
package memorytest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"citizen/memory"
)

// Dataset is the fixed dataset the suite indexes; backends must return the
// same top-k on it, which the suite checks against a brute-force answer.
func Dataset(n, dim int, seed uint64) []memory.Point {
	r := rand.New(rand.NewPCG(seed, 1))
	types := []string{"arithmetic", "policy", "json_extract"}
	tenants := []string{"acme", "globex"}
	pts := make([]memory.Point, n)
	for i := range pts {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		pts[i] = memory.Point{
			ID:     memory.PointID(fmt.Sprint("p", i)),
			Vector: v,
			Payload: memory.Payload{
				"tenant": tenants[i%2], "type": types[i%3], "version": "v1",
				"reward": float64(i%21)/10 - 1, "time": float64(1_700_000_000 + i),
				"_text": fmt.Sprint("point ", i),
			},
		}
	}
	return pts
}

// bruteForce returns the ids of the k nearest points passing f.
func bruteForce(pts []memory.Point, q []float32, k int, f memory.Filter) []string {
	type sc struct {
		id string
		s  float64
	}
	norm := func(v []float32) []float64 {
		var ss float64
		for _, x := range v {
			ss += float64(x) * float64(x)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x) / math.Sqrt(ss)
		}
		return out
	}
	nq := norm(q)
	var all []sc
	for _, p := range pts {
		if !f.Match(p.Payload) {
			continue
		}
		nv := norm(p.Vector)
		var d float64
		for i := range nv {
			d += nv[i] * nq[i]
		}
		all = append(all, sc{p.ID, d})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s })
	var ids []string
	for i := 0; i < k && i < len(all); i++ {
		ids = append(ids, all[i].id)
	}
	return ids
}

// Run runs the suite. newIndex returns a fresh, empty index.
func Run(t *testing.T, newIndex func(t *testing.T) memory.Index) {
	ctx := context.Background()
	const dim = 32
	schema := memory.InteractionSchema(dim)
	setup := func(t *testing.T, n int) (memory.Index, []memory.Point) {
		ix := newIndex(t)
		t.Cleanup(func() { ix.Close() })
		if err := ix.EnsureCollection(ctx, "interactions", schema); err != nil {
			t.Fatal(err)
		}
		pts := Dataset(n, dim, 7)
		if n > 0 {
			if err := ix.Upsert(ctx, "interactions", pts); err != nil {
				t.Fatal(err)
			}
		}
		return ix, pts
	}

	t.Run("TopKMatchesBruteForce", func(t *testing.T) {
		ix, pts := setup(t, 600)
		r := rand.New(rand.NewPCG(99, 2))
		filters := []memory.Filter{
			{},
			{Must: []memory.Condition{memory.Eq("tenant", "acme")}},
			{Must: []memory.Condition{memory.Eq("type", "policy", "arithmetic"), memory.Range("reward", 0, 1)}},
			{Must: []memory.Condition{memory.Range("time", 1_700_000_100, 1_700_000_200)}},
		}
		for qi := 0; qi < 20; qi++ {
			q := make([]float32, dim)
			for j := range q {
				q[j] = float32(r.NormFloat64())
			}
			for fi, f := range filters {
				hits, err := ix.Search(ctx, "interactions", q, 10, f)
				if err != nil {
					t.Fatal(err)
				}
				want := bruteForce(pts, q, 10, f)
				if len(hits) != len(want) {
					t.Fatalf("query %d filter %d: %d hits, want %d", qi, fi, len(hits), len(want))
				}
				for i := range want {
					if hits[i].ID != want[i] {
						t.Fatalf("query %d filter %d rank %d: got %s want %s", qi, fi, i, hits[i].ID, want[i])
					}
					if !f.Match(hits[i].Payload) {
						t.Fatalf("hit fails filter: %v", hits[i].Payload)
					}
				}
				for i := 1; i < len(hits); i++ {
					if hits[i].Score > hits[i-1].Score+1e-6 {
						t.Fatal("hits not best first")
					}
				}
			}
		}
	})

	t.Run("UpsertReplacesDeleteRemovesCount", func(t *testing.T) {
		ix, pts := setup(t, 90)
		n, err := ix.Count(ctx, "interactions", memory.Filter{})
		if err != nil || n != 90 {
			t.Fatalf("count %d %v", n, err)
		}
		n, _ = ix.Count(ctx, "interactions", memory.Filter{Must: []memory.Condition{memory.Eq("type", "policy")}})
		if n != 30 {
			t.Fatalf("filtered count %d", n)
		}
		// Replace point 0 by the negation of point 1's vector's opposite: it
		// becomes the nearest neighbour of point 1's vector.
		p := pts[0]
		p.Vector = append([]float32(nil), pts[1].Vector...)
		p.Payload = memory.Payload{"tenant": "acme", "type": "classify", "version": "v2", "reward": 1.0, "time": 1.0}
		if err := ix.Upsert(ctx, "interactions", []memory.Point{p}); err != nil {
			t.Fatal(err)
		}
		if n, _ := ix.Count(ctx, "interactions", memory.Filter{}); n != 90 {
			t.Fatalf("upsert of an existing id changed the count to %d", n)
		}
		hits, _ := ix.Search(ctx, "interactions", pts[1].Vector, 1, memory.Filter{Must: []memory.Condition{memory.Eq("type", "classify")}})
		if len(hits) != 1 || hits[0].ID != p.ID || hits[0].Payload["version"] != "v2" {
			t.Fatalf("replaced point not found: %+v", hits)
		}
		if err := ix.Delete(ctx, "interactions", []string{p.ID, memory.PointID("never")}); err != nil {
			t.Fatal(err)
		}
		if n, _ := ix.Count(ctx, "interactions", memory.Filter{}); n != 89 {
			t.Fatalf("after delete count %d", n)
		}
		hits, _ = ix.Search(ctx, "interactions", pts[1].Vector, 89, memory.Filter{})
		for _, h := range hits {
			if h.ID == p.ID {
				t.Fatal("deleted point returned")
			}
		}
	})

	t.Run("BadInputChangesNothing", func(t *testing.T) {
		ix, pts := setup(t, 10)
		good := pts[0]
		good.ID = memory.PointID("new")
		nan := make([]float32, dim)
		nan[3] = float32(math.NaN())
		inf := make([]float32, dim)
		inf[0] = float32(math.Inf(1))
		cases := []struct {
			name string
			pts  []memory.Point
			want error
		}{
			{"wrong size", []memory.Point{good, {ID: memory.PointID("x"), Vector: make([]float32, dim+1)}}, memory.ErrDimension},
			{"nan", []memory.Point{good, {ID: memory.PointID("x"), Vector: nan}}, memory.ErrBadVector},
			{"inf", []memory.Point{good, {ID: memory.PointID("x"), Vector: inf}}, memory.ErrBadVector},
			{"zero", []memory.Point{good, {ID: memory.PointID("x"), Vector: make([]float32, dim)}}, memory.ErrBadVector},
			{"unknown field", []memory.Point{good, {ID: memory.PointID("x"), Vector: good.Vector, Payload: memory.Payload{"colour": "red"}}}, memory.ErrUnknownField},
			{"wrong kind", []memory.Point{good, {ID: memory.PointID("x"), Vector: good.Vector, Payload: memory.Payload{"reward": "high"}}}, memory.ErrBadPayload},
			{"bad id", []memory.Point{good, {ID: "not-a-uuid", Vector: good.Vector}}, memory.ErrBadID},
		}
		for _, c := range cases {
			if err := ix.Upsert(ctx, "interactions", c.pts); !errors.Is(err, c.want) {
				t.Errorf("%s: got %v want %v", c.name, err, c.want)
			}
		}
		if n, _ := ix.Count(ctx, "interactions", memory.Filter{}); n != 10 {
			t.Fatalf("a refused batch wrote something: count %d", n)
		}
		if err := ix.Upsert(ctx, "nope", []memory.Point{good}); !errors.Is(err, memory.ErrUnknownCollection) {
			t.Errorf("unknown collection: %v", err)
		}
		if _, err := ix.Search(ctx, "nope", good.Vector, 1, memory.Filter{}); !errors.Is(err, memory.ErrUnknownCollection) {
			t.Errorf("search unknown collection: %v", err)
		}
		if _, err := ix.Search(ctx, "interactions", good.Vector, 1, memory.Filter{Must: []memory.Condition{memory.Eq("colour", "red")}}); !errors.Is(err, memory.ErrUnknownField) {
			t.Errorf("filter on unknown field: %v", err)
		}
		if _, err := ix.Search(ctx, "interactions", good.Vector[:3], 1, memory.Filter{}); !errors.Is(err, memory.ErrDimension) {
			t.Errorf("query size: %v", err)
		}
		if err := ix.EnsureCollection(ctx, "interactions", memory.InteractionSchema(dim+1)); !errors.Is(err, memory.ErrExists) {
			t.Errorf("schema clash: %v", err)
		}
	})
}
