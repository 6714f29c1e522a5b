// scripts/explorer/wasi/shim.h — train.c compiled for WebAssembly (WASI) unchanged, so that the
// explorer page runs the binary's own dry run, --fit and --mem-ops. Force-included (clang -include)
// by the Makefile's explorer rule, before anything else; never by the C build. Two things:
//
// 1. Bytes in 64 bits. wasm32's size_t has 32, and the predictor counts a Llama's bytes in size_t
//    (llama3-70b: hundreds of GiB). With every system header included first, size_t names a 64-bit
//    type in gptmem's own code, as on the machines it runs on; the calls into libc convert as any
//    argument does, and the printf and scanf family below read %zu (%zd, %zx) as the 64-bit
//    integers they now are (%llu), so every number prints as ./train prints it.
// 2. What the rest of the binary calls and WASI has not (signals' handlers, processes, the host's
//    name), failing as on a machine without it: execv returns -1, so ./train runs on in the same
//    process; gethostname fails, so the machine is nameless.
#ifndef GPTMEM_WASI_SHIM_H
#define GPTMEM_WASI_SHIM_H
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// fmt with each conversion's z (size_t) as ll, into out (n bytes)
static inline const char *wasm_fmt64(const char *fmt, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = fmt; *p && k + 3 < n; p++) {
        out[k++] = *p;
        if (*p != '%') continue;
        for (p++; *p && k + 3 < n; p++) {  // the conversion: flags, width, precision, length, then its letter
            if (*p == 'z') { out[k++] = 'l'; out[k++] = 'l'; continue; }
            out[k++] = *p;
            if (strchr("diouxXeEfFgGaAcspn%", *p)) break;
        }
        if (!*p) break;
    }
    out[k] = 0;
    return out;
}
enum { WASM_FMT = 4096 };
static inline int wasm_vfprintf(FILE *f, const char *fmt, va_list ap) {
    char g[WASM_FMT];
    return vfprintf(f, wasm_fmt64(fmt, g, sizeof g), ap);
}
static inline int wasm_vsnprintf(char *s, size_t n, const char *fmt, va_list ap) {
    char g[WASM_FMT];
    return vsnprintf(s, n, wasm_fmt64(fmt, g, sizeof g), ap);
}
static inline int wasm_fprintf(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = wasm_vfprintf(f, fmt, ap);
    va_end(ap);
    return r;
}
static inline int wasm_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = wasm_vfprintf(stdout, fmt, ap);
    va_end(ap);
    return r;
}
static inline int wasm_snprintf(char *s, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = wasm_vsnprintf(s, n, fmt, ap);
    va_end(ap);
    return r;
}
static inline int wasm_sprintf(char *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = wasm_vsnprintf(s, INT_MAX, fmt, ap);
    va_end(ap);
    return r;
}
static inline int wasm_vprintf(const char *fmt, va_list ap) { return wasm_vfprintf(stdout, fmt, ap); }
static inline int wasm_sscanf(const char *s, const char *fmt, ...) {
    char g[WASM_FMT];
    va_list ap;
    va_start(ap, fmt);
    int r = vsscanf(s, wasm_fmt64(fmt, g, sizeof g), ap);
    va_end(ap);
    return r;
}
static inline int wasm_fscanf(FILE *f, const char *fmt, ...) {
    char g[WASM_FMT];
    va_list ap;
    va_start(ap, fmt);
    int r = vfscanf(f, wasm_fmt64(fmt, g, sizeof g), ap);
    va_end(ap);
    return r;
}
#define printf wasm_printf
#define fprintf wasm_fprintf
#define snprintf wasm_snprintf
#define sprintf wasm_sprintf
#define vfprintf wasm_vfprintf
#define vprintf wasm_vprintf
#define vsnprintf wasm_vsnprintf
#define sscanf wasm_sscanf
#define fscanf wasm_fscanf
struct sigaction { void (*sa_handler)(int); };
static inline int sigaction(int sig, const struct sigaction *on, struct sigaction *old) {
    (void)sig, (void)on, (void)old;
    return 0;
}
typedef unsigned wasm_sigset;  // (no signals reach a page: holding them back is nothing to do)
#define sigset_t wasm_sigset
#define SIG_BLOCK 0
#define SIG_SETMASK 2
static inline int sigfillset(sigset_t *set) { *set = ~0u; return 0; }
static inline int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
    (void)how, (void)set;
    if (old) *old = 0;
    return 0;
}
static inline int execv(const char *path, char *const argv[]) { (void)path, (void)argv; errno = ENOSYS; return -1; }
static inline int execvp(const char *file, char *const argv[]) { (void)file, (void)argv; errno = ENOSYS; return -1; }
static inline unsigned geteuid(void) { return 1000; }
__attribute__((weak)) int gethostname(char *name, unsigned long n) {  // (unistd.h declares it; libc has none)
    if (n) name[0] = 0;
    errno = ENOSYS;
    return -1;
}
// A page runs one ./train at a time, in a file system of its own: a temp's name is new by a count
// (wasi-libc has no mkstemp), a file has no mode to set, and an output's lock (io/files.h lock_output)
// is always got.
static inline int mkstemp(char *t) {
    static unsigned made;
    size_t len = strlen(t);
    if (len < 6) return errno = EINVAL, -1;
    for (int tries = 0; tries < 100; tries++) {
        unsigned v = ++made;
        for (size_t i = len - 6; i < len; i++) t[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[v % 36], v /= 36;
        int fd = open(t, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return errno = EEXIST, -1;
}
static inline mode_t umask(mode_t m) { (void)m; return 0; }
#define fchmod(fd, mode) ((void)(fd), (void)(mode), 0)
#ifndef F_SETLK  // (wasi-libc has struct flock, and no lock's commands)
#define F_WRLCK 1
#define F_UNLCK 2
#define F_GETLK 1005
#define F_SETLK 1006
#endif
static inline int wasm_fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    int r = 0;
    if (cmd == F_GETLK) va_arg(ap, struct flock *)->l_type = F_UNLCK;
    else if (cmd == F_SETFL || cmd == F_SETFD) r = fcntl(fd, cmd, va_arg(ap, int));
    else if (cmd != F_SETLK) r = fcntl(fd, cmd);
    va_end(ap);
    return r;
}
#define fcntl wasm_fcntl
typedef unsigned long long wasm_size64;
#define size_t wasm_size64
#endif
