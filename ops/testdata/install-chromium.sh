#!/bin/sh
# Installs headless Chromium for the dashboard test (ops/dashboard_test.go)
# on Debian/Ubuntu. Idempotent; CI calls it before `go test ./ops/...`
# with CI=true, where a missing Chromium fails the test instead of
# skipping it. Needs root (or sudo).
set -eu
if command -v chromium >/dev/null 2>&1; then
	chromium --version
	exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium
chromium --version
