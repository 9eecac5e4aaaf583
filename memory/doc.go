// Package memory owns citizen's vector memory of interactions: the Index
// interface (collections of vectors with payloads, filtered top-k search),
// its embedded backend (an exact scan, and an HNSW graph beyond a size
// threshold) and the Qdrant backend (memory/qdrant), the embedders that turn
// text into vectors, and the uses other components call: type inference by
// nearest labelled neighbours, near-duplicate detection and exemplar
// retrieval.
//
// The HNSW graph is written here rather than imported: the only HNSW module
// the Go proxy serves on this machine (coder/hnsw v0.6.1) measured recall@10
// of 0.004, and ours reaches the recall recorded in BENCHMARKS.md.
// Embedders: hashed word and character n-grams with TF-IDF weighting (the
// default: it typed workplace interactions at 0.984 mean accuracy over
// three corpus seeds against 0.957 for the model's mean-pooled hidden
// states, ModelEmbedder, and costs no forward pass), and an upstream
// OpenAI-compatible /v1/embeddings (UpstreamEmbedder).
//
// Distances are cosine: vectors are L2-normalised on the way in, so a
// score is a dot product (computed with citizen/model/kernels' SIMD Dot).
package memory
