"""Loads a .keras file with real Keras and reports its accuracy on the digits test set.

Usage: keras_accuracy.py MODEL.keras DATA_DIR   (DATA_DIR from examples/make_digits.py)
Prints {"accuracy": a, "rows": n}.
"""
import json
import sys

import keras
import numpy as np


def main():
    model = keras.saving.load_model(sys.argv[1])
    x = np.load(f"{sys.argv[2]}/x_test.npy")
    y = np.load(f"{sys.argv[2]}/y_test.npy")
    predicted = np.argmax(model.predict(x, verbose=0), axis=-1)
    print(json.dumps({"accuracy": float(np.mean(predicted == y)), "rows": int(len(y))}))


if __name__ == "__main__":
    main()
