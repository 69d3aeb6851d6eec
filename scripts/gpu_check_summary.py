#!/usr/bin/env python3
"""The last lines of scripts/gpu-check.sh: a short table of what the GPU check found in OUTDIR.

   python3 scripts/gpu_check_summary.py OUTDIR

Reads stages.tsv, devices.json, the junit files of the test suites, the two demo runs' metrics.jsonl,
memory.jsonl and bench.jsonl; whatever is missing is shown as such. Standard library only.
"""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def jsonl(path):
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def junit(path):
    """(passed, failed, skipped) of a Qt Test junit file, or None."""
    if not path.exists():
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    cases = root.iter("testcase")
    passed = failed = skipped = 0
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def last_epoch(metrics):
    epochs = [r for r in jsonl(metrics) if r.get("kind") == "epoch"]
    return epochs[-1] if epochs else None


def main():
    out = Path(sys.argv[1])
    rows = []

    for line in (out / "stages.tsv").read_text().splitlines() if (out / "stages.tsv").exists() else []:
        name, status, seconds = line.split("\t")
        if status != "ok":
            rows.append((f"stage {name}", status, f"{seconds} s"))

    gpus = []
    try:
        listing = json.loads((out / "devices.json").read_text())
        gpus = [d for d in listing.get("devices", []) if d.get("id", "").startswith("cuda")]
        reason = listing.get("cuda_unavailable_reason", "")
        rows.append(("devices", "ok" if gpus else "no GPU usable",
                     ", ".join(d.get("name", "?") for d in gpus) or reason))
    except (OSError, json.JSONDecodeError):
        rows.append(("devices", "missing", ""))

    for suite in ("test_ops", "test_layers", "test_unet", "test_data_parallel"):
        counts = junit(out / f"{suite}.xml")
        if counts is None:
            rows.append((f"{suite} cuda:0", "missing", ""))
        else:
            passed, failed, skipped = counts
            # Without a usable GPU every cuda:0 row skips: that is no pass.
            status = "FAIL" if failed else ("ok" if gpus else "not run: no GPU")
            rows.append((f"{suite} cuda:0", status, f"{passed} passed, {failed} failed, {skipped} skipped"))

    gpu, cpu = last_epoch(out / "demo-cuda" / "metrics.jsonl"), last_epoch(out / "demo-cpu" / "metrics.jsonl")
    if gpu and cpu:
        ok = gpu["val_iou"] is not None and cpu["val_iou"] is not None and gpu["val_iou"] >= cpu["val_iou"] - 0.02
        rows.append(("demo 200 steps IoU", "ok" if ok else "FAIL",
                     f"cuda:0 {gpu['val_iou']:.4f} vs cpu:0 {cpu['val_iou']:.4f}"))
    else:
        rows.append(("demo 200 steps IoU", "missing", f"cuda:0 {'ran' if gpu else 'none'}, cpu:0 {'ran' if cpu else 'none'}"))

    # Device level: estimate's reserved + measured overhead against NVML's reading (ours: used - others)
    # during the demo run on the GPU, within 3 %.
    try:
        predicted = json.loads((out / "estimate-cuda.json").read_text())["devices"][0].get("device_peak_bytes")
    except (OSError, json.JSONDecodeError, KeyError, IndexError):
        predicted = None
    seen = [r["device_used"] - r["used_by_others"] for r in jsonl(out / "demo-cuda" / "metrics.jsonl")
            if r.get("kind") == "memory" and r.get("used_by_others") is not None]
    if predicted and seen:
        error = 100.0 * (predicted - max(seen)) / max(seen)
        rows.append(("memory device level (NVML)", "ok" if abs(error) <= 3.0 else "FAIL",
                     f"predicted {predicted / 2**20:.0f} MiB, NVML {max(seen) / 2**20:.0f} MiB, error {error:.2f} %"))
    else:
        rows.append(("memory device level (NVML)", "missing",
                     "no overhead measured" if not predicted else "no NVML samples in demo-cuda"))

    for r in jsonl(out / "memory.jsonl"):
        error = r.get("error_percent")
        reserved_error = 0.0
        if r.get("measured_reserved_bytes"):
            reserved_error = 100.0 * (r["predicted_reserved_bytes"] - r["measured_reserved_bytes"]) / r["measured_reserved_bytes"]
        ok = error == 0.0 and reserved_error == 0.0
        rows.append((f"memory {r.get('config', '')}", "ok" if ok else "FAIL",
                     f"peak {r.get('measured_peak_bytes', 0) / 2**20:.1f} MiB, error {error:.2f} %, reserved {reserved_error:.2f} %"))

    for r in jsonl(out / "bench.jsonl"):
        if "framework" in r:
            what = f"pytorch w{r['width']} {r['amp']}{' CL' if r.get('channels_last') else ''}"
            peak = r.get("peak_allocated_mib")
            rows.append((what, "", f"{r['img_per_s']:.0f} img/s" + (f", peak {peak:.0f} MiB" if peak else "")))
        else:
            peak = max((d.get("peak_bytes", 0) for d in r.get("devices", [])), default=0)
            replicas = len(r.get("devices", []))
            comm = r.get("comm") or {}
            detail = f"{r['img_per_s']:.0f} img/s, peak {peak / 2**20:.0f} MiB"
            if comm:
                detail += (f"; sum {comm.get('sum_ms', 0):.2f} ms, {comm.get('bucket_mib')} MiB buckets hide "
                           f"{100 * comm.get('hidden_fraction', 0):.0f} %")
            rows.append((f"unet-bench w{r['model']['width']} {r['precision']}"
                         + (f" x{replicas} replicas" if replicas > 1 else ""), "", detail))

    width = max(len(r[0]) for r in rows) if rows else 10
    print("\n=== GPU check summary")
    for name, status, detail in rows:
        print(f"{name:<{width}}  {status:<14}  {detail}")


if __name__ == "__main__":
    main()
