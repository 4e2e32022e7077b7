#!/usr/bin/env python3
"""Loads a trained model with real Keras and measures it on the digits test set.

What a user does with what Cohort gives back: keras.saving.load_model, then predict.

Usage: KERAS_BACKEND=jax .venv/bin/python examples/evaluate_digits.py MODEL.keras DATA_DIR
           [--json]
DATA_DIR is make_digits.py's output. Prints "test accuracy: 0.9667 (360 images)", or with
--json one line {"accuracy": a, "rows": n}.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("data_dir")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    model = keras.saving.load_model(args.model)
    x = np.load(os.path.join(args.data_dir, "x_test.npy"))
    y = np.load(os.path.join(args.data_dir, "y_test.npy"))
    predicted = np.argmax(model.predict(x, verbose=0), axis=-1)
    accuracy = float(np.mean(predicted == y))
    if args.json:
        print(json.dumps({"accuracy": accuracy, "rows": int(len(y))}))
    else:
        print(f"test accuracy: {accuracy:.4f} ({len(y)} images)")


if __name__ == "__main__":
    main(sys.argv[1:])
