#!/usr/bin/env python3
"""The object metrics of docs/METRICS.md ("Object metrics") computed by another route than the engine's
(engine/unet/objects/object_metrics.cpp), as a cross-check, and the cases tests/test_objects.cpp reads.

The engine counts the overlaps of a truth and a prediction in one pass into a sparse table of id pairs and
matches each pair on its own (above IoU 0.5 an object has at most one partner). Here, instead:

  - ids are relabelled to 0..n-1 with np.unique(return_inverse=True), and one np.bincount over the combined
    index gives the dense contingency matrix (every truth id by every predicted id, background included);
  - areas are its row and column sums, the IoU matrix is intersection / (area_t + area_p - intersection);
  - at each threshold t = (10 + i)/20, i = 0..9 (0.50 ... 0.95, as exact fractions), a pair matches when its
    IoU, as a Fraction, is > t; TP, FP and FN are counted as the Kaggle DSB 2018 kernel counts them: true
    objects with exactly one match, predicted objects with none, true objects with none (and the matching is
    checked to be one-to-one);
  - the DSB score, the matched IoU sum, precision, recall, F1 and panoptic quality are exact fractions, turned
    into floats at the end;
  - merges and splits from the same matrix: a predicted column where two or more true objects have more than
    half their pixels, a true row where two or more predicted objects have more than half theirs.

It also checks that comparing the IoU as a float with the float 0.5 + 0.05*i gives the same verdicts (it does
for any image under 10^14 pixels: an IoU that is not exactly a threshold lies at least 1/(20*union) from it).

    python3 bench/object_metrics_reference.py tests/data/object_cases.json

(Debian's /usr/bin/python3 with python3-numpy; nothing else.) It prints each case's values and writes the
file: a list of image cases (name, height, width, truth and prediction as flat row-major lists of ids, the
expected per-image values) and dataset cases (several of those images together, the accumulator's summary;
null where a value is undefined, as NaN in the engine).
"""
import json
import sys
from fractions import Fraction

import numpy as np

THRESHOLDS = [Fraction(10 + i, 20) for i in range(10)]


def contingency(truth, predicted):
    """The dense overlap matrix (rows: truth ids, columns: predicted ids, 0 included) and both id lists."""
    truth_ids, truth_index = np.unique(truth.ravel(), return_inverse=True)
    predicted_ids, predicted_index = np.unique(predicted.ravel(), return_inverse=True)
    cells = np.bincount(truth_index * len(predicted_ids) + predicted_index,
                        minlength=len(truth_ids) * len(predicted_ids))
    return cells.reshape(len(truth_ids), len(predicted_ids)).astype(np.int64), truth_ids, predicted_ids


def image_metrics(truth, predicted):
    matrix, truth_ids, predicted_ids = contingency(truth, predicted)
    truth_area = matrix.sum(axis=1)
    predicted_area = matrix.sum(axis=0)
    # Drop the background's row and column: they count only towards the areas.
    keep_rows = truth_ids != 0
    keep_columns = predicted_ids != 0
    inter = matrix[keep_rows][:, keep_columns]
    area_t = truth_area[keep_rows]
    area_p = predicted_area[keep_columns]
    n_true, n_predicted = inter.shape
    union = area_t[:, None] + area_p[None, :] - inter
    iou = [[Fraction(int(inter[r, c]), int(union[r, c])) for c in range(n_predicted)] for r in range(n_true)]

    tp, fp, fn = [], [], []
    float_disagreements = 0
    for i, t in enumerate(THRESHOLDS):
        matches = np.array([[iou[r][c] > t for c in range(n_predicted)] for r in range(n_true)],
                           dtype=bool).reshape(n_true, n_predicted)
        float_matches = (inter / np.maximum(union, 1)) > (0.5 + 0.05 * i)
        float_disagreements += int(np.sum(matches != float_matches))
        per_true = matches.sum(axis=1)
        per_predicted = matches.sum(axis=0)
        assert per_true.max(initial=0) <= 1 and per_predicted.max(initial=0) <= 1, "matching not one-to-one"
        tp.append(int(np.sum(per_true == 1)))
        fp.append(int(np.sum(per_predicted == 0)))
        fn.append(int(np.sum(per_true == 0)))
    assert float_disagreements == 0, "float IoU comparisons disagree with the exact ones"

    if n_true == 0 and n_predicted == 0:
        dsb = Fraction(1)
    else:
        dsb = sum(Fraction(tp[i], tp[i] + fp[i] + fn[i]) for i in range(10)) / 10
    matched_iou_sum = sum((iou[r][c] for r in range(n_true) for c in range(n_predicted)
                           if iou[r][c] > THRESHOLDS[0]), Fraction(0))

    covers = 2 * inter > area_t[:, None]  # the predicted object holds more than half of the true one
    covered_per_predicted = covers.sum(axis=0)
    lies_in = 2 * inter > area_p[None, :]  # the true object holds more than half of the predicted one
    lying_per_true = lies_in.sum(axis=1)
    return {
        "true_objects": int(n_true),
        "predicted_objects": int(n_predicted),
        "tp": tp, "fp": fp, "fn": fn,
        "dsb_exact": dsb,
        "matched_iou_sum_exact": matched_iou_sum,
        "merges": int(np.sum(covered_per_predicted >= 2)),
        "merged": int(covered_per_predicted[covered_per_predicted >= 2].sum()),
        "splits": int(np.sum(lying_per_true >= 2)),
        "split_pieces": int(lying_per_true[lying_per_true >= 2].sum()),
    }


def ratio_or_none(numerator, denominator):
    return None if denominator == 0 else float(Fraction(numerator) / Fraction(denominator))


def dataset_summary(metrics):
    tp = [sum(m["tp"][i] for m in metrics) for i in range(10)]
    fp = [sum(m["fp"][i] for m in metrics) for i in range(10)]
    fn = [sum(m["fn"][i] for m in metrics) for i in range(10)]
    iou_sum = sum((m["matched_iou_sum_exact"] for m in metrics), Fraction(0))
    tp50, fp50, fn50 = tp[0], fp[0], fn[0]
    half_errors = Fraction(fp50 + fn50, 2)
    return {
        "images": len(metrics),
        "true_objects": sum(m["true_objects"] for m in metrics),
        "predicted_objects": sum(m["predicted_objects"] for m in metrics),
        "dsb_score": ratio_or_none(sum((m["dsb_exact"] for m in metrics), Fraction(0)), len(metrics)),
        "tp": tp, "fp": fp, "fn": fn,
        "matched_iou_sum": float(iou_sum),
        "precision": ratio_or_none(tp50, tp50 + fp50),
        "recall": ratio_or_none(tp50, tp50 + fn50),
        "f1": ratio_or_none(2 * tp50, 2 * tp50 + fp50 + fn50),
        "sq": ratio_or_none(iou_sum, tp50),
        "rq": ratio_or_none(tp50, tp50 + half_errors),
        "pq": ratio_or_none(iou_sum, tp50 + half_errors),
        "merges": sum(m["merges"] for m in metrics),
        "merged": sum(m["merged"] for m in metrics),
        "splits": sum(m["splits"] for m in metrics),
        "split_pieces": sum(m["split_pieces"] for m in metrics),
    }


# ---- the cases ----------------------------------------------------------------------------------------

def blank(height, width):
    return np.zeros((height, width), dtype=np.uint32)


def merge_case():
    # Two touching objects, 8x12 (96 px) and 8x4 (32 px), predicted as one 8x16 object: IoUs 0.75 and 0.25.
    truth, predicted = blank(12, 20), blank(12, 20)
    truth[2:10, 2:14] = 1
    truth[2:10, 14:18] = 2
    predicted[2:10, 2:18] = 5
    return truth, predicted


def split_case():
    # One 8x16 object (128 px) predicted as two pieces, 8x10 and 8x6: IoUs 0.625 and 0.375.
    truth, predicted = blank(12, 20), blank(12, 20)
    truth[2:10, 2:18] = 1
    predicted[2:10, 2:12] = 1
    predicted[2:10, 12:18] = 2
    return truth, predicted


def half_coverage_case(extra):
    """Merges and splits at the edge of "more than half". True A and B (4x8, 32 px each) side by side; P holds
    16 + extra px of A and all of B, so it covers B, and A only when extra > 0. True C (4x16, 64 px) holds all
    of Q1 (4x8) and 16 + extra of Q2's 32 + extra px, so Q2 lies in C only when extra > 0."""
    truth, predicted = blank(14, 24), blank(14, 24)
    truth[1:5, 2:10] = 1
    truth[1:5, 10:18] = 2
    predicted[1:5, 6:18] = 3
    predicted[1, 6 - extra:6] = 3
    truth[8:12, 2:18] = 4
    predicted[8:12, 2:10] = 5
    predicted[8:12, 14:22] = 6
    predicted[8, 14 - extra:14] = 6
    return truth, predicted


def squares(ids, size=10, gap=2, columns=5):
    """Objects laid out as size x size squares on a grid; returns the image and each square's corner."""
    rows = (len(ids) + columns - 1) // columns
    image = blank(rows * (size + gap) + gap, columns * (size + gap) + gap)
    corners = []
    for k, object_id in enumerate(ids):
        y, x = gap + (k // columns) * (size + gap), gap + (k % columns) * (size + gap)
        image[y:y + size, x:x + size] = object_id
        corners.append((y, x))
    return image, corners


def inside_case(pixels):
    """10x10 true squares, each predicted by the first `pixels[k]` pixels of its square in row-major order
    (a prediction inside the truth): IoU = pixels / 100 exactly."""
    truth, corners = squares(list(range(1, len(pixels) + 1)))
    predicted = blank(*truth.shape)
    for k, ((y, x), n) in enumerate(zip(corners, pixels)):
        block = np.zeros(100, dtype=np.uint32)
        block[:n] = 100 + k
        predicted[y:y + 10, x:x + 10] = block.reshape(10, 10)
    return truth, predicted


def shifted_case():
    # Rectangles h x w predicted by the same rectangle shifted s columns: IoU = (w - s) / (w + s). Exactly
    # 0.5 (w 9, s 3), 0.6 (w 8, s 2 and w 12, s 3), 0.7 (w 17, s 3), 0.75 (w 14, s 2), 0.8 (w 18, s 2) and
    # 0.9 (w 19, s 1); near them 0.5714 (w 11, s 3), 0.625 (w 13, s 3), 0.6842 (w 16, s 3) and 0.7037
    # (w 23, s 4).
    shapes = [(6, 9, 3), (5, 8, 2), (4, 12, 3), (3, 17, 3), (4, 14, 2), (3, 18, 2), (5, 19, 1), (4, 11, 3),
              (4, 13, 3), (3, 16, 3), (3, 23, 4)]
    height = sum(h + 2 for h, _, _ in shapes) + 2
    truth, predicted = blank(height, 32), blank(height, 32)
    y = 2
    for k, (h, w, s) in enumerate(shapes):
        truth[y:y + h, 2:2 + w] = 1 + k
        predicted[y:y + h, 2 + s:2 + s + w] = 50 + k
        y += h + 2
    return truth, predicted


def large_ids_case():
    # Ids far from 1..n: 70000, 2^32 - 1 (the largest ObjectId), 3 in the truth; 65536, 2^31, 12 predicted.
    truth, predicted = blank(16, 24), blank(16, 24)
    truth[1:7, 1:9] = 70000
    truth[1:7, 12:20] = 4294967295
    truth[9:15, 1:9] = 3
    predicted[1:7, 2:9] = 65536          # 42 of 48 px: IoU 0.875
    predicted[1:7, 12:22] = 2147483648   # 48 px inside 60: IoU 0.8
    predicted[10:15, 10:20] = 12         # touches nothing: a false positive; 3 is missed
    return truth, predicted


def disks(rng, height, width, count, first_id):
    """Overlapping disks drawn in order (a later disk covers an earlier one), ids from first_id upward
    in random steps; returns the image and each disk (cy, cx, r, id)."""
    image = blank(height, width)
    yy, xx = np.mgrid[0:height, 0:width]
    drawn = []
    object_id = first_id
    for _ in range(count):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        r = rng.uniform(3, 9)
        image[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = object_id
        drawn.append((cy, cx, r, object_id))
        object_id += int(rng.integers(1, 5000))
    return image, drawn


def random_scene(seed):
    """A 64x64 scene of 5-15 overlapping disks, and a prediction of it: each disk moved and resized a little,
    some missed, a few spurious ones, and now and then two neighbours drawn as one blob."""
    rng = np.random.default_rng(seed)
    height = width = 64
    truth, drawn = disks(rng, height, width, int(rng.integers(5, 16)), int(rng.integers(1, 100000)))
    predicted = blank(height, width)
    yy, xx = np.mgrid[0:height, 0:width]
    next_id = int(rng.integers(1, 1000))
    for cy, cx, r, _ in drawn:
        if rng.random() < 0.15:
            continue  # missed
        cy += rng.normal(0, 1.2)
        cx += rng.normal(0, 1.2)
        r = max(1.5, r * rng.uniform(0.8, 1.2))
        if rng.random() < 0.2:
            # Split: two half-disks with their own ids.
            disk = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            predicted[disk & (xx < cx)] = next_id
            predicted[disk & (xx >= cx)] = next_id + 1
            next_id += 2
            continue
        predicted[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = next_id
        next_id += 1
    if len(drawn) >= 2 and rng.random() < 0.8:
        # Merge: the first two disks' pixels as one predicted object.
        a, b = drawn[0], drawn[1]
        predicted[((yy - a[0]) ** 2 + (xx - a[1]) ** 2 <= a[2] ** 2)
                  | ((yy - b[0]) ** 2 + (xx - b[1]) ** 2 <= b[2] ** 2)] = next_id
        next_id += 1
    for _ in range(int(rng.integers(0, 3))):
        cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(2, 5)
        predicted[(yy - cy) ** 2 + (xx - cx) ** 2 <= r * r] = next_id
        next_id += 1
    return truth, predicted


def cases():
    out = []
    out.append(("merge_two_touching", *merge_case()))
    out.append(("split_one_in_two", *split_case()))
    out.append(("empty_both", blank(8, 12), blank(8, 12)))
    truth, _ = squares([1, 2, 3])
    out.append(("empty_truth_with_predictions", blank(*truth.shape), squares([7, 8, 9])[0]))
    out.append(("all_missed", truth, blank(*truth.shape)))
    perfect, _ = squares([4, 9, 16, 25, 36, 49])
    out.append(("perfect", perfect, np.where(perfect > 0, perfect * 3 + 1, 0).astype(np.uint32)))
    out.append(("iou_exactly_at_thresholds", *inside_case([50, 55, 60, 65, 70, 75, 80, 85, 90, 95])))
    out.append(("iou_just_above_thresholds", *inside_case([51, 56, 61, 66, 71, 76, 81, 86, 91, 96])))
    out.append(("iou_just_below_thresholds", *inside_case([49, 54, 59, 64, 69, 74, 79, 84, 89, 94])))
    out.append(("shifted_objects", *shifted_case()))
    out.append(("large_ids", *large_ids_case()))
    out.append(("exactly_half_covered", *half_coverage_case(0)))
    out.append(("just_over_half_covered", *half_coverage_case(1)))
    for seed in (1, 2, 3, 4):
        out.append((f"random_disks_{seed}", *random_scene(seed)))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/object_metrics_reference.py tests/data/object_cases.json")
    image_cases = []
    metrics_by_name = {}
    for name, truth, predicted in cases():
        assert truth.shape == predicted.shape
        m = image_metrics(truth, predicted)
        metrics_by_name[name] = m
        image_cases.append({
            "name": name,
            "height": int(truth.shape[0]),
            "width": int(truth.shape[1]),
            "truth": [int(v) for v in truth.ravel()],
            "predicted": [int(v) for v in predicted.ravel()],
            "true_objects": m["true_objects"],
            "predicted_objects": m["predicted_objects"],
            "dsb_score": float(m["dsb_exact"]),
            "tp": m["tp"], "fp": m["fp"], "fn": m["fn"],
            "matched_iou_sum": float(m["matched_iou_sum_exact"]),
            "merges": m["merges"], "merged": m["merged"],
            "splits": m["splits"], "split_pieces": m["split_pieces"],
        })
        print(f"{name:28s} {truth.shape[0]:3d}x{truth.shape[1]:<3d} true {m['true_objects']:2d} "
              f"predicted {m['predicted_objects']:2d}  dsb {float(m['dsb_exact']):.6f}  "
              f"tp@t {m['tp']}  merges {m['merges']} ({m['merged']})  "
              f"splits {m['splits']} ({m['split_pieces']})")

    dataset_cases = []
    all_names = [c["name"] for c in image_cases]
    for name, images in [("all_images", all_names),
                         ("random_scenes", [n for n in all_names if n.startswith("random")]),
                         ("empty_only", ["empty_both"])]:
        summary = dataset_summary([metrics_by_name[n] for n in images])
        dataset_cases.append({"name": name, "images": images, "summary": summary})
        shown = {k: v for k, v in summary.items() if k not in ("tp", "fp", "fn")}
        print(f"dataset {name}: {json.dumps(shown)}")

    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump({"generator": "bench/object_metrics_reference.py", "images": image_cases,
                   "datasets": dataset_cases}, out, separators=(",", ":"))
        out.write("\n")
    print(f"wrote {sys.argv[1]}")


if __name__ == "__main__":
    main()
