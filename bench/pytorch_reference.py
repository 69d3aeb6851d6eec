#!/usr/bin/env python3
"""The same U-Net in PyTorch, for two things unet-bench cannot do alone:

  speed      train it the way unet-bench does (batch of synthetic-looking data, Adam) and print images/s as
             JSON, so the engine's figure has a baseline measured on the same machine; on a GPU with
             --device cuda, optionally in mixed precision (--amp bf16|fp16, with a GradScaler for fp16) and
             channels-last, also printing the peak of PyTorch's allocator:
               python3 bench/pytorch_reference.py speed --width 16 --depth 4 --size 128 --batch 8
               python3 bench/pytorch_reference.py speed --device cuda --amp bf16 --channels-last \
                   --width 64 --size 256 --batch 16
  load       load a unet-workbench checkpoint with load_state_dict(strict=True) into the module tree
             docs/MODEL.md names (enc/mid/up/dec/head, c1/c2, dw/pw), proving the names and layouts:
               python3 bench/pytorch_reference.py load runs/demo/last.safetensors

Needs PyTorch (Debian: python3-torch). Not used by the build or the tests.
"""
import argparse
import json
import struct
import sys
import time

import torch
import torch.nn as nn


class Conv3x3(nn.Module):
    """A U-Net block's 3x3 convolution: plain (named pw) or depthwise dw + pointwise pw."""

    def __init__(self, cin, cout, separable):
        super().__init__()
        if separable:
            self.dw = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
            self.pw = nn.Conv2d(cin, cout, 1)
        else:
            self.pw = nn.Conv2d(cin, cout, 3, padding=1)
        self.separable = separable

    def forward(self, x):
        if self.separable:
            x = self.dw(x)
        return torch.relu(self.pw(x))


class Block(nn.Module):
    def __init__(self, cin, cout, separable):
        super().__init__()
        self.c1 = Conv3x3(cin, cout, separable)
        self.c2 = Conv3x3(cout, cout, separable)

    def forward(self, x):
        return self.c2(self.c1(x))


class UNet(nn.Module):
    def __init__(self, in_channels=3, classes=1, width=16, depth=4, separable=False):
        super().__init__()
        ch = [width << l for l in range(depth + 1)]
        self.enc = nn.ModuleList()
        c = in_channels
        for l in range(depth):
            self.enc.append(Block(c, ch[l], separable))
            c = ch[l]
        self.mid = Block(c, ch[depth], separable)
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        c = ch[depth]
        for i in range(depth):
            out = ch[depth - 1 - i]
            self.up.append(nn.ConvTranspose2d(c, out, 2, stride=2))
            self.dec.append(Block(2 * out, out, separable))
            c = out
        self.head = nn.Conv2d(c, classes, 1)

    def forward(self, pixels):  # pixels: float 0..255, NCHW
        x = pixels / 255.0
        skips = []
        for block in self.enc:
            x = block(x)
            skips.append(x)
            x = torch.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def speed(args):
    torch.set_num_threads(args.threads or torch.get_num_threads())
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.amp != "none" and not cuda:
        sys.exit("--amp needs --device cuda")
    if cuda:
        # As the engine's defaults: TF32 for fp32 convolutions and matmuls, heuristic (not benchmarked) algorithms.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = UNet(args.in_channels, args.classes, args.width, args.depth, args.separable).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randint(0, 256, (args.batch, args.in_channels, args.size, args.size), device=device).float()
    y = (torch.rand(args.batch, 1, args.size, args.size, device=device) > 0.7).float()
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    loss_fn = nn.BCEWithLogitsLoss()
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    scaler = torch.amp.GradScaler("cuda") if args.amp == "fp16" else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_fn(model(x).float(), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = time.perf_counter() - start
    result = {"framework": "pytorch " + torch.__version__, "device": str(device),
              "threads": torch.get_num_threads(), "amp": args.amp, "channels_last": args.channels_last,
              "width": args.width, "depth": args.depth, "image_size": args.size, "batch_size": args.batch,
              "img_per_s": args.batch * args.steps / seconds}
    if cuda:
        result["gpu"] = torch.cuda.get_device_name(device)
        result["peak_allocated_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
        result["peak_reserved_mib"] = torch.cuda.max_memory_reserved(device) / 2**20
    print(json.dumps(result))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + begin:base + end]), dtype=torch.float32)
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


def load(args):
    tensors, meta = read_safetensors(args.checkpoint)
    model_cfg = json.loads(meta["config"]).get("model", {})
    model = UNet(model_cfg.get("in_channels", 3), model_cfg.get("classes", 1), model_cfg.get("width", 16),
                 model_cfg.get("depth", 4), model_cfg.get("separable", False))
    params = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(params, strict=True)
    print(json.dumps({"loaded": args.checkpoint, "tensors": len(params),
                      "parameters": sum(p.numel() for p in model.parameters()), "step": int(meta["step"])}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--width", type=int, default=16)
    s.add_argument("--depth", type=int, default=4)
    s.add_argument("--size", type=int, default=128)
    s.add_argument("--batch", type=int, default=8)
    s.add_argument("--in-channels", type=int, default=3)
    s.add_argument("--classes", type=int, default=1)
    s.add_argument("--separable", action="store_true")
    s.add_argument("--channels-last", action="store_true")
    s.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    s.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none",
                   help="mixed precision on a GPU (autocast; fp16 with a GradScaler)")
    s.add_argument("--threads", type=int, default=0)
    s.add_argument("--steps", type=int, default=10)
    s.add_argument("--warmup", type=int, default=2)
    l = sub.add_parser("load")
    l.add_argument("checkpoint")
    args = p.parse_args()
    speed(args) if args.command == "speed" else load(args)


if __name__ == "__main__":
    sys.exit(main())
