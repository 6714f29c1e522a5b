// scripts/explorer/wasi/sys/wait.h — WASI has no processes: --ranks, which starts mpirun as a child,
// fails as on a machine without fork (pipe fails first); the page runs dry runs, which start none.
#ifndef GPTMEM_WASI_WAIT_H
#define GPTMEM_WASI_WAIT_H
#include <errno.h>
#include <sys/types.h>
#define WIFEXITED(s) 1
#define WEXITSTATUS(s) (s)
#define WTERMSIG(s) 0
static inline int pipe(int fd[2]) { (void)fd; errno = ENOSYS; return -1; }
static inline pid_t fork(void) { errno = ENOSYS; return -1; }
static inline pid_t waitpid(pid_t pid, int *status, int options) { (void)pid, (void)status, (void)options; errno = ENOSYS; return -1; }
static inline int kill(pid_t pid, int sig) { (void)pid, (void)sig; errno = ENOSYS; return -1; }
static inline int dup2(int a, int b) { (void)a, (void)b; errno = ENOSYS; return -1; }
#endif
