#!/usr/bin/env bash
# Prints the cgo environment every build of lloyal uses, as `export` lines.
#
# The flags must be byte-identical between builds: Go's build cache keys the
# llama.cpp objects on them (a cold `make build` took 4 min 52 s on 2 cores,
# docs/build.md), so any change rebuilds all of llama.cpp. Everything here is
# derived from the machine and the module cache, never from the caller's
# environment, for that reason.
#
#   LLOYAL_MARCH=native  builds with -march=native instead of the set read
#                        off /proc/cpuinfo — for the engine benchmark only.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ollama="$(cd "$root" && go list -m -f '{{.Dir}}' github.com/ollama/ollama)"
if [ -z "$ollama" ] || [ ! -d "$ollama" ]; then
  (cd "$root" && go mod download github.com/ollama/ollama) >&2
  ollama="$(cd "$root" && go list -m -f '{{.Dir}}' github.com/ollama/ollama)"
fi

simd=""
if [ "${LLOYAL_MARCH:-}" = "native" ]; then
  simd="-march=native"
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then
  # What ollama's release "haswell" CPU build enables. Without it ggml's CPU
  # kernels are compiled for SSE2 only and prefill is ~10x slower.
  simd="-mavx2 -mfma -mf16c"
  # AVX-512 where the CPU has the whole set, as ollama's skylakex, icelake
  # and zen4 CPU builds enable it: ggml's F16 matrix kernels then take 16
  # floats at a time instead of 8. On a 2-core Zen 5, 8 agents of a 134M F16
  # model step in 35 ms instead of 66 (docs/speed.md). As with AVX2, a
  # binary built here runs only on CPUs that have what this one has.
  if grep -qw avx512f /proc/cpuinfo && grep -qw avx512cd /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo &&
    grep -qw avx512dq /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo; then
    simd+=" -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw"
    grep -qw avx512vbmi /proc/cpuinfo && simd+=" -mavx512vbmi"
    grep -qw avx512_vnni /proc/cpuinfo && simd+=" -mavx512vnni"
    grep -qw avx512_bf16 /proc/cpuinfo && simd+=" -mavx512bf16"
  fi
fi

# The stand-in headers (engine/llamacpp/include) are copied to a folder named
# by their content, outside the checkout: a path inside it would make the
# flags, and so Go's cache keys for all of llama.cpp, differ between two
# checkouts of the same commit, and each new folder would compile llama.cpp
# again (minutes).
include="$root/engine/llamacpp/include"
sum="$(cd "$include" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
cache="$(cd "$root" && go env GOCACHE)"
shared="$(dirname "$cache")/lloyal/cgo-include-$sum"
if [ ! -d "$shared" ]; then
  mkdir -p "$(dirname "$shared")"
  tmp="$(mktemp -d "$(dirname "$shared")/.cgo-include.XXXXXX")"
  cp -R "$include/." "$tmp/"
  mv -T "$tmp" "$shared" 2>/dev/null || rm -rf "$tmp" # another build made it first
fi
cppflags="-I$shared"
cppflags+=" -I$ollama/llama/llama.cpp/include"
cppflags+=" -I$ollama/llama/llama.cpp/common"
cppflags+=" -I$ollama/ml/backend/ggml/ggml/include"

echo "export CGO_ENABLED=1"
echo "export CGO_CPPFLAGS='$cppflags'"
echo "export CGO_CFLAGS='-O2 $simd'"
echo "export CGO_CXXFLAGS='-O2 $simd'"
echo "export LLOYAL_SIMD_FLAGS='${simd:-none (baseline x86-64)}'"
