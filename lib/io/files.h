// io/files.h — what every file a run names must be before it is touched, and how
// gptmem writes one so that nothing is lost.
//
// Reading: a path is opened only once it is known to be a regular file that
// can be read (open() of a fifo waits for a writer for ever; a directory
// reads as nothing), and a message says which of these it is.
// Writing (--save, --export): the file goes to PATH.tmp and is renamed over
// PATH only when whole; any failure removes PATH.tmp, and so does a signal
// that ends the process while it is written (Ctrl-C, kill, a closed
// terminal, Ctrl-\, a closed pipe): the previous PATH is never touched
// until the new one is complete. Before training, a target is checked: not
// a device, directory or fifo, a folder that takes a file, room for it.
#ifndef GPTMEM_FILES_H
#define GPTMEM_FILES_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

// Is `path` something a write may replace: missing, or a regular file? A
// device, directory or fifo is refused (writing PATH.tmp and renaming it over
// /dev/full, say, would replace the device node with a file).
int replaceable(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return errno == ENOENT;
    return S_ISREG(st.st_mode);
}

// A file of `bytes` zeros (sparse where the file system allows), so that ranks can write their parts
// into it in any order; 0, or -1 if it cannot be made.
int file_of_zeros(const char *path, long long bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fseek(f, bytes - 1, SEEK_SET) != 0 || fputc(0, f) == EOF;
    return fclose(f) != 0 || bad ? -1 : 0;
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

// Can `flag` write `bytes` bytes to `path` (through path.tmp)? 0, or -1 after
// a message: not a device, directory or fifo; a folder that takes a file
// (tried: created and removed); room for the whole file beside the old one.
int writable_target(const char *flag, const char *path, long long bytes) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!replaceable(path) || !replaceable(tmp)) {
        fprintf(stderr, "error: %s '%s': it exists and is not a regular file (a device, directory or fifo); pass %s "
                "a file path\n", flag, replaceable(path) ? tmp : path, flag);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        fprintf(stderr, "error: %s: cannot write '%s': %s; pass %s a path in a folder you can write\n", flag, tmp,
                strerror(errno), flag);
        return -1;
    }
    fclose(f);
    remove(tmp);
    long long room = free_bytes_at(path);
    if (room >= 0 && bytes > room) {
        fprintf(stderr, "error: %s '%s' needs %.1f MB there, and %.1f MB are free; free some space, or write it "
                "elsewhere\n", flag, path, bytes / 1e6, room / 1e6);
        return -1;
    }
    return 0;
}

// A signal that ends the process while a file is written: remove the
// unfinished path.tmp, say that the previous file is intact, and stop. Only
// async-signal-safe calls (unlink, write, _exit) happen in the handler.
static char g_writing_tmp[4096];
static char g_writing_msg[600];
static const int g_writing_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
enum { WRITING_SIGNALS = sizeof g_writing_signals / sizeof g_writing_signals[0] };
static struct sigaction g_writing_old[WRITING_SIGNALS];

static void interrupted_while_writing(int sig) {
    unlink(g_writing_tmp);
    ssize_t ignored = write(2, g_writing_msg, strlen(g_writing_msg));
    (void)ignored;
    _exit(128 + sig);
}

// From here to writing_end, a signal removes tmp; `what` names the file in
// the message ("a checkpoint", "the --export file").
void writing_begin(const char *tmp, const char *what) {
    snprintf(g_writing_tmp, sizeof g_writing_tmp, "%s", tmp);
    snprintf(g_writing_msg, sizeof g_writing_msg, "\nerror: interrupted while saving %s: the unfinished file was "
             "removed; the previous one (if any) is intact\n", what);
    struct sigaction on_signal;
    memset(&on_signal, 0, sizeof on_signal);
    on_signal.sa_handler = interrupted_while_writing;
    for (int i = 0; i < WRITING_SIGNALS; i++) sigaction(g_writing_signals[i], &on_signal, &g_writing_old[i]);
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

void writing_end(void) {
    for (int i = 0; i < WRITING_SIGNALS; i++) sigaction(g_writing_signals[i], &g_writing_old[i], NULL);
}

#endif
