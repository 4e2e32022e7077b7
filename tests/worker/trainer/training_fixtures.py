#!/usr/bin/env python3
"""Fixtures and judges for training_test.cc, with real Keras, h5py and numpy.

  models OUT_DIR          writes mlp.keras and cnn.keras (digits shapes, (8, 8, 1) -> 10,
                          no dropout or batch norm; Adam, sparse crossentropy, accuracy)
  accuracy PRED.npy Y.npy prints {"accuracy": a, "rows": n}: argmax of the predictions
                          against integer labels
  compare A.keras B.keras [--rtol R]
                          compares every variable of two .keras files (model.weights.h5):
                          for each, the same dtype and shape and max|a - b| <= R * max|b|
                          (R = 0 asks for equal bytes).
                          Prints {"ok", "variables", "worst": {"name", "relative"}}; exits
                          1 when a variable differs, or the files hold different variables.
"""
import argparse
import io
import json
import os
import sys
import zipfile

import h5py
import numpy as np


def Models(out_dir):
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras
    from keras import layers

    os.makedirs(out_dir, exist_ok=True)
    builds = {
        "mlp": lambda: [layers.Flatten(), layers.Dense(32, activation="relu"),
                        layers.Dense(10, activation="softmax")],
        "cnn": lambda: [layers.Conv2D(8, 3, padding="same", activation="relu"),
                        layers.MaxPooling2D(2), layers.Flatten(),
                        layers.Dense(10, activation="softmax")],
    }
    for name, build in builds.items():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input(shape=(8, 8, 1))] + build(), name=name)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        tmp = os.path.join(out_dir, name + ".tmp.keras")  # Keras wants the suffix
        model.save(tmp)
        os.replace(tmp, os.path.join(out_dir, name + ".keras"))
    return 0


def Accuracy(pred_path, y_path):
    pred = np.load(pred_path)
    y = np.load(y_path)
    if pred.shape[0] != y.shape[0]:
        print(json.dumps({"error": f"{pred.shape[0]} predictions for {y.shape[0]} labels"}))
        return 1
    accuracy = float(np.mean(np.argmax(pred, axis=-1) == y.reshape(-1)))
    print(json.dumps({"accuracy": accuracy, "rows": int(y.shape[0])}))
    return 0


def Variables(keras_path):
    with zipfile.ZipFile(keras_path) as z:
        data = z.read("model.weights.h5")
    found = {}
    with h5py.File(io.BytesIO(data), "r") as f:
        def Visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                found[name] = np.array(obj)
        f.visititems(Visit)
    return found


def Compare(a_path, b_path, rtol):
    a, b = Variables(a_path), Variables(b_path)
    if sorted(a) != sorted(b):
        print(json.dumps({"ok": False, "error": "different variables",
                          "a": sorted(a), "b": sorted(b)}))
        return 1
    worst = {"name": None, "relative": 0.0}
    ok = True
    for name in sorted(a):
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        if x.shape != y.shape or a[name].dtype != b[name].dtype:
            print(json.dumps({"ok": False, "error": f"{name}: {a[name].dtype}{x.shape} vs "
                                                    f"{b[name].dtype}{y.shape}"}))
            return 1
        diff = float(np.max(np.abs(x - y))) if x.size else 0.0
        scale = float(np.max(np.abs(y))) if y.size else 0.0
        relative = diff / scale if scale > 0 else diff
        if relative > worst["relative"] or worst["name"] is None:
            worst = {"name": name, "relative": relative}
        if (rtol == 0 and a[name].tobytes() != b[name].tobytes()) or relative > rtol:
            ok = False
    print(json.dumps({"ok": ok, "variables": len(a), "worst": worst}))
    return 0 if ok else 1


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models")
    p.add_argument("out_dir")
    p = sub.add_parser("accuracy")
    p.add_argument("pred")
    p.add_argument("y")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args(argv)
    if args.command == "models":
        return Models(args.out_dir)
    if args.command == "accuracy":
        return Accuracy(args.pred, args.y)
    return Compare(args.a, args.b, args.rtol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
