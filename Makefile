# The two commands a newcomer needs (README.md):
#   make demo   set up, build, and run the embedded default (a local cluster)
#   make test   set up, build, and run every test, then the unit tests again under
#               ASan + UBSan (scripts/sanitize) and each fuzzer for FUZZ_SECONDS
#               (scripts/fuzz); any failure or finding fails the target
# Both are idempotent. BUILD_DIR and CMAKE_FLAGS may be overridden.

BUILD_DIR ?= build
CMAKE_FLAGS ?=
CTEST_FLAGS ?= -j2 --timeout 1200
FUZZ_SECONDS ?= 20

.PHONY: all setup configure build test demo trainer-only clean

all: build

setup:
	@scripts/setup

configure: setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja $(CMAKE_FLAGS) > $(BUILD_DIR).configure.log 2>&1 \
	  || (cat $(BUILD_DIR).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD_DIR)

test: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure $(CTEST_FLAGS)
	@scripts/sanitize
	@scripts/fuzz $(FUZZ_SECONDS)

demo: build
	@scripts/demo $(BUILD_DIR)

# Only the trainer library and its tests: needs LibTorch, not gRPC (the GPU build).
trainer-only: setup
	@cmake -S . -B build-trainer-only -G Ninja -DCOHORT_TRAINER_ONLY=ON $(CMAKE_FLAGS)
	@cmake --build build-trainer-only

clean:
	rm -rf $(BUILD_DIR) build-trainer-only $(BUILD_DIR).configure.log build-asan build-fuzz \
	  build-asan.configure.log build-fuzz.configure.log
