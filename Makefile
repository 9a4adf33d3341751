# lloyal's build. Every target evaluates scripts/cgo-env.sh, so the cgo flags
# are byte-identical between targets and llama.cpp (compiled by cgo through
# the ollama module) is built once and then served from Go's build cache.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CGO := eval "$$(scripts/cgo-env.sh)"
LDFLAGS = -X 'github.com/lloyal-ai/lloyal/internal/cli.SIMDFlags=$$LLOYAL_SIMD_FLAGS' -X 'github.com/lloyal-ai/lloyal/internal/cli.Version=$(shell git describe --always --dirty 2>/dev/null || echo dev)'
GOTEST_FLAGS ?=

.PHONY: all deps build test test-e2e run bench bench-native flags fuzz

all: build

deps:
	@scripts/deps.sh

flags: deps
	@$(CGO); echo "CGO_CFLAGS=$$CGO_CFLAGS"; echo "CGO_CXXFLAGS=$$CGO_CXXFLAGS"; echo "CGO_CPPFLAGS=$$CGO_CPPFLAGS"

# GPU=vulkan, cuda or auto also builds that ggml backend from the ollama
# module's sources into lib/lloyal, which bin/lloyal loads at start (the
# binary is the same: its cgo flags do not change). The first build is slow
# (Vulkan's shaders), later ones copy it from ~/.cache/lloyal/gpu.
# GPU=none removes lib/lloyal. docs/gpu.md.
GPU ?=
build: deps
	@$(CGO); echo "building bin/lloyal (llama.cpp SIMD: $$LLOYAL_SIMD_FLAGS)"; \
	go build -ldflags "$(LDFLAGS)" -o bin/lloyal .
	$(if $(GPU),@scripts/build-gpu.sh $(GPU))

# The main job: the research harness over the built-in handbook, with the
# built-in demo model unless MODEL= names a GGUF file or an ollama model.
MODEL ?=
run: build
	bin/lloyal run $(if $(MODEL),--model $(MODEL))

# The default suite (minutes): vet, unit and fast integration tests, the race
# detector on every package that does not link llama.cpp (scripts/test.sh).
test: deps
	@GOTEST_FLAGS='$(GOTEST_FLAGS)' scripts/test.sh

# The slow end-to-end suite: the real binary in tmux, a real ollama server,
# whole harness runs, training, soak. CI runs it after make test.
test-e2e: deps
	@GOTEST_FLAGS='$(GOTEST_FLAGS)' scripts/test.sh e2e

bench: build
	bin/lloyal bench engine
	bin/lloyal bench runtime
	bin/lloyal bench pressure

# The same benchmark with llama.cpp compiled for this exact CPU
# (-march=native). Uses a separate binary; the first run rebuilds llama.cpp.
bench-native: deps
	@eval "$$(LLOYAL_MARCH=native scripts/cgo-env.sh)"; \
	go build -ldflags "$(LDFLAGS)" -o bin/lloyal-native . && bin/lloyal-native bench engine

FUZZTIME ?= 60s
fuzz:
	go test ./engine/chat -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./engine/chat -run '^$$' -fuzz '^FuzzDecoder$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./engine/chat -run '^$$' -fuzz '^FuzzTemplateContent$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./engine/chat -run '^$$' -fuzz '^FuzzTemplateJinja2$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	go test ./internal/gguf -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME)
	go test ./trace -run '^$$' -fuzz '^FuzzScanner$$' -fuzztime $(FUZZTIME)
	go test ./tools -run '^$$' -fuzz '^FuzzToolArgs$$' -fuzztime $(FUZZTIME)
	go test ./abilities -run '^$$' -fuzz '^FuzzParseManifest$$' -fuzztime $(FUZZTIME)
	@$(CGO); go test ./engine/llamacpp/model -run '^$$' -fuzz '^FuzzOpenMetadata$$' -fuzztime $(FUZZTIME)
	@$(CGO); go test ./engine/llamacpp/model -run '^$$' -fuzz '^FuzzOpenExperts$$' -fuzztime $(FUZZTIME)
	@$(CGO); go test ./internal/runconfig -run '^$$' -fuzz '^FuzzCheckRun$$' -fuzztime $(FUZZTIME)
	go test ./internal/questions -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	go test ./internal/jsondepth -run '^$$' -fuzz '^FuzzMeasure$$' -fuzztime $(FUZZTIME)
	go test ./internal/demoranker -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME)
	go test ./harness -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	go test ./tools -run '^$$' -fuzz '^FuzzStem$$' -fuzztime $(FUZZTIME)
	go test ./internal/research -run '^$$' -fuzz '^FuzzClauses$$' -fuzztime $(FUZZTIME)
	go test ./internal/repetition -run '^$$' -fuzz '^FuzzTail$$' -fuzztime $(FUZZTIME)
	@$(CGO); go test ./internal/cli -run '^$$' -fuzz '^FuzzSamplingFlags$$' -fuzztime $(FUZZTIME)
