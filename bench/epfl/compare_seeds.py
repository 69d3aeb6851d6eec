#!/usr/bin/env python3
"""Compares several seeds of the engine's patch recipe with several of the PyTorch reference.

    /usr/bin/python3 bench/epfl/compare_seeds.py --engine build/epfl-runs/patch build/epfl-runs/patch-seed1 ... \
        --torch build/epfl-runs/torch-patch.jsonl build/epfl-runs/torch-patch-seed1.jsonl ...

--engine takes run folders (their metrics.jsonl), --torch the files torch_reference.py --out wrote. For each
run: val_iou at the last three epochs, their mean (one epoch's value moves by up to 0.1 from the next), the
best. Then, per framework, the mean and standard deviation over seeds of the last-three mean and of the best,
and Welch's t statistic of the difference with its degrees of freedom (|t| below about 2 with these few seeds:
no difference the seeds can tell from noise). Standard library only.
"""
import argparse
import json
import math
import os
import statistics


def epochs(path):
    with open(path) as f:
        return [r for r in map(json.loads, f) if r.get("kind") == "epoch" and not r.get("within_epoch")]


def summary(path):
    records = epochs(path)
    if len(records) < 3:
        raise SystemExit(f"{path}: {len(records)} epoch record(s); a finished run has at least 3")
    ious = [r["val_iou"] for r in records]
    return {"run": path, "epochs": len(ious), "last_three": [round(v, 4) for v in ious[-3:]],
            "last_three_mean": statistics.fmean(ious[-3:]), "best": max(ious)}


def welch(a, b):
    """Welch's t of mean(a) - mean(b) and its Welch-Satterthwaite degrees of freedom."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb) if va + vb > 0 else float("nan")
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va + vb > 0 else float("nan")
    return t, df


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", nargs="+", required=True, help="the engine's run folders")
    parser.add_argument("--torch", nargs="+", required=True, help="torch_reference.py's --out files")
    args = parser.parse_args()
    groups = {"engine": [summary(os.path.join(folder, "metrics.jsonl")) for folder in args.engine],
              "pytorch": [summary(path) for path in args.torch]}
    lengths = {run["epochs"] for runs in groups.values() for run in runs}
    if len(lengths) > 1:
        raise SystemExit(f"the runs hold {sorted(lengths)} epochs: compare runs of the same length (one may "
                         "still be running)")
    for name, runs in groups.items():
        for run in runs:
            print(json.dumps({"framework": name, **run}))
    if min(len(runs) for runs in groups.values()) < 2:
        raise SystemExit("give at least two runs of each framework for a spread")
    result = {"kind": "comparison"}
    for key in ("last_three_mean", "best"):
        values = {name: [run[key] for run in runs] for name, runs in groups.items()}
        for name, v in values.items():
            result[f"{name}_{key}_mean"] = statistics.fmean(v)
            result[f"{name}_{key}_sd"] = statistics.stdev(v)
        t, df = welch(values["engine"], values["pytorch"])
        result[f"{key}_difference"] = statistics.fmean(values["engine"]) - statistics.fmean(values["pytorch"])
        result[f"{key}_welch_t"], result[f"{key}_welch_df"] = t, df
    print(json.dumps(result))


if __name__ == "__main__":
    main()
