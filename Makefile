# gptmem — build the trainer, its tests and its benchmarks.
#   make            build ./train (CPU path; gcc, C11, OpenMP)
#   make test       build and run every test; ends with "N passed, N failed"
#   make data       fetch the default corpus into data/
#   make bench      the CPU benchmark (GPT-2 124M, B=4 T=64, 2 threads)
#   make asan       build and run the tests under AddressSanitizer + UBSan
# ARCH=-march=x86-64-v3 builds for another machine than this one.

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

CC     ?= gcc
ARCH   ?= -march=native $(if $(filter x86_64,$(shell uname -m)),-mprefer-vector-width=512)
OPT    ?= -O3
CFLAGS ?= $(OPT) $(ARCH) -ffp-contract=fast
CFLAGS += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -fopenmp
LDLIBS  = -lm

HEADERS = memory.h model.h predict.h optimizer.h data.h dtype.h comm.h

.PHONY: all test data bench asan clean

all: train

train: train.c $(HEADERS)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_FLAGS) -o $@ train.c $(LDLIBS)

tests/test_cpu: tests/test_cpu.c $(HEADERS)
	$(CC) $(CFLAGS) -I. -o $@ tests/test_cpu.c $(LDLIBS)

test: train tests/test_cpu data
	bash tests/run.sh

data: data/tinyshakespeare.txt

data/tinyshakespeare.txt:
	bash data/get_data.sh

bench: train
	bash scripts/bench_cpu.sh

# Two passes: without MPI, with leak checking (all of our code); then with MPI,
# leak checking off (OpenMPI's plugins leak at MPI_Init, which is not ours to fix).
SANITIZE = OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer"
asan:
	$(MAKE) clean
	$(MAKE) test MPICC= $(SANITIZE)
	$(MAKE) clean
	ASAN_OPTIONS=detect_leaks=0 $(MAKE) test $(SANITIZE)
	$(MAKE) clean

clean:
	rm -f train tests/test_cpu
