package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// Sentinel errors; test with errors.Is.
var (
	ErrUnknownCollection = errors.New("memory: unknown collection")
	ErrDimension         = errors.New("memory: wrong vector dimension")
	ErrBadVector         = errors.New("memory: vector has NaN, infinite or all-zero values")
	ErrUnknownField      = errors.New("memory: unknown payload field")
	ErrBadPayload        = errors.New("memory: bad payload value")
	ErrBadID             = errors.New("memory: bad point id")
	ErrExists            = errors.New("memory: collection exists with another schema")
)

// FieldKind is the type of a payload field.
type FieldKind uint8

const (
	// Keyword fields hold strings and are matched exactly.
	Keyword FieldKind = iota + 1
	// Number fields hold float64 and are matched by range (times are
	// stored as Unix seconds).
	Number
)

// Schema declares a collection: its vector size and its filterable
// payload fields. Qdrant gets a payload index per field.
type Schema struct {
	Dim    int
	Fields map[string]FieldKind
}

// InteractionSchema is the payload schema of interaction collections.
func InteractionSchema(dim int) Schema {
	return Schema{Dim: dim, Fields: map[string]FieldKind{
		"tenant": Keyword, "type": Keyword, "version": Keyword, "label_source": Keyword,
		"reward": Number, "time": Number, "polarity": Number,
	}}
}

// Payload holds a point's fields: strings for Keyword fields, float64 for
// Number fields, and free text for fields outside the schema whose name
// starts with "_" (stored, returned, never filtered on).
type Payload map[string]any

// Point is one vector with its payload. IDs are UUID strings (Qdrant's
// requirement); use PointID to derive one from any key.
type Point struct {
	ID      string
	Vector  []float32
	Payload Payload
}

// Condition restricts one payload field: Equals (Keyword fields, any of
// the values) or a closed range [Min, Max] (Number fields; nil = open).
type Condition struct {
	Field  string
	Equals []string
	Min    *float64
	Max    *float64
}

// Filter is a conjunction of conditions; the zero Filter matches all.
type Filter struct {
	Must []Condition
}

// Eq is a Keyword condition.
func Eq(field string, values ...string) Condition { return Condition{Field: field, Equals: values} }

// Range is a Number condition; pass math.Inf for an open end.
func Range(field string, min, max float64) Condition {
	c := Condition{Field: field}
	if !math.IsInf(min, -1) {
		c.Min = &min
	}
	if !math.IsInf(max, 1) {
		c.Max = &max
	}
	return c
}

// Since is a time condition (time stored as Unix seconds).
func Since(t time.Time) Condition { return Range("time", float64(t.Unix()), math.Inf(1)) }

// Hit is one search result; Score is the cosine similarity.
type Hit struct {
	ID      string
	Score   float32
	Payload Payload
}

// Index is a vector index of named collections. Implementations are safe
// for concurrent use. Bad input (unknown collection, wrong dimension, NaN
// or infinite values, a filter or payload field outside the schema)
// returns an error and changes nothing.
type Index interface {
	// EnsureCollection creates the collection or checks that an existing
	// one has the same schema (ErrExists otherwise).
	EnsureCollection(ctx context.Context, name string, s Schema) error
	// Upsert inserts or replaces points by ID, all or none.
	Upsert(ctx context.Context, collection string, pts []Point) error
	// Delete removes points by ID; missing IDs are ignored.
	Delete(ctx context.Context, collection string, ids []string) error
	// Search returns the k nearest points to v that pass f, best first.
	Search(ctx context.Context, collection string, v []float32, k int, f Filter) ([]Hit, error)
	// Count returns how many points pass f.
	Count(ctx context.Context, collection string, f Filter) (int, error)
	Close() error
}

// validateVector checks size and values; it returns a normalised copy.
func validateVector(v []float32, dim int) ([]float32, error) {
	return normalizeInto(nil, v, dim)
}

// normalizeInto is validateVector writing into dst when it has room.
func normalizeInto(dst, v []float32, dim int) ([]float32, error) {
	inv, err := vectorScale(v, dim)
	if err != nil {
		return nil, err
	}
	if cap(dst) < dim {
		dst = make([]float32, dim)
	}
	dst = dst[:dim]
	for i, x := range v {
		dst[i] = x * inv
	}
	return dst, nil
}

// vectorScale checks v as validateVector does and returns 1/|v|.
func vectorScale(v []float32, dim int) (float32, error) {
	if len(v) != dim {
		return 0, fmt.Errorf("%w: got %d, collection has %d", ErrDimension, len(v), dim)
	}
	var ss float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return 0, ErrBadVector
		}
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return 0, ErrBadVector
	}
	return float32(1 / math.Sqrt(ss)), nil
}

// validatePayload checks payload values against the schema.
func (s Schema) validatePayload(p Payload) error {
	for k, v := range p {
		kind, ok := s.Fields[k]
		if !ok {
			if len(k) > 0 && k[0] == '_' {
				if _, isStr := v.(string); isStr {
					continue
				}
				return fmt.Errorf("%w: %s must be a string", ErrBadPayload, k)
			}
			return fmt.Errorf("%w: %q", ErrUnknownField, k)
		}
		switch kind {
		case Keyword:
			if _, ok := v.(string); !ok {
				return fmt.Errorf("%w: %s must be a string, got %T", ErrBadPayload, k, v)
			}
		case Number:
			f, ok := v.(float64)
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("%w: %s must be a finite float64, got %v", ErrBadPayload, k, v)
			}
		}
	}
	return nil
}

// validateFilter checks filter fields against the schema.
func (s Schema) validateFilter(f Filter) error {
	for _, c := range f.Must {
		kind, ok := s.Fields[c.Field]
		if !ok {
			return fmt.Errorf("%w: filter on %q", ErrUnknownField, c.Field)
		}
		if kind == Keyword && (c.Min != nil || c.Max != nil) {
			return fmt.Errorf("%w: range on keyword field %q", ErrBadPayload, c.Field)
		}
		if kind == Number && len(c.Equals) > 0 {
			return fmt.Errorf("%w: equality on number field %q", ErrBadPayload, c.Field)
		}
	}
	return nil
}

// Match reports whether p passes f (fields absent from p fail their
// condition).
func (f Filter) Match(p Payload) bool {
	for _, c := range f.Must {
		v, ok := p[c.Field]
		if !ok {
			return false
		}
		if len(c.Equals) > 0 {
			s, _ := v.(string)
			hit := false
			for _, e := range c.Equals {
				if s == e {
					hit = true
					break
				}
			}
			if !hit {
				return false
			}
		}
		if c.Min != nil || c.Max != nil {
			x, _ := v.(float64)
			if c.Min != nil && x < *c.Min || c.Max != nil && x > *c.Max {
				return false
			}
		}
	}
	return true
}

// ValidatePoints checks a batch against a schema (vector size and values,
// payload fields, UUID ids) as every backend must before writing.
func ValidatePoints(s Schema, pts []Point) error {
	for _, p := range pts {
		if _, err := uuid.Parse(p.ID); err != nil {
			return fmt.Errorf("%w: %q is not a UUID", ErrBadID, p.ID)
		}
		if _, err := vectorScale(p.Vector, s.Dim); err != nil {
			return fmt.Errorf("point %s: %w", p.ID, err)
		}
		if err := s.validatePayload(p.Payload); err != nil {
			return fmt.Errorf("point %s: %w", p.ID, err)
		}
	}
	return nil
}

// ValidateQuery checks a query vector (if not nil) and a filter.
func ValidateQuery(s Schema, v []float32, f Filter) error {
	if v != nil {
		if _, err := vectorScale(v, s.Dim); err != nil {
			return err
		}
	}
	return s.validateFilter(f)
}
