# citizen's two commands: `make run` starts everything on embedded defaults,
# `make test` runs every test, doing each set-up step the tests need.
GO ?= go

.PHONY: run build test vet bench fmt

# The binary exits 0 when interrupted; the trap keeps make from reporting
# Ctrl-C as a failed recipe.
run: build
	@trap 'exit 0' INT; ./bin/citizen serve

build:
	$(GO) build -o bin/citizen ./cmd/citizen

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

test: vet
	./scripts/test.sh

bench:
	$(GO) test ./... -run '^$$' -bench . -benchtime 1x
