#!/usr/bin/env bash
# Runs lloyal's tests: `make test` and `make test-e2e` call it.
#
#   scripts/test.sh       the default suite: go vet, then every package's
#                         tests with -short (the slow end-to-end tests skip,
#                         saying so). Packages whose test binary does not
#                         link llama.cpp run under the race detector; the
#                         others run without it, because a race build of
#                         llama.cpp costs minutes and the detector does not
#                         look inside C++. The engine's goroutines are
#                         race-checked on its scripted double (pure Go).
#   scripts/test.sh e2e   the slow suite: every test of every package, -short
#                         off (tmux of the real binary, a real ollama server,
#                         whole harness runs on llama.cpp, training, soak),
#                         without the race detector.
#
# GOTEST_FLAGS adds go test flags (e.g. -count=1, or -run '^$' to only build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
eval "$(scripts/cgo-env.sh)"
echo "llama.cpp SIMD: $LLOYAL_SIMD_FLAGS"
read -r -a flags <<<"${GOTEST_FLAGS:-}"

case "${1:-}" in
"")
  go vet ./...
  # One go list for every package: its test binary's dependencies say
  # whether it links llama.cpp (through the ollama module's llama package).
  pure=() native=()
  while read -r kind pkg; do
    if [ "$kind" = native ]; then native+=("$pkg"); else pure+=("$pkg"); fi
  done < <(go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
    awk '$1 ~ /\.test$/ { pkg = $1; sub(/\.test$/, "", pkg); kind = "pure"
      for (i = 2; i <= NF; i++) if ($i == "github.com/ollama/ollama/llama") kind = "native"
      print kind, pkg }')
  go test -short -race -timeout 15m "${flags[@]}" "${pure[@]}"
  go test -short -timeout 15m "${flags[@]}" "${native[@]}"
  ;;
e2e)
  go test -timeout 60m "${flags[@]}" ./...
  ;;
*)
  echo "usage: scripts/test.sh [e2e]" >&2
  exit 2
  ;;
esac
