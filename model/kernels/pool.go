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

// chunkJob is work cut into chunks that the caller and the pool's workers claim one at a time
// (an atomic counter), so that a worker that starts late, or is descheduled by other load on
// the machine, takes fewer chunks instead of holding the others up: the caller waits only for
// chunks already claimed. Nested calls cannot deadlock: whoever waits has run every chunk that
// nobody else claimed.
//
// A hand-off that a worker takes up after the job is over must not touch the job's next use:
// state holds the use's generation (high 32 bits) and the workers inside it (low 32 bits); a
// worker joins only by raising the count of the generation it was handed, and the caller ends
// a use by moving to the next generation once no worker is inside.
type chunkJob struct {
	task   chunker
	chunks int
	next   atomic.Int64 // next chunk to claim
	done   atomic.Int64 // chunks finished
	joined atomic.Int32 // participants so far (their w)
	state  atomic.Uint64
	fin    chan struct{}
}

type workItem struct {
	j   *chunkJob
	gen uint32
}

var chunkJobs = sync.Pool{New: func() any { return &chunkJob{fin: make(chan struct{}, 1)} }}

// work claims and runs chunks until none is left.
func (j *chunkJob) work() {
	w := int(j.joined.Add(1) - 1)
	for {
		c := int(j.next.Add(1) - 1)
		if c >= j.chunks {
			return
		}
		j.task.runChunk(w, c)
		if int(j.done.Add(1)) == j.chunks {
			j.fin <- struct{}{}
		}
	}
}

// help runs a hand-off of generation gen, unless that use of j is over.
func (j *chunkJob) help(gen uint32) {
	for {
		st := j.state.Load()
		if uint32(st>>32) != gen {
			return
		}
		if j.state.CompareAndSwap(st, st+1) {
			break
		}
	}
	j.work()
	j.state.Add(^uint64(0))
}

// end closes the current use of j and returns it to the pool once no worker is inside it;
// when one stays inside for long (descheduled), j is left to the garbage collector.
func (j *chunkJob) end() {
	for range 1000 {
		st := j.state.Load()
		if uint32(st) == 0 && j.state.CompareAndSwap(st, (st>>32+1)<<32) {
			j.task = nil
			chunkJobs.Put(j)
			return
		}
		runtime.Gosched()
	}
}

var (
	workCh    = make(chan workItem, 256)
	workersMu sync.Mutex
	nWorkers  int
)

func worker() {
	for it := range workCh {
		it.j.help(it.gen)
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

// chunker runs chunk c of a job on participant w.
type chunker interface{ runChunk(w, c int) }

// chunkFunc is a chunker of its own.
type chunkFunc func(w, c int)

func (f chunkFunc) runChunk(w, c int) { f(w, c) }

// runChunks calls t.runChunk(w, c) for every chunk c in [0, chunks) on the calling goroutine
// and up to helpers workers of the pool; w < 1+helpers tells the goroutines apart (the caller
// is one of them, not necessarily 0). It returns when every call has returned.
func runChunks(chunks, helpers int, t chunker) {
	helpers = min(helpers, chunks-1)
	if helpers <= 0 {
		for c := 0; c < chunks; c++ {
			t.runChunk(0, c)
		}
		return
	}
	ensureWorkers(helpers)
	j := chunkJobs.Get().(*chunkJob)
	j.task, j.chunks = t, chunks
	j.next.Store(0)
	j.done.Store(0)
	j.joined.Store(0)
	gen := uint32(j.state.Load() >> 32)
	for range helpers {
		select {
		case workCh <- workItem{j, gen}:
		default: // the queue is full: the caller takes that share
		}
	}
	j.work()
	<-j.fin
	j.end()
}

// mmJob is one product of parallelMM, cut into chunks of columns (alongN) or rows.
type mmJob struct {
	im          *impl
	kind        int
	c, a, b     []float32
	m, k, n     int
	acc, alongN bool
	chunk, end  int
}

var mmJobs = sync.Pool{New: func() any { return new(mmJob) }}

func (j *mmJob) runChunk(_, p int) {
	lo, hi := p*j.chunk, min((p+1)*j.chunk, j.end)
	if j.alongN {
		j.im.mm(j.kind, j.c, j.a, j.b, j.m, j.k, j.n, j.acc, 0, j.m, lo, hi)
	} else {
		j.im.mm(j.kind, j.c, j.a, j.b, j.m, j.k, j.n, j.acc, lo, hi, 0, j.n)
	}
}

// parallelMM splits C into parts blocks of columns (or rows) and computes
// them on the worker pool plus the calling goroutine.
func parallelMM(im *impl, kind int, c, a, b []float32, m, k, n int, acc bool, parts int) {
	j := mmJobs.Get().(*mmJob)
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
	runChunks((j.end+j.chunk-1)/j.chunk, parts-1, j)
	*j = mmJob{}
	mmJobs.Put(j)
}

func roundUp(x, a int) int { return (x + a - 1) / a * a }

// chunksPerThread is how many chunks parallelFor cuts work into per goroutine it may use:
// enough that a goroutine held up by other load leaves its share to the others.
const chunksPerThread = 4

// forParts is how many goroutines parallelFor gives work of that many multiply-adds over n
// items in runs of align.
func forParts(n, align, work int) int {
	parts := int(threads.Load())
	if p := work / (parallelMinMACs / 2); p < parts {
		parts = p
	}
	if p := (n + align - 1) / align; p < parts {
		parts = p
	}
	return parts
}

// parallelFor calls fn on disjoint ranges covering [0, n), each a multiple of align long (but
// the last), on up to Threads() goroutines of the pool (the caller's included) when the work,
// in multiply-adds, is large enough to pay for the hand-off; otherwise fn(0, n) runs inline.
// The ranges depend only on n, align, work and Threads(), never on which goroutine runs them.
func parallelFor(n, align, work int, fn func(lo, hi int)) {
	parts := forParts(n, align, work)
	if parts <= 1 {
		fn(0, n)
		return
	}
	chunk := roundUp((n+parts*chunksPerThread-1)/(parts*chunksPerThread), align)
	runChunks((n+chunk-1)/chunk, parts-1, chunkFunc(func(_, c int) {
		fn(c*chunk, min((c+1)*chunk, n))
	}))
}

// Parallel calls fn(w, i) for every i in [0, n) on up to min(workers, Threads(), n)
// goroutines: the caller's and those of the kernels' persistent worker pool, each claiming the
// next i as it finishes one (so uneven items and goroutines held up by other load balance
// out). w < workers tells the goroutines running at once apart (for per-goroutine scratch).
// It returns when every call has returned. fn may call the kernels: nested products split
// the same way, without deadlock.
func Parallel(n, workers int, fn func(w, i int)) {
	runChunks(n, min(workers, int(threads.Load()))-1, chunkFunc(fn))
}
