#!/usr/bin/env bash
# Runs every test. Starts what the tests need (a Kafka broker for the Kafka
# adapter when one can be started) and stops it afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
cleanup=()
trap 'for c in "${cleanup[@]}"; do eval "$c" || true; done' EXIT

if [ -z "${KAFKA_BROKERS:-}" ] && [ -x events/bus/kafka/testdata/start-kafka.sh ]; then
  echo "== starting a local Apache Kafka (KRaft) for the Kafka adapter's conformance suite"
  if out=$(events/bus/kafka/testdata/start-kafka.sh); then
    export KAFKA_BROKERS="$out"
    cleanup+=("events/bus/kafka/testdata/start-kafka.sh stop")
  elif [ "${CI:-}" = "true" ]; then
    echo "could not start Kafka and CI=true: failing" >&2
    exit 1
  fi
fi

echo "== go test"
go test -count=1 -timeout 20m ./...
echo "== go test -race (concurrency-heavy packages)"
go test -count=1 -race -timeout 15m ./events/... ./services/...
