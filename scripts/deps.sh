#!/usr/bin/env bash
# Installs what building lloyal needs and is not already here. Idempotent:
# it checks first and says what it installs.
#   - Debian: nlohmann-json3-dev and libstb-dev (headers llama.cpp's vendor/
#     folder would hold; Go module zips drop vendor/), a C/C++ compiler.
#   - Go modules (go mod download).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v go >/dev/null; then
  echo "deps: Go is not installed (need Go 1.26+ on PATH, e.g. /usr/local/go/bin)" >&2
  exit 1
fi

need=()
for pkg in nlohmann-json3-dev libstb-dev g++ make tmux ${LLOYAL_EXTRA_DEBS:-}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${need[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

(cd "$root" && go mod download)
