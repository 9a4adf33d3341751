#!/usr/bin/env bash
# The device check: lloyal on this machine's GPU against its CPU and against
# ollama on the same GPU, in one table (docs/gpu.md). One command, meant to
# finish within 8 minutes on a machine with a GPU and 16 cores:
#
#   scripts/device-check.sh [OUTDIR]
#
# 1. builds bin/lloyal and the GPU backend it can (CUDA where nvcc is,
#    Vulkan otherwise: scripts/build-gpu.sh), and ollama from lloyal's own
#    ollama module with the same backend library (as engine/serverbackend/
#    ollamatest builds it);
# 2. writes the model both sides run (MODEL=FILE.gguf to bring one; default
#    a generated 134M llama, random weights, f16: docs/speed.md's shape, so
#    the CPU rows finish in the time);
# 3. runs `lloyal devices`, then `lloyal bench kv`, `bench agents` and
#    `bench server` offloaded (every layer on the GPU) and on the CPU
#    (LLOYAL_LIBRARY_PATH= loads no GPU backend), the server rows against
#    ollama on the GPU in its best configuration for 8 agents
#    (OLLAMA_NUM_PARALLEL=8 OLLAMA_MULTIUSER_CACHE=1 OLLAMA_NEW_ENGINE=1
#    OLLAMA_FLASH_ATTENTION=1);
# 4. writes OUTDIR/table.md: every 8-agent row, wall seconds, and the
#    ratios the issue asks for; each command's whole output is beside it.
#
# OUTDIR defaults to $OUT (the device machine's folder that comes back) or
# /tmp/lloyal-device-check. On a machine without a GPU it still runs (the
# Vulkan rows then need GGML_VK_VISIBLE_DEVICES=0 and Mesa's software
# device, and mean nothing for speed): that is how it was tested.
#
#   GPU=vulkan|cuda   force a backend (default: cuda where nvcc is)
#   AGENTS=8          the agent counts of the bench rows (e.g. 1,8)
#   SKIP_BUILD=1      use bin/lloyal and lib/lloyal as they are
#   LLOYAL_OLLAMA_BIN use this ollama instead of building one
#   STEP_TIMEOUT=120  seconds any one bench may take (a row cut short is
#                     missing from the table; its output says so)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-/tmp/lloyal-device-check}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
agents="${AGENTS:-8}"
step_timeout="${STEP_TIMEOUT:-120}"
start=$(date +%s)
say() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$out/steps.txt"; }
: >"$out/steps.txt"

# Every process started here dies with the script.
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

cd "$root"
gpu="${GPU:-}"
if [ -z "$gpu" ]; then
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then gpu=cuda; else gpu=vulkan; fi
fi

# 1. Builds.
eval "$(scripts/cgo-env.sh)"
if [ "${SKIP_BUILD:-}" != 1 ]; then
  say "building bin/lloyal and the $gpu backend (GPU=$gpu)"
  # make build installs what is missing first; a machine that cannot
  # reach a package archive builds with what it has.
  if ! make build GPU="$gpu" >"$out/build.txt" 2>&1; then
    say "make build GPU=$gpu failed (build.txt): building without installing"
    go build -o bin/lloyal . >>"$out/build.txt" 2>&1 || { say "bin/lloyal does not build: see build.txt"; exit 1; }
    if ! LLOYAL_NO_INSTALL=1 scripts/build-gpu.sh "$gpu" >>"$out/build.txt" 2>&1; then
      if [ "$gpu" = cuda ] && LLOYAL_NO_INSTALL=1 scripts/build-gpu.sh vulkan >>"$out/build.txt" 2>&1; then gpu=vulkan; else gpu=none; fi
      say "the GPU backend built: $gpu (build.txt)"
    fi
  fi
fi
lloyal="$root/bin/lloyal"
libdir="$root/lib/lloyal"
if [ "${SKIP_BUILD:-}" = 1 ]; then
  gpu=none
  for g in cuda vulkan; do [ -f "$libdir/libggml-$g.so" ] && gpu=$g && break; done
fi
gpuenv=()
if [ "$gpu" = vulkan ]; then gpuenv+=(OLLAMA_VULKAN=1); fi
say "$("$lloyal" --version | tr '\n' ' ')"

# ollama from the module lloyal builds llama.cpp from, with the same cgo
# flags, and the same backend library laid out as ollama looks for it
# (<bin>/../lib/ollama/<variant>/).
ollama="$out/ollama/bin/ollama"
mkdir -p "$(dirname "$ollama")"
if [ -n "${LLOYAL_OLLAMA_BIN:-}" ]; then
  cp "$LLOYAL_OLLAMA_BIN" "$ollama"
else
  version="$(go list -m -f '{{.Version}}' github.com/ollama/ollama)"
  if [ ! -x "$ollama" ]; then
    say "building ollama $version"
    work="$(mktemp -d)"
    cp internal/ollamatest/testdata/ollama.mod "$work/go.mod"
    cp internal/ollamatest/testdata/ollama.sum "$work/go.sum"
    (cd "$work" && go build -o "$ollama" github.com/ollama/ollama) >"$out/ollama-build.txt" 2>&1 || say "ollama did not build (ollama-build.txt): no server rows"
    rm -rf "$work"
  fi
fi
if [ -x "$ollama" ] && [ -d "$libdir" ]; then
  olib="$out/ollama/lib/ollama"
  mkdir -p "$olib/$gpu"
  cp -P "$libdir"/libggml-base.so* "$olib/"
  cp -P "$libdir"/libggml-base.so* "$libdir"/libggml-"$gpu".so "$olib/$gpu/" 2>/dev/null || true
fi

# 2. The model.
model="${MODEL:-$out/llama134m.gguf}"
if [ ! -f "$model" ]; then
  say "writing the 134M bench model"
  "$lloyal" model tiny --preset bench --layers 12 --width 768 --ff 2048 --heads 12 --kv-heads 12 --type f16 -o "$model" >>"$out/steps.txt"
fi

# run NAME WHERE CMD...: one bench, its output in NAME-WHERE.txt, bounded.
run() {
  local name="$1" where="$2"
  shift 2
  say "$name ($where)"
  local rc=0
  timeout --kill-after=10 "$step_timeout" "$@" >"$out/$name-$where.txt" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "(exit status $rc: 124 is the ${step_timeout} s limit)" >>"$out/$name-$where.txt"
    say "$name ($where) did not finish (exit status $rc): $out/$name-$where.txt"
  fi
}
cpu=(env LLOYAL_LIBRARY_PATH=)
dev=(env "${gpuenv[@]}")

# 3. The runs.
run devices gpu "${dev[@]}" "$lloyal" devices
run kv gpu "${dev[@]}" "$lloyal" bench kv --model "$model" --agents 8
run kv cpu "${cpu[@]}" "$lloyal" bench kv --model "$model" --agents 8

server=()
if [ -x "$ollama" ]; then
  port=$((20000 + RANDOM % 20000))
  mkdir -p "$out/ollama/home" "$out/ollama/models"
  say "ollama serve on 127.0.0.1:$port"
  setsid env HOME="$out/ollama/home" OLLAMA_MODELS="$out/ollama/models" OLLAMA_HOST="127.0.0.1:$port" \
    OLLAMA_NUM_PARALLEL=8 OLLAMA_MULTIUSER_CACHE=1 OLLAMA_NEW_ENGINE=1 OLLAMA_FLASH_ATTENTION=1 \
    OLLAMA_CONTEXT_LENGTH=16384 "${gpuenv[@]}" "$ollama" serve >"$out/ollama-serve.txt" 2>&1 &
  pids+=($!)
  for _ in $(seq 120); do
    OLLAMA_HOST="127.0.0.1:$port" "$ollama" list >/dev/null 2>&1 && break
    sleep 0.5
  done
  printf 'FROM %s\n' "$model" >"$out/Modelfile"
  if OLLAMA_HOST="127.0.0.1:$port" timeout 300 "$ollama" create bench -f "$out/Modelfile" >"$out/ollama-create.txt" 2>&1; then
    server=(--server "http://127.0.0.1:$port" --model bench)
  else
    say "ollama create failed (ollama-create.txt): no server rows"
  fi
fi
run agents gpu "${dev[@]}" "$lloyal" bench agents --local-model "$model" --agents "$agents" "${server[@]}"
run agents cpu "${cpu[@]}" "$lloyal" bench agents --local-model "$model" --agents "$agents"
run server gpu "${dev[@]}" "$lloyal" bench server --local-model "$model" --agents "$agents" "${server[@]}"
run server cpu "${cpu[@]}" "$lloyal" bench server --local-model "$model" --agents "$agents"
grep -i "inference compute\|offloaded" "$out/ollama-serve.txt" 2>/dev/null | head -20 >"$out/ollama-device.txt" || true

# 4. The table: every 8-agent row of the bench tables (backend, agents,
# wall s are their first columns), and bench kv's rows (ms per step).
{
  echo "# lloyal device check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- $("$lloyal" --version | tr '\n' ' ')"
  echo "- GPU backend: $gpu; model: $model"
  echo "- devices:"
  sed 's/^/    /' "$out/devices-gpu.txt"
  echo "- ollama's devices (its log): $(tr '\n' ' ' <"$out/ollama-device.txt" 2>/dev/null | cut -c1-400)"
  echo
  echo "| bench | lloyal on | row | agents | wall s / ms per step |"
  echo "|---|---|---|---|---|"
  for f in kv-gpu kv-cpu; do
    awk -v f="$f" '$1 ~ /^[0-9]+$/ && $2 ~ /^(f16|q8_0|q4_0)$/ && $0 !~ /fails/ {
      printf "| bench kv | %s | spine %s, %s, flash %s | 8 | %s ms/step |\n", substr(f, 4), $1, $2, $3, $(NF-1) }' "$out/$f.txt"
  done
  for f in agents-gpu agents-cpu server-gpu server-cpu; do
    # A row: the backend's words, then agents (an integer) and wall s.
    awk -v f="$f" '{
      for (i = 2; i < NF; i++) if ($i ~ /^[0-9]+$/ && $(i + 1) ~ /^[0-9]+\.[0-9]+$/) break
      if (i >= NF || $i != 8) next
      row = $1; for (j = 2; j < i; j++) row = row " " $j
      split(f, p, "-"); printf "| bench %s | %s | %s | %s | %s s |\n", p[1], p[2], row, $i, $(i + 1) }' "$out/$f.txt"
  done
  echo
  echo "Targets (issue 61): the 8-agent agent loop offloaded ≥ 10× faster than on the CPU (bench agents, gpu vs cpu local rows), and ≤ 0.5× ollama's wall on the same GPU (bench agents, gpu: local vs ollama rows)."
  echo "Took $(($(date +%s) - start)) s. Each command's output: $out/*.txt"
} >"$out/table.md"
say "wrote $out/table.md"
cat "$out/table.md"
