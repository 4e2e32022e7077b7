"""Fixtures and checks for the npy tests, made with NumPy itself.

  npy_helper.py fixtures DIR   write the arrays npy_array_test.cc reads, and for each
                               the bytes GatherRows must produce (DIR/<name>.f32/.i64)
  npy_helper.py check NPY...   np.load each file; print its dtype, shape, whether
                               np.save writes the very same bytes, and the data in hex
"""
import io
import os
import sys
import zipfile

import numpy as np

ROWS_SHAPE = (37, 3, 2)
# GatherRows is checked on these rows of every fixture: repeats, reversed, the ends.
GATHER = [36, 0, 5, 5, 17, 36, 1, 30, 2]


def dtype_arrays(rng):
    n = int(np.prod(ROWS_SHAPE))
    f = rng.standard_normal(n) * 1000.0
    return {
        "float32": f.astype(np.float32),
        "float64": f,  # rounding to float32 matters
        "int32": rng.integers(-2**31, 2**31, n, dtype=np.int32),
        "int64": rng.integers(-2**62, 2**62, n, dtype=np.int64),  # beyond float32's 2^24
        "uint8": rng.integers(0, 256, n, dtype=np.uint8),
        "bool": rng.integers(0, 2, n).astype(np.bool_),
    }


def save_expected(d, name, a):
    g = a[GATHER]
    g.astype(np.float32).tofile(os.path.join(d, name + ".f32"))
    if a.dtype.kind != "f" or np.all(np.trunc(a) == a):
        g.astype(np.int64).tofile(os.path.join(d, name + ".i64"))


def write_version(path, a, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, a, version=version)


def fixtures(d):
    p = lambda name: os.path.join(d, name)
    rng = np.random.default_rng(7)
    arrays = {k: v.reshape(ROWS_SHAPE) for k, v in dtype_arrays(rng).items()}
    # Floats holding integers: labels saved as floats, convertible to int64.
    arrays["float32_int"] = rng.integers(-10**6, 10**6, ROWS_SHAPE).astype(np.float32)
    arrays["float64_int"] = rng.integers(-2**53, 2**53, ROWS_SHAPE).astype(np.float64)
    arrays["labels"] = rng.integers(0, 10, 37, dtype=np.int64)  # 1-D
    for name, a in arrays.items():
        np.save(p(name + ".npy"), a)
        write_version(p(name + "_v2.npy"), a, (2, 0))
        write_version(p(name + "_v3.npy"), a, (3, 0))
        save_expected(d, name, a)
    np.savez(p("savez.npz"), **arrays)
    np.savez_compressed(p("compressed.npz"), **arrays)
    np.savez(p("single.npz"), arrays["labels"])  # one member: arr_0

    big = rng.standard_normal((200000, 32)).astype(np.float32)
    np.save(p("big.npy"), big)
    np.savez(p("big.npz"), x=big)
    idx = (np.arange(5000, dtype=np.int64) * 7919) % big.shape[0]
    big[idx].tofile(p("big_gather.f32"))

    # Non-finite values at known places; one at the end of a 4096-element block.
    nan = np.ones((50, 4), np.float32)
    nan[17, 2] = np.nan
    np.save(p("nan.npy"), nan)
    inf = np.ones((50, 4), np.float64)
    inf[33, 1] = -np.inf
    np.save(p("inf.npy"), inf)
    late = np.zeros(10000, np.float32)
    late[8191] = np.inf
    np.save(p("late_inf.npy"), late)
    np.save(p("fraction.npy"), np.array([0.0, 1.0, 2.5, 3.0], np.float32))
    np.save(p("too_big.npy"), np.array([1.0, 2.0**63], np.float64))

    # Refused dtypes and layouts.
    np.save(p("big_endian.npy"), np.arange(6, dtype=">f4"))
    np.save(p("float16.npy"), np.arange(6, dtype=np.float16))
    np.save(p("int8.npy"), np.arange(6, dtype=np.int8))
    np.save(p("unicode.npy"), np.array(["ab", "cd"]))
    np.save(p("object.npy"), np.array([1, "a"], dtype=object), allow_pickle=True)
    np.save(p("structured.npy"), np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
    np.save(p("fortran.npy"), np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)))
    np.save(p("scalar.npy"), np.float32(3.0))
    np.save(p("zero_rows.npy"), np.zeros((0, 3), np.float32))

    # Damaged files.
    good = open(p("float32.npy"), "rb").read()
    open(p("truncated.npy"), "wb").write(good[:-10])
    open(p("header_cut.npy"), "wb").write(good[:40])
    open(p("trailing.npy"), "wb").write(good + b"extra")
    open(p("bad_magic.npy"), "wb").write(b"\x93NUMPX" + good[6:])
    npz = open(p("savez.npz"), "rb").read()
    open(p("truncated.npz"), "wb").write(npz[: len(npz) // 2])
    # A flipped byte inside a deflated member.
    with zipfile.ZipFile(p("compressed.npz")) as z:
        info = z.getinfo("float32.npy")
    data = bytearray(open(p("compressed.npz"), "rb").read())
    at = info.header_offset
    name_len, extra_len = int.from_bytes(data[at + 26:at + 28], "little"), int.from_bytes(data[at + 28:at + 30], "little")
    data[at + 30 + name_len + extra_len + 50] ^= 0xFF
    open(p("corrupt.npz"), "wb").write(bytes(data))


def check(*paths):
    for path in paths:
        a = np.load(path)
        buf = io.BytesIO()
        np.save(buf, a)
        same = buf.getvalue() == open(path, "rb").read()
        print(a.dtype.str, a.shape, "same" if same else "different", a.tobytes().hex())


if __name__ == "__main__":
    {"fixtures": fixtures, "check": check}[sys.argv[1]](*sys.argv[2:])
