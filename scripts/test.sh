#!/usr/bin/env bash
# Runs every test (the README's `make test`; CI's .ci/run). It installs and
# starts what the tests need first: the OpenAI SDK for the gateway's API
# tests (npm ci), headless Chromium for the dashboard test, a single-node
# Apache Kafka for the Kafka adapter's real-broker suite, a PostgreSQL
# server for the PostgreSQL event store's suite, the Python reference
# packages for the interop checks (gguf, tokenizers, transformers, jinja2,
# numpy, and openai for the gateway's Python SDK test) and the default
# model's GGUF file (SmolLM2-135M-Instruct, fetched once into the model
# cache); and stops the servers at the end. Under
# CI=true a missing piece fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
cleanup=()
trap 'for c in "${cleanup[@]}"; do eval "$c" || true; done' EXIT
ci=${CI:-}

need() { # need WHAT: fail under CI, warn otherwise
	if [ "$ci" = "true" ]; then
		echo "test.sh: $1 is required under CI=true" >&2
		exit 1
	fi
	echo "test.sh: warning: $1 unavailable; the tests that need it will skip" >&2
}

echo "== OpenAI SDK (npm ci in gateway/sdktest)"
if command -v npm >/dev/null; then
	(cd gateway/sdktest && npm ci --no-audit --no-fund --loglevel=error) || need "npm ci"
else
	need "npm"
fi

echo "== headless Chromium"
if ! command -v chromium >/dev/null; then
	sh ops/testdata/install-chromium.sh >/dev/null || need "chromium"
fi

if [ -z "${KAFKA_BROKERS:-}" ]; then
	echo "== Apache Kafka (KRaft, single node)"
	if brokers=$(events/bus/kafka/testdata/start-kafka.sh); then
		export KAFKA_BROKERS="$brokers"
		cleanup+=("events/bus/kafka/testdata/start-kafka.sh stop")
	else
		need "a Kafka broker"
	fi
fi

if [ -z "${CITIZEN_PG_URL:-}" ]; then
	echo "== PostgreSQL"
	if url=$(events/pgstore/testdata/start-postgres.sh); then
		export CITIZEN_PG_URL="$url"
		cleanup+=("events/pgstore/testdata/start-postgres.sh stop")
	else
		need "a PostgreSQL server"
	fi
fi

echo "== Python reference packages (interop checks)"
if python3 -m pip install --quiet --disable-pip-version-check gguf==0.19.0 tokenizers numpy jinja2 transformers safetensors openai==3.51.0 >/dev/null 2>&1 \
	|| python3 -m pip install --quiet --disable-pip-version-check gguf tokenizers numpy jinja2 transformers safetensors openai >/dev/null 2>&1; then
	export CITIZEN_PY_INTEROP=1
else
	need "pip install gguf tokenizers numpy jinja2 transformers safetensors openai"
fi

echo "== the default model (SmolLM2-135M-Instruct, once into the model cache)"
if gguf=$(go run ./cmd/citizen models path smollm2-135m-instruct); then
	export CITIZEN_SMOLLM2_GGUF="$gguf"
else
	need "the SmolLM2 GGUF file"
fi

echo "== go test"
go test -count=1 -timeout 25m ./...
echo "== go test -race -short (the concurrent core; -short skips the long model-driven runs, which the plain pass ran)"
go test -count=1 -race -short -timeout 20m ./events/... ./gateway/... ./services/... ./ops/...
