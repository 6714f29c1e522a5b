# gptmem — build the trainer, its tests and its benchmarks.
#   make            build ./train (gcc, C11, OpenMP; MPI and CUDA when found) and fetch the corpus
#   make test       build and run every test; ends with "N passed, N failed"
#   make data       fetch the default corpus into data/
#   make bench      the CPU benchmark (GPT-2 124M, B=4 T=64, 2 threads)
#   make bench-cpu  the CPU's GEMM on a step's shapes beside OpenBLAS and the FMA peak, then make bench
#   make bench-flags what each memory flag costs in time on the CPU (the small model)
#   make asan       build and run the tests under AddressSanitizer + UBSan
#   make lecture    ./train-lecture: the seeds' techniques alone (no GPU, LoRA, TP, offload, model files)
#   make debug      ./train-debug for a debugger: the lecture build at -O0 -g (doc/reading.md steps through it)
#   make explorer   the memory explorer, doc/explorer.html: the dry run in a web page (clang's wasm32-wasi target)
#   make test-cuda  the GPU tests (needs a GPU): each kernel against its CPU op, then the model
#   make bench-gpu  the GPU benchmark (GPT-2 124M, B=16 T=1024): tok/s, MFU, peak memory
#   make bench-load short runs on a quiet and on a busy machine; --ranks 4 with the cores divided or not
# ARCH=-march=x86-64-v3 builds for another machine than this one; NVCC= builds without CUDA (no nvcc
# step, --device cpu only) where nvcc is installed but no GPU is.

# MPI (ZeRO over several ranks) when mpicc is found; otherwise one rank only.
MPICC  := $(shell command -v mpicc 2>/dev/null)
ifeq ($(MPICC),)
TRAIN_CC    = $(CC)
TRAIN_FLAGS =
$(info gptmem: mpicc not found: building ./train without MPI (one rank; install libopenmpi-dev openmpi-bin for ZeRO))
else
TRAIN_CC    = OMPI_CC=$(CC) $(MPICC)
TRAIN_FLAGS = -DGPTMEM_MPI
endif

# CUDA (--device cuda) when nvcc is found; otherwise cuda/none.c says so at run time.
NVCC   ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
CUDA_SRC = $(wildcard cuda/*.cu cuda/*.cuh) cuda/api.h cuda/nccl_parts.h cuda/gemm_choices.h lib/core/sizes.h
ifeq ($(NVCC),)
GPU_OBJ  = cuda/none.o
GPU_LIBS =
ifeq ($(origin NVCC),command line)
$(info gptmem: NVCC= given: building ./train without CUDA (--device cpu only), as asked)
else
$(info gptmem: nvcc not found: building ./train without CUDA (--device cpu only; install the CUDA toolkit for --device cuda))
endif
else
GPU_OBJ  = cuda/kernels.o
GPU_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++
# cuBLASLt is not linked: cuda/matmul.cu opens it when the GPU opens (a process on the CPU never
# loads its half gigabyte), by the soname of its header's major version; the rpath above is where
# it is found
# NCCL (--comm nccl: ZeRO's collectives on the GPU's buffers) when its header and library are found
NCCL_H   := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h))
NCCL_LIB := $(firstword $(wildcard $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so \
                                   /usr/lib/aarch64-linux-gnu/libnccl.so /usr/lib64/libnccl.so /usr/local/lib/libnccl.so))
ifeq ($(and $(NCCL_H),$(NCCL_LIB)),)
NCCL_FLAGS =
$(info gptmem: NCCL not found: building without --comm nccl (ZeRO on GPUs goes over MPI; install libnccl-dev for NCCL))
else
NCCL_FLAGS = -DGPTMEM_NCCL -I$(dir $(NCCL_H))
GPU_LIBS  += -L$(dir $(NCCL_LIB)) -Wl,-rpath,$(dir $(NCCL_LIB)) -lnccl
endif
endif

CC     ?= gcc
ARCH   ?= -march=native $(if $(filter x86_64,$(shell uname -m)),-mprefer-vector-width=512)
OPT    ?= -O3
CFLAGS ?= $(OPT) $(ARCH) -ffp-contract=fast
# the rooms are in lib/ and included by their path there ("core/config.h"), as llm.c's llmc/;
# -fno-math-errno: sqrtf need not set errno (nothing reads it), so loops that call it vectorize (AdamW's)
CFLAGS += -fno-math-errno -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -fopenmp -I. -Ilib
# CI (CI=true) fails the build on any warning: the build is warning-free, and stays so
CFLAGS += $(if $(filter true 1,$(CI)),-Werror)
LDLIBS  = -lm

STB := $(wildcard /usr/include/stb/stb_image_write.h)

# every header: the program is one translation unit (train.c includes them), as are the tests
HEADERS = model.h $(wildcard lib/*/*.h) cuda/api.h cuda/gemm_choices.h

.PHONY: all test data bench bench-cpu bench-flags bench-load asan clean chart compare test-cuda bench-gpu explorer debug lecture

# `make` leaves a runnable ./train with its corpus; if the corpus cannot be had
# (no ../shared, no network) the build still succeeds and says what to do.
all: train
	@$(MAKE) --no-print-directory -s data || echo "gptmem: the corpus is missing (see above): ./train needs data/tinyshakespeare.txt (make data) or --data FILE"

train: train.c $(HEADERS) $(GPU_OBJ)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) -o $@ train.c $(GPU_OBJ) $(LDLIBS) $(GPU_LIBS)

# The kernels: one nvcc translation unit (cuda/kernels.cu includes the op files), its GPU targets
# compiled side by side (--threads 0: a thread a target, up to the cores)
cuda/kernels.o: $(CUDA_SRC)
	@echo "gptmem: compiling the CUDA kernels with nvcc (about 2 minutes on 2 cores, once; make NVCC= builds the CPU path alone)"
	$(NVCC) -O3 -std=c++17 -I. -Ilib $(CUDA_ARCH) $(NCCL_FLAGS) --threads 0 -Xcompiler -Wall,-Wextra -c cuda/kernels.cu -o $@

cuda/none.o: cuda/none.c cuda/api.h
	$(CC) -O2 -std=c11 -Wall -Wextra -I. -Ilib -c cuda/none.c -o $@

# The GPU API run on the CPU (tests/host_gpu.c): tests/train_host is ./train whose --device cuda runs
# the GPU model (gpu/) on host memory, so CPU-only CI tests the GPU model's host logic (not its kernels).
# One translation unit, like train.c: tests/train_host.c includes train.c and tests/host_gpu.c.
tests/train_host: tests/train_host.c train.c tests/host_gpu.c $(wildcard tests/host_gpu/*.h) cuda/nccl_parts.h $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) -o $@ tests/train_host.c $(LDLIBS)

# The memory explorer (doc/explorer.html): train.c for WebAssembly (clang's wasm32-wasi target over
# Debian's wasi-libc; scripts/explorer/wasi/ holds what WASI lacks), inlined into one page with
# scripts/explorer/'s script. Without that toolchain it is left out, and says so.
WASI_CC ?= clang
WASI_OK := $(shell printf 'int main(void){return 0;}' | $(WASI_CC) --target=wasm32-wasi -x c - -o /dev/null 2>/dev/null && echo yes)
EXPLORER_SRC = $(wildcard scripts/explorer/*.js scripts/explorer/*.html scripts/explorer/*.py scripts/explorer/wasi/*.h \
                          scripts/explorer/wasi/sys/*.h)
# (no OpenMP there: its pragmas go, and a variable only a pragma reads is unused)
WASI_FLAGS = --target=wasm32-wasi -Os -std=c11 -D_POSIX_C_SOURCE=200809L -D_WASI_EMULATED_SIGNAL \
             -D_WASI_EMULATED_GETPID -D_WASI_EMULATED_PROCESS_CLOCKS -Wall -Wextra -Wno-unused-variable \
             -include scripts/explorer/wasi/shim.h -Iscripts/explorer/wasi -I. -Ilib
# (a stack of 1 MiB, not wasm-ld's 64 KiB: the settings are copied down a dry run's calls, and a stack that
# overflows in WebAssembly overwrites the data below it without a word)
WASI_LIBS  = -lwasi-emulated-signal -lwasi-emulated-getpid -lwasi-emulated-process-clocks -lm -Wl,--strip-all \
             -Wl,-z,stack-size=1048576

explorer:
ifeq ($(WASI_OK),yes)
	@$(MAKE) --no-print-directory doc/explorer.html
else
	@echo "gptmem: clang's wasm32-wasi target not found: the explorer page (doc/explorer.html) is left out (bash scripts/setup.sh installs clang, lld and wasi-libc)"
endif

scripts/explorer/train.wasm: train.c cuda/none.c $(HEADERS) $(EXPLORER_SRC)
	$(WASI_CC) $(WASI_FLAGS) -o $@ train.c cuda/none.c $(WASI_LIBS)

doc/explorer.html: scripts/explorer/train.wasm $(EXPLORER_SRC) data/tinyshakespeare.txt
	python3 scripts/explorer/build.py $< data/tinyshakespeare.txt $@

# GPU tests: kernels against the CPU ops (tests/test_cuda.c), then the model (tests/run_cuda.sh).
tests/test_cuda: tests/test_cuda.c $(wildcard tests/cuda_checks/*.h) tests/check.h $(HEADERS) $(GPU_OBJ)
	$(CC) $(CFLAGS) -o $@ tests/test_cuda.c $(GPU_OBJ) $(LDLIBS) $(GPU_LIBS)

test-cuda: train tests/test_cuda data
	bash tests/run_cuda.sh

bench-gpu: train tests/test_cuda
	bash scripts/bench_gpu.sh

# parallel/staging.h's host-staged collectives against the direct ones (run under mpirun by tests/run.sh).
tests/test_comm: tests/test_comm.c tests/check.h $(HEADERS) $(GPU_OBJ)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) -o $@ tests/test_comm.c $(GPU_OBJ) $(LDLIBS) $(GPU_LIBS)

tests/test_cpu: tests/test_cpu.c $(wildcard tests/cpu_checks/*.h) tests/check.h $(HEADERS)
	$(CC) $(CFLAGS) -o $@ tests/test_cpu.c $(LDLIBS)

test: train tests/test_cpu tests/test_cuda tests/test_comm tests/train_host data $(if $(STB),scripts/chart) explorer
	bash tests/run.sh

data: data/tinyshakespeare.txt

data/tinyshakespeare.txt:
	bash data/get_data.sh

bench: train
	bash scripts/bench_cpu.sh

# The CPU's GEMM on each shape of a step beside OpenBLAS's (Debian's libopenblas: a benchmark-only dependency,
# never linked into ./train; without it the table has gptmem's column alone) and the measured FMA peak, at 1
# and 2 threads; then the step itself (make bench). Numbers of the machine it runs on: doc/performance.md.
OPENBLAS := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib/aarch64-linux-gnu/libopenblas.so /usr/lib64/libopenblas.so))
scripts/bench_gemm: scripts/bench_gemm.c lib/cpu/gemm.h lib/core/sizes.h
	$(CC) $(CFLAGS) $(if $(OPENBLAS),-DWITH_BLAS) -o $@ scripts/bench_gemm.c $(if $(OPENBLAS),-lopenblas) -lm
bench-cpu: train scripts/bench_gemm
	./scripts/bench_gemm 1 2
	bash scripts/bench_cpu.sh

# A shared machine: quiet against every core busy, and ranks dividing the cores (doc/performance.md).
bench-load: train data
	bash scripts/bench_load.sh

# What each memory flag costs in time on the CPU (the numbers doc/ quotes).
bench-flags: train data
	bash scripts/bench_flags.sh

# PNG charts need stb (Debian: libstb-dev); without it the chart tool is left out.
chart: scripts/chart
scripts/chart: scripts/chart.c scripts/chart_files.h lib/io/files.h
ifeq ($(STB),)
	@echo "gptmem: stb not found (install libstb-dev): scripts/chart left out, no PNG charts"
else
	$(CC) -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Ilib -o $@ scripts/chart.c -lm
endif

# The class demo: memory of GPT-2 across settings (dry runs), the small model for real, loss curves,
# the activation timeline, and the trained small model's weights in each number format. Each
# picture's settings live in scripts/pictures.py, which make test also runs (--check): a picture
# that no longer matches the binary fails the tests.
GPT2 = --model gpt2 --batch 8 --seq-len 1024
compare: train chart data
	mkdir -p doc/img
	python3 scripts/compare.py --dry-run --base "$(GPT2) --dtype bf16" "bf16=" "offload=--offload opt" \
	  "to disk=--offload opt --offload-to disk" "ZeRO-3 x4=--zero 3 --ranks 4" "+opt,params=--zero 3 --ranks 4 --offload opt,params"
	python3 scripts/pictures.py  # the last picture trains the default run, 1000 steps (~6 min)

# The lecture build (doc/reading.md): ./train-lecture, the seeds' techniques alone, on the CPU. lib/lecture/
# stands ahead of lib/ on the include path with a null room for each room it leaves out (the GPU, LoRA,
# QLoRA, tensor parallelism, offload, the model files, quantization, --fit), and its app/rooms.h refuses
# their flags; the runs it keeps are ./train's, bit for bit (tests/e2e/lecture.sh). It says what it compiles.
SOURCES_OF = $(sort $(shell $(CC) $(1) -I. -Ilib -MM train.c | sed -e 's/^[^:]*://' -e 's/[\\]$$//'))
lecture: train-lecture
	@echo "gptmem: ./train-lecture compiles $(words $(call SOURCES_OF,-Ilib/lecture)) files, $$(cat \
	  $(call SOURCES_OF,-Ilib/lecture) | wc -l) lines; ./train $(words $(call SOURCES_OF,)) files, $$(cat \
	  $(call SOURCES_OF,) | wc -l) lines"
train-lecture: train.c $(HEADERS) $(wildcard lib/lecture/*/*.h) cuda/none.o
	$(TRAIN_CC) -Ilib/lecture $(CFLAGS) $(TRAIN_FLAGS) -o $@ train.c cuda/none.o $(LDLIBS)

# The lecture build to step through in a debugger (doc/reading.md): no optimization, every symbol, MPI when
# found; `gdb --args ./train-debug ...` (GOMP_SPINCOUNT set: no re-exec, app/launch.h).
debug: train-debug
train-debug: train.c $(HEADERS) $(wildcard lib/lecture/*/*.h) cuda/none.o
	$(TRAIN_CC) -O0 -g3 -fno-omit-frame-pointer -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -fopenmp -Ilib/lecture \
	  -I. -Ilib $(TRAIN_FLAGS) -o $@ train.c cuda/none.o $(LDLIBS)

# Two passes: without MPI, with leak checking (all of our code); then with MPI,
# leak checking off (OpenMPI's plugins leak at MPI_Init, which is not ours to fix).
SANITIZE = OPT="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# GPTMEM_QUICK: the doc checks run only their dry runs and --adam-bits 8 tracks fp32 Adam over 20
# steps, not 200 (the sanitized build trains 20-60x slower;
# plain make test runs them all).
asan:
	$(MAKE) clean
	GPTMEM_QUICK=1 $(MAKE) test MPICC= $(SANITIZE)
	$(MAKE) clean
	GPTMEM_QUICK=1 ASAN_OPTIONS=detect_leaks=0 $(MAKE) test $(SANITIZE)
	$(MAKE) clean

clean:
	rm -f train train-debug train-lecture tests/test_cpu tests/test_cuda tests/test_comm tests/train_host scripts/chart cuda/*.o scripts/explorer/train.wasm doc/explorer.html
