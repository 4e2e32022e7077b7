#!/usr/bin/env python3
"""Writes scikit-learn's digits dataset as .npy files Cohort (and Keras) can train on.

The digits (1,797 8x8 grey images, 10 classes) ship inside scikit-learn, so nothing is
downloaded. Output, in OUT_DIR:

  x_train.npy  float32 (1437, 8, 8, 1), pixels scaled to [0, 1] (raw values are 0..16)
  y_train.npy  int64   (1437,)
  x_test.npy   float32 (360, 8, 8, 1)
  y_test.npy   int64   (360,)

The split is stratified, 20% test, random_state=0, so every run writes the same bytes.
Files are written to a temporary name and renamed, so an interrupted run never leaves a
half-written file behind.

Usage: python examples/make_digits.py OUT_DIR
"""
import argparse
import os
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
TEST_FRACTION = 0.2


def Split():
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).reshape(-1, 8, 8, 1)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=SEED, stratify=y)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def SaveAtomically(path, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array))
    os.replace(tmp, path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", help="directory for the .npy files (created if missing)")
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, array in Split().items():
        path = os.path.join(args.out_dir, name + ".npy")
        SaveAtomically(path, array)
        print(f"{path}: {array.dtype} {array.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
