#!/usr/bin/python3
"""The ONNX export checked by programs that are not ours (issue 13).

For a binary RGB model and a separable three-class grayscale model, each with random weights and non-zero
biases (tests/onnx_reference.cpp writes the checkpoint), `unet-train export --format onnx` writes the model,
and then:
  - onnx.checker.check_model(full_check=True) accepts it (ONNX's own checker, with shape inference);
  - OpenCV's DNN module (cv2.dnn.readNetFromONNX) runs it at the training size and at a larger non-square size,
    on a batch of two images, and its probabilities match the engine's for the same pixels (onnx_reference
    probabilities) within 1/255;
  - at the training size, they also match `unet-train predict`'s probability PNGs within 1/255;
  - the comparison is not blind: the same model with its 3x3 kernels, or its 2x2 transposed-conv kernels,
    transposed (a wrong weight layout) is refused by it.

usage: onnx_consumer_check.py --unet-train BIN --reference BIN --work DIR
Exit code 0 when every check passes; the failures are printed otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

try:
    import cv2
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:  # the packages are installed by scripts/setup-debian.sh
    sys.exit(f"onnx_consumer_check: {e}: install python3-onnx python3-opencv python3-numpy "
             "(scripts/setup-debian.sh does)")

TOLERANCE = 1.0 / 255.0

CASES = [
    {"name": "binary-rgb",
     "config": {"model": {"in_channels": 3, "classes": 1, "width": 8, "depth": 3},
                "data": {"image_size": [32, 32]}},
     "sizes": [(32, 32), (48, 80)]},
    {"name": "3-class-gray-separable",
     "config": {"model": {"in_channels": 1, "classes": 3, "width": 8, "depth": 2, "separable": True},
                "data": {"image_size": [24, 32]}},
     "sizes": [(24, 32), (44, 60)]},
]


def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}:\n{result.stderr}")
    return result.stdout


def engine_probabilities(reference, checkpoint, pixels, work):
    """The engine's probabilities [N, classes, H, W] for pixels u8 [N, H, W, C]."""
    n, h, w, _ = pixels.shape
    pixels_file = os.path.join(work, f"pixels-{h}x{w}.u8")
    out_file = os.path.join(work, f"engine-{h}x{w}.f32")
    pixels.tofile(pixels_file)
    run(reference, "probabilities", checkpoint, pixels_file, str(n), str(h), str(w), out_file)
    return np.fromfile(out_file, dtype=np.float32)


def opencv_probabilities(model_bytes, pixels):
    net = cv2.dnn.readNetFromONNX(model_bytes)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    # What a user has: float32 NCHW pixel values 0..255.
    net.setInput(pixels.transpose(0, 3, 1, 2).astype(np.float32))
    return net.forward()


def predict_pngs(unet_train, checkpoint, pixels, classes, work):
    """`unet-train predict` on the images as PNGs; its probabilities [N, classes written, H, W] in 0..1."""
    inputs = os.path.join(work, "predict-in")
    outputs = os.path.join(work, "predict-out")
    for folder in (inputs, outputs):
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(inputs)
    for i, image in enumerate(pixels):
        # OpenCV writes three channels as BGR; the model's channels are RGB.
        written = image[:, :, ::-1] if image.shape[2] == 3 else image[:, :, 0]
        if not cv2.imwrite(os.path.join(inputs, f"image{i}.png"), np.ascontiguousarray(written)):
            raise RuntimeError("cannot write a test image")
    run(unet_train, "predict", "--checkpoint", checkpoint, "--input", inputs, "--output", outputs)
    # Binary: image<i>.png; several classes: image<i>_class<k>.png for k >= 1 (predict leaves out class 0).
    channels = [None] if classes == 1 else list(range(1, classes))
    maps = []
    for i in range(len(pixels)):
        per_image = []
        for k in channels:
            name = f"image{i}.png" if k is None else f"image{i}_class{k}.png"
            png = cv2.imread(os.path.join(outputs, name), cv2.IMREAD_UNCHANGED)
            if png is None:
                raise RuntimeError(f"predict wrote no {name}")
            per_image.append(png.astype(np.float32) / 255.0)
        maps.append(per_image)
    return np.array(maps), [0] if classes == 1 else channels


def with_transposed_kernels(model, kernel):
    """A copy of the model whose initialisers of spatial size kernel x kernel have their axes H and W swapped."""
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    for tensor in broken.graph.initializer:
        if len(tensor.dims) == 4 and tuple(tensor.dims[2:]) == (kernel, kernel):
            values = numpy_helper.to_array(tensor).swapaxes(2, 3).copy()
            tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
    return broken.SerializeToString()


def check_case(case, args, failures):
    name = case["name"]
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_spec = case["config"]["model"]
    classes, in_channels = model_spec["classes"], model_spec["in_channels"]
    checkpoint = os.path.join(work, "model.safetensors")
    onnx_file = os.path.join(work, "model.onnx")
    run(args.reference, "checkpoint", checkpoint, json.dumps(case["config"]), "7")
    run(args.unet_train, "export", "--format", "onnx", "--checkpoint", checkpoint, "--out", onnx_file)

    model = onnx.load(onnx_file)
    onnx.checker.check_model(model, full_check=True)
    opsets = {o.domain: o.version for o in model.opset_import}
    print(f"{name}: onnx {onnx.__version__} checker (full_check) accepts it: IR {model.ir_version}, "
          f"opsets {opsets}")
    if [i.name for i in model.graph.input] != ["pixels"] or \
            [o.name for o in model.graph.output] != ["probabilities"]:
        failures.append(f"{name}: inputs {[i.name for i in model.graph.input]}, "
                        f"outputs {[o.name for o in model.graph.output]}")
    metadata = {p.key: p.value for p in model.metadata_props}
    if json.loads(metadata.get("unet.model", "{}")).get("classes") != classes or metadata.get("unet.step") != "42":
        failures.append(f"{name}: metadata {metadata}")

    model_bytes = model.SerializeToString()
    rng = np.random.default_rng(2026)
    for h, w in case["sizes"]:
        pixels = rng.integers(0, 256, size=(2, h, w, in_channels), dtype=np.uint8)
        engine = engine_probabilities(args.reference, checkpoint, pixels, work).reshape(2, classes, h, w)
        opencv = opencv_probabilities(model_bytes, pixels)
        if opencv.shape != engine.shape:
            failures.append(f"{name} {h}x{w}: OpenCV gives {opencv.shape}, the engine {engine.shape}")
            continue
        # Random weights could saturate every probability to 0 or 1, where any graph agrees: make sure
        # they do not, or the comparison would prove nothing.
        if float(engine.std()) < 0.02:
            failures.append(f"{name} {h}x{w}: the engine's probabilities hardly vary (std {engine.std():.4f})")
        difference = float(np.abs(opencv - engine).max())
        print(f"{name} {h}x{w}: OpenCV {cv2.__version__} vs engine: max |difference| {difference:.3g} "
              f"(probabilities {engine.min():.3f}..{engine.max():.3f})")
        if not difference <= TOLERANCE:
            failures.append(f"{name} {h}x{w}: OpenCV differs from the engine by {difference} > 1/255")

        if (h, w) == tuple(case["config"]["data"]["image_size"]):
            predicted, channels = predict_pngs(args.unet_train, checkpoint, pixels, classes, work)
            difference = float(np.abs(opencv[:, channels] - predicted).max())
            print(f"{name} {h}x{w}: OpenCV vs unet-train predict's PNGs: max |difference| {difference:.3g} "
                  f"({difference * 255:.2f}/255)")
            if not difference <= TOLERANCE:
                failures.append(f"{name} {h}x{w}: OpenCV differs from predict by {difference} > 1/255")

            for kernel in (3, 2):
                broken = opencv_probabilities(with_transposed_kernels(model, kernel), pixels)
                difference = float(np.abs(broken - engine).max())
                print(f"{name} {h}x{w}: with its {kernel}x{kernel} kernels transposed: max |difference| "
                      f"{difference:.3g}")
                if difference <= TOLERANCE:
                    failures.append(f"{name}: a model with transposed {kernel}x{kernel} kernels passed the "
                                    f"comparison (difference {difference})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unet-train", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    failures = []
    for case in CASES:
        try:
            check_case(case, args, failures)
        except (RuntimeError, onnx.checker.ValidationError, cv2.error) as e:
            failures.append(f"{case['name']}: {e}")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if failures:
        return 1
    print("onnx_consumer_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
