package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Work below this many multiply-adds runs inline on the caller's goroutine:
// handing work to another goroutine costs a few microseconds.
const parallelMinMACs = 1 << 19

var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// SetThreads sets how many goroutines one large MatMul* call may use
// (default runtime.GOMAXPROCS(0) at start-up; n < 1 means 1). The workers
// are started lazily and kept for the life of the process. Safe for
// concurrent use; calls already running keep their split. Callers that
// already run many products in parallel on their own goroutines may prefer
// SetThreads(1) to avoid oversubscribing the cores.
func SetThreads(n int) {
	if n < 1 {
		n = 1
	}
	threads.Store(int32(n))
}

// Threads reports the value set by SetThreads.
func Threads() int { return int(threads.Load()) }

// splitParts decides how many parts a product is cut into.
func splitParts(m, k, n int) int {
	t := int(threads.Load())
	if t <= 1 {
		return 1
	}
	work := m * k * n
	if work < parallelMinMACs {
		return 1
	}
	if p := work / (parallelMinMACs / 2); p < t {
		t = p
	}
	return t
}

type mmJob struct {
	im         *impl
	kind       int
	c, a, b    []float32
	m, k, n    int
	acc        bool
	alongN     bool
	chunk, end int
	wg         sync.WaitGroup
}

func (j *mmJob) run(part int) {
	lo := part * j.chunk
	hi := min(lo+j.chunk, j.end)
	if lo < hi {
		if j.alongN {
			j.im.mm(j.kind, j.c, j.a, j.b, j.m, j.k, j.n, j.acc, 0, j.m, lo, hi)
		} else {
			j.im.mm(j.kind, j.c, j.a, j.b, j.m, j.k, j.n, j.acc, lo, hi, 0, j.n)
		}
	}
}

// job is work the pool runs in parts; done is called once per finished part.
type job interface {
	run(part int)
	done()
}

func (j *mmJob) done() { j.wg.Done() }

type workItem struct {
	j    job
	part int
}

var (
	workCh    = make(chan workItem, 256)
	workersMu sync.Mutex
	nWorkers  int
	jobPool   = sync.Pool{New: func() any { return new(mmJob) }}
)

func worker() {
	for it := range workCh {
		it.j.run(it.part)
		it.j.done()
	}
}

func ensureWorkers(n int) {
	workersMu.Lock()
	for nWorkers < n {
		nWorkers++
		go worker()
	}
	workersMu.Unlock()
}

// parallelMM splits C into parts blocks of columns (or rows) and computes
// them on the worker pool plus the calling goroutine.
func parallelMM(im *impl, kind int, c, a, b []float32, m, k, n int, acc bool, parts int) {
	j := jobPool.Get().(*mmJob)
	*j = mmJob{im: im, kind: kind, c: c, a: a, b: b, m: m, k: k, n: n, acc: acc}
	// Split along n for NT (each part packs only its own columns of B) and
	// whenever n is the larger side; align to the microkernel tiles.
	j.alongN = kind == kindNT || n >= m
	if j.alongN && n < 16*parts {
		j.alongN = false
	}
	if !j.alongN && m < parts {
		j.alongN = true
	}
	if j.alongN {
		j.end = n
		j.chunk = roundUp((n+parts-1)/parts, 16)
		if n >= 64*parts {
			j.chunk = roundUp((n+parts-1)/parts, 64)
		}
	} else {
		j.end = m
		j.chunk = (m + parts - 1) / parts
		if m >= 16*parts {
			j.chunk = roundUp(j.chunk, 16)
		}
	}
	parts = (j.end + j.chunk - 1) / j.chunk
	ensureWorkers(parts - 1)
	j.wg.Add(parts - 1)
	for p := 1; p < parts; p++ {
		workCh <- workItem{j, p}
	}
	j.run(0)
	j.wg.Wait()
	*j = mmJob{}
	jobPool.Put(j)
}

func roundUp(x, a int) int { return (x + a - 1) / a * a }

// forJob runs fn over [0, n) in chunks of chunk.
type forJob struct {
	fn       func(lo, hi int)
	n, chunk int
	wg       sync.WaitGroup
}

func (j *forJob) run(part int) {
	lo := part * j.chunk
	if hi := min(lo+j.chunk, j.n); lo < hi {
		j.fn(lo, hi)
	}
}

func (j *forJob) done() { j.wg.Done() }

// parallelFor calls fn on disjoint ranges covering [0, n), each a multiple of align long (but
// the last), on up to Threads() goroutines of the pool (the caller's included) when the work,
// in multiply-adds, is large enough to pay for the hand-off; otherwise fn(0, n) runs inline.
func parallelFor(n, align, work int, fn func(lo, hi int)) {
	parts := int(threads.Load())
	if p := work / (parallelMinMACs / 2); p < parts {
		parts = p
	}
	if p := (n + align - 1) / align; p < parts {
		parts = p
	}
	if parts <= 1 {
		fn(0, n)
		return
	}
	j := &forJob{fn: fn, n: n, chunk: roundUp((n+parts-1)/parts, align)}
	parts = (n + j.chunk - 1) / j.chunk
	ensureWorkers(parts - 1)
	j.wg.Add(parts - 1)
	for p := 1; p < parts; p++ {
		workCh <- workItem{j, p}
	}
	j.run(0)
	j.wg.Wait()
}
