# make        build (build/lib/libgpubridge.so, build/bin/gpubridge-{run,perf,info})
# make demo   a simulated 4-rank job (nvidia:2 + amd:2): all-reduce 8 B .. 64 MiB, validated
# make test   build, then every test suite
BUILD ?= build
WERROR ?= ON
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all build demo test clean env-doc

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

# docs/ENV.md is generated from the parameter table.
env-doc: build
	$(BUILD)/bin/gpubridge-info -c --markdown > docs/ENV.md

clean:
	rm -rf $(BUILD)
