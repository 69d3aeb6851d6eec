#!/usr/bin/env python3
"""The GPU check's own plumbing, without a GPU (CTest: test_gpu_check, label unit):

- scripts/gpu_check_summary.py writes its table from a results folder with missing, partial, null and broken
  data, and judges the figures it has;
- scripts/gpu-check.sh leaves exactly summary.txt, log.txt, stages.tsv and results.tar.xz in OUTDIR when the
  bundle is missing, when the budget is spent before the first stage and when it is terminated (a stand-in
  bundle), and refuses an OUTDIR that is not empty without touching it.

   python3 tests/test_gpu_check.py
"""
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
SUMMARY = SCRIPTS / "gpu_check_summary.py"
CHECK = SCRIPTS / "gpu-check.sh"
FOUR = ["log.txt", "results.tar.xz", "stages.tsv", "summary.txt"]

JUNIT_OK = """<?xml version="1.0" encoding="UTF-8" ?>
<testsuite name="TestOps" tests="3" failures="0" errors="0" skipped="1">
  <testcase name="initTestCase" classname="TestOps"/>
  <testcase name="a(cuda:0)" classname="TestOps"/>
  <testcase name="b(cuda:0)" classname="TestOps"/>
  <testcase name="c(cuda:0)" classname="TestOps"><skipped message="no"/></testcase>
</testsuite>
"""
JUNIT_FAIL = JUNIT_OK.replace('<testcase name="b(cuda:0)" classname="TestOps"/>',
                              '<testcase name="b(cuda:0)" classname="TestOps"><failure message="x"/></testcase>')


def summarize(folder):
    done = subprocess.run([sys.executable, str(SUMMARY), str(folder)], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


def write(folder, name, text):
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def jsonl(*rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def row(lines, stage):
    """The table's line for stage."""
    found = [l for l in lines if l.startswith(stage + "  ")]
    if not found:
        raise AssertionError(f"no row for {stage!r} in:\n" + "\n".join(lines))
    return found[0]


STAGES = [
    ("unpack bundle", "ok", "3", "120", "-"),
    ("nvidia-smi", "ok", "1", "15", "nvidia-smi.csv"),
    ("devices", "ok", "2", "30", "devices.json"),
    ("nvml readings", "failed(1)", "0", "10", "nvml.json"),
    ("test_ops", "ok", "20", "60", "test_ops.xml"),
    ("test_layers", "failed(1)", "30", "60", "test_layers.xml"),
    ("test_unet", "timeout", "90", "90", "test_unet.xml"),
    ("demo-cuda", "ok", "40", "75", "demo-cuda/metrics.jsonl"),
    ("estimate demo-cuda", "ok", "2", "20", "estimate-cuda.json"),
    ("memory fp32 ckpt=false", "ok", "5", "25", "memory-fp32-ckpt-false.jsonl"),
    ("memory fp32 ckpt=true", "ok", "5", "25", "memory-fp32-ckpt-true.jsonl"),
    ("bench fp32", "ok", "6", "30", "bench-fp32.jsonl"),
    ("bench overlap 2 replicas", "ok", "6", "45", "bench-overlap-2-replicas.jsonl"),
    ("pytorch width16 fp32", "ok", "9", "45", "pytorch-width16-fp32.jsonl"),
    ("pytorch width64 bf16", "skipped(budget)", "0", "45", "-"),
]


def stages_tsv(stages=STAGES):
    return "".join("\t".join(s) + "\n" for s in stages)


GPU = {"id": "cuda:0", "name": "NVIDIA H200", "kind": "cuda"}


class Summary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def lines(self):
        rc, out, err = summarize(self.dir)
        self.assertEqual(rc, 0, err)
        self.assertEqual(err, "")
        self.assertIn("=== GPU check summary", out)
        return out.splitlines()

    def test_an_empty_folder_says_so(self):
        self.assertIn("no stages recorded", "\n".join(self.lines()))

    def test_stages_alone_give_a_row_each(self):
        write(self.dir, "stages.tsv", stages_tsv())
        lines = self.lines()
        for name, status, *_ in STAGES:
            self.assertIn(status, row(lines, name))
        self.assertIn("no junit file", row(lines, "test_ops"))
        self.assertIn("devices.json missing", row(lines, "devices"))

    def test_missing_partial_and_null_figures_still_give_the_table(self):
        # stages.tsv with a line of the old three columns, an empty line and a line of a name alone
        write(self.dir, "stages.tsv", "\t".join(STAGES[0][:3]) + "\n" + stages_tsv(STAGES[1:]) + "\nlonely\n")
        write(self.dir, "nvidia-smi.csv", "name\n")
        write(self.dir, "devices.json", json.dumps({"devices": [{"id": "cuda:0", "name": None}], "versions": None}))
        write(self.dir, "nvml.json", json.dumps({"utilisation_percent": None, "power_watts": "12"}))
        write(self.dir, "test_ops.xml", "<testsuite><testcase")  # cut off
        write(self.dir, "cpu-reference.json", json.dumps({"val_iou": None}))
        write(self.dir, "demo-cuda/metrics.jsonl",
              jsonl({"kind": "epoch", "val_iou": None, "step": None}, {"kind": "memory", "device_used": None,
                                                                        "used_by_others": 5}) + "not json\n[1]\n")
        write(self.dir, "estimate-cuda.json", json.dumps({"devices": [None]}))
        write(self.dir, "memory-fp32-ckpt-false.jsonl", jsonl({"error_percent": None, "measured_peak_bytes": None}))
        write(self.dir, "memory-fp32-ckpt-true.jsonl", "")
        write(self.dir, "bench-fp32.jsonl", jsonl({"img_per_s": None, "devices": None, "comm": None},
                                                  {"devices": [None, {"peak_bytes": None}], "comm": {"sum_ms": None}}))
        write(self.dir, "pytorch-width16-fp32.jsonl", jsonl({"framework": None, "peak_allocated_mib": float("nan")}))
        lines = self.lines()
        for name, *_ in STAGES:
            row(lines, name)
        self.assertIn("? img/s", row(lines, "bench fp32"))
        self.assertIn("FAIL", row(lines, "memory fp32 ckpt=false"))

    def test_the_figures_are_judged(self):
        write(self.dir, "stages.tsv", stages_tsv())
        write(self.dir, "info.txt", "commit: abc123\nhost: gpu1\ndate: now\n")
        write(self.dir, "nvidia-smi.csv", "name, driver_version\nNVIDIA H200, 580.159\n")
        write(self.dir, "devices.json", json.dumps({"devices": [{"id": "cpu:0"}, GPU],
                                                    "versions": {"driver": "13.0", "cudnn": "9.19.0"}}))
        write(self.dir, "test_ops.xml", JUNIT_OK)
        write(self.dir, "test_layers.xml", JUNIT_FAIL)
        write(self.dir, "cpu-reference.json", json.dumps({"val_iou": 0.85, "step": 200}))
        write(self.dir, "demo-cuda/metrics.jsonl",
              jsonl({"kind": "epoch", "val_iou": 0.80, "step": 150}, {"kind": "epoch", "val_iou": 0.84, "step": 200},
                    {"kind": "memory", "device_used": 1100 * 2**20, "used_by_others": 100 * 2**20}))
        write(self.dir, "estimate-cuda.json", json.dumps({"devices": [{"device_peak_bytes": 1010 * 2**20}]}))
        write(self.dir, "memory-fp32-ckpt-false.jsonl",
              jsonl({"error_percent": 0.0, "predicted_peak_bytes": 2**30, "measured_peak_bytes": 2**30,
                     "predicted_reserved_bytes": 2**30, "measured_reserved_bytes": 2**30}))
        write(self.dir, "memory-fp32-ckpt-true.jsonl",
              jsonl({"error_percent": 0.5, "predicted_reserved_bytes": 2**30, "measured_reserved_bytes": 2**30}))
        write(self.dir, "bench-fp32.jsonl", jsonl({"img_per_s": 1234.4, "precision": "fp32",
                                                   "devices": [{"peak_bytes": 300 * 2**20}]}))
        write(self.dir, "bench-overlap-2-replicas.jsonl",
              jsonl({"img_per_s": 900, "devices": [{"peak_bytes": 1}, {"peak_bytes": 2}],
                     "comm": {"sum_ms": 1.5, "bucket_mib": 4, "hidden_fraction": 0.5}}))
        write(self.dir, "pytorch-width16-fp32.jsonl",
              jsonl({"framework": "pytorch 2.11", "amp": "none", "img_per_s": 2000.0, "peak_allocated_mib": 250.0}))
        lines = self.lines()
        self.assertIn("commit abc123 on gpu1", lines[1])
        self.assertIn("NVIDIA H200, 580.159", row(lines, "nvidia-smi"))
        self.assertIn("NVIDIA H200; driver 13.0", row(lines, "devices"))
        self.assertIn("2 passed, 0 failed, 1 skipped", row(lines, "test_ops"))
        self.assertIn("1 passed, 1 failed, 1 skipped", row(lines, "test_layers"))
        self.assertIn("val IoU cuda:0 0.8400 at step 200 vs CPU record 0.8500", row(lines, "demo-cuda"))
        self.assertTrue(row(lines, "demo-cuda").startswith("demo-cuda  ") and " ok " in row(lines, "demo-cuda"))
        self.assertIn("error 1.00 %", row(lines, "estimate demo-cuda"))
        self.assertIn(" ok ", row(lines, "memory fp32 ckpt=false"))
        self.assertIn("FAIL", row(lines, "memory fp32 ckpt=true"))
        self.assertIn("1234 img/s fp32, peak 300 MiB", row(lines, "bench fp32"))
        self.assertIn("2 replicas", row(lines, "bench overlap 2 replicas"))
        self.assertIn("hide 50%", row(lines, "bench overlap 2 replicas"))
        self.assertIn("2000 img/s (pytorch 2.11, none), peak 250 MiB", row(lines, "pytorch width16 fp32"))

    def test_an_iou_below_the_cpu_record_fails(self):
        write(self.dir, "stages.tsv", stages_tsv())
        write(self.dir, "devices.json", json.dumps({"devices": [GPU]}))
        write(self.dir, "cpu-reference.json", json.dumps({"val_iou": 0.85, "step": 200}))
        write(self.dir, "demo-cuda/metrics.jsonl", jsonl({"kind": "epoch", "val_iou": 0.80, "step": 200}))
        self.assertIn("FAIL", row(self.lines(), "demo-cuda"))


class Check(unittest.TestCase):
    """gpu-check.sh's output folder, on the paths that need no GPU and no built bundle."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)
        self.out = self.dir / "out"

    def tearDown(self):
        self.tmp.cleanup()

    def check(self, bundle, budget="420"):
        env = dict(os.environ, GPU_CHECK_BUDGET=budget, TMPDIR=str(self.dir))
        return subprocess.run(["bash", str(CHECK), str(self.out), str(bundle)], capture_output=True, text=True,
                              env=env, timeout=120)

    def assert_four_files(self):
        self.assertEqual(sorted(p.name for p in self.out.iterdir()), FOUR)
        with tarfile.open(self.out / "results.tar.xz") as tar:
            names = tar.getnames()
        self.assertIn("results/stages.tsv", names)
        left = [p.name for p in self.dir.iterdir() if p.name.startswith("gpu-check.")]
        self.assertEqual(left, [], "the work folder is removed")
        return (self.out / "summary.txt").read_text(), names

    def test_a_missing_bundle_leaves_four_files_and_says_so(self):
        done = self.check(self.dir / "no-such-bundle.tar.xz")
        self.assertEqual(done.returncode, 3, done.stderr)
        summary, _ = self.assert_four_files()
        self.assertEqual(len(summary.splitlines()), 1)
        self.assertIn("could not be unpacked", summary)
        self.assertIn("does not exist", summary)
        self.assertIn("could not be unpacked", (self.out / "log.txt").read_text())

    def stand_in_bundle(self, unet_train):
        """A bundle of a stand-in unet-train (a shell script) and the summary: enough to unpack and summarize."""
        bundle = self.dir / "bundle"
        (bundle / "bin").mkdir(parents=True)
        (bundle / "share").mkdir()
        (bundle / "bin" / "unet-train").write_text("#!/bin/sh\n" + unet_train + "\n")
        (bundle / "bin" / "unet-train").chmod(0o755)
        (bundle / "share" / "commit").write_text("abc123\n")
        (bundle / "share" / "gpu_check_summary.py").write_text(SUMMARY.read_text())
        with tarfile.open(self.dir / "bundle.tar.xz", "w:xz") as tar:
            tar.add(bundle, arcname="bundle")
        return self.dir / "bundle.tar.xz"

    def test_a_terminated_check_still_leaves_four_files_and_its_whole_log(self):
        bundle = self.stand_in_bundle("sleep 3; echo '{}'")
        env = dict(os.environ, TMPDIR=str(self.dir))
        # Its own process group, killed as a whole, as a tool that stops a command does.
        check = subprocess.Popen(["bash", str(CHECK), str(self.out), str(bundle)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        time.sleep(1.5)
        os.killpg(check.pid, signal.SIGTERM)
        self.assertEqual(check.wait(timeout=60), 143)
        summary, _ = self.assert_four_files()
        self.assertIn("terminated", summary)
        log = (self.out / "log.txt").read_text()
        self.assertIn("gpu-check: terminated during devices", log)
        self.assertTrue(log.rstrip().endswith(summary.rstrip().splitlines()[-1]), "the summary ends log.txt")

    def test_a_spent_budget_skips_every_stage_and_leaves_four_files(self):
        done = self.check(self.stand_in_bundle("exit 1"), budget="5")
        self.assertEqual(done.returncode, 1, done.stderr)
        summary, names = self.assert_four_files()
        self.assertIn("results/info.txt", names)
        stages = [l.split("\t") for l in (self.out / "stages.tsv").read_text().splitlines()]
        self.assertEqual(stages[0][:2], ["unpack bundle", "ok"])
        self.assertGreater(len(stages), 15)
        for name, status, *_ in stages[1:]:
            self.assertTrue(status.startswith("skipped"), f"{name}: {status}")
            self.assertIn(name, summary)
        log = (self.out / "log.txt").read_text()
        self.assertTrue(log.rstrip().endswith(summary.rstrip().splitlines()[-1]), "the summary ends log.txt")

    def test_a_folder_that_is_not_empty_is_refused_untouched(self):
        self.out.mkdir()
        (self.out / "mine.txt").write_text("keep")
        done = self.check(self.dir / "no-such-bundle.tar.xz")
        self.assertEqual(done.returncode, 2)
        self.assertIn("not empty", done.stderr)
        self.assertEqual([p.name for p in self.out.iterdir()], ["mine.txt"])
        self.assertEqual((self.out / "mine.txt").read_text(), "keep")


if __name__ == "__main__":
    unittest.main(verbosity=2)
