#!/usr/bin/env python3
"""The EPFL patch recipe (bench/epfl/patch.json) trained in PyTorch on the CPU, as a reference for the engine.

Issue 26: a PyTorch run of the same recipe should reach the engine's IoU within noise. Everything below follows
the engine's documents and code, cited where each part is defined; the random streams differ from the engine's,
the distributions do not. Prints one JSON line per epoch, named as metrics.jsonl's "epoch" records
(docs/METRICS.md): epoch, step, loss, val_loss, val_iou, val_dice, val_acc, seconds; then a summary line.

  /work/venv-torch/bin/python bench/epfl/torch_reference.py                   # the full recipe, 12 epochs
  python3 bench/epfl/torch_reference.py --epochs 1 --patches-per-epoch 16 --out /tmp/epfl-torch.jsonl

Needs only PyTorch, NumPy and OpenCV's Python bindings (Debian: python3-torch, python3-numpy, python3-opencv;
pip: torch, numpy, opencv-python-headless). Not used by the build or the tests.
"""
import argparse
import json
import math
import os
import sys
import time

import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.dont_write_bytecode = True  # no __pycache__ left in bench/
from pytorch_reference import UNet, read_safetensors  # noqa: E402  (the module tree of docs/MODEL.md)

# bench/epfl/patch.json, and every key it leaves out at its default (docs/CONFIG.md, "Keys").
MODEL = dict(in_channels=1, classes=1, width=16, depth=4)
PATCH = 256                      # data.patch_size [256, 256]
FOREGROUND_OVERSAMPLE = 0.33     # data.foreground_oversample
PERCENTILES = (1.0, 99.8)        # data.normalize "percentile", data.normalize_percentiles, normalize_clip false
LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.0   # train.lr; optimizer.kind adamw; schedule constant
CE_WEIGHT, DICE_WEIGHT, DICE_SMOOTH = 1.0, 1.0, 1.0            # loss.kind cross_entropy_dice; ignore_index -1
AUGMENT = dict(rotation_p=0.2, rotation_deg=180.0, scale_p=0.2, scale_range=(0.7, 1.4),
               brightness_p=0.15, brightness_range=(0.75, 1.25), contrast_p=0.15, contrast_range=(0.75, 1.25),
               gamma_p=0.3, gamma_range=(0.7, 1.5), noise_p=0.1, noise_sigma=0.1,
               blur_p=0.2, blur_sigma=(0.5, 1.0))  # augment.flips true; augment.elastic_p 0: no elastic field
OVERLAP = 0.5                    # predict's default overlap (engine/unet/infer/predictor.h, PredictOptions)


# ---- Data: the folder source, gray+alpha PNGs, percentile normalisation -----------------------------------

def read_gray(path):
    """Channel 0 of an 8-bit file: what convert_channels (engine/unet/io/image.cpp) keeps of gray+alpha for
    model.in_channels 1, and what read_mask (io/image.h) reads of a gray+alpha mask. OpenCV gives gray+alpha as
    BGRA with B = G = R = the gray. (Colour files would need the engine's BT.601 luma; EPFL has none.)"""
    data = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if data is None:
        sys.exit(f"cannot read {path}")
    if data.dtype != np.uint8:
        sys.exit(f"{path}: {data.dtype} samples; this reference reads 8-bit files only")
    return data if data.ndim == 2 else data[..., 0]


def normalise(gray):
    """data.normalize percentile (engine/unet/model/normalize.cpp): per image over the whole image as stored,
    numpy's linear-interpolation percentiles, y = (x - p_low) * f32(1 / (p_high - p_low)), not clipped."""
    low, high = np.percentile(gray.astype(np.float64), PERCENTILES)
    scale = np.float32(1.0 / (high - low)) if high - low > 1e-12 else np.float32(1.0)
    return (gray.astype(np.float32) - np.float32(low)) * scale


def load_folder(folder):
    """data.source folder: folder/images/* and folder/masks/* matched by stem (a mask may be <stem>_mask.*).
    A binary model's mask is 1 where the stored value is non-zero (file_dataset.cpp, ignore_index -1)."""
    masks = {}
    for name in os.listdir(os.path.join(folder, "masks")):
        stem = os.path.splitext(name)[0]
        masks[stem[:-5] if stem.endswith("_mask") else stem] = name
    samples = []
    for name in sorted(os.listdir(os.path.join(folder, "images"))):
        stem = os.path.splitext(name)[0]
        if stem not in masks:
            sys.exit(f"{folder}/images/{name}: no mask")
        image = normalise(read_gray(os.path.join(folder, "images", name)))
        mask = (read_gray(os.path.join(folder, "masks", masks[stem])) != 0).astype(np.uint8)
        samples.append({"name": name, "image": image, "mask": mask, "foreground": np.flatnonzero(mask)})
    if not samples:
        sys.exit(f"{folder}/images: no images")
    return samples


# ---- Training samples: patch placement and augmentation (engine/unet/step/data_plan.cpp) ------------------

def epoch_order(count, patches, rng):
    """patch_epoch_order: the training images shuffled, repeated in a new order each round until the epoch's
    patches are drawn (each image equally often, not weighted by its pixels)."""
    rounds = [rng.permutation(count) for _ in range(-(-patches // count))]
    return np.concatenate(rounds)[:patches]


def place_patch(sample, rng):
    """place_patch (engine/unet/data/patch_sampler.cpp): with probability foreground_oversample the patch's
    pixel (PATCH/2, PATCH/2) is a foreground pixel chosen uniformly; else the patch lies uniformly inside the
    image (centred on an axis where the image is smaller). Returns its top-left corner."""
    height, width = sample["mask"].shape
    foreground = sample["foreground"]
    if rng.random() < FOREGROUND_OVERSAMPLE and foreground.size:
        y, x = divmod(int(foreground[rng.integers(foreground.size)]), width)
        return y - PATCH // 2, x - PATCH // 2

    def anywhere(size):
        return -((PATCH - size) // 2) if size <= PATCH else int(rng.integers(size - PATCH + 1))
    return anywhere(height), anywhere(width)


def maybe(rng, p, low, high):
    """augment_draw.cpp's maybe(): the value uniform in [low, high] with probability p, else None."""
    happens, value = rng.random() < p, rng.uniform(low, high)
    return value if happens else None


def draw_augmentation(rng):
    """draw_augmentation (engine/unet/data/augment_draw.cpp) under the default augment.* keys."""
    a = AUGMENT
    angle = maybe(rng, a["rotation_p"], -a["rotation_deg"], a["rotation_deg"])
    return {
        # random_augmentation (data/augment.cpp): each flip with p 1/2, 0..3 quarter turns on a square patch
        "flip_h": rng.random() < 0.5, "flip_v": rng.random() < 0.5, "turns": int(rng.integers(4)),
        "angle": 0.0 if angle is None else math.radians(angle),
        "scale": maybe(rng, a["scale_p"], *a["scale_range"]) or 1.0,
        "noise": maybe(rng, a["noise_p"], 0.0, a["noise_sigma"]),
        "blur": maybe(rng, a["blur_p"], *a["blur_sigma"]),
        "brightness": maybe(rng, a["brightness_p"], *a["brightness_range"]),
        "contrast": maybe(rng, a["contrast_p"], *a["contrast_range"]),
        "gamma": maybe(rng, a["gamma_p"], *a["gamma_range"]),
    }


def source_map(draw):
    """augment_warp.cpp's source_map: the linear map from an output offset (dy, dx) to a source offset that
    undoes the scaling, then the counter-clockwise rotation, then the flips and quarter turns."""
    c, s = math.cos(draw["angle"]) / draw["scale"], math.sin(draw["angle"]) / draw["scale"]

    def through(dy, dx):
        y, x = c * dy + s * dx, -s * dy + c * dx
        for _ in range(draw["turns"] % 4):
            y, x = x, -y  # one clockwise quarter turn undoes a counter-clockwise one
        return (-y if draw["flip_v"] else y), (-x if draw["flip_h"] else x)
    (yy, xy), (yx, xx) = through(1.0, 0.0), through(0.0, 1.0)
    return yy, yx, xy, xx


def warp_patch(sample, top, left, draw):
    """warp_patch (augment_warp.cpp): the whole source image resampled by cv2.remap so that the output's
    centre ((PATCH-1)/2, (PATCH-1)/2) lands on the patch's centre; bilinear image with 0 outside, nearest
    mask with 0 outside (loss.ignore_index -1: PatchOptions::mask_fill is 0, so padding is labelled
    background). A draw of flips and turns alone reads whole pixels: the exact crop, as the engine's fast path."""
    yy, yx, xy, xx = source_map(draw)
    half = (PATCH - 1) / 2.0
    first_y = top + half - (yy * half + yx * half)
    first_x = left + half - (xy * half + xx * half)
    i, j = np.mgrid[0:PATCH, 0:PATCH].astype(np.float64)
    map_y = (first_y + yy * i + yx * j).astype(np.float32)
    map_x = (first_x + xy * i + xx * j).astype(np.float32)
    image = cv2.remap(sample["image"], map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                      borderValue=0)
    mask = cv2.remap(sample["mask"], map_x, map_y, cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT,
                     borderValue=0)
    return image, mask


def apply_intensity(image, draw, rng):
    """apply_intensity (engine/unet/data/augment_intensity.cpp), nnU-Net's order: noise, blur, brightness,
    contrast (clipped to the patch's min and max), gamma (on the patch rescaled by its min and max)."""
    if draw["noise"] is not None:
        image = (image + draw["noise"] * rng.standard_normal(image.shape)).astype(np.float32)
    if draw["blur"] is not None:
        image = cv2.GaussianBlur(image, (0, 0), draw["blur"], sigmaY=draw["blur"],
                                 borderType=cv2.BORDER_REFLECT_101)
    if draw["brightness"] is not None:
        image = image * np.float32(draw["brightness"])
    if draw["contrast"] is not None:
        low, high, mean = image.min(), image.max(), image.mean(dtype=np.float64)
        image = np.clip(((image - mean) * draw["contrast"] + mean).astype(np.float32), low, high)
    if draw["gamma"] is not None:
        low, high = float(image.min()), float(image.max())
        if high > low:
            unit = (image.astype(np.float64) - low) / (high - low)
            image = (low + (high - low) * unit ** draw["gamma"]).astype(np.float32)
    return image


def training_batch(samples, indices, rng):
    """assemble_batch with data.augment true: every sample is placed, then warped and intensity-augmented."""
    images, masks = [], []
    for index in indices:
        sample = samples[index]
        top, left = place_patch(sample, rng)
        draw = draw_augmentation(rng)
        image, mask = warp_patch(sample, top, left, draw)
        images.append(apply_intensity(image, draw, rng))
        masks.append(mask)
    x = torch.from_numpy(np.stack(images)[:, None])
    y = torch.from_numpy(np.stack(masks)[:, None].astype(np.float32))
    return x, y


# ---- Model, loss ------------------------------------------------------------------------------------------

class NormalisedUNet(UNet):
    """pytorch_reference.UNet divides its input by 255 (data.normalize scale_255); here the input is already
    normalised (percentile), so it is scaled back up first and reaches the first conv as given."""

    def forward(self, x):
        return super().forward(x * 255.0)


def build_model(seed):
    """docs/MODEL.md, "Initialisation": He-normal N(0, 2 / fan_in), biases 0. torch's fan_in is PyTorch's
    fan-in the page names (C_in k k; C_out 2 2 for a ConvTranspose2d weight [in, out, 2, 2])."""
    torch.manual_seed(seed)
    model = NormalisedUNet(**MODEL)
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return model


def loss_sums(logits, target):
    """docs/MODEL.md, "Losses", binary model, no class weights, no ignored label: the cross-entropy term's sum
    over pixels and the soft Dice term's sum over images, (1 - (2 sum p t + s) / (sum p + sum t + s)) per image
    over its foreground. bench/loss_reference.py computes the same with torch's functions but needs
    torchvision, so the two terms are written here."""
    ce = F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
    p = torch.sigmoid(logits)
    dims = tuple(range(1, logits.dim()))
    dice = (2 * (p * target).sum(dims) + DICE_SMOOTH) / (p.sum(dims) + target.sum(dims) + DICE_SMOOTH)
    return ce, (1 - dice).sum()


def combined(ce_sum, dice_sum, pixels, images):
    """cross_entropy_dice: CE weight x the mean over pixels + Dice weight x the mean over images."""
    return CE_WEIGHT * ce_sum / pixels + DICE_WEIGHT * dice_sum / images


# ---- Validation: predict's tiled inference (engine/unet/infer/predictor.cpp) -------------------------------

def tile_starts(length, tile, overlap, align):
    """tile_starts: the fewest tiles whose step is at most tile (1 - overlap), the steps evened out, each start
    a multiple of `align`, the last at length - tile."""
    span = (length - tile) // align
    if span == 0:
        return [0]
    step = max(1.0, (tile // align) * (1.0 - overlap))
    steps = math.ceil(span / step - 1e-9)
    return [(2 * i * span + steps) // (2 * steps) * align for i in range(steps + 1)]


def gaussian_importance(height, width):
    """gaussian_importance: exp(-(i + 0.5 - n/2)^2 / (2 (n/8)^2)) per axis, their product."""
    def axis(n):
        d = np.arange(n) + 0.5 - n / 2.0
        return np.exp(-d * d / (2.0 * (n / 8.0) ** 2))
    return np.outer(axis(height), axis(width)).astype(np.float32)


@torch.no_grad()
def predict_tiled(model, image, batch):
    """Tiles of data.patch_size (validation_predict_options, tiled_validation.cpp), half overlapping, at
    multiples of 2^depth of the image reflect-padded below and right to multiples of 2^depth; each tile's
    sigmoid weighted by the Gaussian map (when there is more than one tile) and blended."""
    multiple = 2 ** MODEL["depth"]
    height, width = image.shape
    canvas_h, canvas_w = -(-height // multiple) * multiple, -(-width // multiple) * multiple
    canvas = np.pad(image, ((0, canvas_h - height), (0, canvas_w - width)), mode="reflect")
    tile_h, tile_w = min(PATCH, canvas_h), min(PATCH, canvas_w)
    places = [(top, left) for top in tile_starts(canvas_h, tile_h, OVERLAP, multiple)
              for left in tile_starts(canvas_w, tile_w, OVERLAP, multiple)]
    weight = gaussian_importance(tile_h, tile_w) if len(places) > 1 else np.ones((tile_h, tile_w), np.float32)
    sums = np.zeros((canvas_h, canvas_w), np.float32)
    weights = np.zeros((canvas_h, canvas_w), np.float32)
    for first in range(0, len(places), batch):
        group = places[first:first + batch]
        tiles = np.stack([canvas[top:top + tile_h, left:left + tile_w] for top, left in group])[:, None]
        probabilities = torch.sigmoid(model(torch.from_numpy(tiles))).numpy()[:, 0]
        for (top, left), p in zip(group, probabilities):
            sums[top:top + tile_h, left:left + tile_w] += weight * p
            weights[top:top + tile_h, left:left + tile_w] += weight
    return (sums / weights)[:height, :width]


def validate(model, samples, batch):
    """evaluate_tiled (engine/unet/train/tiled_validation.cpp) and docs/MODEL.md, "Metrics": the blended
    probabilities become logits log(p / (1 - p)), p clamped to [1e-7, 1 - 1e-7]; val_loss is the loss of those
    over the whole set (CE over all its pixels, Dice over its images); a pixel is foreground when its logit is
    > 0; IoU, Dice and accuracy come from confusion counts summed over every pixel of the set."""
    ce_sum = dice_sum = 0.0
    tp = fp = fn = correct = pixels = 0
    for sample in samples:
        p = np.clip(predict_tiled(model, sample["image"], batch).astype(np.float64), 1e-7, 1 - 1e-7)
        logits = torch.from_numpy(np.log(p / (1 - p)).astype(np.float32)).double()[None, None]
        target = torch.from_numpy(sample["mask"]).double()[None, None]
        ce, dice = loss_sums(logits, target)
        ce_sum, dice_sum = ce_sum + ce.item(), dice_sum + dice.item()
        predicted, truth = logits[0, 0].numpy() > 0, sample["mask"] != 0
        tp += int(np.sum(predicted & truth))
        fp += int(np.sum(predicted & ~truth))
        fn += int(np.sum(~predicted & truth))
        correct += int(np.sum(predicted == truth))
        pixels += truth.size

    def score(num, den):
        return num / den if den else None
    return {"val_loss": combined(ce_sum, dice_sum, pixels, len(samples)), "val_iou": score(tp, tp + fp + fn),
            "val_dice": score(2 * tp, 2 * tp + fp + fn), "val_acc": correct / pixels}


# ---- The run ----------------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=12, help="train.epochs (12)")
    parser.add_argument("--patches-per-epoch", type=int, default=128, help="data.patches_per_epoch (128)")
    parser.add_argument("--batch", type=int, default=8, help="train.batch_size (8)")
    parser.add_argument("--data", default=os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data",
                                                                        "epfl-em")),
                        help="the dataset's root, holding train/ and test/ (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the weights, the patches and augmentation")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--val-batch", type=int, default=8, help="tiles per forward pass in validation")
    parser.add_argument("--init", help="start from this checkpoint's weights (say `unet-train init --config "
                                       "bench/epfl/patch.json --out F`) instead of drawing them with --seed")
    parser.add_argument("--out", help="also write the JSON lines to this file")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    cv2.setNumThreads(1)
    rng = np.random.default_rng(args.seed)
    train = load_folder(os.path.join(args.data, "train"))   # data.path
    val = load_folder(os.path.join(args.data, "test"))      # data.val_path
    model = build_model(args.seed)
    if args.init:  # the engine's initial weights; --seed still draws the patches and augmentation
        tensors, _ = read_safetensors(args.init)
        model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, strict=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    out = open(args.out, "w") if args.out else None

    def emit(record):
        line = json.dumps(record)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    emit({"kind": "start", "framework": "pytorch " + torch.__version__, "threads": torch.get_num_threads(),
          "train_images": len(train), "val_images": len(val), "epochs": args.epochs,
          "patches_per_epoch": args.patches_per_epoch, "batch_size": args.batch, "seed": args.seed,
          "init": args.init, "parameters": sum(p.numel() for p in model.parameters())})
    step, history, started = 0, [], time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        order = epoch_order(len(train), args.patches_per_epoch, rng)
        ce_total = dice_total = 0.0
        pixels = images = 0
        model.train()
        for first in range(0, len(order), args.batch):  # the last step takes what is left
            x, y = training_batch(train, order[first:first + args.batch], rng)
            ce, dice = loss_sums(model(x), y)
            loss = combined(ce, dice, y.numel(), y.shape[0])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            ce_total, dice_total = ce_total + ce.item(), dice_total + dice.item()
            pixels, images = pixels + y.numel(), images + y.shape[0]
        model.eval()
        record = {"kind": "epoch", "epoch": epoch, "step": step,
                  "loss": combined(ce_total, dice_total, pixels, images)}
        record.update(validate(model, val, args.val_batch))
        record["seconds"] = time.perf_counter() - epoch_start
        history.append(record)
        emit(record)

    best = max(history, key=lambda r: -1.0 if r["val_iou"] is None else r["val_iou"])
    total = time.perf_counter() - started
    emit({"kind": "summary", "epochs": len(history), "steps": step, "final_val_iou": history[-1]["val_iou"],
          "final_val_dice": history[-1]["val_dice"], "final_val_loss": history[-1]["val_loss"],
          "best_val_iou": best["val_iou"], "best_epoch": best["epoch"], "seconds": total,
          "seconds_per_epoch": total / len(history)})
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
