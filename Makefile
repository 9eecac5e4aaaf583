# citizen's two commands: `make run` starts everything on embedded defaults,
# `make test` runs every test, doing each set-up step the tests need.
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: run build test vet sdk bench fmt

run:
	$(GO) run ./services/citizen serve

build:
	$(GO) build -o bin/citizen ./services/citizen

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# The OpenAI SDK the API tests drive the gateway with.
sdk:
	@if [ -f gateway/sdktest/package-lock.json ]; then cd gateway/sdktest && npm ci --no-audit --no-fund --loglevel=error; fi

test: vet sdk
	./scripts/test.sh

bench:
	$(GO) test ./... -run '^$$' -bench . -benchtime 1x
