// scripts/explorer/wasi/omp.h — OpenMP's calls for the WebAssembly build (no threads there): one
// thread, as a build without -fopenmp runs (the pragmas are ignored without it).
#ifndef GPTMEM_WASI_OMP_H
#define GPTMEM_WASI_OMP_H
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_num_procs(void) { return 1; }
static inline int omp_in_parallel(void) { return 0; }
static inline void omp_set_num_threads(int n) { (void)n; }
#endif
