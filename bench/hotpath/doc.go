// Package hotpath measures citizen's per-interaction hot path the way it
// is deployed: real processes and real HTTP. It has an instant
// OpenAI-compatible mock upstream (Mock), a closed-loop load generator
// (Load) and per-process CPU accounting from /proc (ProcessCPU), and a
// runner (Run) that measures, interleaved for several rounds, the load
// generator straight to the mock, `citizen serve` with every component and
// with --target=gateway (both with the upstream engine pointed at the
// mock), and any other OpenAI-compatible gateway given by URL. The report
// gives the latency each adds to the direct path at concurrency 1
// (non-streaming, and the time to the first chunk of a stream), the
// throughput at many connections, the target's CPU time per request, the
// interactions recorded against those acknowledged, and how far reflection
// had evaluated them when the load stopped (with the time it took to
// catch up).
//
// `citizen bench gateway` runs it; this package knows nothing of the
// command line, which passes it the commands that start each process.
// The figures are the runner's, never a test's: the tests check the
// pieces on tiny loads.
package hotpath
