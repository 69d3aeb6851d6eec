#!/usr/bin/env python3
"""How far PyTorch's own half-precision gradients are from its fp32 ones, on the model and batch that
tests/test_unet.cpp's gradientsMatchTheCpuInEachPrecision uses (3 input channels, 3 classes, width 8, depth 3,
2 images of 32x32, softmax cross-entropy): the normalised error ||g - g_fp32|| / ||g_fp32|| per parameter
tensor, the worst first. The test's tolerances come from these figures.

    /usr/bin/python3 bench/precision_reference.py [--device cpu|cuda] [--seeds N]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import UNet  # noqa: E402


def gradients(model, x, y, device, dtype):
    m = UNet(3, 3, 8, 3, False).to(device)
    m.load_state_dict(model.state_dict())
    if dtype is None:
        loss = F.cross_entropy(m(x), y)
    else:
        with torch.autocast(device, dtype=dtype):
            loss = F.cross_entropy(m(x).float(), y)
    loss.backward()
    return {n: p.grad.float() for n, p in m.named_parameters()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    dtypes = [("bf16", torch.bfloat16)] + ([("fp16", torch.float16)] if args.device == "cuda" else [])
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        model = UNet(3, 3, 8, 3, False).to(args.device)
        for p in model.parameters():
            if p.dim() > 1:
                torch.nn.init.kaiming_normal_(p, nonlinearity="relu")
            else:
                torch.nn.init.zeros_(p)
        x = torch.rand(2, 3, 32, 32, device=args.device) * 255
        y = torch.randint(0, 3, (2, 32, 32), device=args.device)
        reference = gradients(model, x, y, args.device, None)
        for name, dtype in dtypes:
            g = gradients(model, x, y, args.device, dtype)
            errors = {n: ((g[n] - reference[n]).norm() / reference[n].norm()).item() for n in reference}
            worst = sorted(errors.items(), key=lambda kv: -kv[1])[:3]
            print(f"seed {seed} {name} autocast on {args.device} (torch {torch.__version__}): worst "
                  + ", ".join(f"{n} {e:.3f}" for n, e in worst))


if __name__ == "__main__":
    main()
