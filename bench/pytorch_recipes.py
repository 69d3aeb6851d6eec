#!/usr/bin/env python3
"""Cross-checks unet-train's training recipes against PyTorch itself (not a test dependency):

  schedules   trains a tiny model for each schedule kind with unet-train and compares the rate each step
              logged (metrics.jsonl "lr") with torch.optim.lr_scheduler stepped once per optimizer step; the
              plateau schedule is fed the validation losses unet-train logged.
  optimizers  trains a tiny model for three steps on one fixed batch with unet-train, and the same model (the
              same initial weights, from `unet-train init`) with torch.optim, and compares the weights.

    /usr/bin/python3 bench/pytorch_recipes.py --unet-train build/cli/unet-train schedules
    /usr/bin/python3 bench/pytorch_recipes.py --unet-train build/cli/unet-train optimizers

Prints one JSON line per case with the largest relative difference, and exits 1 when one exceeds its
tolerance. Needs PyTorch (Debian: python3-torch).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import UNet, read_safetensors  # noqa: E402


def run(unet_train, *args):
    subprocess.run([unet_train, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def records(folder, kind):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r.get("kind") == kind]


def schedules(args):
    cases = [
        ("constant", {}),
        ("step", {"step_epochs": 2, "gamma": 0.5}),
        ("cosine", {"min_lr": 1e-4}),
        ("cosine", {"min_lr": 1e-4, "warmup_steps": 6, "warmup_start_factor": 0.1}),
        ("poly", {"power": 0.9}),
        ("poly", {"power": 0.9, "warmup_steps": 5}),
        ("one_cycle", {"pct_start": 0.25}),
        ("plateau", {"patience": 0, "gamma": 0.5, "threshold": 0.0, "monitor": "val_loss"}),
    ]
    lr, epochs = 0.01, 6
    worst = 0.0
    for kind, extra in cases:
        with tempfile.TemporaryDirectory() as tmp:
            config = {
                "model": {"width": 4, "depth": 2},
                "data": {"image_size": [32, 32], "synthetic_samples": 40, "val_fraction": 0.2},
                "train": {"epochs": epochs, "batch_size": 8, "lr": lr},
                "optimizer": {"kind": "sgd", "momentum": 0.9},
                "schedule": {"kind": kind, **extra},
                "checkpoint": {"dir": os.path.join(tmp, "run"), "every_epochs": 0},
            }
            path = os.path.join(tmp, "config.json")
            with open(path, "w") as f:
                json.dump(config, f)
            run(args.unet_train, "train", "--config", path)
            steps = records(os.path.join(tmp, "run"), "step")
            epochs_logged = records(os.path.join(tmp, "run"), "epoch")
            total, spe = len(steps), len(steps) // epochs
            param = torch.nn.Parameter(torch.zeros(1))
            opt = torch.optim.SGD([param], lr=lr, momentum=0.9)
            warm = extra.get("warmup_steps", 0)

            def main_scheduler(span):
                if kind == "step":
                    return torch.optim.lr_scheduler.StepLR(opt, extra["step_epochs"] * spe, extra["gamma"])
                if kind == "cosine":
                    return torch.optim.lr_scheduler.CosineAnnealingLR(opt, span, extra["min_lr"])
                if kind == "poly":
                    return torch.optim.lr_scheduler.PolynomialLR(opt, span, extra["power"])
                if kind == "one_cycle":
                    return torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=total,
                                                               pct_start=extra["pct_start"])
                if kind == "plateau":
                    return torch.optim.lr_scheduler.ReduceLROnPlateau(
                        opt, factor=extra["gamma"], patience=extra["patience"], threshold=extra["threshold"])
                return torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)

            if warm:
                start = extra.get("warmup_start_factor", 0.01)
                sched = torch.optim.lr_scheduler.SequentialLR(
                    opt, [torch.optim.lr_scheduler.LinearLR(opt, start, 1.0, warm), main_scheduler(total - warm)],
                    milestones=[warm])
            else:
                sched = main_scheduler(total)
            diff = 0.0
            for k, rec in enumerate(steps):
                expected = opt.param_groups[0]["lr"]
                diff = max(diff, abs(rec["lr"] - expected) / max(abs(expected), 1e-12))
                opt.step()
                if kind == "plateau":
                    if (k + 1) % spe == 0:
                        sched.step(epochs_logged[(k + 1) // spe - 1]["val_loss"])
                else:
                    sched.step()
            worst = max(worst, diff)
            print(json.dumps({"check": "schedule", "kind": kind, **extra, "steps": total,
                              "max_relative_difference": diff}))
    return worst <= 1e-9


def write_png(path, height, width, channels, data):
    """A minimal 8-bit PNG (grey or RGB), no filtering."""
    color_type = {1: 0, 3: 2}[channels]
    rows = b"".join(b"\x00" + bytes(data[y * width * channels:(y + 1) * width * channels]) for y in range(height))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(rows)))
        f.write(chunk(b"IEND", b""))


def optimizers(args):
    cases = [
        ("adam", {"weight_decay": 0.01}, {}),
        ("adamw", {"weight_decay": 0.01}, {}),
        ("sgd", {"weight_decay": 3e-5}, {"momentum": 0.99, "nesterov": True}),
        ("sgd", {"weight_decay": 0.0}, {"momentum": 0.9}),
        ("sgd", {"weight_decay": 0.0}, {"momentum": 0.0}),
        ("adamw", {"weight_decay": 0.0}, {"clip_grad_norm": 0.05}),
    ]
    size, count, steps = 32, 8, 3
    gen = torch.Generator().manual_seed(5)
    images = (torch.rand(count, 3, size, size, generator=gen) * 255).round().to(torch.uint8)
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    masks = torch.stack([((xx - 8 - 2 * i) ** 2 + (yy - 16) ** 2 < 30 + 5 * i) for i in range(count)]).to(torch.uint8)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("images", "masks"):
            os.makedirs(os.path.join(tmp, "data", sub))
        for i in range(count):
            write_png(os.path.join(tmp, "data", "images", f"{i:03d}.png"), size, size, 3,
                      images[i].permute(1, 2, 0).flatten().tolist())
            write_png(os.path.join(tmp, "data", "masks", f"{i:03d}.png"), size, size, 1, (masks[i] * 255).flatten().tolist())
        for n, (kind, train_extra, opt_extra) in enumerate(cases):
            lr = 1e-3 if kind != "sgd" else 1e-2
            run_dir = os.path.join(tmp, f"run{n}")
            config = {
                "model": {"width": 4, "depth": 2},
                "data": {"source": "folder", "path": os.path.join(tmp, "data"), "image_size": [size, size],
                         "val_fraction": 0.0, "augment": False, "shuffle": False},
                "train": {"steps": steps, "batch_size": count, "lr": lr, **train_extra},
                "optimizer": {"kind": kind, **opt_extra},
                "checkpoint": {"dir": run_dir, "every_epochs": 0, "monitor": "loss"},
            }
            path = os.path.join(tmp, f"config{n}.json")
            with open(path, "w") as f:
                json.dump(config, f)
            init = os.path.join(tmp, f"init{n}.safetensors")
            run(args.unet_train, "init", "--config", path, "--out", init)
            run(args.unet_train, "train", "--config", path)
            start, _ = read_safetensors(init)
            ours, _ = read_safetensors(os.path.join(run_dir, "last.safetensors"))

            model = UNet(3, 1, 4, 2, False)
            model.load_state_dict({k: v for k, v in start.items() if not k.startswith("optimizer.")}, strict=True)
            params = list(model.parameters())
            wd = train_extra["weight_decay"]
            if kind == "adam":
                opt = torch.optim.Adam(params, lr=lr, weight_decay=wd)
            elif kind == "adamw":
                opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
            else:
                opt = torch.optim.SGD(params, lr=lr, weight_decay=wd, momentum=opt_extra["momentum"],
                                      nesterov=opt_extra.get("nesterov", False))
            x, t = images.float(), masks.float().unsqueeze(1)
            for _ in range(steps):
                opt.zero_grad()
                loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), t)
                loss.backward()
                if "clip_grad_norm" in opt_extra:
                    torch.nn.utils.clip_grad_norm_(params, opt_extra["clip_grad_norm"])
                opt.step()
            moved = sum(float(((ours[k] - start[k]) ** 2).sum()) for k, _ in model.named_parameters())
            diff = math.sqrt(sum(float(((ours[k] - p.detach()) ** 2).sum()) for k, p in model.named_parameters()))
            relative = diff / max(math.sqrt(moved), 1e-30)
            # The forward and backward passes round differently (oneDNN against PyTorch's CPU kernels): the
            # weights agree to float rounding of the step, not bit for bit.
            ok = ok and relative <= 1e-3
            print(json.dumps({"check": "optimizer", "kind": kind, **train_extra, **opt_extra, "steps": steps,
                              "relative_difference_of_the_update": relative}))
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--unet-train", default="build/cli/unet-train")
    p.add_argument("check", choices=["schedules", "optimizers", "all"])
    args = p.parse_args()
    torch.set_num_threads(1)
    ok = True
    if args.check in ("schedules", "all"):
        ok = schedules(args) and ok
    if args.check in ("optimizers", "all"):
        ok = optimizers(args) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
