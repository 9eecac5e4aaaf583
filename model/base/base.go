// Package base holds the tiny base checkpoint (3.7M parameters, pretrained
// on the workplace corpus by `citizen pretrain`; see MODEL_CARD.md) inside
// the binary, so that `citizen` finds it wherever it is started from. It is
// the model tests and fast benchmarks serve; catalog materialises it as a
// checkpoint directory.
package base

import "embed"

// Files are the checkpoint's files: config.json, model.safetensors,
// tokenizer.json, rehearsal.jsonl, card.json and MODEL_CARD.md.
//
//go:embed config.json model.safetensors tokenizer.json rehearsal.jsonl card.json MODEL_CARD.md
var Files embed.FS
