#!/usr/bin/env python3
"""One training run, step by step, in unet-train and in PyTorch from the same weights on the same batch.

The EPFL recipe's model, loss, optimizer and normalisation (bench/epfl/patch.json: width 16, depth 4,
cross_entropy_dice, AdamW at lr 0.001, batch 8, percentile normalisation) trained for --steps steps on one
fixed batch of eight 256 x 256 crops of the training slices, without augmentation, from the weights
`unet-train init` writes. Prints one JSON line per step with both frameworks' loss and gradient norm, then a
summary; exits 1 when the first steps (before rounding differences grow through training) differ by more than
1e-3 relative.

This separates the training step from the data: when the steps agree, a gap in IoU between unet-train and
torch_reference.py lies in the random draws (initial weights, patches, augmentation), which only more seeds
can measure (README.md, "Results"). Later steps drift apart: the two frameworks round differently (oneDNN
against PyTorch's CPU kernels), Adam's normalised update turns a rounding difference in a near-zero gradient
into a full-size step, and once the model leaves the all-background plateau the runs follow different paths.

    /work/venv-torch/bin/python bench/epfl/trajectory.py --unet-train build/cli/unet-train

Needs torch, numpy and cv2 (Debian: python3-torch, python3-numpy, python3-opencv).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True
import torch_reference as ref  # noqa: E402  (the recipe's model, loss and normalisation)
from pytorch_reference import read_safetensors  # noqa: E402

# One batch holds every crop: the engine keeps its split's order when data.shuffle is false, and a batch of
# all the crops is the same batch in any order.
CROP, CROPS, BATCH = 256, 8, 8
EARLY_STEPS, EARLY_TOLERANCE = 5, 1e-3


def write_crops(data_root, folder):
    """CROPS crops of CROP x CROP: the first CROPS // 2 slices' top-left and centre, as 8-bit PNGs."""
    for sub in ("images", "masks"):
        os.makedirs(os.path.join(folder, sub))
    names = sorted(os.listdir(os.path.join(data_root, "images")))[:CROPS // 2]
    index = 0
    for name in names:
        stem = os.path.splitext(name)[0]
        image = ref.read_gray(os.path.join(data_root, "images", name))
        mask = ref.read_gray(os.path.join(data_root, "masks", name))
        height, width = image.shape
        for top, left in ((0, 0), ((height - CROP) // 2, (width - CROP) // 2)):
            out = f"{index:03d}_{stem}.png"
            cv2.imwrite(os.path.join(folder, "images", out), image[top:top + CROP, left:left + CROP])
            cv2.imwrite(os.path.join(folder, "masks", out), mask[top:top + CROP, left:left + CROP])
            index += 1


def engine_run(unet_train, folder, steps):
    config = {
        "model": ref.MODEL,
        "loss": {"kind": "cross_entropy_dice"},
        "data": {"source": "folder", "path": os.path.join(folder, "data"), "image_size": [CROP, CROP],
                 "normalize": "percentile", "val_fraction": 0.0, "augment": False, "shuffle": False},
        "train": {"steps": steps, "batch_size": BATCH, "lr": ref.LR},
        "optimizer": {"kind": "adamw"},
        "checkpoint": {"dir": os.path.join(folder, "run"), "every_epochs": 0, "monitor": "loss"},
    }
    path = os.path.join(folder, "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    init = os.path.join(folder, "init.safetensors")
    for args in (("init", "--config", path, "--out", init), ("train", "--config", path)):
        subprocess.run([unet_train, *args], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(folder, "run", "metrics.jsonl")) as f:
        records = [r for r in map(json.loads, f) if r.get("kind") == "step"]
    final, _ = read_safetensors(os.path.join(folder, "run", "last.safetensors"))
    start, _ = read_safetensors(init)
    return start, final, records


def torch_run(folder, start, steps):
    samples = ref.load_folder(os.path.join(folder, "data"))
    model = ref.NormalisedUNet(**ref.MODEL)
    model.load_state_dict({k: v for k, v in start.items() if not k.startswith("optimizer.")}, strict=True)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=ref.LR, betas=ref.BETAS, eps=ref.EPS, weight_decay=ref.WEIGHT_DECAY)
    x_all = torch.from_numpy(np.stack([s["image"] for s in samples])[:, None])
    y_all = torch.from_numpy(np.stack([s["mask"] for s in samples])[:, None].astype(np.float32))
    records = []
    for step in range(steps):
        x, y = x_all, y_all  # the one batch, every step
        ce, dice = ref.loss_sums(model(x), y)
        loss = ref.combined(ce, dice, y.numel(), y.shape[0])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))
        optimizer.step()
        records.append({"loss": loss.item(), "grad_norm": norm})
    return model, records


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--unet-train", default="build/cli/unet-train")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--data", default=os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data",
                                                                        "epfl-em", "train")))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        write_crops(args.data, os.path.join(tmp, "data"))
        start, final, ours = engine_run(args.unet_train, tmp, args.steps)
        model, theirs = torch_run(tmp, start, args.steps)
    early = 0.0
    for step, (a, b) in enumerate(zip(ours, theirs), start=1):
        row = {"step": step, "loss": a["loss"], "torch_loss": b["loss"], "grad_norm": a["grad_norm"],
               "torch_grad_norm": b["grad_norm"]}
        print(json.dumps(row))
        if step <= EARLY_STEPS:
            early = max(early, relative(a["loss"], b["loss"]), relative(a["grad_norm"], b["grad_norm"]))
    names = [k for k, _ in model.named_parameters()]
    moved = math.sqrt(sum(float(((final[k] - start[k]) ** 2).sum()) for k in names))
    apart = math.sqrt(sum(float(((final[k] - p.detach()) ** 2).sum()) for k, p in model.named_parameters()))
    summary = {"kind": "summary", "steps": args.steps,
               "worst_relative_difference_first_steps": early,
               "worst_relative_loss_difference": max(relative(a["loss"], b["loss"]) for a, b in zip(ours, theirs)),
               "relative_difference_of_the_update": apart / max(moved, 1e-30),
               "final_loss": ours[-1]["loss"], "torch_final_loss": theirs[-1]["loss"]}
    print(json.dumps(summary))
    sys.exit(0 if early <= EARLY_TOLERANCE else 1)


if __name__ == "__main__":
    main()
