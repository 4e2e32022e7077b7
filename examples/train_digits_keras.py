#!/usr/bin/env python3
"""Trains examples/digits_cnn.keras with real Keras: the accuracy Cohort must match.

Loads the saved (untrained) model, fits it on the digits data written by
make_digits.py, and prints one JSON line: epochs, batch size, seconds spent in fit,
final test loss and accuracy, and the first epoch whose test accuracy reached 95%.

Usage: KERAS_BACKEND=jax .venv/bin/python examples/train_digits_keras.py DATA_DIR
           [--model examples/digits_cnn.keras] [--epochs 10] [--batch-size 64]
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

TARGET_ACCURACY = 0.95


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--model", default=os.path.join(here, "digits_cnn.keras"))
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    data = {n: np.load(os.path.join(args.data_dir, n + ".npy"))
            for n in ("x_train", "y_train", "x_test", "y_test")}
    keras.utils.set_random_seed(args.seed)
    model = keras.saving.load_model(args.model)
    start = time.perf_counter()
    history = model.fit(data["x_train"], data["y_train"], batch_size=args.batch_size,
                        epochs=args.epochs, validation_data=(data["x_test"], data["y_test"]),
                        verbose=0)
    seconds = time.perf_counter() - start
    accuracy = history.history["val_accuracy"]
    reached = next((i + 1 for i, a in enumerate(accuracy) if a >= TARGET_ACCURACY), None)
    print(json.dumps({
        "model": os.path.basename(args.model), "epochs": args.epochs,
        "batch_size": args.batch_size, "fit_seconds": round(seconds, 2),
        "test_loss": round(history.history["val_loss"][-1], 4),
        "test_accuracy": round(accuracy[-1], 4),
        "first_epoch_at_95": reached,
        "test_accuracy_per_epoch": [round(a, 4) for a in accuracy],
    }))
    return 0 if accuracy[-1] >= TARGET_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
