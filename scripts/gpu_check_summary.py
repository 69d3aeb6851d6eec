#!/usr/bin/env python3
"""The last lines of scripts/gpu-check.sh: one short table of what the GPU check found in its results folder.

   python3 scripts/gpu_check_summary.py RESULTS

RESULTS is the folder gpu-check.sh fills (results/ in results.tar.xz): stages.tsv (name, status, seconds, limit,
result file) and each stage's result file; cpu-reference.json is the CPU's run of the demo, recorded when the
bundle was made. One row per stage: its status, duration and key figures. A stage that ran but whose figures
miss their mark gets status FAIL. Anything missing, unreadable or null is shown as such: the table is always
written. Standard library only.
"""
import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

IOU_TOLERANCE = 0.02  # cuda:0's validation IoU may be this much below the CPU's for the same 200 steps
NVML_TOLERANCE_PERCENT = 3.0


def number(value):
    """value if it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def fmt(value, spec="", unit="", scale=1.0):
    """value / scale formatted with spec, '?' where it is missing or not a number."""
    v = number(value)
    if v is None:
        return "?" + unit
    return f"{(v / scale if scale != 1.0 else v):{spec}}{unit}"


def mib(value):
    return fmt(value, ".0f", " MiB", 2**20)


def read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def jsonl(path):
    """The JSON objects among the lines of path ([] where it is missing)."""
    rows = []
    try:
        text = path.read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def junit(path):
    """(passed, failed, skipped) of a Qt Test junit file, or None."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("name") in ("initTestCase", "cleanupTestCase"):
            continue  # Qt Test's set-up and tear-down are no rows, unless they fail
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def last_epoch(rows):
    epochs = [r for r in rows if r.get("kind") == "epoch"]
    return epochs[-1] if epochs else None


def read_stages(results):
    """[(name, status, seconds, result file or None)] from stages.tsv."""
    stages = []
    try:
        lines = (results / "stages.tsv").read_text().splitlines()
    except OSError:
        return stages
    for line in lines:
        fields = line.split("\t")
        if not fields[0]:
            continue
        fields += [""] * (5 - len(fields))
        result = fields[4] if fields[4] not in ("", "-") else None
        stages.append((fields[0], fields[1] or "?", fields[2] or "?", result))
    return stages


class Check:
    """Figures per stage; each returns (detail, verdict) where verdict is None (no judgement), "ok" or "FAIL"."""

    def __init__(self, results):
        self.results = results
        devices = read_json(results / "devices.json")
        self.devices = devices if isinstance(devices, dict) else None
        gpus = (self.devices or {}).get("devices") or []
        self.gpus = [d for d in gpus if isinstance(d, dict) and str(d.get("id", "")).startswith("cuda")]

    def figures(self, name, result):
        path = self.results / result if result else None
        if name == "nvidia-smi":
            return self.nvidia_smi(path)
        if name == "devices":
            return self.devices_row()
        if name == "nvml readings":
            return self.nvml(path)
        if name.startswith("test_"):
            return self.tests(path)
        if name == "demo-cuda":
            return self.demo(path)
        if name.startswith("estimate"):
            return self.estimate(path)
        if name.startswith("memory"):
            return self.memory(path)
        if name.startswith("bench"):
            return self.bench(path)
        if name.startswith("pytorch"):
            return self.pytorch(path)
        return "", None

    def nvidia_smi(self, path):
        try:
            lines = [l for l in path.read_text().splitlines() if l.strip()] if path else []
        except OSError:
            lines = []
        return (lines[1].strip() if len(lines) > 1 else "no reading"), None

    def devices_row(self):
        if self.devices is None:
            return "devices.json missing or unreadable", None
        versions = self.devices.get("versions") if isinstance(self.devices.get("versions"), dict) else {}
        names = ", ".join(str(d.get("name") or "?") for d in self.gpus)
        if not names:
            return f"no GPU usable: {self.devices.get('cuda_unavailable_reason') or '?'}", "FAIL"
        v = ", ".join(f"{k} {versions.get(k) or '?'}" for k in ("driver", "runtime", "cudnn", "nccl"))
        return f"{names}; {v}", None

    def nvml(self, path):
        r = read_json(path) if path else None
        if not isinstance(r, dict):
            return "no readings", None
        return (f"{fmt(r.get('utilisation_percent'), '.0f', ' %')}, {fmt(r.get('temperature_celsius'), '.0f', ' C')}, "
                f"{fmt(r.get('power_watts'), '.0f', ' W')}, others {mib(r.get('used_by_others_bytes'))}"), None

    def tests(self, path):
        counts = junit(path) if path else None
        if counts is None:
            return "no junit file", None
        passed, failed, skipped = counts
        detail = f"{passed} passed, {failed} failed, {skipped} skipped"
        if failed:
            return detail, "FAIL"
        if not self.gpus:
            return detail + " (no GPU: its rows skip)", None
        return detail, "ok"

    def demo(self, path):
        rows = jsonl(path) if path else []
        gpu = last_epoch(rows)
        record = read_json(self.results / "cpu-reference.json")
        record = record if isinstance(record, dict) else {}
        cpu_iou, cpu_step = number(record.get("val_iou")), number(record.get("step"))
        if gpu is None:
            return f"no epoch in metrics.jsonl; CPU record IoU {fmt(cpu_iou, '.4f')}", None
        gpu_iou, gpu_step = number(gpu.get("val_iou")), number(gpu.get("step"))
        detail = (f"val IoU cuda:0 {fmt(gpu_iou, '.4f')} at step {fmt(gpu_step)}"
                  f" vs CPU record {fmt(cpu_iou, '.4f')}")
        if cpu_iou is None:
            return detail + " (no CPU record)", None
        if gpu_step is not None and cpu_step is not None and gpu_step != cpu_step:
            return detail + f" (CPU record at step {fmt(cpu_step)}: not comparable)", "FAIL"
        if gpu_iou is None:
            return detail, "FAIL"
        return detail + f" (tolerance {IOU_TOLERANCE})", "ok" if gpu_iou >= cpu_iou - IOU_TOLERANCE else "FAIL"

    def estimate(self, path):
        """estimate's device-level peak against NVML's reading of ours (used - others) during the demo run."""
        est = read_json(path) if path else None
        predicted = None
        if isinstance(est, dict) and isinstance(est.get("devices"), list) and est["devices"]:
            first = est["devices"][0]
            predicted = number(first.get("device_peak_bytes")) if isinstance(first, dict) else None
        seen = []
        for r in jsonl(self.results / "demo-cuda" / "metrics.jsonl"):
            used, others = number(r.get("device_used")), number(r.get("used_by_others"))
            if r.get("kind") == "memory" and used is not None and others is not None:
                seen.append(used - others)
        if not predicted or not seen:
            return ("no overhead measured" if not predicted else "no NVML samples in demo-cuda"), None
        error = 100.0 * (predicted - max(seen)) / max(seen) if max(seen) else None
        verdict = "ok" if error is not None and abs(error) <= NVML_TOLERANCE_PERCENT else "FAIL"
        return f"device predicted {mib(predicted)} vs NVML {mib(max(seen))}, error {fmt(error, '.2f', ' %')}", verdict

    def memory(self, path):
        rows = jsonl(path) if path else []
        if not rows:
            return "no result", None
        details, verdict = [], "ok"
        for r in rows:
            error = number(r.get("error_percent"))
            predicted, measured = number(r.get("predicted_reserved_bytes")), number(r.get("measured_reserved_bytes"))
            reserved_error = 100.0 * (predicted - measured) / measured if predicted is not None and measured else None
            # The planner is exact: 0.0 % on the peak; on the reserved bytes too, where they were measured.
            if error != 0.0 or (reserved_error is not None and reserved_error != 0.0):
                verdict = "FAIL"
            details.append(f"peak predicted {mib(r.get('predicted_peak_bytes'))} vs measured "
                           f"{mib(r.get('measured_peak_bytes'))} (error {fmt(error, '.2f', ' %')}), reserved error "
                           f"{fmt(reserved_error, '.2f', ' %')}")
        return "; ".join(details), verdict

    def bench(self, path):
        rows = jsonl(path) if path else []
        if not rows:
            return "no result", None
        details = []
        for r in rows:
            devices = [d for d in (r.get("devices") or []) if isinstance(d, dict)]
            peaks = [p for p in (number(d.get("peak_bytes")) for d in devices) if p is not None]
            detail = f"{fmt(r.get('img_per_s'), '.0f', ' img/s')} {r.get('precision') or ''}".rstrip()
            detail += f", peak {mib(max(peaks)) if peaks else '?'}"
            if len(devices) > 1:
                detail += f", {len(devices)} replicas"
            comm = r.get("comm") if isinstance(r.get("comm"), dict) else {}
            if comm:
                detail += (f"; sum {fmt(comm.get('sum_ms'), '.2f', ' ms')}, {fmt(comm.get('bucket_mib'))} MiB buckets "
                           f"hide {fmt(comm.get('hidden_fraction'), '.0%')}")
            details.append(detail)
        return "; ".join(details), None

    def pytorch(self, path):
        rows = jsonl(path) if path else []
        if not rows:
            return "no result", None
        details = []
        for r in rows:
            detail = f"{fmt(r.get('img_per_s'), '.0f', ' img/s')} ({r.get('framework') or 'pytorch ?'}, {r.get('amp') or '?'})"
            if number(r.get("peak_allocated_mib")) is not None:
                detail += f", peak {fmt(r.get('peak_allocated_mib'), '.0f', ' MiB')}"
            details.append(detail)
        return "; ".join(details), None


def table(results):
    """The summary's lines."""
    stages = read_stages(results)
    lines = ["=== GPU check summary"]
    info = {}
    try:
        for line in (results / "info.txt").read_text().splitlines():
            key, _, value = line.partition(": ")
            info[key] = value
    except OSError:
        pass
    if info:
        lines.append(f"commit {info.get('commit', '?')} on {info.get('host', '?')}, {info.get('date', '?')}")
    if not stages:
        lines.append(f"no stages recorded (no stages.tsv in {results})")
        return lines
    check = Check(results)
    rows = []
    for name, status, seconds, result in stages:
        if status.startswith("skipped"):
            rows.append((name, status, seconds, ""))
            continue
        try:
            detail, verdict = check.figures(name, result)
        except Exception as e:  # a figure that cannot be read must not cost the table
            detail, verdict = f"figures unreadable: {type(e).__name__}: {e}", None
        if status == "ok" and verdict == "FAIL":
            status = "FAIL"
        rows.append((name, status, seconds, detail))
    widths = [max(len(r[i]) for r in rows + [("stage", "status", "s", "")]) for i in range(3)]
    lines.append(f"{'stage':<{widths[0]}}  {'status':<{widths[1]}}  {'s':>{widths[2]}}  figures")
    for name, status, seconds, detail in rows:
        lines.append(f"{name:<{widths[0]}}  {status:<{widths[1]}}  {seconds:>{widths[2]}}  {detail}".rstrip())
    counts = {}
    for _, status, _, _ in rows:
        kind = "ok" if status == "ok" else "skipped" if status.startswith("skipped") else "not ok"
        counts[kind] = counts.get(kind, 0) + 1
    lines.append(", ".join(f"{counts[k]} {k}" for k in ("ok", "not ok", "skipped") if k in counts))
    return lines


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print("\n".join(table(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
