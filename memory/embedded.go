package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"citizen/model/kernels"
	"github.com/google/uuid"
)

// EmbeddedConfig configures the embedded index.
type EmbeddedConfig struct {
	// ExactLimit is the number of points up to which a collection is
	// searched by exact scan; beyond it an HNSW graph is built and kept.
	// A collection of at most 4,096 slots builds it when an upsert
	// crosses the limit; a larger one when a search first needs it (one
	// that the posting lists of its filter do not answer), behind, on a
	// goroutine: searches scan exactly until it is in use. Default
	// 20,000.
	ExactLimit int
	// M and EfConstruction shape the HNSW graph (defaults 16 and 200);
	// EfSearch is the search breadth (default 256, raised to k if smaller).
	M, EfConstruction, EfSearch int
	// Seed makes graph construction reproducible.
	Seed uint64
}

func (c *EmbeddedConfig) defaults() {
	if c.ExactLimit <= 0 {
		c.ExactLimit = 20000
	}
	if c.M <= 0 {
		c.M = 16
	}
	if c.EfConstruction <= 0 {
		c.EfConstruction = 200
	}
	if c.EfSearch <= 0 {
		c.EfSearch = 256
	}
}

// Embedded is the in-process Index. Searches of one collection run
// concurrently; writes to it are serialised.
type Embedded struct {
	cfg  EmbeddedConfig
	mu   sync.RWMutex
	cols map[string]*collection
}

// NewEmbedded returns an empty embedded index.
func NewEmbedded(cfg EmbeddedConfig) *Embedded {
	cfg.defaults()
	return &Embedded{cfg: cfg, cols: map[string]*collection{}}
}

type collection struct {
	mu     sync.RWMutex
	schema Schema
	ids    []string // slot -> id; "" marks a deleted slot
	slots  map[string]int32
	// vecs holds the vectors, vecChunk slots a chunk: a chunk is never
	// moved, so a growing collection copies no vectors (appended to one
	// slice, a collection of 20,000 vectors of 512 dimensions copied
	// 40 MB at each growth), and a slot's vector is never written once
	// set.
	vecs     [][]float32
	payloads []Payload
	// postings[field][value] lists, ascending, the slots whose payload
	// holds value in that Keyword field. Dead slots stay listed (ids[slot]
	// is "" for them), as their vectors stay in vecs, and a slot whose
	// payload an Upsert with the same vector replaced stays listed under
	// its old values too: candidates are supersets. A filtered search
	// walks the shortest list its equality conditions name instead of
	// every slot: the memory's own uses filter on fields (tenant,
	// label_source) that a growing collection may match in few points or
	// none, and a scan of every payload made each search's cost grow with
	// the collection.
	postings map[string]map[string][]int32
	graph    *hnsw
	// building: buildGraphBehind is building graph.
	building bool
	cfg      EmbeddedConfig
}

// post adds slot to the posting lists of p's Keyword fields it is not in
// yet, keeping each list ascending: an append for a new slot (the
// largest), an insertion for one whose payload became p. The lists of
// values a slot no longer holds keep it: candidates are matched against
// the payload anyway. Caller holds c.mu.
func (c *collection) post(slot int32, p Payload) {
	for field, kind := range c.schema.Fields {
		if kind != Keyword {
			continue
		}
		v, ok := p[field].(string)
		if !ok {
			continue
		}
		byValue := c.postings[field]
		if byValue == nil {
			byValue = map[string][]int32{}
			c.postings[field] = byValue
		}
		l := byValue[v]
		if n := len(l); n == 0 || l[n-1] < slot {
			byValue[v] = append(l, slot)
		} else if i, found := slices.BinarySearch(l, slot); !found {
			byValue[v] = slices.Insert(l, i, slot)
		}
	}
}

// candidates returns the slots that may match f, ascending, from the
// posting lists of its most selective equality condition; ok is false
// when f has no equality condition (every slot is a candidate). Caller
// holds c.mu (read).
func (c *collection) candidates(f Filter) (slots []int32, ok bool) {
	best := -1
	var lists [][]int32
	for _, cond := range f.Must {
		if len(cond.Equals) == 0 || c.schema.Fields[cond.Field] != Keyword {
			continue
		}
		n := 0
		var ls [][]int32
		for _, v := range cond.Equals {
			if l := c.postings[cond.Field][v]; len(l) > 0 {
				ls = append(ls, l)
				n += len(l)
			}
		}
		if best < 0 || n < best {
			best, lists = n, ls
		}
	}
	switch {
	case best < 0:
		return nil, false
	case len(lists) == 0:
		return nil, true
	case len(lists) == 1:
		return lists[0], true
	}
	// Several values of one field: a slot whose payload changed in place
	// may be in more than one of their lists.
	out := make([]int32, 0, best)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out), true
}

// vecChunk is the number of slots of a chunk of collection.vecs.
const vecChunk = 1024

func (c *collection) vec(slot int32) []float32 { return vecIn(c.vecs, c.schema.Dim, slot) }

func vecIn(chunks [][]float32, dim int, slot int32) []float32 {
	i := int(slot%vecChunk) * dim
	return chunks[slot/vecChunk][i : i+dim]
}

// setVec stores v as the vector of slot, the next one. Caller holds c.mu.
func (c *collection) setVec(slot int32, v []float32) {
	if int(slot)/vecChunk == len(c.vecs) {
		c.vecs = append(c.vecs, make([]float32, vecChunk*c.schema.Dim))
	}
	copy(c.vec(slot), v)
}

func sameSchema(a, b Schema) bool { return a.Dim == b.Dim && maps.Equal(a.Fields, b.Fields) }

// EnsureCollection implements Index.
func (e *Embedded) EnsureCollection(_ context.Context, name string, s Schema) error {
	if name == "" || s.Dim <= 0 {
		return fmt.Errorf("memory: collection needs a name and a positive dimension")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.cols[name]; ok {
		if !sameSchema(c.schema, s) {
			return fmt.Errorf("%w: %s", ErrExists, name)
		}
		return nil
	}
	e.cols[name] = &collection{schema: Schema{Dim: s.Dim, Fields: maps.Clone(s.Fields)}, slots: map[string]int32{},
		postings: map[string]map[string][]int32{}, cfg: e.cfg}
	return nil
}

func (e *Embedded) col(name string) (*collection, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	c, ok := e.cols[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownCollection, name)
	}
	return c, nil
}

// Upsert implements Index: every point is validated before any is written.
func (e *Embedded) Upsert(_ context.Context, collection string, pts []Point) error {
	c, err := e.col(collection)
	if err != nil {
		return err
	}
	if err := ValidatePoints(c.schema, pts); err != nil {
		return err
	}
	// The normalized vectors are copied into the collection's chunks:
	// their scratch goes back to the pool.
	dim := c.schema.Dim
	buf := queryBuffers.Get().(*[]float32)
	defer queryBuffers.Put(buf)
	if cap(*buf) < len(pts)*dim {
		*buf = make([]float32, len(pts)*dim)
	}
	norm := make([][]float32, len(pts))
	for i, p := range pts {
		norm[i], _ = normalizeInto((*buf)[i*dim:(i+1)*dim:(i+1)*dim], p.Vector, dim)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range pts {
		if old, ok := c.slots[p.ID]; ok {
			if slices.Equal(c.vec(old), norm[i]) {
				// The same vector with a new payload (the indexer
				// upserts an interaction again once it is evaluated):
				// the slot keeps its place in vecs and the graph.
				c.payloads[old] = maps.Clone(p.Payload)
				c.post(old, p.Payload)
				continue
			}
			// Replace: tombstone the old slot (the graph keeps it as a
			// waypoint) and add a fresh one.
			c.ids[old] = ""
			c.payloads[old] = nil
		}
		slot := int32(len(c.ids))
		c.ids = append(c.ids, p.ID)
		c.setVec(slot, norm[i])
		c.payloads = append(c.payloads, maps.Clone(p.Payload))
		c.slots[p.ID] = slot
		c.post(slot, p.Payload)
		if c.graph != nil {
			c.graph.insert(slot)
		}
	}
	if c.graph == nil && len(c.slots) > c.cfg.ExactLimit && len(c.ids) <= syncGraphPoints {
		c.buildGraph()
	}
	return nil
}

// needsGraph reports whether c is past ExactLimit without a graph, built
// or being built. Caller holds c.mu.
func (c *collection) needsGraph() bool {
	return c.graph == nil && !c.building && len(c.slots) > c.cfg.ExactLimit
}

// syncGraphPoints bounds the collections whose graph Upsert builds in
// place; a larger one's is built by buildGraphBehind once a search needs
// it. The interactions collection is searched through posting lists (the
// labelled points of a tenant, for typing) until something searches it
// unfiltered: built when crossing the limit, its graph cost each
// interaction a graph insert (and 20,000 of them at once) that no search
// used.
const syncGraphPoints = 4096

// buildGraphBehind builds the graph of a large collection on a goroutine
// of its own, from the slots there are now, and then, holding c.mu, adds
// the slots upserted meanwhile and puts it in use. Until then searches
// scan exactly. Built in place, under the write lock, the graph of the
// default 20,000 points of 512 dimensions took seconds, during which
// every search and upsert of the collection waited (reflection's typing
// among them). The vectors of existing slots are never written, so the
// goroutine reads them without the lock. Caller holds c.mu.
func (c *collection) buildGraphBehind() {
	c.building = true
	n, dim := len(c.ids), c.schema.Dim
	ids := slices.Clone(c.ids)
	vecs := slices.Clone(c.vecs)
	go func() {
		g := newHNSW(c.cfg.M, c.cfg.EfConstruction, c.cfg.Seed, func(slot int32) []float32 {
			return vecIn(vecs, dim, slot)
		})
		for slot, id := range ids {
			if id != "" {
				g.insert(int32(slot))
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		g.vec = c.vec
		for slot := n; slot < len(c.ids); slot++ {
			if c.ids[slot] != "" {
				g.insert(int32(slot))
			}
		}
		c.graph, c.building = g, false
	}()
}

// buildGraph indexes every live slot. Caller holds c.mu.
func (c *collection) buildGraph() {
	c.graph = newHNSW(c.cfg.M, c.cfg.EfConstruction, c.cfg.Seed, c.vec)
	for slot, id := range c.ids {
		if id != "" {
			c.graph.insert(int32(slot))
		}
	}
}

// Delete implements Index.
func (e *Embedded) Delete(_ context.Context, collection string, ids []string) error {
	c, err := e.col(collection)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if slot, ok := c.slots[id]; ok {
			c.ids[slot] = ""
			c.payloads[slot] = nil
			delete(c.slots, id)
		}
	}
	return nil
}

// Search implements Index.
func (e *Embedded) Search(ctx context.Context, collection string, v []float32, k int, f Filter) ([]Hit, error) {
	c, err := e.col(collection)
	if err != nil {
		return nil, err
	}
	if err := ValidateQuery(c.schema, v, f); err != nil {
		return nil, err
	}
	if k <= 0 {
		return nil, nil
	}
	buf := queryBuffers.Get().(*[]float32)
	defer queryBuffers.Put(buf)
	q, _ := normalizeInto(*buf, v, c.schema.Dim)
	*buf = q
	hits, build := c.search(q, k, f)
	if build {
		c.mu.Lock()
		if c.needsGraph() {
			c.buildGraphBehind()
		}
		c.mu.Unlock()
	}
	return hits, ctx.Err()
}

// queryBuffers hold normalized vectors for the length of a search or an
// upsert.
var queryBuffers = sync.Pool{New: func() any { return new([]float32) }}

// search answers Search; build reports that the answer would have used a
// graph that c does not have yet.
func (c *collection) search(q []float32, k int, f Filter) (hits []Hit, build bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var best []cand
	ef := max(c.cfg.EfSearch, k)
	if cands, ok := c.candidates(f); ok && len(cands) <= 4*ef {
		// Few candidates: the exact answer costs less than a graph walk.
		best = c.scanSlots(q, k, f, cands)
	} else if c.graph != nil {
		ef := max(c.cfg.EfSearch, k)
		top := newTopK(k)
		for _, cd := range c.graph.search(q, ef) {
			if c.ids[cd.slot] != "" && f.Match(c.payloads[cd.slot]) {
				top.offer(cd.d, cd.slot)
			}
		}
		best = top.sorted()
		if len(best) < k && len(best) < len(c.slots) {
			// A selective filter starved the graph walk: fall back to an
			// exact scan so results are complete.
			best = c.scan(q, k, f)
		}
	} else {
		best = c.scan(q, k, f)
		build = c.needsGraph()
	}
	hits = make([]Hit, len(best))
	for i, b := range best {
		hits[i] = Hit{ID: c.ids[b.slot], Score: 1 - b.d, Payload: maps.Clone(c.payloads[b.slot])}
	}
	return hits, build
}

// scan is the exact search. Caller holds c.mu (read).
func (c *collection) scan(q []float32, k int, f Filter) []cand {
	if cands, ok := c.candidates(f); ok {
		return c.scanSlots(q, k, f, cands)
	}
	top := newTopK(k)
	all := len(f.Must) == 0
	for slot, id := range c.ids {
		if id == "" || !all && !f.Match(c.payloads[slot]) {
			continue
		}
		top.offer(1-kernels.Dot(q, c.vec(int32(slot))), int32(slot))
	}
	return top.sorted()
}

// scanSlots is the exact search over the candidate slots (ascending, as
// scan visits them). Caller holds c.mu (read).
func (c *collection) scanSlots(q []float32, k int, f Filter, slots []int32) []cand {
	top := newTopK(k)
	for _, slot := range slots {
		if c.ids[slot] == "" || !f.Match(c.payloads[slot]) {
			continue
		}
		top.offer(1-kernels.Dot(q, c.vec(slot)), slot)
	}
	return top.sorted()
}

// Count implements Index.
func (e *Embedded) Count(_ context.Context, collection string, f Filter) (int, error) {
	c, err := e.col(collection)
	if err != nil {
		return 0, err
	}
	if err := c.schema.validateFilter(f); err != nil {
		return 0, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(f.Must) == 0 {
		return len(c.slots), nil
	}
	n := 0
	if cands, ok := c.candidates(f); ok {
		for _, slot := range cands {
			if c.ids[slot] != "" && f.Match(c.payloads[slot]) {
				n++
			}
		}
		return n, nil
	}
	for slot, id := range c.ids {
		if id != "" && f.Match(c.payloads[slot]) {
			n++
		}
	}
	return n, nil
}

// Close implements Index.
func (e *Embedded) Close() error { return nil }

// PointID derives a stable point UUID from any key (an interaction id).
func PointID(key string) string {
	return uuid.NewSHA1(pointNamespace, []byte(key)).String()
}

var pointNamespace = uuid.MustParse("0b7f3c52-9d2e-4a61-8c1e-5a2f7d9e4b30")
