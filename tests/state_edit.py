#!/usr/bin/env python3
"""tests/state_edit.py — make a saved state that is well-formed but says something else.

Usage: tests/state_edit.py IN OUT nan K           weight K set to nan, checksum made right
       tests/state_edit.py IN OUT version3        the same state as a version 3 file (no adam_bits, steps)
       tests/state_edit.py IN OUT version4        the same state as a version 4 file (no layout, no save id)
       tests/state_edit.py IN OUT version5        the same state as a version 5 file (no --lora fields)
       tests/state_edit.py IN OUT version6        the same state as a version 6 file (no --tp field)
       tests/state_edit.py IN OUT set NAME=V ...  header fields set (step=-5, updates=..., dtype=7, lo=1, ...)

The loader's checks of damaged files are tests/fuzz_files.py's; these files
pass the checksum, so what refuses (or accepts) them is the check after it.
"""
import struct
import sys

MAGIC = 8  # "GPTMEMCK"; then u32 version, then StateHeader (io/state.h)
HEADER3, HEADER4, HEADER5, HEADER6, HEADER7 = 104, 112, 136, 168, 176  # StateHeader's bytes in versions 3 to 7
FIELDS = dict(L=(0, "i"), C=(4, "i"), H=(8, "i"), V=(12, "i"), maxT=(16, "i"), B=(20, "i"), T=(24, "i"),
              step=(28, "i"), data_rng=(32, "Q"), sample_rng=(40, "Q"), nparams=(48, "Q"), dtype=(56, "i"),
              updates=(60, "i"), loss_scale=(64, "f"), good_steps=(68, "i"), zero=(72, "i"), nranks=(76, "i"),
              rank=(80, "i"), lo=(88, "Q"), hi=(96, "Q"), adam_bits=(104, "i"), steps=(108, "i"), arch=(112, "i"),
              kv_heads=(116, "i"), ffn=(120, "i"), untied=(124, "i"), rope_scaled=(128, "i"),
              rope_theta=(132, "i"), lora_rank=(136, "i"), lora_targets=(140, "i"), lora_alpha=(144, "f"),
              base_format=(148, "i"), double_quant=(152, "i"), base_hash=(160, "Q"), tp=(168, "i"))


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
    data = bytearray(open(src, "rb").read()[:-8])  # without the checksum
    head = MAGIC + 4
    if what == "nan":
        at = head + HEADER7 + 4 * int(sys.argv[4])
        data[at:at + 4] = struct.pack("<f", float("nan"))
    elif what in ("version3", "version4", "version5", "version6"):
        if what in ("version3", "version4"):
            del data[-8:]  # the save id
        keep = {"version3": HEADER3, "version4": HEADER4, "version5": HEADER5, "version6": HEADER6}[what]
        data[MAGIC:MAGIC + 4] = struct.pack("<I", int(what[-1]))
        del data[head + keep:head + HEADER7]
    elif what == "set":
        for kv in sys.argv[4:]:
            name, value = kv.split("=")
            off, kind = FIELDS[name]
            struct.pack_into("<" + kind, data, head + off, float(value) if kind == "f" else int(value, 0))
    else:
        sys.exit(f"unknown edit {what}")
    data += struct.pack("<Q", fnv1a(data))
    open(dst, "wb").write(data)


if __name__ == "__main__":
    main()
