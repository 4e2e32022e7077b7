"""Fixtures and checks for the zip tests, done with Python's own zipfile (and Keras).

  zip_helper.py fixtures DIR         write the archives zip_reader_test.cc reads
  zip_helper.py check ZIP            testzip() it and list its entries
  zip_helper.py keras_save DIR       save a small Keras model and its predictions
  zip_helper.py keras_load DIR FILE...  load each FILE with Keras; exit 0 if all predict the same
"""
import io
import os
import struct
import sys
import warnings
import zipfile

# Deterministic contents; zip_reader_test.cc builds the same bytes.
ENTRIES = {
    "a.txt": b"hello",
    "dir/b.bin": bytes(range(256)) * 100,
    "empty": b"",
}


def write(path, compression, entries=ENTRIES, comment=b""):
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)
        z.comment = comment


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def set_flag(path, bit):
    """Sets a general-purpose flag bit in every local and central header."""
    data = bytearray(open(path, "rb").read())
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = data.find(sig)
        while i >= 0:
            flags = struct.unpack_from("<H", data, i + at)[0]
            struct.pack_into("<H", data, i + at, flags | bit)
            i = data.find(sig, i + 4)
    open(path, "wb").write(bytes(data))


def fixtures(d):
    big = os.urandom(3 << 20)
    open(os.path.join(d, "big.bin"), "wb").write(big)
    write(os.path.join(d, "stored.zip"), zipfile.ZIP_STORED)
    write(os.path.join(d, "deflate.zip"), zipfile.ZIP_DEFLATED)
    write(os.path.join(d, "big.zip"), zipfile.ZIP_DEFLATED, {"big.bin": big, "a.txt": b"hello"})
    write(os.path.join(d, "comment.zip"), zipfile.ZIP_DEFLATED, comment=b"PK\x05\x06 a comment")
    with open(os.path.join(d, "descriptor.zip"), "wb") as f:
        with zipfile.ZipFile(Unseekable(f), "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, data in ENTRIES.items():
                with z.open(name, "w") as m:
                    m.write(data)
    # ZIP64 records without 4 GiB of data: lower the limit zipfile switches at.
    limit = zipfile.ZIP64_LIMIT
    zipfile.ZIP64_LIMIT = 100
    try:
        write(os.path.join(d, "zip64.zip"), zipfile.ZIP_STORED)
    finally:
        zipfile.ZIP64_LIMIT = limit
    write(os.path.join(d, "bzip2.zip"), zipfile.ZIP_BZIP2)
    write(os.path.join(d, "encrypted.zip"), zipfile.ZIP_STORED)
    set_flag(os.path.join(d, "encrypted.zip"), 0x1)
    write(os.path.join(d, "traversal.zip"), zipfile.ZIP_STORED, {"ok.txt": b"x", "../evil.txt": b"x"})
    write(os.path.join(d, "absolute.zip"), zipfile.ZIP_STORED, {"/etc/evil": b"x"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name"
        with zipfile.ZipFile(os.path.join(d, "duplicate.zip"), "w") as z:
            z.writestr("same", b"1")
            z.writestr("same", b"2")


def check(path):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        infos = z.infolist()
        print("testzip", "ok" if bad is None else "bad:" + bad)
        print("count", len(infos))
        if len(infos) <= 100:
            for i in infos:
                print(i.filename, i.compress_type, i.file_size, "%08x" % i.CRC, sep="\t")


def keras_model():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    import numpy as np

    keras.utils.set_random_seed(1)
    inputs = keras.Input((6,))
    h = keras.layers.Dense(8, activation="relu")(inputs)
    outputs = keras.layers.Dense(3)(h)
    model = keras.Model(inputs, outputs)
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    return keras, model, x


def keras_save(d):
    keras, model, x = keras_model()
    import numpy as np

    model.save(os.path.join(d, "model.keras"))
    np.save(os.path.join(d, "pred.npy"), model.predict(x, verbose=0))


def keras_load(d, *paths):
    keras, _, x = keras_model()
    import numpy as np

    want = np.load(os.path.join(d, "pred.npy"))
    for path in paths:
        got = keras.saving.load_model(path).predict(x, verbose=0)
        if not np.array_equal(got, want):
            print("predictions differ:", path, got, want)
            sys.exit(1)
        print("keras loaded", path)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"fixtures": fixtures, "check": check, "keras_save": keras_save, "keras_load": keras_load}[cmd](*args)
