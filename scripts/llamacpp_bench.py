"""llama.cpp's side of scripts/llamacpp-compare.sh (optional, outside CI).

Runs llama.cpp (llama-cpp-python) at one thread on a GGUF file and prints one JSON line:
decode tokens per CPU-second at batch 1 (64 greedy tokens after the 37-token ChatML prompt),
prefill tokens per CPU-second (a 204-token prompt in one batch, then the first token) and the
resident memory serving added (VmRSS after loading the model and decoding once, less VmRSS
before the load: citizen's BenchmarkSmolLM2ServingRSS),
the same token ids and counts as citizen's BenchmarkSmolLM2Decode and BenchmarkSmolLM2Prefill
(model/gguf/smollm2_test.go: chatmlParis, paragraph). CPU seconds are the process's
(time.process_time), as citizen's benchmarks count theirs.

usage: python llamacpp_bench.py MODEL.gguf [--iters 3]
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

# chatmlParis and paragraph of model/gguf/smollm2_test.go.
CHATML_PARIS = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]
PARAGRAPH = [504, 452, 55, 69, 54, 2301, 4624, 7821, 44223, 284, 11566, 327, 23630, 9396, 30, 3768, 13104, 314, 3873, 411, 624, 1462, 28, 624, 8213, 28, 624, 1502, 284, 354, 10497, 618, 260, 940, 3246, 28, 527, 5909, 418, 260, 1867, 2701, 282, 260, 12181, 990, 260, 11511, 30, 14980, 1005, 1995, 1528, 10379, 618, 6703, 282, 216, 35, 34, 355, 216, 34, 37, 38, 2396, 338, 2419, 253, 3964, 28, 588, 253, 1743, 282, 216, 33, 35, 37, 2215, 6116, 12638, 281, 1181, 670, 582, 3822, 17835, 37560, 979, 624, 5360, 2951, 2800, 288, 967, 282, 260, 2073, 9636, 10379, 30]
GEN = 64


def last_logits(llm):
    return llm.scores[llm.n_tokens - 1]


def decode(llm):
    """CPU seconds of GEN greedy single-token steps after the ChatML prompt."""
    llm.reset()
    llm.eval(CHATML_PARIS)
    tok = int(np.argmax(last_logits(llm)))
    t0 = time.process_time()
    for _ in range(GEN):
        llm.eval([tok])
        tok = int(np.argmax(last_logits(llm)))
    return time.process_time() - t0


def prefill(llm):
    """CPU seconds of the 204-token prompt in one batch and the first token."""
    prompt = PARAGRAPH + PARAGRAPH
    llm.reset()
    t0 = time.process_time()
    llm.eval(prompt)
    int(np.argmax(last_logits(llm)))
    return time.process_time() - t0, len(prompt)


def vm_rss_mib():
    """The process's resident set (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--iters", type=int, default=3, help="iterations per measure (summed, as go test -benchtime 3x)")
    args = ap.parse_args()
    rss0 = vm_rss_mib()
    llm = llama_cpp.Llama(model_path=args.model, n_threads=1, n_threads_batch=1, n_ctx=512, n_batch=512,
                          n_ubatch=512, verbose=False)
    decode(llm)  # warm-up: page in the weights
    rss = vm_rss_mib() - rss0
    dec = sum(decode(llm) for _ in range(args.iters))
    pre_cpu, n = 0.0, 0
    for _ in range(args.iters):
        c, k = prefill(llm)
        pre_cpu += c
        n += k
    print(json.dumps({
        "engine": "llama.cpp",
        "version": llama_cpp.__version__,
        "decode_tokens_per_cpu_s": args.iters * GEN / dec,
        "prefill_tokens_per_cpu_s": n / pre_cpu,
        "serving_rss_mib": rss,
    }))


if __name__ == "__main__":
    sys.exit(main())
