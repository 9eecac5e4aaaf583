// Package parallel runs independent pieces of work on a few goroutines:
// Each hands out the indices 0..n-1 to workers that stop at the first
// error. The regression suite (distill) uses it to ask many questions of
// the engine at once, which batches concurrent requests; a library for
// this (errgroup) would not hand out indices nor bound the workers
// without a semaphore of its own. (The workplace's quiz has its own loop:
// the workplace uses citizen only over HTTP, TestImportIsolation.)
package parallel

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls fn(ctx, i) for every i in [0, n) on min(workers, n)
// goroutines (at least one), each taking the next index when it is done
// with one. The first error cancels the context the others see, no new
// index is started, and Each returns that error once every call has
// returned; otherwise it returns ctx's error, if any.
func Each(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(max(workers, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n && cctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := fn(cctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
