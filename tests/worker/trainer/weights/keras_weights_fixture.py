"""Fixtures and checks for the Keras weights tests, made with real Keras, h5py and numpy.

  make OUT    Builds four models with Keras, compiles them with Adam, trains one step,
              saves OUT/<model>.keras and extracts OUT/<model>.weights.h5. Writes what
              Keras holds in memory to OUT/<model>.json (+ raw little-endian .bin files),
              plus two h5py re-encodings of the MLP file: float64 and chunked+gzip.
  bad OUT     Writes malformed weights files with h5py (no Keras needed).
  check OUT   For each model, OUT/<model>.cohort.weights.h5 (written by Cohort with every
              value of the Keras file plus one) must have Keras' layout and load, in a
              .keras zip with Keras' own config.json and metadata.json through
              keras.saving.load_model, and through model.load_weights, with every layer
              and optimizer variable equal to Keras' value plus one.

Exits 0 after printing "OK"; otherwise prints what differs and exits 1.
"""

import json
import os
import sys
import zipfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import h5py  # noqa: E402
import numpy as np  # noqa: E402

MODELS = ("mlp", "cnn", "residual", "embedding")


def build(name, keras):
    layers = keras.layers
    rng = np.random.default_rng(7)
    if name == "mlp":
        model = keras.Sequential([
            keras.Input((20,)),
            layers.Dense(16, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(8, activation="relu"),
            layers.Dense(3, activation="softmax"),
        ])
        x = rng.random((32, 20), dtype=np.float32)
        y = rng.integers(0, 3, 32)
        loss = "sparse_categorical_crossentropy"
    elif name == "cnn":
        model = keras.Sequential([
            keras.Input((8, 8, 3)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.BatchNormalization(),
            layers.Conv2D(4, 3, padding="same"),
            layers.BatchNormalization(),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(5),
        ])
        x = rng.random((16, 8, 8, 3), dtype=np.float32)
        y = rng.random((16, 5), dtype=np.float32)
        loss = "mse"
    elif name == "residual":
        inputs = keras.Input((10,))
        h = layers.Dense(10, activation="relu")(inputs)
        h = layers.Dense(10)(h)
        h = layers.Add()([inputs, h])
        outputs = layers.Dense(1)(h)
        model = keras.Model(inputs, outputs)
        x = rng.random((16, 10), dtype=np.float32)
        y = rng.random((16, 1), dtype=np.float32)
        loss = "mse"
    elif name == "embedding":
        inputs = keras.Input((12,), dtype="int32")
        h = layers.Embedding(50, 8)(inputs)
        h = layers.Conv1D(6, 3, activation="relu")(h)
        h = layers.GlobalAveragePooling1D()(h)
        outputs = layers.Dense(2)(h)
        model = keras.Model(inputs, outputs)
        x = rng.integers(0, 50, (16, 12)).astype(np.int32)
        y = rng.random((16, 2), dtype=np.float32)
        loss = "mse"
    else:
        raise ValueError(name)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss=loss)
    model.fit(x, y, batch_size=len(x), epochs=1, verbose=0)  # one step: optimizer state
    return model


def export(values, out, stem):
    """Writes each array to OUT/<stem>.<i>.bin and returns their descriptions."""
    described = []
    for i, value in enumerate(values):
        value = np.asarray(value)
        file = f"{stem}.{i}.bin"
        np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tofile(
            os.path.join(out, file))
        described.append({"shape": list(value.shape), "dtype": value.dtype.name, "file": file})
    return described


def make(out):
    import keras

    for name in MODELS:
        model = build(name, keras)
        path = os.path.join(out, f"{name}.keras")
        model.save(path)
        with zipfile.ZipFile(path) as archive:
            with open(os.path.join(out, f"{name}.weights.h5"), "wb") as f:
                f.write(archive.read("model.weights.h5"))
        manifest = {
            "model_name": model.name,
            "layers": [{
                "class_name": type(layer).__name__,
                "name": layer.name,
                "variables": export(layer.get_weights(), out, f"{name}.layer{i}"),
            } for i, layer in enumerate(model.layers)],
            "optimizer": {
                "name": model.optimizer.name,
                "variables": export([v.numpy() for v in model.optimizer.variables], out,
                                    f"{name}.optimizer"),
            },
        }
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(manifest, f, indent=1)

    source = os.path.join(out, "mlp.weights.h5")
    recode(source, os.path.join(out, "mlp_f64.weights.h5"), dtype="f8")
    recode(source, os.path.join(out, "mlp_gzip.weights.h5"), compression="gzip")
    print("OK")


def recode(source, target, dtype=None, compression=None):
    """Copies a weights file, storing every float dataset as `dtype` / compressed."""
    with h5py.File(source, "r") as src, h5py.File(target, "w") as dst:
        def copy(name, obj):
            if isinstance(obj, h5py.Group):
                group = dst.require_group(name)
                group.attrs.update(obj.attrs)
            elif obj.dtype.kind == "f":
                dst.create_dataset(name, data=obj[()].astype(dtype or obj.dtype),
                                   compression=compression if obj.ndim else None)
            else:
                dst.create_dataset(name, data=obj[()])
        src.visititems(copy)


def bad(out):
    def weights_file(name, fill):
        with h5py.File(os.path.join(out, name), "w") as f:
            f.create_group("vars").attrs["name"] = "sequential"
            vars_ = f.create_group("layers/dense/vars")
            vars_.attrs["name"] = "dense"
            fill(f, vars_)

    def int_kernel(f, v):
        v["0"] = np.arange(6, dtype=np.int32).reshape(3, 2)
        v["1"] = np.zeros(2, np.float32)

    def float16_kernel(f, v):
        v["0"] = np.zeros((3, 2), np.float16)

    def uint8_optimizer(f, v):
        v["0"] = np.zeros((3, 2), np.float32)
        opt = f.create_group("optimizer/vars")
        opt.attrs["name"] = "adam"
        opt["0"] = np.zeros((), np.uint8)

    def soft_link(f, v):
        v["0"] = np.zeros((3, 2), np.float32)
        v["1"] = h5py.SoftLink("/layers/dense/vars/0")

    def misnamed(f, v):
        v["kernel"] = np.zeros((3, 2), np.float32)

    def gap(f, v):
        v["0"] = np.zeros((3, 2), np.float32)
        v["2"] = np.zeros(2, np.float32)

    def group_in_vars(f, v):
        v["0"] = np.zeros((3, 2), np.float32)
        v.create_group("extra")

    def null_space(f, v):
        v.create_dataset("0", data=h5py.Empty("f4"))

    weights_file("int_kernel.weights.h5", int_kernel)
    weights_file("float16_kernel.weights.h5", float16_kernel)
    weights_file("uint8_optimizer.weights.h5", uint8_optimizer)
    weights_file("soft_link.weights.h5", soft_link)
    weights_file("misnamed.weights.h5", misnamed)
    weights_file("gap.weights.h5", gap)
    weights_file("group_in_vars.weights.h5", group_in_vars)
    weights_file("null_space.weights.h5", null_space)
    # Keras 2 (tf.keras) layout: datasets under model_weights-style layer groups.
    with h5py.File(os.path.join(out, "keras2.weights.h5"), "w") as f:
        f.attrs["layer_names"] = [b"dense"]
        f.attrs["keras_version"] = "2.15.0"
        f.create_group("dense/dense")["kernel:0"] = np.zeros((3, 2), np.float32)
    # HDF5 without any vars group.
    with h5py.File(os.path.join(out, "no_vars.weights.h5"), "w") as f:
        f.create_group("layers/dense")
    print("OK")


def describe(path):
    """Everything about a file's layout that Keras or h5py could tell apart."""
    tree = {}
    with h5py.File(path, "r") as f:
        def attrs_of(obj):
            result = {}
            for key, value in obj.attrs.items():
                attribute = obj.attrs.get_id(key)
                kind = attribute.get_type()
                result[key] = (
                    value if not isinstance(value, bytes) else value.decode(),
                    type(kind).__name__,
                    kind.is_variable_str() if isinstance(kind, h5py.h5t.TypeStringID) else None,
                    kind.get_cset() if isinstance(kind, h5py.h5t.TypeStringID) else None,
                    attribute.get_space().get_simple_extent_type(),
                )
            return result

        def visit(name, obj):
            plist = obj.id.get_create_plist()
            if isinstance(obj, h5py.Dataset):
                tree[name] = ("dataset", obj.shape, obj.dtype.str, obj.chunks, obj.compression,
                              obj.id.get_space().get_simple_extent_type(), plist.get_layout(),
                              plist.get_obj_track_times(), attrs_of(obj))
            else:
                tree[name] = ("group", plist.get_obj_track_times(), attrs_of(obj))

        tree["/"] = ("root", attrs_of(f), f.userblock_size)
        f.visititems(visit)
    with open(path, "rb") as raw:
        tree["superblock version"] = raw.read(9)[8]
    return tree


def plus_one(value):
    value = np.asarray(value)
    return value + np.ones((), value.dtype)


def compare(label, loaded, original, failures):
    if len(loaded) != len(original):
        failures.append(f"{label}: {len(loaded)} variables, Keras saved {len(original)}")
        return
    for i, (got, want) in enumerate(zip(loaded, original)):
        got, want = np.asarray(got), plus_one(want)
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            failures.append(f"{label}[{i}]: loaded {got.dtype}{got.shape} differs from "
                            f"Keras' value plus one {want.dtype}{want.shape}")


def compare_model(label, model, original, failures):
    for layer, layer0 in zip(model.layers, original.layers):
        compare(f"{label} layer {layer.name}", layer.get_weights(), layer0.get_weights(), failures)
    compare(f"{label} optimizer", [v.numpy() for v in model.optimizer.variables],
            [v.numpy() for v in original.optimizer.variables], failures)


def check(out):
    import keras

    failures = []
    for name in MODELS:
        keras_h5 = os.path.join(out, f"{name}.weights.h5")
        cohort_h5 = os.path.join(out, f"{name}.cohort.weights.h5")
        want, got = describe(keras_h5), describe(cohort_h5)
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                failures.append(f"{name} layout {key}: Keras {want.get(key)}, Cohort {got.get(key)}")
        with open(keras_h5, "rb") as a, open(cohort_h5, "rb") as b:
            same = a.read() == b.read()
        print(f"{name}: layout matches Keras; bytes identical to Keras' file: {same}")

        original_path = os.path.join(out, f"{name}.keras")
        original = keras.saving.load_model(original_path)
        zipped = os.path.join(out, f"{name}.cohort.keras")
        with zipfile.ZipFile(original_path) as src, zipfile.ZipFile(zipped, "w") as dst:
            dst.writestr("metadata.json", src.read("metadata.json"))
            dst.writestr("config.json", src.read("config.json"))
            dst.write(cohort_h5, "model.weights.h5")
        compare_model(f"{name} load_model", keras.saving.load_model(zipped), original, failures)

        model = keras.saving.load_model(original_path)
        model.load_weights(cohort_h5)
        compare_model(f"{name} load_weights", model, original, failures)

    for failure in failures:
        print(failure)
    if failures:
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    command, out = sys.argv[1], sys.argv[2]
    {"make": make, "bad": bad, "check": check}[command](out)
