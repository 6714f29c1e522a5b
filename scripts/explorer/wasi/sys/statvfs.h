// scripts/explorer/wasi/sys/statvfs.h — WASI has no file system's free space: --fit on the explorer
// page takes the disk's from --fit-disk, as it does for a machine in mind.
#ifndef GPTMEM_WASI_STATVFS_H
#define GPTMEM_WASI_STATVFS_H
#include <errno.h>
struct statvfs { unsigned long f_bavail, f_frsize; };
static inline int statvfs(const char *path, struct statvfs *fs) { (void)path, (void)fs; errno = ENOSYS; return -1; }
#endif
