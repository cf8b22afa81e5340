# make        build (build/lib/libgpubridge.so, build/bin/gpubridge-{run,perf,info})
# make demo   a simulated 4-rank job (nvidia:2 + amd:2): all-reduce 8 B .. 64 MiB, validated
# make test   build, then every test suite
# make test-asan / test-tsan   the unit and multi-process suites under ASan+UBSan
#             (build-asan) or TSan (build-tsan); any report fails (tests/sanitizers/)
# make bench-gloo / bench-mpi / bench-link   comparisons (bench/, docs/PERFORMANCE.md)
BUILD ?= build
WERROR ?= ON
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all build demo test test-asan test-tsan clean env-doc bench-gloo bench-mpi bench-link

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DGPUBRIDGE_WERROR=$(WERROR)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/gpubridge-run -n 4 --vendors nvidia:2,amd:2 -- \
	  $(BUILD)/bin/gpubridge-perf all_reduce -b 8 -e 64M -f 2 -n 5 -w 1 -c 1

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Sanitizer suites: labels unit and mp only (tests/python loads the library
# into an uninstrumented python, tests/gpu needs a GPU). The sanitizer options
# are set per test by tests/CMakeLists.txt. SAN_TESTS narrows to a -R regex.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_TESTS ?= .
SAN_TSAN_EXCLUDE ?=

$(ASAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ASAN_BUILD) -DGPUBRIDGE_WERROR=$(WERROR) -DGPUBRIDGE_SANITIZE=address

$(TSAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(TSAN_BUILD) -DGPUBRIDGE_WERROR=$(WERROR) -DGPUBRIDGE_SANITIZE=thread

test-asan: $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L '^(unit|mp)$$' -R '$(SAN_TESTS)'

test-tsan: $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && ctest --output-on-failure -j $(JOBS) -L '^(unit|mp)$$' -R '$(SAN_TESTS)' \
	  $(if $(SAN_TSAN_EXCLUDE),-E '$(SAN_TSAN_EXCLUDE)')

# docs/ENV.md is generated from the parameter table.
env-doc: build
	$(BUILD)/bin/gpubridge-info -c --markdown > docs/ENV.md

# Comparisons on this machine, each in one run; results and plots go to
# $(BENCH_OUT), each ends with its ratio line (docs/PERFORMANCE.md).
PYTHON ?= python3
BENCH_OUT ?= docs/perf
BENCH_ARGS = --build $(abspath $(BUILD)) --out $(abspath $(BENCH_OUT))

bench-gloo: build
	$(PYTHON) bench/bench_gloo.py $(BENCH_ARGS)

bench-mpi: build
	$(PYTHON) bench/bench_mpi.py $(BENCH_ARGS)

# Needs root: network namespaces and tc.
bench-link: build
	$(PYTHON) bench/bench_link.py $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
