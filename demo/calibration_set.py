#!/usr/bin/env python3
"""Writes calibration samples for `ferrite pack --quantize int8`: images from the digits model's
*training* split (the same seeded split as demo/train_digits.py), never the held-out ones.

    python demo/calibration_set.py OUT_DIR [COUNT]     # OUT_DIR/train.npy, COUNT x 1 x 8 x 8 float32
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    out_dir = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, _, _, _ = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "train.npy"), x_train[:count].reshape(-1, 1, 8, 8))
    print(f"wrote {min(count, len(x_train))} training images to {out_dir}/train.npy")


if __name__ == "__main__":
    main()
