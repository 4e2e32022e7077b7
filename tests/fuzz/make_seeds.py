"""Writes the small seed inputs of the keras_file, keras_weights and npy_file fuzz
targets (tests/fuzz/corpus/) with real Keras 3 and NumPy. Rerun after changing it:
  .venv/bin/python tests/fuzz/make_seeds.py
The seeds are committed; nothing runs this at test time."""
import io
import os
import pathlib
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

HERE = pathlib.Path(__file__).parent / "corpus"


def save(model, name, compiled):
    if compiled:
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
        x = np.zeros((4,) + model.input_shape[1:], np.float32)
        model.fit(x, np.zeros((4,), np.int64), epochs=1, verbose=0)
    path = HERE / "keras_file" / f"{name}.keras"
    model.save(path)
    with zipfile.ZipFile(path) as z:
        (HERE / "keras_weights" / f"{name}.weights.h5").write_bytes(z.read("model.weights.h5"))


keras.utils.set_random_seed(0)
save(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")]),
     "dense", compiled=True)
save(keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Conv2D(2, 2),
                       keras.layers.BatchNormalization(), keras.layers.Flatten(),
                       keras.layers.Dense(2)]), "conv", compiled=False)
inp = keras.Input((3,))
h = keras.layers.Dense(3)(inp)
out = keras.layers.Dense(2)(keras.layers.Add()([inp, h]))
save(keras.Model(inp, out), "functional", compiled=False)

# A .keras without weights, and one whose entries are deflated.
with zipfile.ZipFile(HERE / "keras_file" / "dense.keras") as z:
    config = z.read("config.json")
    meta = z.read("metadata.json")
    weights = z.read("model.weights.h5")
with zipfile.ZipFile(HERE / "keras_file" / "no_weights.keras", "w") as z:
    z.writestr("config.json", config)
with zipfile.ZipFile(HERE / "keras_file" / "deflated.keras", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("metadata.json", meta)
    z.writestr("config.json", config)
    z.writestr("model.weights.h5", weights)

# .npy and .npz files as np.save / np.savez write them.
def npy(name, array):
    buf = io.BytesIO()
    np.save(buf, array)
    (HERE / "npy_file" / name).write_bytes(buf.getvalue())


npy("f32.npy", np.arange(12, dtype=np.float32).reshape(4, 3))
npy("f64_nan.npy", np.array([[1.0, np.nan], [np.inf, 2.0]]))
npy("i64.npy", np.arange(5, dtype=np.int64))
npy("u8_3d.npy", np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
npy("bool.npy", np.array([True, False, True]))
npy("fortran.npy", np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
for name, compressed in (("one.npz", False), ("deflated.npz", True)):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, x=np.arange(6, dtype=np.float32).reshape(3, 2),
                                                      y=np.arange(3, dtype=np.int64))
    (HERE / "npy_file" / name).write_bytes(buf.getvalue())
