#!/usr/bin/python3
"""The ONNX export checked by programs that are not ours (issue 13; the normalisation, issue 26).

For each case, a model with random weights and non-zero biases (tests/onnx_reference.cpp writes the
checkpoint), `unet-train export --format onnx` writes the model, and then:
  - onnx.checker.check_model(full_check=True) accepts it (ONNX's own checker, with shape inference);
  - its metadata holds the model, the step, data.normalize ("unet.normalize") and the input's contract
    ("unet.input", also the input's doc_string);
  - OpenCV's DNN module (cv2.dnn.readNetFromONNX) runs it at the training size and at a larger non-square size,
    on a batch of two images, and its probabilities match the engine's for the same images (onnx_reference
    probabilities) within 1/255. A normalisation that does not depend on the image (scale_255, range, zscore
    over the dataset) is inside the graph, which is given the stored values (8- or 16-bit) as the engine is;
    a per-image one (percentile, zscore per image) is not, and the graph is given the values the engine's
    normalisation gives;
  - for scale_255 at the training size, they also match `unet-train predict`'s probability PNGs within 1/255;
  - the comparison is not blind: the same model with its 3x3 kernels, or its 2x2 transposed-conv kernels,
    transposed (a wrong weight layout), or without the clip of a clipping normalisation, is refused by it.

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

# "stored": the sample type of the images (u8 or u16); "graph_input": what the graph is given, the stored values
# or the engine's normalised ones.
CASES = [
    {"name": "binary-rgb",
     "config": {"model": {"in_channels": 3, "classes": 1, "width": 8, "depth": 3},
                "data": {"image_size": [32, 32]}},
     "sizes": [(32, 32), (48, 80)], "stored": "u8", "graph_input": "stored"},
    {"name": "3-class-gray-separable",
     "config": {"model": {"in_channels": 1, "classes": 3, "width": 8, "depth": 2, "separable": True},
                "data": {"image_size": [24, 32]}},
     "sizes": [(24, 32), (44, 60)], "stored": "u8", "graph_input": "stored"},
    {"name": "range-16-bit-clipped",
     "config": {"model": {"in_channels": 2, "classes": 2, "width": 8, "depth": 2},
                "data": {"image_size": [32, 32], "normalize": "range", "normalize_range": [1000, 40000],
                         "normalize_clip": True}},
     "sizes": [(32, 32), (40, 56)], "stored": "u16", "graph_input": "stored"},
    {"name": "zscore-over-the-dataset",
     "config": {"model": {"in_channels": 3, "classes": 1, "width": 8, "depth": 2},
                "data": {"image_size": [32, 32], "normalize": "zscore", "normalize_scope": "dataset",
                         "normalize_mean": [110.5, 128, 90.25], "normalize_std": [60, 70.5, 50]}},
     "sizes": [(32, 32), (40, 56)], "stored": "u8", "graph_input": "stored"},
    {"name": "percentile-16-bit",
     "config": {"model": {"in_channels": 1, "classes": 3, "width": 8, "depth": 2},
                "data": {"image_size": [32, 32], "normalize": "percentile", "normalize_percentiles": [2, 99.5]}},
     "sizes": [(32, 32), (40, 56)], "stored": "u16", "graph_input": "normalised"},
    {"name": "percentile-clipped",
     "config": {"model": {"in_channels": 2, "classes": 1, "width": 8, "depth": 2},
                "data": {"image_size": [32, 32], "normalize": "percentile", "normalize_percentiles": [10, 90],
                         "normalize_clip": True}},
     "sizes": [(32, 32)], "stored": "u16", "graph_input": "normalised"},
    {"name": "zscore-per-image",
     "config": {"model": {"in_channels": 3, "classes": 2, "width": 8, "depth": 2, "separable": True},
                "data": {"image_size": [32, 32], "normalize": "zscore", "normalize_scope": "image"}},
     "sizes": [(32, 32), (40, 56)], "stored": "u8", "graph_input": "normalised"},
]

def run(*command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {result.returncode}:\n{result.stderr}")
    return result.stdout


def engine_probabilities(reference, checkpoint, stored, work):
    """The engine's probabilities [N, classes, H, W] for the stored values [N, H, W, C] (u8 or u16), each
    image normalised by the checkpoint's data.normalize; and those normalised values [N, C, H, W], before
    any clipping."""
    n, h, w, c = stored.shape
    suffix = "u16" if stored.dtype == np.uint16 else "u8"
    stored_file = os.path.join(work, f"stored-{h}x{w}.{suffix}")
    out_file = os.path.join(work, f"engine-{h}x{w}.f32")
    normalised_file = os.path.join(work, f"normalised-{h}x{w}.f32")
    stored.astype(stored.dtype.newbyteorder("<")).tofile(stored_file)
    run(reference, "probabilities", checkpoint, stored_file, str(n), str(h), str(w), out_file, normalised_file)
    return (np.fromfile(out_file, dtype=np.float32),
            np.fromfile(normalised_file, dtype=np.float32).reshape(n, c, h, w))


def opencv_probabilities(model_bytes, graph_input):
    """OpenCV's probabilities for float32 NCHW input values."""
    net = cv2.dnn.readNetFromONNX(model_bytes)
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_CPU)
    net.setInput(np.ascontiguousarray(graph_input, dtype=np.float32))
    return net.forward()


def expected_normalize(data):
    """The "unet.normalize" metadata a data section gives: data.normalize and the keys of its mode."""
    mode = data.get("normalize", "scale_255")
    keys = {"percentile": ["normalize_percentiles", "normalize_clip"], "range": ["normalize_range", "normalize_clip"],
            "zscore": ["normalize_scope"] + (["normalize_mean", "normalize_std"]
                                             if data.get("normalize_scope") == "dataset" else [])}.get(mode, [])
    defaults = {"normalize_percentiles": [1, 99.8], "normalize_clip": False, "normalize_range": [0, 65535],
                "normalize_scope": "image"}
    return {"normalize": mode, **{k: data.get(k, defaults.get(k)) for k in keys}}


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


def without_clip(model):
    """A copy of the model whose normalisation does not clip: what read the clip's output reads its input."""
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    clip = next(node for node in broken.graph.node if node.name == "normalize.clip")
    for node in broken.graph.node:
        for i, name in enumerate(node.input):
            if name == clip.output[0]:
                node.input[i] = clip.input[0]
    broken.graph.node.remove(clip)
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
    normalize = json.loads(metadata.get("unet.normalize", "null"))
    if normalize != expected_normalize(case["config"]["data"]):
        failures.append(f"{name}: unet.normalize {normalize}, expected {expected_normalize(case['config']['data'])}")
    contract = metadata.get("unet.input", "")
    if not contract or model.graph.input[0].doc_string != contract:
        failures.append(f"{name}: unet.input '{contract}', the input's doc_string '{model.graph.input[0].doc_string}'")
    print(f"{name}: input: {contract}")

    model_bytes = model.SerializeToString()
    rng = np.random.default_rng(2026)
    stored_type = np.uint16 if case["stored"] == "u16" else np.uint8
    for h, w in case["sizes"]:
        stored = rng.integers(0, np.iinfo(stored_type).max + 1, size=(2, h, w, in_channels), dtype=stored_type)
        engine, normalised = engine_probabilities(args.reference, checkpoint, stored, work)
        engine = engine.reshape(2, classes, h, w)
        graph_input = stored.transpose(0, 3, 1, 2) if case["graph_input"] == "stored" else normalised
        opencv = opencv_probabilities(model_bytes, graph_input)
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
            if normalize == {"normalize": "scale_255"}:
                predicted, channels = predict_pngs(args.unet_train, checkpoint, stored, classes, work)
                difference = float(np.abs(opencv[:, channels] - predicted).max())
                print(f"{name} {h}x{w}: OpenCV vs unet-train predict's PNGs: max |difference| {difference:.3g} "
                      f"({difference * 255:.2f}/255)")
                if not difference <= TOLERANCE:
                    failures.append(f"{name} {h}x{w}: OpenCV differs from predict by {difference} > 1/255")

            broken_models = [(f"its {kernel}x{kernel} kernels transposed", with_transposed_kernels(model, kernel))
                             for kernel in (3, 2)]
            if any(node.name == "normalize.clip" for node in model.graph.node):
                broken_models.append(("no clip", without_clip(model)))
            for what, broken_model in broken_models:
                difference = float(np.abs(opencv_probabilities(broken_model, graph_input) - engine).max())
                print(f"{name} {h}x{w}: with {what}: max |difference| {difference:.3g}")
                if difference <= TOLERANCE:
                    failures.append(f"{name}: a model with {what} passed the comparison (difference {difference})")


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
