// scripts/explorer/wasi.js — ./train compiled to WebAssembly, run as a command: its argv, its
// stdout and stderr, its exit code, and the files it writes (--mem-json, --mem-timeline) kept in
// memory. The calls of WASI's preview 1 that wasi-libc makes, over a file system of one folder ("/",
// the current one) that holds the corpus as a size alone (the dry run stats it, reads none of it)
// and what the run writes. Each run gets a fresh instance: a process of its own, as on a shell.
"use strict";

const WASI_ERRNO = { SUCCESS: 0, BADF: 8, INVAL: 28, NOENT: 44, NOSYS: 52, SPIPE: 70 };
const FILETYPE = { CHARACTER_DEVICE: 2, DIRECTORY: 3, REGULAR_FILE: 4 };

class WasiExit extends Error {
  constructor(code) { super("exit " + code); this.code = code; }
}

// runTrain(module, args, sizes) -> {code, stdout, stderr, files}: module a WebAssembly.Module of
// train.wasm, args the flags (without "./train"), sizes {path: bytes} the files that exist to stat.
function runTrain(module, args, sizes) {
  const enc = new TextEncoder(), dec = new TextDecoder();
  const argv = ["./train"].concat(args).map((a) => enc.encode(a + "\0"));
  const out = { 1: [], 2: [] }, files = {}, open = {};  // files: path -> {data, size}; open: fd -> {path, pos}
  let nextFd = 4, memory = null;
  const view = () => new DataView(memory.buffer), bytes = () => new Uint8Array(memory.buffer);
  const str = (p, n) => dec.decode(bytes().slice(p, p + n));
  const clean = (p) => p.replace(/^\/+/, "").replace(/^(\.\/)+/, "");
  const chunks = (iovs, n) => {  // the (pointer, length) pairs of an iovec array
    const v = view(), r = [];
    for (let i = 0; i < n; i++) r.push([v.getUint32(iovs + 8 * i, true), v.getUint32(iovs + 8 * i + 4, true)]);
    return r;
  };
  const putStrings = (list, ptrs, buf) => {
    const v = view(), b = bytes();
    for (const s of list) { v.setUint32(ptrs, buf, true); b.set(s, buf); ptrs += 4; buf += s.length; }
    return WASI_ERRNO.SUCCESS;
  };
  const wasi = {
    args_sizes_get(count, size) {
      view().setUint32(count, argv.length, true);
      view().setUint32(size, argv.reduce((n, a) => n + a.length, 0), true);
      return 0;
    },
    args_get: (ptrs, buf) => putStrings(argv, ptrs, buf),
    environ_sizes_get(count, size) { view().setUint32(count, 0, true); view().setUint32(size, 0, true); return 0; },
    environ_get: () => 0,
    clock_time_get(id, precision, at) {
      view().setBigUint64(at, BigInt(Math.round(performance.now() * 1e6)), true);
      return 0;
    },
    fd_prestat_get(fd, buf) {
      if (fd !== 3) return WASI_ERRNO.BADF;
      view().setUint8(buf, 0);
      view().setUint32(buf + 4, 1, true);  // its name, "/"
      return 0;
    },
    fd_prestat_dir_name(fd, p, n) { if (fd !== 3) return WASI_ERRNO.BADF; bytes().set(enc.encode("/").slice(0, n), p); return 0; },
    fd_fdstat_get(fd, buf) {
      const v = view();
      v.setUint8(buf, fd <= 2 ? FILETYPE.CHARACTER_DEVICE : fd === 3 ? FILETYPE.DIRECTORY : FILETYPE.REGULAR_FILE);
      v.setUint16(buf + 2, 0, true);
      v.setBigUint64(buf + 8, 0xffffffffn, true);
      v.setBigUint64(buf + 16, 0xffffffffn, true);
      return fd <= 3 || open[fd] ? 0 : WASI_ERRNO.BADF;
    },
    fd_fdstat_set_flags: () => 0,
    path_filestat_get(fd, flags, p, n, buf) {
      const path = clean(str(p, n)), v = view();
      const size = path in files ? files[path].size : sizes[path];
      if (size === undefined && path !== "" && path !== ".") return WASI_ERRNO.NOENT;
      for (let k = 0; k < 64; k += 8) v.setBigUint64(buf + k, 0n, true);
      v.setUint8(buf + 16, size === undefined ? FILETYPE.DIRECTORY : FILETYPE.REGULAR_FILE);
      v.setBigUint64(buf + 24, 1n, true);
      v.setBigUint64(buf + 32, BigInt(size || 0), true);
      return 0;
    },
    path_open(dirfd, dirflags, p, n, oflags, rightsBase, rightsInherit, fdflags, fdOut) {
      const path = clean(str(p, n));
      if (!(oflags & 1) && !(path in files)) return WASI_ERRNO.NOENT;  // only what the run wrote can be read
      if ((oflags & 1 && oflags & 8) || !(path in files)) files[path] = { data: new Uint8Array(4096), size: 0 };  // O_CREAT, O_TRUNC
      open[nextFd] = { path, pos: fdflags & 1 ? files[path].size : 0 };
      view().setUint32(fdOut, nextFd++, true);
      return 0;
    },
    fd_write(fd, iovs, n, written) {
      let total = 0;
      for (const [p, len] of chunks(iovs, n)) {
        const data = bytes().slice(p, p + len);
        total += len;
        if (fd === 1 || fd === 2) { out[fd].push(data); continue; }
        const f = open[fd];
        if (!f) return WASI_ERRNO.BADF;
        const file = files[f.path];
        if (f.pos + len > file.data.length) {  // room for it, doubling: a file written a buffer at a time
          const grown = new Uint8Array(Math.max(2 * file.data.length, f.pos + len));
          grown.set(file.data.subarray(0, file.size));
          file.data = grown;
        }
        file.data.set(data, f.pos);
        f.pos += len;
        file.size = Math.max(file.size, f.pos);
      }
      view().setUint32(written, total, true);
      return 0;
    },
    fd_read(fd, iovs, n, got) {
      let total = 0;
      const f = open[fd];
      if (f) for (const [p, len] of chunks(iovs, n)) {
        const file = files[f.path], data = file.data.slice(f.pos, Math.min(f.pos + len, file.size));
        bytes().set(data, p);
        f.pos += data.length;
        total += data.length;
      }
      view().setUint32(got, total, true);
      return fd === 0 || f ? 0 : WASI_ERRNO.BADF;
    },
    fd_seek(fd, offset, whence, to) {
      const f = open[fd];
      if (!f) return fd <= 2 ? WASI_ERRNO.SPIPE : WASI_ERRNO.BADF;
      const base = whence === 0 ? 0 : whence === 1 ? f.pos : files[f.path].size;
      f.pos = base + Number(offset);
      view().setBigUint64(to, BigInt(f.pos), true);
      return 0;
    },
    fd_filestat_get(fd, buf) {  // (an output is checked to be a regular file once open: io/files.h open_regular)
      const f = open[fd], v = view();
      if (!f) return WASI_ERRNO.BADF;
      for (let k = 0; k < 64; k += 8) v.setBigUint64(buf + k, 0n, true);
      v.setUint8(buf + 16, FILETYPE.REGULAR_FILE);
      v.setBigUint64(buf + 24, 1n, true);
      v.setBigUint64(buf + 32, BigInt(files[f.path].size), true);
      return 0;
    },
    fd_filestat_set_size(fd, size) {
      const f = open[fd];
      if (!f) return WASI_ERRNO.BADF;
      files[f.path].size = Math.min(files[f.path].size, Number(size));
      return 0;
    },
    path_rename(fd, p, n, fd2, q, m) {  // (a whole file is written to a temp beside FILE and renamed over FILE)
      const from = clean(str(p, n)), to = clean(str(q, m));
      if (!(from in files)) return WASI_ERRNO.NOENT;
      files[to] = files[from];
      delete files[from];
      return 0;
    },
    path_unlink_file(fd, p, n) {
      const path = clean(str(p, n));
      if (!(path in files)) return WASI_ERRNO.NOENT;
      delete files[path];
      return 0;
    },
    fd_close(fd) { delete open[fd]; return 0; },
    proc_exit(code) { throw new WasiExit(code); },
  };
  for (const name of ["fd_allocate", "fd_pread", "fd_pwrite", "fd_readdir", "path_create_directory", "path_remove_directory"])
    wasi[name] = () => WASI_ERRNO.NOSYS;
  const instance = new WebAssembly.Instance(module, { wasi_snapshot_preview1: wasi });
  memory = instance.exports.memory;
  let code = 0;
  try {
    instance.exports._start();
  } catch (e) {
    if (!(e instanceof WasiExit)) throw e;
    code = e.code;
  }
  const text = (parts) => {  // the writes, joined once (a character may straddle two of them)
    const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { all.set(p, at); at += p.length; }
    return dec.decode(all);
  };
  const written = {};
  for (const path in files) written[path] = dec.decode(files[path].data.subarray(0, files[path].size));
  return { code, stdout: text(out[1]), stderr: text(out[2]), files: written };
}

if (typeof module !== "undefined") module.exports = { runTrain };
