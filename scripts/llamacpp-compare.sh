#!/usr/bin/env bash
# Side-by-side benchmark of citizen's engine against llama.cpp on the GGUF file citizen serves
# (optional; not part of CI). Installs llama-cpp-python into a virtual environment in the user
# cache (pip builds llama.cpp from source for this CPU: about 20 minutes on 2 cores, once),
# then runs, REPS times interleaved, llama.cpp at one thread (scripts/llamacpp_bench.py) and
# citizen's BenchmarkSmolLM2Decode (weights=quant, seqs=1) and BenchmarkSmolLM2Prefill
# (weights=quant) at one thread and BenchmarkSmolLM2ServingRSS (the resident memory serving
# adds, in a process of its own), and prints the medians, the ratios citizen / llama.cpp and
# the load average at the start and the end, as a table and as JSON (OUT, default
# llamacpp-compare.json in the current directory).
#
#   scripts/llamacpp-compare.sh
#
# Environment: LLAMACPP_VENV (default ${XDG_CACHE_HOME:-~/.cache}/citizen/llamacpp-venv),
# LLAMACPP_VERSION (default 0.3.36), REPS (default 3), OUT.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${LLAMACPP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/citizen/llamacpp-venv}
version=${LLAMACPP_VERSION:-0.3.36}
reps=${REPS:-3}
out=${OUT:-llamacpp-compare.json}

if ! "$venv/bin/python" -c 'import llama_cpp, numpy' 2>/dev/null; then
	echo "installing llama-cpp-python $version into $venv (builds llama.cpp from source)" >&2
	python3 -m venv "$venv"
	CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF" \
		CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install "llama-cpp-python==$version" numpy >&2
fi

gguf=$(go run ./cmd/citizen models path smollm2-135m-instruct)
test -f "$gguf" || { echo "no model at $gguf: run citizen once to fetch it" >&2; exit 1; }
bin=$(mktemp -d)/gguf.test
go test -c -o "$bin" ./model/gguf

load() { cut -d' ' -f1-3 /proc/loadavg; }
load0=$(load)
llama=() go_dec=() go_pre=() go_rss=()
for r in $(seq "$reps"); do
	echo "run $r/$reps (load $(load))" >&2
	llama+=("$("$venv/bin/python" scripts/llamacpp_bench.py "$gguf")")
	res=$(cd model/gguf && for b in 'SmolLM2Decode$/weights=quant$/seqs=1$' 'SmolLM2Prefill$/weights=quant$'; do
		CITIZEN_SMOLLM2_GGUF=$gguf "$bin" -test.run '^$' -test.bench "$b" -test.benchtime 3x
	done)
	go_dec+=("$(awk '/SmolLM2Decode/ {for (i = 1; i <= NF; i++) if ($(i+1) == "tokens/CPU-s") print $i}' <<<"$res")")
	go_pre+=("$(awk '/SmolLM2Prefill/ {for (i = 1; i <= NF; i++) if ($(i+1) == "tokens/CPU-s") print $i}' <<<"$res")")
	rss=$(cd model/gguf && CITIZEN_SMOLLM2_GGUF=$gguf "$bin" -test.run '^$' -test.bench 'SmolLM2ServingRSS$' -test.benchtime 1x)
	go_rss+=("$(awk '/SmolLM2ServingRSS/ {for (i = 1; i <= NF; i++) if ($(i+1) == "MiB-rss") print $i}' <<<"$rss")")
done
load1=$(load)

python3 - "$out" "$load0" "$load1" "$(lscpu | sed -n 's/^Model name: *//p')" "${llama[@]}" -- "${go_dec[@]}" -- "${go_pre[@]}" -- "${go_rss[@]}" <<'PY'
import json, statistics, sys
out, load0, load1, cpu = sys.argv[1:5]
rest = sys.argv[5:]
i = rest.index("--")
j = rest.index("--", i + 1)
k = rest.index("--", j + 1)
llama = [json.loads(s) for s in rest[:i]]
go_dec = [float(x) for x in rest[i + 1:j]]
go_pre = [float(x) for x in rest[j + 1:k]]
go_rss = [float(x) for x in rest[k + 1:]]
rows = []
for name, key, go in (("decode, batch 1 (tokens/CPU-s)", "decode_tokens_per_cpu_s", go_dec),
                      ("prefill, 204 tokens (tokens/CPU-s)", "prefill_tokens_per_cpu_s", go_pre),
                      ("resident memory serving adds (MiB, lower is better)", "serving_rss_mib", go_rss)):
    ll = [r[key] for r in llama]
    rows.append({"measure": name, "llama_cpp": ll, "citizen": go,
                 "llama_cpp_median": statistics.median(ll), "citizen_median": statistics.median(go),
                 "ratio": statistics.median(go) / statistics.median(ll)})
res = {"cpu": cpu, "llama_cpp_version": llama[0]["version"], "load_start": load0, "load_end": load1, "rows": rows}
json.dump(res, open(out, "w"), indent=1)
print(f"{cpu}; llama-cpp-python {res['llama_cpp_version']}; 1 thread each; load average {load0} at the start, {load1} at the end")
print("| median of %d | llama.cpp | citizen | citizen / llama.cpp |" % len(go_dec))
print("|---|---|---|---|")
f = lambda v: " / ".join(f"{x:.1f}" for x in v)
for r in rows:
    print(f"| {r['measure']} | {r['llama_cpp_median']:.1f} ({f(r['llama_cpp'])}) | {r['citizen_median']:.1f} ({f(r['citizen'])}) | {r['ratio']:.2f}× |")
print(f"(JSON in {out})")
PY
