"""The rule ./train's outputs follow (lib/io/files.h, lib/app/outputs.h), for the files the scripts write.

    with outfile.writing(path, "a compare.py CSV", head=b"category,", inputs=[...]) as f:
        f.write(...)

- a regular file or nothing: never a device, fifo, socket or folder (a fifo is never opened, so never waited on);
- never one of the script's inputs (by device and inode, through any link);
- an existing file only when it holds what the script writes (it begins with `head`, or one of a tuple of them) or
  is empty;
- written to a temp of its own beside it (mkstemp: PATH.tmp-XXXXXX, created exclusively, so never a link or a
  file planted beside it, never another process's) and renamed over it only when whole: a failure (a full disk),
  Ctrl-C, SIGTERM or SIGHUP removes the temp and leaves the old file as it was;
- one writer at a time: PATH.lock held (a POSIX lock, the one ./train takes) while the file is written; a second
  writer refuses, naming the first's pid.
Every refusal and failure is an OutError with one line that names the file and what to do.
"""
import contextlib
import errno
import fcntl
import os
import signal
import stat
import struct
import tempfile


class OutError(Exception):
    """One line: the file, what is wrong, what to do."""


def readable(path, what="input"):
    """An input a script reads: a regular file (a fifo would wait for a writer for ever). Else OutError."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise OutError(f"cannot read the {what} '{path}': {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a fifo" if stat.S_ISFIFO(st.st_mode) else "a device or a socket"
        raise OutError(f"cannot read the {what} '{path}': it is {kind}, not a regular file")
    return path


def check(path, kind, head=b"", inputs=()):
    """May `path` be written as `kind` (what the script writes)? Else OutError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutError(f"cannot write '{path}': {e.strerror}")
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "a fifo" if stat.S_ISFIFO(st.st_mode) else \
            "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        raise OutError(f"'{path}': it exists and is {what}, not a regular file; give a file path")
    for i in inputs:
        try:
            same = st is not None and os.path.samefile(i, path)
        except OSError:
            same = False
        if same:
            raise OutError(f"'{path}' is the input '{i}': writing it would replace it; write somewhere else")
    heads = head if isinstance(head, tuple) else (head,)
    if st is not None and st.st_size > 0:
        with open(path, "rb") as f:
            got = f.read(max(len(h) for h in heads))
        if not any(h and got.startswith(h) for h in heads):
            raise OutError(f"'{path}': the file exists and is not {kind}; it is replaced only when it is: give another "
                           f"path, or move it away")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise OutError(f"cannot write '{path}': its folder '{folder}' does not exist; make it first (mkdir -p {folder})")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutError(f"cannot write '{path}': its folder '{folder}' is not writable; give a path in a folder you can write")


def _holder(fd):
    """The pid holding a POSIX lock on fd (Linux's struct flock), or None."""
    try:
        got = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack("hh4xqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))
        kind, _, _, _, pid = struct.unpack("hh4xqqi4x", got)
        return pid if kind != fcntl.F_UNLCK and pid > 0 else None
    except (OSError, struct.error):
        return None


@contextlib.contextmanager
def locked(path):
    """PATH.lock held while the body runs (./train's lock: an empty file, a POSIX lock on it). OutError when another
    process holds it, or when PATH.lock is a link or a file with something in it."""
    lock = path + ".lock"
    fd = None
    for _ in range(16):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise OutError(f"'{path}': '{lock}' is there and is not gptmem's lock (an empty file): remove it, or give "
                           f"another path" if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO) else f"cannot lock '{path}' ('{lock}'): {e.strerror}")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size:
            os.close(fd)
            raise OutError(f"'{path}': '{lock}' is there and is not gptmem's lock (an empty file): remove it, or give "
                           f"another path")
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = _holder(fd)
            os.close(fd)
            raise OutError(f"'{path}' is being written by another process ({'pid %d holds' % pid if pid else 'one holds'} "
                           f"'{lock}'): let it end, or give another path")
        try:
            now = os.stat(lock)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            break
        os.close(fd)  # (the process that held it removed it as it ended: take the new one)
        fd = None
    if fd is None:
        raise OutError(f"cannot lock '{path}' ('{lock}'): it keeps being replaced")
    try:
        yield
    finally:
        os.unlink(lock)
        os.close(fd)


def _ended_by(sig, _frame):
    raise SystemExit(128 + sig)


@contextlib.contextmanager
def writing(path, kind, head=b"", inputs=(), text=False):
    """The file's stream (binary, or text), written to a temp of its own and renamed over `path` when the body ends
    without an exception; checked (check), locked (locked) first. OutError for a refusal or a failed write."""
    check(path, kind, head, inputs)
    folder, name = os.path.dirname(path) or ".", os.path.basename(path)
    old = {s: signal.signal(s, _ended_by) for s in (signal.SIGTERM, signal.SIGHUP)}  # (the temp removed on the way out)
    try:
        with locked(path):
            try:
                fd, tmp = tempfile.mkstemp(prefix=name + ".tmp-", dir=folder)
            except OSError as e:
                raise OutError(f"cannot write beside '{path}': {e.strerror}")
            try:
                mask = os.umask(0)
                os.umask(mask)
                os.fchmod(fd, 0o666 & ~mask)
                with os.fdopen(fd, "w" if text else "wb", **({"newline": ""} if text else {})) as f:
                    yield f
                os.replace(tmp, path)
            except OSError as e:
                raise OutError(f"cannot write '{path}': {e.strerror or e}; the previous file (if any) is as it was")
            finally:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
