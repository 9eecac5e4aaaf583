// Package qdrant is the memory.Index backend on a Qdrant server, through
// the official gRPC client (github.com/qdrant/go-client). Points are
// validated here, against the same schema rules as the embedded index,
// before anything is sent, so bad input is refused identically and
// nothing is written. Collections are created with cosine distance and a
// payload index per schema field.
package qdrant

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"sync"

	"citizen/memory"

	qc "github.com/qdrant/go-client/qdrant"
)

// Index is a memory.Index on Qdrant. Safe for concurrent use.
type Index struct {
	client *qc.Client
	mu     sync.RWMutex
	cols   map[string]memory.Schema
}

// Open connects to the Qdrant gRPC endpoint in rawURL (for example
// "http://localhost:6334"; an API key may be given as the URL's password
// or user).
func Open(rawURL string) (*Index, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("qdrant: bad url: %w", err)
	}
	host, portS, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, portS = u.Host, "6334"
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		return nil, fmt.Errorf("qdrant: bad port %q", portS)
	}
	cfg := &qc.Config{Host: host, Port: port, UseTLS: u.Scheme == "https"}
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			cfg.APIKey = p
		} else {
			cfg.APIKey = u.User.Username()
		}
	}
	c, err := qc.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("qdrant: %w", err)
	}
	return &Index{client: c, cols: map[string]memory.Schema{}}, nil
}

// EnsureCollection implements memory.Index.
func (ix *Index) EnsureCollection(ctx context.Context, name string, s memory.Schema) error {
	exists, err := ix.client.CollectionExists(ctx, name)
	if err != nil {
		return fmt.Errorf("qdrant: %w", err)
	}
	if exists {
		info, err := ix.client.GetCollectionInfo(ctx, name)
		if err != nil {
			return fmt.Errorf("qdrant: %w", err)
		}
		if p := info.GetConfig().GetParams().GetVectorsConfig().GetParams(); p == nil || int(p.GetSize()) != s.Dim {
			return fmt.Errorf("%w: %s has another vector size", memory.ErrExists, name)
		}
	} else {
		err := ix.client.CreateCollection(ctx, &qc.CreateCollection{
			CollectionName: name,
			VectorsConfig:  qc.NewVectorsConfig(&qc.VectorParams{Size: uint64(s.Dim), Distance: qc.Distance_Cosine}),
		})
		if err != nil {
			return fmt.Errorf("qdrant: create %s: %w", name, err)
		}
	}
	wait := true
	for field, kind := range s.Fields {
		ft := qc.FieldType_FieldTypeKeyword
		if kind == memory.Number {
			ft = qc.FieldType_FieldTypeFloat
		}
		if _, err := ix.client.CreateFieldIndex(ctx, &qc.CreateFieldIndexCollection{
			CollectionName: name, FieldName: field, FieldType: ft.Enum(), Wait: &wait,
		}); err != nil {
			return fmt.Errorf("qdrant: index %s.%s: %w", name, field, err)
		}
	}
	ix.mu.Lock()
	ix.cols[name] = s
	ix.mu.Unlock()
	return nil
}

func (ix *Index) schema(name string) (memory.Schema, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s, ok := ix.cols[name]
	if !ok {
		return memory.Schema{}, fmt.Errorf("%w: %q", memory.ErrUnknownCollection, name)
	}
	return s, nil
}

// Upsert implements memory.Index.
func (ix *Index) Upsert(ctx context.Context, collection string, pts []memory.Point) error {
	s, err := ix.schema(collection)
	if err != nil {
		return err
	}
	if err := memory.ValidatePoints(s, pts); err != nil {
		return err
	}
	out := make([]*qc.PointStruct, len(pts))
	for i, p := range pts {
		out[i] = &qc.PointStruct{Id: qc.NewID(p.ID), Vectors: qc.NewVectors(p.Vector...), Payload: qc.NewValueMap(p.Payload)}
	}
	wait := true
	if _, err := ix.client.Upsert(ctx, &qc.UpsertPoints{CollectionName: collection, Points: out, Wait: &wait}); err != nil {
		return fmt.Errorf("qdrant: upsert: %w", err)
	}
	return nil
}

// Delete implements memory.Index.
func (ix *Index) Delete(ctx context.Context, collection string, ids []string) error {
	if _, err := ix.schema(collection); err != nil {
		return err
	}
	pids := make([]*qc.PointId, len(ids))
	for i, id := range ids {
		pids[i] = qc.NewID(id)
	}
	wait := true
	if _, err := ix.client.Delete(ctx, &qc.DeletePoints{CollectionName: collection, Points: qc.NewPointsSelectorIDs(pids), Wait: &wait}); err != nil {
		return fmt.Errorf("qdrant: delete: %w", err)
	}
	return nil
}

func toFilter(f memory.Filter) *qc.Filter {
	if len(f.Must) == 0 {
		return nil
	}
	out := &qc.Filter{}
	for _, c := range f.Must {
		if len(c.Equals) > 0 {
			out.Must = append(out.Must, qc.NewMatchKeywords(c.Field, c.Equals...))
		}
		if c.Min != nil || c.Max != nil {
			out.Must = append(out.Must, qc.NewRange(c.Field, &qc.Range{Gte: c.Min, Lte: c.Max}))
		}
	}
	return out
}

// Search implements memory.Index.
func (ix *Index) Search(ctx context.Context, collection string, v []float32, k int, f memory.Filter) ([]memory.Hit, error) {
	s, err := ix.schema(collection)
	if err != nil {
		return nil, err
	}
	if err := memory.ValidateQuery(s, v, f); err != nil {
		return nil, err
	}
	if k <= 0 {
		return nil, nil
	}
	limit := uint64(k)
	res, err := ix.client.Query(ctx, &qc.QueryPoints{
		CollectionName: collection, Query: qc.NewQuery(v...), Filter: toFilter(f),
		Limit: &limit, WithPayload: qc.NewWithPayload(true),
		Params: &qc.SearchParams{Exact: ptr(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("qdrant: query: %w", err)
	}
	hits := make([]memory.Hit, len(res))
	for i, r := range res {
		hits[i] = memory.Hit{ID: r.GetId().GetUuid(), Score: r.GetScore(), Payload: fromValues(r.GetPayload())}
	}
	return hits, nil
}

func ptr[T any](v T) *T { return &v }

func fromValues(m map[string]*qc.Value) memory.Payload {
	p := memory.Payload{}
	for k, v := range m {
		switch x := v.GetKind().(type) {
		case *qc.Value_StringValue:
			p[k] = x.StringValue
		case *qc.Value_DoubleValue:
			p[k] = x.DoubleValue
		case *qc.Value_IntegerValue:
			p[k] = float64(x.IntegerValue)
		}
	}
	return p
}

// Count implements memory.Index.
func (ix *Index) Count(ctx context.Context, collection string, f memory.Filter) (int, error) {
	s, err := ix.schema(collection)
	if err != nil {
		return 0, err
	}
	if err := memory.ValidateQuery(s, nil, f); err != nil {
		return 0, err
	}
	n, err := ix.client.Count(ctx, &qc.CountPoints{CollectionName: collection, Filter: toFilter(f), Exact: ptr(true)})
	if err != nil {
		return 0, fmt.Errorf("qdrant: count: %w", err)
	}
	if n > math.MaxInt32 {
		return math.MaxInt32, nil
	}
	return int(n), nil
}

// Close implements memory.Index.
func (ix *Index) Close() error { return ix.client.Close() }
