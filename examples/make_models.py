#!/usr/bin/env python3
"""Builds the example Keras models with real Keras 3 and saves them as .keras files.

  digits_cnn.keras  (8, 8, 1) -> 10: Conv2D 32 3x3 same relu, MaxPooling2D 2x2,
                    Conv2D 64 3x3 same relu, Flatten, Dense 10 softmax
                    (for the digits data from make_digits.py; Keras trains it past 95%
                    test accuracy in 10 epochs of batch 64: train_digits_keras.py)
  mnist_mlp.keras   (784,) -> Dense 256 relu, Dense 128 relu, Dense 10 softmax
  mnist_cnn.keras   (28, 28, 1) -> Conv2D 32 3x3 relu, MaxPooling2D 2x2,
                    Conv2D 64 3x3 relu, MaxPooling2D 2x2, Flatten, Dense 10 softmax
  mnist_residual.keras  Functional, (784,) -> Dense 256 relu, then twice a residual
                    block (Dense 256 relu, Dense 256, Add with the block's input, ReLU),
                    Dense 10 softmax (bench/'s residual model)

All but mnist_residual are Sequential; all are compiled with Adam (Keras defaults: lr 1e-3, epsilon 1e-7),
sparse_categorical_crossentropy and accuracy, and hold their (untrained) initial
weights. The seed is fixed, so the weights are the same on every run; only
metadata.json's date_saved, the zip timestamps and config.json's shared_object_id
(Python's id() of the shared DTypePolicy) differ between runs.
The bench/ peers in PyTorch use the same shapes as mnist_mlp, mnist_cnn and
mnist_residual.

Usage: KERAS_BACKEND=jax .venv/bin/python examples/make_models.py [OUT_DIR]
       (OUT_DIR defaults to this script's folder)
"""
import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402  (the backend must be chosen before the import)
from keras import layers  # noqa: E402

SEED = 0


def DigitsCnn():
    return keras.Sequential([
        keras.Input(shape=(8, 8, 1)),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.Flatten(),
        layers.Dense(10, activation="softmax"),
    ], name="digits_cnn")


def MnistMlp():
    return keras.Sequential([
        keras.Input(shape=(784,)),
        layers.Dense(256, activation="relu"),
        layers.Dense(128, activation="relu"),
        layers.Dense(10, activation="softmax"),
    ], name="mnist_mlp")


def MnistCnn():
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Flatten(),
        layers.Dense(10, activation="softmax"),
    ], name="mnist_cnn")


def MnistResidual():
    inputs = keras.Input(shape=(784,))
    x = layers.Dense(256, activation="relu")(inputs)
    for _ in range(2):
        y = layers.Dense(256, activation="relu")(x)
        y = layers.Dense(256)(y)
        x = layers.ReLU()(layers.Add()([x, y]))
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="mnist_residual")


MODELS = {"digits_cnn": DigitsCnn, "mnist_mlp": MnistMlp, "mnist_cnn": MnistCnn,
          "mnist_residual": MnistResidual}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", nargs="?",
                        default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, build in MODELS.items():
        keras.utils.set_random_seed(SEED)  # per model, so each is reproducible alone
        model = build()
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        path = os.path.join(args.out_dir, name + ".keras")
        tmp = os.path.join(args.out_dir, name + ".tmp.keras")  # Keras wants the suffix
        model.save(tmp)
        os.replace(tmp, path)
        print(f"{path}: {model.count_params()} parameters, "
              f"{os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
