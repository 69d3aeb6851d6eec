#!/usr/bin/env python3
"""The engine's losses (docs/MODEL.md, "Losses") computed with PyTorch's own functions, as a cross-check.

For every loss.kind, binary and softmax, plain and with class weights, an ignored label and Dice of the
background, it draws logits and masks from a fixed seed and computes in float64, with torch's autograd for the
gradient:

  cross-entropy   F.cross_entropy(logits, target, weight=class_weights, ignore_index=ignore_index,
                  reduction="mean"); a binary model's logit z is the two-class case [0, z] (the same as
                  F.binary_cross_entropy_with_logits when nothing is weighted or ignored, which is checked too)
  focal, binary   torchvision.ops.sigmoid_focal_loss(z, t, alpha, gamma, reduction="none"), then the class-
                  weighted mean over the labelled pixels as F.cross_entropy takes it (the plain mean when no
                  weights: sigmoid_focal_loss's reduction="mean", checked too)
  focal, softmax  -(1 - p_t)^gamma log p_t from F.log_softmax, weighted as cross-entropy
  soft Dice       per image and class from F.softmax / torch.sigmoid (PyTorch has no Dice function; autograd
                  gives the gradient the engine derives by hand)
  pixel weights   (the cases named "... pixel_weights", a mask's per-pixel loss weights such as the U-Net
                  paper's border weights) each pixel's per-pixel term (cross-entropy from F.cross_entropy's
                  reduction="none", which holds the class weight, or focal) times its weight, over the sum of
                  class weight times pixel weight of the labelled pixels, as the class weights alone are taken;
                  for a binary model without class weights or an ignored label that is
                  F.binary_cross_entropy_with_logits(weight=v, reduction="sum") / v.sum(), checked too (its
                  reduction="mean" would divide by the pixel count instead). Dice never reads them.

  python3 bench/loss_reference.py                       # print the cases' values
  python3 bench/loss_reference.py --write tests/data/loss_cases.json

The JSON file holds each case's logits (NHWC, float32 values), masks, pixel weights (NHW, where the case has
them), options, loss and gradient;
tests/test_ops.cpp (lossMatchesPyTorch) runs every backend on it. The tests read the committed file and never
need PyTorch. Needs PyTorch (Debian: python3-torch) and torchvision (python3-torchvision).
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
import torchvision.ops

KINDS = ["cross_entropy", "dice", "cross_entropy_dice", "focal", "focal_dice"]
IGNORED = 255


def options_for(kind, channels, variant):
    o = {"kind": kind, "cross_entropy_weight": 1.0, "dice_weight": 1.0, "focal_gamma": 2.0,
         "focal_alpha": 0.25 if channels == 1 else -1.0, "class_weights": [], "ignore_index": -1,
         "dice_smooth": 1.0, "dice_include_background": False}
    if variant == "options":
        o.update({"cross_entropy_weight": 0.7, "dice_weight": 1.3, "focal_gamma": 1.5,
                  "class_weights": [0.4, 2.5] if channels == 1 else [0.5, 2.0, 1.25],
                  "ignore_index": IGNORED, "dice_smooth": 0.5, "dice_include_background": True})
        if channels == 1:
            o["focal_alpha"] = 0.6
    return o


def draw(generator, n, channels, h, w, ignore):
    # float32 values, so that the engine reads exactly the numbers PyTorch computed with
    logits = (1.5 * torch.randn(n, channels, h, w, generator=generator, dtype=torch.float64)).float().double()
    classes = 2 if channels == 1 else channels
    masks = torch.randint(0, classes, (n, h, w), generator=generator)
    if channels == 1:
        masks[masks == 1] = torch.where(torch.rand(masks.shape, generator=generator) < 0.3, 7, 1)[masks == 1]
    if ignore:
        masks[torch.rand(masks.shape, generator=generator) < 0.25] = IGNORED
    return logits, masks


def draw_pixel_weights(generator, n, h, w):
    # float32 values from 0 to 10, a fifth of them 0 (a pixel that adds nothing) and a fifth exactly 1
    v = (10 * torch.rand(n, h, w, generator=generator, dtype=torch.float64)).float().double()
    pick = torch.rand(n, h, w, generator=generator)
    v[pick < 0.2] = 0.0
    v[(pick >= 0.2) & (pick < 0.4)] = 1.0
    return v


def loss_of(o, logits, masks, pixel_weights=None):
    """The loss as the engine defines it, with torch's functions; returns a 0-d tensor. pixel_weights: [n, h, w]
    or None (every pixel weighs 1)."""
    channels = logits.shape[1]
    binary = channels == 1
    ignore = o["ignore_index"]
    labelled = masks != ignore if ignore >= 0 else torch.ones_like(masks, dtype=torch.bool)
    cls = (masks != 0).long() if binary else masks.clone()
    target = torch.where(labelled, cls, torch.full_like(cls, -100))  # F.cross_entropy's own ignore value
    two = torch.cat([torch.zeros_like(logits), logits], 1) if binary else logits
    weights = torch.tensor(o["class_weights"], dtype=torch.float64) if o["class_weights"] else None
    w_pixel = (weights[cls.clamp(max=len(weights) - 1)] if weights is not None
               else torch.ones_like(logits[:, 0])) * labelled
    v = pixel_weights if pixel_weights is not None else torch.ones_like(logits[:, 0])
    total = torch.zeros((), dtype=torch.float64)
    if o["kind"] in ("cross_entropy", "cross_entropy_dice"):
        if pixel_weights is None:
            ce = F.cross_entropy(two, target, weight=weights, ignore_index=-100, reduction="mean")
            if binary and weights is None and ignore < 0:
                bce = F.binary_cross_entropy_with_logits(logits[:, 0], cls.double(), reduction="mean")
                assert torch.allclose(ce, bce, rtol=1e-12), (ce, bce)
        else:
            # reduction "none" holds w_y l per pixel (0 where ignored); weighted by v, over sum(w_y v)
            per_pixel = F.cross_entropy(two, target, weight=weights, ignore_index=-100, reduction="none")
            ce = (per_pixel * v).sum() / (w_pixel * v).sum()
            if binary and weights is None and ignore < 0:
                bce = F.binary_cross_entropy_with_logits(logits[:, 0], cls.double(), weight=v, reduction="sum")
                assert torch.allclose(ce, bce / v.sum(), rtol=1e-12), (ce, bce / v.sum())
        total = total + o["cross_entropy_weight"] * ce
    if o["kind"] in ("focal", "focal_dice"):
        if binary:
            per_pixel = torchvision.ops.sigmoid_focal_loss(logits[:, 0], cls.double(), alpha=o["focal_alpha"],
                                                           gamma=o["focal_gamma"], reduction="none")
            if weights is None and ignore < 0:
                mean = torchvision.ops.sigmoid_focal_loss(logits[:, 0], cls.double(), alpha=o["focal_alpha"],
                                                          gamma=o["focal_gamma"], reduction="mean")
                assert torch.allclose((per_pixel * w_pixel).sum() / w_pixel.sum(), mean, rtol=1e-12)
        else:
            log_p = F.log_softmax(logits, 1).gather(1, cls.clamp(max=channels - 1).unsqueeze(1))[:, 0]
            per_pixel = -(1 - log_p.exp()) ** o["focal_gamma"] * log_p
        focal = (per_pixel * w_pixel * v).sum() / (w_pixel * v).sum()
        total = total + o["cross_entropy_weight"] * focal
    if o["kind"] in ("dice", "cross_entropy_dice", "focal_dice"):
        classes = 2 if binary else channels
        if binary:
            p = torch.cat([torch.sigmoid(-logits), torch.sigmoid(logits)], 1)
        else:
            p = F.softmax(logits, 1)
        onehot = F.one_hot(cls.clamp(max=classes - 1), classes).permute(0, 3, 1, 2).double()
        keep = labelled.unsqueeze(1).double()
        p, onehot = p * keep, onehot * keep
        s = o["dice_smooth"]
        dice = (2 * (p * onehot).sum((2, 3)) + s) / (p.sum((2, 3)) + onehot.sum((2, 3)) + s)  # [n, classes]
        first = 0 if o["dice_include_background"] else 1
        cw = weights if weights is not None else torch.ones(classes, dtype=torch.float64)
        cw = cw[first:]
        per_image = 1 - (dice[:, first:] * cw).sum(1) / cw.sum()
        total = total + o["dice_weight"] * per_image.mean()
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", metavar="JSON", help="write the cases for tests/test_ops.cpp")
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(2026)
    cases = []
    for kind in KINDS:
        for channels in (1, 3):
            for variant in ("plain", "options"):
                o = options_for(kind, channels, variant)
                logits, masks = draw(generator, 2, channels, 4, 5, variant == "options")
                x = logits.clone().requires_grad_(True)
                value = loss_of(o, x, masks)
                value.backward()
                name = f"{kind} {'binary' if channels == 1 else 'softmax'} {variant}"
                print(f"{name:40s} loss {value.item():.12f}")
                cases.append({"name": name, "options": o, "shape": [2, channels, 4, 5],
                              "logits_nhwc": logits.permute(0, 2, 3, 1).reshape(-1).tolist(),
                              "masks": masks.reshape(-1).tolist(), "loss": value.item(),
                              "gradient_nhwc": x.grad.permute(0, 2, 3, 1).reshape(-1).tolist()})
    # Pixel weights, after the cases above so that their draws stay as they were: every kind, binary and
    # softmax, without and with the options (class weights, an ignored label, Dice of the background).
    for kind in KINDS:
        for channels in (1, 3):
            for variant in ("plain", "options"):
                o = options_for(kind, channels, variant)
                logits, masks = draw(generator, 2, channels, 4, 5, variant == "options")
                pixel_weights = draw_pixel_weights(generator, 2, 4, 5)
                x = logits.clone().requires_grad_(True)
                value = loss_of(o, x, masks, pixel_weights)
                value.backward()
                name = f"{kind} {'binary' if channels == 1 else 'softmax'} {variant} pixel_weights"
                print(f"{name:40s} loss {value.item():.12f}")
                cases.append({"name": name, "options": o, "shape": [2, channels, 4, 5],
                              "logits_nhwc": logits.permute(0, 2, 3, 1).reshape(-1).tolist(),
                              "masks": masks.reshape(-1).tolist(),
                              "pixel_weights": pixel_weights.reshape(-1).tolist(), "loss": value.item(),
                              "gradient_nhwc": x.grad.permute(0, 2, 3, 1).reshape(-1).tolist()})
    if args.write:
        with open(args.write, "w") as f:  # one case a line
            head = {"generator": "bench/loss_reference.py", "torch": torch.__version__,
                    "torchvision": torchvision.__version__}
            f.write(json.dumps(head)[:-1] + ', "cases": [\n')
            f.write(",\n".join(json.dumps(c) for c in cases))
            f.write("\n]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
