#!/usr/bin/env python3
"""tests/state_edit.py — make a saved state that is well-formed but says something else.

Usage: tests/state_edit.py IN OUT nan K        weight K set to nan, checksum made right
       tests/state_edit.py IN OUT version3     the same state as a version 3 file (no adam_bits)

The loader's checks of damaged files are tests/fuzz_state.py's; these files
pass the checksum, so what refuses (or accepts) them is the check after it.
"""
import struct
import sys

MAGIC, HEADER4, HEADER3 = 8, 112, 104  # magic bytes; StateHeader in versions 4 and 3 (state.h)


def fnv1a(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
    data = bytearray(open(src, "rb").read()[:-8])  # without the checksum
    if what == "nan":
        at = MAGIC + 4 + HEADER4 + 4 * int(sys.argv[4])
        data[at:at + 4] = struct.pack("<f", float("nan"))
    elif what == "version3":
        data[MAGIC:MAGIC + 4] = struct.pack("<I", 3)
        del data[MAGIC + 4 + HEADER3:MAGIC + 4 + HEADER4]  # adam_bits, reserved
    else:
        sys.exit(f"unknown edit {what}")
    data += struct.pack("<Q", fnv1a(data))
    open(dst, "wb").write(data)


main()
