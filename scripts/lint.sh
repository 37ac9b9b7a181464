#!/usr/bin/env bash
# golangci-lint with the committed configuration (.golangci.yml), at the pinned
# version: installed into $(go env GOBIN) (default: GOPATH's bin) from the Go module proxy the first
# time, or when another version is there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v2.15.0
bin=$(go env GOBIN) # where go install puts it: GOBIN, else the first GOPATH entry's bin
bin=${bin:-$(go env GOPATH | cut -d: -f1)/bin}/golangci-lint
if ! [ -x "$bin" ] || ! "$bin" version 2>/dev/null | grep -q "version ${version#v} "; then
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
exec "$bin" run --timeout 30m "$@" ./...
