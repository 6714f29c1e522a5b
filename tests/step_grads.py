#!/usr/bin/env python3
"""tests/step_grads.py — the gradients one AdamW step read, from two saved states, compared.

Usage: tests/step_grads.py A B rounded   B's gradients rounded to bf16 are A's, bit for bit
       tests/step_grads.py A B equal     A's gradients are B's, bit for bit
       tests/step_grads.py A B wider     A's are all bf16 values, a third of B's or more are not, and
                                          ||A - B|| / ||B|| is below 2^-6 (a few of bf16's roundings)

A and B are one-rank states (--save) of a one-step run with --beta1 0 --clip 0: AdamW's first
moment is then (1 - 0) * g * 1 = g exactly, the gradients the step read (io/state.h: the header,
the fp32 weights, m, v). That is how a test sees what --fp32-grads keeps: A a --dtype bf16 run, B
the same with --fp32-grads. Prints one line; exits 0 when the relation holds.
"""
import struct
import sys
from array import array

from state_edit import FIELDS, HEADER5, HEADER6, HEADER7, MAGIC  # io/state.h's layout, as tests/state_edit.py reads it


def moment(path):
    data = open(path, "rb").read()
    lo, hi = (struct.unpack_from("<" + FIELDS[k][1], data, MAGIC + 4 + FIELDS[k][0])[0] for k in ("lo", "hi"))
    n = hi - lo
    head = MAGIC + 4 + {5: HEADER5, 6: HEADER6, 7: HEADER7}[struct.unpack_from("<I", data, MAGIC)[0]]  # magic, version, StateHeader
    m = array("I")
    m.frombytes(data[head + 4 * n:head + 8 * n])
    return m


def bf16_round(u):  # core/dtype.h bf16_from_float, back to fp32 bits
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16


def as_float(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def main():
    a, b, how = moment(sys.argv[1]), moment(sys.argv[2]), sys.argv[3]
    if len(a) != len(b) or not a:
        sys.exit(f"the states hold {len(a)} and {len(b)} parameters")
    a_bf16 = sum(1 for u in a if u & 0xFFFF == 0)
    b_wide = sum(1 for u in b if u & 0xFFFF)
    if how == "rounded":
        off = sum(1 for x, y in zip(a, b) if bf16_round(y) != x)
        print(f"{len(a)} gradients: {off} of B's rounded differ from A's; {b_wide} of B's are not bf16 values")
        ok = off == 0 and b_wide > len(b) // 3
    elif how == "equal":
        off = sum(1 for x, y in zip(a, b) if x != y)
        print(f"{len(a)} gradients: {off} differ")
        ok = off == 0
    else:
        d = sum((as_float(x) - as_float(y)) ** 2 for x, y in zip(a, b)) ** 0.5
        rel = d / max(sum(as_float(y) ** 2 for y in b) ** 0.5, 1e-30)
        print(f"{len(a)} gradients: A's {a_bf16} bf16 values, B's {b_wide} not bf16 values, ||A - B|| / ||B|| {rel:.2e}")
        ok = a_bf16 == len(a) and b_wide > len(b) // 3 and rel < 2 ** -6
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
