package events

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// decodeCache remembers the latest decoded payloads of a type several
// consumers of one process decode (Registry.CacheDecoded), so that each
// event is parsed once and the other readers get a deep copy, which costs
// a fraction of a decode. An entry is used only for
// the same event id, schema and data bytes; it is bounded by entries and
// by the bytes of data it holds, oldest out first.
type decodeCache struct {
	mu      sync.Mutex
	byID    map[[16]byte]*cached
	order   []*cached // insertion order, a ring from head
	head    int
	bytes   int
	maxN    int
	maxData int
}

type cached struct {
	id     [16]byte
	schema int
	data   []byte
	p      Payload
}

func newDecodeCache(maxN, maxData int) *decodeCache {
	return &decodeCache{byID: map[[16]byte]*cached{}, maxN: maxN, maxData: maxData}
}

// get returns a deep copy of ev's cached payload, if any.
func (c *decodeCache) get(ev *Event, data []byte) (Payload, bool) {
	c.mu.Lock()
	e := c.byID[ev.ID]
	c.mu.Unlock()
	if e == nil || e.schema != ev.Schema || !bytes.Equal(e.data, data) {
		return nil, false
	}
	return clonePayload(e.p), true
}

// put remembers a deep copy of p, ev's decoded payload.
func (c *decodeCache) put(ev *Event, data []byte, p Payload) {
	if len(data) > c.maxData/8 {
		return
	}
	e := &cached{id: ev.ID, schema: ev.Schema, data: bytes.Clone(data), p: clonePayload(p)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.byID[e.id]; old != nil {
		return
	}
	for len(c.byID) > 0 && (len(c.byID) >= c.maxN || c.bytes+len(e.data) > c.maxData) {
		c.evictLocked()
	}
	c.byID[e.id] = e
	c.order = append(c.order, e)
	c.bytes += len(e.data)
}

func (c *decodeCache) evictLocked() {
	old := c.order[c.head]
	c.order[c.head] = nil
	c.head++
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
	delete(c.byID, old.id)
	c.bytes -= len(old.data)
}

// clonePayload returns a deep copy of p (a pointer to a payload struct):
// no slice, map or pointer in an exported field of the copy is shared with
// p. Strings, and unexported fields, are shared.
func clonePayload(p Payload) Payload {
	if e, ok := p.(*InteractionEvaluated); ok {
		return e.clone()
	}
	v := reflect.ValueOf(p)
	out := reflect.New(v.Type()).Elem()
	deepCopy(out, v)
	return out.Interface().(Payload)
}

// flatTypes caches whether a type holds no slice, map, pointer or
// interface (a plain value copy is then a deep copy).
var flatTypes sync.Map // reflect.Type -> bool

func isFlat(t reflect.Type) bool {
	if f, ok := flatTypes.Load(t); ok {
		return f.(bool)
	}
	flat := true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		flat = false
	case reflect.Array:
		flat = isFlat(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !isFlat(t.Field(i).Type) {
				flat = false
				break
			}
		}
	}
	flatTypes.Store(t, flat)
	return flat
}

// deepCopy sets dst (settable, of src's type) to a deep copy of src.
func deepCopy(dst, src reflect.Value) {
	t := src.Type()
	if isFlat(t) {
		dst.Set(src)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		n := reflect.New(t.Elem())
		deepCopy(n.Elem(), src.Elem())
		dst.Set(n)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		n := reflect.MakeSlice(t, src.Len(), src.Len())
		if isFlat(t.Elem()) {
			reflect.Copy(n, src)
		} else {
			for i := range src.Len() {
				deepCopy(n.Index(i), src.Index(i))
			}
		}
		dst.Set(n)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		n := reflect.MakeMapWithSize(t, src.Len())
		flat := isFlat(t.Elem())
		it := src.MapRange()
		for it.Next() {
			if flat {
				n.SetMapIndex(it.Key(), it.Value())
				continue
			}
			v := reflect.New(t.Elem()).Elem()
			deepCopy(v, it.Value())
			n.SetMapIndex(it.Key(), v)
		}
		dst.Set(n)
	case reflect.Struct:
		// A value copy first: unexported fields (a time.Time's location)
		// are shared, the exported ones are then copied deeply.
		dst.Set(src)
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && !isFlat(f.Type) {
				dst.Field(i).SetZero()
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case reflect.Array:
		for i := range src.Len() {
			deepCopy(dst.Index(i), src.Index(i))
		}
	case reflect.Interface:
		if src.IsNil() {
			return
		}
		v := reflect.New(src.Elem().Type()).Elem()
		deepCopy(v, src.Elem())
		dst.Set(v)
	default: // chan, func: shared
		dst.Set(src)
	}
}

// clone is clonePayload for the cached type, without reflection
// (TestCloneCoversEveryField keeps it complete).
func (e *InteractionEvaluated) clone() *InteractionEvaluated {
	c := *e
	c.Lessons = slices.Clone(e.Lessons)
	c.Graders = slices.Clone(e.Graders)
	c.Checks = slices.Clone(e.Checks)
	c.Faults = slices.Clone(e.Faults)
	if e.Self != nil {
		self := *e.Self
		c.Self = &self
	}
	if e.FeedbackPolarity != nil {
		pol := *e.FeedbackPolarity
		c.FeedbackPolarity = &pol
	}
	c.RewardTerms = maps.Clone(e.RewardTerms)
	return &c
}
