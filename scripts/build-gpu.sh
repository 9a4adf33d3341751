#!/usr/bin/env bash
# Builds one of ggml's GPU backends from the ollama module's own sources (the
# llama.cpp lloyal compiles through cgo) as a shared library, and installs
# it where bin/lloyal loads it at start: lib/lloyal/ beside bin/.
#
#   scripts/build-gpu.sh vulkan   ggml-vulkan (needs cmake, glslc, libvulkan-dev and
#                                 Mesa's drivers, mesa-vulkan-drivers:
#                                 installed here as scripts/deps.sh installs)
#   scripts/build-gpu.sh cuda     ggml-cuda (needs nvcc on PATH or in
#                                 /usr/local/cuda/bin; never installed for you)
#   scripts/build-gpu.sh auto     cuda where nvcc is, else vulkan
#   scripts/build-gpu.sh none     removes lib/lloyal: bin/lloyal runs on the CPU
#
#   --dest DIR   install into DIR instead of lib/lloyal (the tests use it)
#   --print      only print the cache folder the build would use
#
# LLOYAL_NO_INSTALL=1 installs nothing: a missing tool is an error with exit
# status 3 (the tests skip on it, saying what to install).
#
# The lloyal binary itself is the same for every backend (the cgo flags of
# scripts/cgo-env.sh do not change, so Go's cache keeps serving llama.cpp);
# a backend is a library ggml loads at run time, as ollama's are.
#
# A build is done once per ollama version, backend, compiler and recipe, in
# ${XDG_CACHE_HOME:-~/.cache}/lloyal/gpu/<backend>-<version>-<hash>/: the
# Vulkan backend's ~1,400 shader variants and its 15,000-line source took
# 4 min 39 s on 2 cores (docs/gpu.md), so the second `make build
# GPU=vulkan` only copies the library. LLOYAL_BUILD_JOBS sets the parallel
# jobs (default: every CPU).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

backend="${1:-}"
shift || true
dest="$root/lib/lloyal"
print=false
while [ $# -gt 0 ]; do
  case "$1" in
  --dest) dest="$2"; shift 2 ;;
  --print) print=true; shift ;;
  *) echo "build-gpu: unknown argument $1 (use --dest DIR or --print)" >&2; exit 2 ;;
  esac
done

# Where nvcc is, if anywhere: PATH first, then CUDA's default prefix.
find_nvcc() {
  command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; } || true
}

case "$backend" in
auto)
  if [ -n "$(find_nvcc)" ]; then backend=cuda; else backend=vulkan; fi
  echo "build-gpu: GPU=auto chose $backend$([ "$backend" = cuda ] && echo " (nvcc at $(find_nvcc))" || echo " (no nvcc here)")"
  ;;
vulkan | cuda) ;;
none | "")
  if [ "$dest" = "$root/lib/lloyal" ]; then rm -rf "$dest"; fi
  exit 0
  ;;
*)
  echo "build-gpu: GPU=$backend is not a backend: use vulkan, cuda, auto or none" >&2
  exit 2
  ;;
esac

ollama="$(cd "$root" && go list -m -f '{{.Dir}}' github.com/ollama/ollama)"
version="$(cd "$root" && go list -m -f '{{.Version}}' github.com/ollama/ollama)"
if [ -z "$ollama" ] || [ ! -f "$ollama/CMakeLists.txt" ]; then
  echo "build-gpu: the ollama module's sources are not in the module cache: run make deps" >&2
  exit 1
fi

# What a backend needs. Vulkan's are Debian packages, installed like
# scripts/deps.sh's; CUDA's toolkit is the machine owner's choice.
if [ "${LLOYAL_NO_INSTALL:-}" = 1 ] && [ "$backend" = vulkan ]; then
  missing=()
  command -v cmake >/dev/null || missing+=(cmake)
  command -v glslc >/dev/null || missing+=(glslc)
  [ -f /usr/include/vulkan/vulkan.h ] || missing+=(libvulkan-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "build-gpu: the Vulkan backend cannot be built here: missing ${missing[*]} (make build GPU=vulkan installs them: apt-get install cmake glslc libvulkan-dev mesa-vulkan-drivers)" >&2
    exit 3
  fi
elif [ "$backend" = vulkan ]; then
  LLOYAL_EXTRA_DEBS="cmake glslc libvulkan-dev mesa-vulkan-drivers" "$root/scripts/deps.sh" >/dev/null
else
  nvcc="$(find_nvcc)"
  if [ -z "$nvcc" ]; then
    echo "build-gpu: GPU=cuda needs NVIDIA's CUDA toolkit (nvcc), and there is none on PATH or in /usr/local/cuda/bin: install it, or build GPU=vulkan, which runs on NVIDIA GPUs too" >&2
    exit 3
  fi
  if [ "${LLOYAL_NO_INSTALL:-}" != 1 ]; then
    LLOYAL_EXTRA_DEBS="cmake" "$root/scripts/deps.sh" >/dev/null
  fi
  export PATH="$(dirname "$nvcc"):$PATH"
fi

# The recipe: every cmake argument. The library is linked with its own
# folder as its run path, so it finds the libggml-base.so beside it wherever
# it is installed.
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=\$ORIGIN"
  -DGGML_CCACHE=OFF -DOLLAMA_RUNNER_DIR="$backend")
target="ggml-$backend"
if [ "$backend" = cuda ]; then
  # The GPUs of this machine only: a build for every architecture takes
  # hours. LLOYAL_CUDA_ARCHS overrides (e.g. "80;86;89;90").
  cmake_args+=("-DCMAKE_CUDA_ARCHITECTURES=${LLOYAL_CUDA_ARCHS:-native}")
  # ollama's CMakeLists.txt configures Vulkan too wherever its headers are,
  # and then requires glslc: a CUDA build needs neither.
  cmake_args+=(-DCMAKE_DISABLE_FIND_PACKAGE_Vulkan=ON)
  tools="$(nvcc --version | tail -1)"
else
  tools="$(glslc --version 2>&1 | sed -n 1p)"
fi
tools+=" $(c++ --version | sed -n 1p) $(cmake --version | sed -n 1p)"
# recipe names what this script does to the sources (below): a change to
# it must change the cache folder.
recipe="src-copy+feature-tests+layer-settings v2"
hash="$(printf '%s\n' "${cmake_args[*]}" "$tools" "$(uname -m)" "$recipe" | sha256sum | cut -c1-12)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lloyal/gpu/$backend-$version-$hash"
if $print; then
  echo "$cache"
  exit 0
fi

if [ ! -f "$cache/done" ]; then
  echo "build-gpu: building $target from ollama $version into $cache (once: about 5 minutes on 2 cores for Vulkan's shaders and source)"
  rm -rf "$cache"
  mkdir -p "$cache"
  start=$(date +%s)
  # The sources the build needs, copied out of the read-only module cache:
  # ollama's CMakeLists.txt and its ggml tree. The module lacks ggml-vulkan's
  # vulkan-shaders/feature-tests/, the shaders cmake compiles to ask glslc
  # which GLSL extensions it supports; without them every extension seems
  # supported and an older glslc (Debian 12's) fails on the shaders that use
  # them. Each test is the extension's #extension line alone.
  src="$cache/src"
  mkdir -p "$src/ml/backend/ggml"
  cp "$ollama/CMakeLists.txt" "$src/"
  cp -r "$ollama/ml/backend/ggml/ggml" "$src/ml/backend/ggml/"
  chmod -R u+w "$src"
  tests="$src/ml/backend/ggml/ggml/src/ggml-vulkan/vulkan-shaders/feature-tests"
  mkdir -p "$tests"
  for t in coopmat:GL_KHR_cooperative_matrix coopmat2:GL_NV_cooperative_matrix2 integer_dot:GL_EXT_integer_dot_product bfloat16:GL_EXT_bfloat16; do
    [ -f "$tests/${t%%:*}.comp" ] || printf '#version 460\n#extension %s : require\nvoid main() {}\n' "${t#*:}" >"$tests/${t%%:*}.comp"
  done
  # ggml-vulkan chains VK_EXT_layer_settings (used only by its validation
  # build) into every instance it creates; Vulkan headers older than
  # 1.3.272 (Debian 12 has 1.3.239) lack the type. Without the extension's
  # macro the instance is created without the chain, as a release build
  # with newer headers does in effect (the setting is off there).
  vk="$src/ml/backend/ggml/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
  perl -0pi -e 's/(    VkBool32 enable_best_practice = layer_settings;\n.*?vk::InstanceCreateInfo instance_create_info\(vk::InstanceCreateFlags\{\}, &app_info, layers, extensions, &layer_setting_info\);\n)/#ifdef VK_EXT_layer_settings\n$1#else\n    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n#endif\n/s' "$vk"
  if [ "$backend" = vulkan ] && ! grep -q '^#ifdef VK_EXT_layer_settings' "$vk"; then
    echo "build-gpu: ggml-vulkan.cpp of ollama $version no longer has the instance code scripts/build-gpu.sh adapts to older Vulkan headers: update the edit there" >&2
    exit 1
  fi
  cmake -S "$src" -B "$cache/build" "${cmake_args[@]}" >"$cache/configure.log" 2>&1 || {
    tail -30 "$cache/configure.log" >&2
    echo "build-gpu: cmake configure failed (whole log: $cache/configure.log)" >&2
    exit 1
  }
  cmake --build "$cache/build" --target "$target" -j "${LLOYAL_BUILD_JOBS:-$(nproc)}" >"$cache/build.log" 2>&1 || {
    tail -30 "$cache/build.log" >&2
    echo "build-gpu: building $target failed (whole log: $cache/build.log)" >&2
    exit 1
  }
  mkdir -p "$cache/lib"
  # The backend and the ggml-base it links (with its soname links).
  cp -P "$cache/build/lib/ollama/lib$target.so" "$cache/build/lib/ollama"/libggml-base.so* "$cache/lib/"
  echo "$(($(date +%s) - start))" >"$cache/seconds"
  # The objects (a quarter of a GB) serve no later build: a new key
  # builds from scratch.
  rm -rf "$cache/build" "$cache/src"
  touch "$cache/done"
  echo "build-gpu: built $target in $(cat "$cache/seconds") s"
fi

# Install: a folder holding one backend, so a stale one of another kind is
# never loaded beside it.
mkdir -p "$dest"
find "$dest" -maxdepth 1 -name 'libggml-*.so*' ! -name "lib$target.so" ! -name 'libggml-base.so*' -delete
for f in "$cache/lib"/*; do
  name="$(basename "$f")"
  if [ -L "$f" ]; then
    ln -sfn "$(readlink "$f")" "$dest/$name"
  elif ! cmp -s "$f" "$dest/$name"; then
    cp -f "$f" "$dest/$name.tmp" && mv -f "$dest/$name.tmp" "$dest/$name"
  fi
done
echo "build-gpu: $target installed in ${dest#"$root"/}"
