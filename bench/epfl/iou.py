#!/usr/bin/env python3
"""Foreground IoU and Dice of predicted masks against the true masks, at the files' own resolution.

`unet-train predict --output-kind mask` writes <stem>_mask.png (a binary model's foreground as 255, the
rest 0); this counts, over every pixel of every image in the truth folder, the pixels both call foreground
(intersection), either does (union) and each does, as validation's val_iou and val_dice do (docs/METRICS.md:
sums over the whole set, not a mean of images). It puts a resize-mode model, validated at its training size,
and a patch-mode model, validated at full resolution, on the same scale:

  python3 bench/epfl/iou.py --truth ../shared/data/epfl-em/test/masks --predicted build/epfl-runs/resize/masks

Needs NumPy and OpenCV's Python bindings (Debian: python3-numpy, python3-opencv).
"""
import argparse
import json
import os
import sys

import cv2
import numpy as np


def foreground(path):
    data = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if data is None:
        sys.exit(f"cannot read {path}")
    if data.ndim == 3:
        data = data[..., 0]  # gray+alpha: the gray; the masks' channels are equal
    return data > 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--truth", required=True, help="folder of true masks (non-zero: foreground)")
    parser.add_argument("--predicted", required=True, help="folder of <stem>_mask.png from predict")
    args = parser.parse_args()

    intersection = union = truth_sum = predicted_sum = 0
    images = 0
    for name in sorted(os.listdir(args.truth)):
        stem = os.path.splitext(name)[0]
        predicted_path = os.path.join(args.predicted, stem + "_mask.png")
        if not os.path.exists(predicted_path):
            sys.exit(f"no prediction {predicted_path} for {name}")
        truth = foreground(os.path.join(args.truth, name))
        predicted = foreground(predicted_path)
        if truth.shape != predicted.shape:
            sys.exit(f"{predicted_path} is {predicted.shape}, its truth {truth.shape}")
        intersection += int(np.count_nonzero(truth & predicted))
        union += int(np.count_nonzero(truth | predicted))
        truth_sum += int(np.count_nonzero(truth))
        predicted_sum += int(np.count_nonzero(predicted))
        images += 1
    print(json.dumps({"images": images, "iou": intersection / union if union else None,
                      "dice": 2 * intersection / (truth_sum + predicted_sum) if truth_sum + predicted_sum else None}))


if __name__ == "__main__":
    main()
