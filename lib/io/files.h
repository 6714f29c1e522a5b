// io/files.h — what every file a run names must be before it is touched, and how
// gptmem writes one so that nothing is lost.
//
// Reading: a path is opened only once it is known to be a regular file that
// can be read (open() of a fifo waits for a writer for ever; a directory
// reads as nothing), and a message says which of these it is.
// Writing: every file a run writes goes through the functions at the end of
// this file. A whole file goes to a temp of its own beside PATH
// (PATH.tmp-XXXXXX: made by this process alone, never through a link) and is
// renamed over PATH only when complete; any failure removes the temp, and so
// does a signal that ends the process while it is written (Ctrl-C, kill, a
// closed terminal, Ctrl-\, a closed pipe): the previous PATH is never touched
// until the new one is complete. Each output is locked for the run's life
// (PATH.lock), so two runs never write one file. Which paths may be written at
// all (never a device, directory, fifo or socket, never an input, another
// output or a file of another kind) is app/outputs.h's rule, checked before
// anything is allocated.
#ifndef GPTMEM_FILES_H
#define GPTMEM_FILES_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <fcntl.h>
#include <unistd.h>

// Why `path` cannot be read as a file, in words; NULL if it can.
const char *unreadable_why(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return strerror(errno);
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    if (S_ISFIFO(st.st_mode)) return "it is a fifo, not a regular file";
    if (!S_ISREG(st.st_mode)) return "it is a device or a socket, not a regular file";
    if (access(path, R_OK) != 0) return strerror(errno);
    return NULL;
}

// Size of a file in bytes, or -1 if it is not a regular file that exists.
long long file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (long long)st.st_size;
}

// Does `path` not exist (as opposed to existing and being unreadable)?
int path_missing(const char *path) {
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOENT;
}

// Are a and b one file (the same device and inode)? 0 when either is missing.
int same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// Is `path` one of the files in the folder `dir` (by device and inode)?
int in_folder(const char *dir, const char *path) {
    DIR *d = opendir(dir);
    int same = 0;
    for (struct dirent *e; d && !same && (e = readdir(d));) {
        char file[4400];
        snprintf(file, sizeof file, "%.4000s/%.255s", dir, e->d_name);
        same = e->d_name[0] != '.' && same_file(file, path);
    }
    if (d) closedir(d);
    return same;
}

// Is `path` something a write may replace: missing, or a regular file? A
// device, directory or fifo is refused (writing a temp and renaming it over
// /dev/full, say, would replace the device node with a file).
int replaceable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT;
    return S_ISREG(st.st_mode);
}

// --- writing: the one way a run writes a file -------------------------------------------
// A whole file (a state, an export, a report) goes to a temp beside PATH and is
// renamed over PATH only once it is complete; a file a run adds to as it goes
// (--log, --tensorboard's events, read while the run trains) is opened in place,
// without waiting (O_NONBLOCK: a fifo with no reader is refused, never waited on)
// and only if it turns out a regular file, so a device node is never written or
// replaced. The temp's name is new (mkstemp: PATH.tmp-XXXXXX, created
// exclusively, so a link or a file planted beside PATH is never written and a
// user's own PATH.tmp never touched; two processes never share one). Every temp
// open at once is known to one signal handler, which removes them all.

enum { OPEN_TEMPS = 8 };
static char g_temps[OPEN_TEMPS][4200];
static int g_ntemps;
static char g_writing_msg[600];
static const int g_writing_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
enum { WRITING_SIGNALS = sizeof g_writing_signals / sizeof g_writing_signals[0] };
static struct sigaction g_writing_old[WRITING_SIGNALS];

// A signal that ends the process while files are written: remove every
// unfinished temp and the run's locks, say that the previous files are intact,
// and stop. Only async-signal-safe calls (unlink, write, _exit) happen in the handler.
static void locks_remove(void);
static void interrupted_while_writing(int sig) {
    for (int i = 0; i < g_ntemps; i++) unlink(g_temps[i]);
    locks_remove();
    ssize_t ignored = write(2, g_writing_msg, strlen(g_writing_msg));
    (void)ignored;
    _exit(128 + sig);
}

// From here to temp_forget(tmp), a signal removes tmp; `what` names the file
// in the message ("a checkpoint", "the --export file").
void temp_guard(const char *tmp, const char *what) {
    if (g_ntemps == OPEN_TEMPS) return;  // (a bug: more files at once than any writer opens)
    snprintf(g_temps[g_ntemps], sizeof g_temps[0], "%s", tmp);
    if (g_ntemps++ > 0) return;
    snprintf(g_writing_msg, sizeof g_writing_msg, "\nerror: interrupted while saving %s: the unfinished file was "
             "removed; the previous one (if any) is intact\n", what);
    struct sigaction on_signal;
    memset(&on_signal, 0, sizeof on_signal);
    on_signal.sa_handler = interrupted_while_writing;
    for (int i = 0; i < WRITING_SIGNALS; i++) sigaction(g_writing_signals[i], &on_signal, &g_writing_old[i]);
}

// tmp is renamed or removed: the handler forgets it (and, with none left, is gone).
void temp_forget(const char *tmp) {
    for (int i = 0; i < g_ntemps; i++)
        if (!strcmp(g_temps[i], tmp)) {
            memmove(g_temps[i], g_temps[i + 1], sizeof g_temps[0] * (size_t)(g_ntemps - i - 1));
            if (--g_ntemps == 0)
                for (int k = 0; k < WRITING_SIGNALS; k++) sigaction(g_writing_signals[k], &g_writing_old[k], NULL);
            return;
        }
}

// The tests' way to check the handler: with the environment variable `var`
// set to INT, TERM, HUP, QUIT, PIPE, USR1 or USR2 (anything else: INT), this
// sends that signal to the process half-way through a write; KILL, which no
// handler sees, leaves the unfinished file as a power cut would.
void interrupt_for_tests(const char *var) {
    const char *v = getenv(var);
    if (!v) return;
    if (!strcmp(v, "KILL")) raise(SIGKILL);
    const char *names[WRITING_SIGNALS] = {"INT", "TERM", "HUP", "QUIT", "PIPE", "USR1", "USR2"};
    int sig = SIGINT;
    for (int i = 0; i < WRITING_SIGNALS; i++)
        if (!strcmp(v, names[i])) sig = g_writing_signals[i];
    raise(sig);
}

// Rename each tmp[i] over path[i], in order, with the signals held back, so
// that a signal never falls between two renames of one write (an export's
// weights and its config.json). How many were renamed: n, or fewer with errno set.
int temps_commit(int n, char *const tmp[], char *const path[]) {
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int done = 0;
    while (done < n && rename(tmp[done], path[done]) == 0) temp_forget(tmp[done]), done++;
    int err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return done;
}

// Open `path` to write without waiting, and only if it is (or becomes) a
// regular file: extra is O_TRUNC (replace it), O_EXCL (a new file) or
// O_APPEND. NULL with errno set (ENXIO: a fifo no one reads; EINVAL: not a
// regular file).
FILE *open_regular(const char *path, int extra) {
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | (extra & (O_EXCL | O_APPEND)), 0666);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    if ((extra & O_TRUNC) && ftruncate(fd, 0) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, (extra & O_APPEND) ? "ab" : "wb");
    if (!f) close(fd);
    return f;
}

// A new temp beside `path` (into tmp: PATH.tmp-XXXXXX), created by this process alone (mkstemp: O_EXCL,
// so never through a link), with the permissions a new file gets (0666 less the umask), and guarded from
// the moment it exists (a signal removes it; `what` names the file in the message). Its descriptor, or -1
// with errno set.
int temp_create(const char *path, char *tmp, size_t len, const char *what) {
    if (snprintf(tmp, len, "%s.tmp-XXXXXX", path) >= (int)len) return errno = ENAMETOOLONG, -1;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);  // (created and guarded together: no signal between)
    int fd = mkstemp(tmp), err = errno;
    if (fd >= 0) temp_guard(tmp, what);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) return tmp[0] = 0, errno = err, -1;  // (no name to remove later)
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
        err = errno;
        close(fd), unlink(tmp), temp_forget(tmp);
        return tmp[0] = 0, errno = err, -1;
    }
    return fd;
}

// This run's temp opened again to write into it (an export's ranks each write their part), never
// through a link: the stream, or NULL with errno set.
FILE *temp_reopen(const char *tmp) {
    int fd = open(tmp, O_RDWR | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) close(fd), fd = -1, errno = EINVAL;
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r+b");
    if (fd >= 0 && !f) close(fd);
    return f;
}

// The temp made `bytes` long (zeros, sparse where the file system allows), so that ranks can write their
// parts into it in any order; 0, or -1 if it cannot be.
int file_of_zeros(const char *tmp, long long bytes) {
    FILE *f = temp_reopen(tmp);
    if (!f) return -1;
    int bad = fseek(f, bytes - 1, SEEK_SET) != 0 || fputc(0, f) == EOF;
    return fclose(f) != 0 || bad ? -1 : 0;
}

// A whole file being written: a temp beside it until out_commit renames it.
typedef struct {
    FILE *f;
    char path[4096], tmp[4200];
} OutFile;

// Start `path`'s new contents in a temp of its own (guarded: a signal removes it). The stream, or NULL
// with errno set.
FILE *out_open(OutFile *o, const char *path, const char *what) {
    snprintf(o->path, sizeof o->path, "%s", path);
    int fd = temp_create(path, o->tmp, sizeof o->tmp, what);
    o->f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (fd >= 0 && !o->f) {
        int err = errno;
        close(fd), unlink(o->tmp), temp_forget(o->tmp);
        errno = err;
    }
    return o->f;
}

// Give up: the temp removed, the old file as it was.
void out_abort(OutFile *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    unlink(o->tmp);
    temp_forget(o->tmp);
}

// Close the stream, checked (flushed, no write failed). 0, or -1 with errno set and the temp removed.
int out_close(OutFile *o) {
    int bad = fflush(o->f) != 0 || ferror(o->f), err = errno;
    if (fclose(o->f) != 0 && !bad) bad = 1, err = errno;
    o->f = NULL;
    if (!bad) return 0;
    out_abort(o);
    errno = err ? err : EIO;
    return -1;
}

// The file is complete: closed and renamed over path. 0, or -1 with errno set (the temp removed).
int out_commit(OutFile *o) {
    if (out_close(o)) return -1;
    char *tmp[] = {o->tmp}, *path[] = {o->path};
    if (temps_commit(1, tmp, path) == 1) return 0;
    int err = errno;
    out_abort(o);
    errno = err;
    return -1;
}

// The folder `dir` made with the folders above it that are missing (mkdir -p). 0, or -1 with errno set.
int make_folders(const char *dir) {
    char d[4096];
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d) return errno = ENAMETOOLONG, -1;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(d, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

// The bytes free to this user in the folder that holds `path`; -1 if unknown.
long long free_bytes_at(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    struct statvfs v;
    if (statvfs(dir, &v) != 0) return -1;
    return (long long)v.f_bavail * (long long)v.f_frsize;
}

// Can `flag` write `bytes` bytes to `path` (through a temp beside it)? 0, or -1
// after a message: not a device, directory or fifo; a folder that takes a file
// (tried: a temp created and removed); room for the whole file beside the old one.
int writable_target(const char *flag, const char *path, long long bytes) {
    char tmp[4200];
    if (!replaceable(path)) {
        fprintf(stderr, "error: %s '%s': it exists and is not a regular file (a device, directory or fifo); pass %s "
                "a file path\n", flag, path, flag);
        return -1;
    }
    int fd = temp_create(path, tmp, sizeof tmp, "a file");
    if (fd < 0) {
        fprintf(stderr, "error: %s: cannot write beside '%s': %s; pass %s a path in a folder you can write\n", flag,
                path, strerror(errno), flag);
        return -1;
    }
    close(fd), unlink(tmp), temp_forget(tmp);
    long long room = free_bytes_at(path);
    if (room >= 0 && bytes > room) {
        fprintf(stderr, "error: %s '%s' needs %.1f MB there, and %.1f MB are free; free some space, or write it "
                "elsewhere\n", flag, path, bytes / 1e6, room / 1e6);
        return -1;
    }
    return 0;
}

// --- one run an output: PATH.lock ---------------------------------------------------------
// Each output is locked for the run's life: an empty PATH.lock beside it, held
// with a POSIX record lock (fcntl F_SETLK, which also tells a second run the
// holder's pid). A second run given the same output refuses at its start; a
// lock no process holds (a run killed) is taken over. The run removes its
// locks when it ends (exit, or a signal that ends it).
enum { OUT_LOCKS = 24 };
static char g_locks[OUT_LOCKS][4200];
static int g_nlocks;
static const int g_lock_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void locks_remove(void) {
    for (int i = 0; i < g_nlocks; i++) unlink(g_locks[i]);
}

// A signal that ends the run: its locks removed, then the signal's own ending.
static void locks_signalled(int sig) {
    locks_remove();
    signal(sig, SIG_DFL);
    raise(sig);
}

// Lock `path` (PATH.lock) for the run's life. 0; 1 when another process holds it (its pid in *holder);
// 2 when PATH.lock is not such a lock (a link, a folder, a file with something in it: left as it is);
// -1 with errno set.
int lock_output(const char *path, long *holder) {
    char lock[4200];
    *holder = 0;
    if (snprintf(lock, sizeof lock, "%s.lock", path) >= (int)sizeof lock) return errno = ENAMETOOLONG, -1;
    if (g_nlocks == OUT_LOCKS) return errno = EMFILE, -1;  // (a bug: more outputs than a run names)
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0666);
        if (fd < 0) return errno == ELOOP || errno == EISDIR || errno == ENXIO ? 2 : -1;
        struct stat st, now;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size != 0) {
            close(fd);
            return 2;
        }
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &l) != 0) {
            int err = errno;
            struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK) *holder = (long)who.l_pid;
            close(fd);
            if (err == EACCES || err == EAGAIN) return 1;
            return errno = err, -1;
        }
        if (stat(lock, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
            close(fd);  // (the run that held it removed it as it ended: take the new one)
            continue;
        }
        snprintf(g_locks[g_nlocks++], sizeof g_locks[0], "%s", lock);  // (the descriptor stays open: the lock held)
        if (g_nlocks == 1) {
            atexit(locks_remove);
            for (int i = 0; i < 4; i++) {
                struct sigaction was;
                sigaction(g_lock_signals[i], NULL, &was);
                if (was.sa_handler == SIG_DFL) signal(g_lock_signals[i], locks_signalled);
            }
        }
        return 0;
    }
    return errno = EAGAIN, -1;
}

#endif
