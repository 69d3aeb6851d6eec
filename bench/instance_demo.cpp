// Issue 27's claim on the built-in demo: a U-Net trained on instances (task "instances") finds the touching
// cells as objects better than the same U-Net trained on the binary mask, post-processed the same way.
//
//   unet-instance-demo-bench [--epochs N] [--samples N] [--seed N] [--targets LIST] [--runs DIR]
//
// Each model of LIST (default "semantic,boundary"; "weight_map" too) is trained on the demo (the synthetic
// cells of Config's defaults: 512 samples of 128 x 128, width 16, depth 4, batch 8, 10 epochs, a tenth held
// out) with the same seed, so that every model sees the same images in the same order. Then each model's
// validation images are predicted, their objects found by the same post-processing (objects/
// instance_extraction: seeds grown by a watershed; a binary model's sigmoid is both maps) at the thresholds
// of the same grid that score best, and scored against the cells' instance labels (the DSB 2018 score, F1 at
// IoU 0.5, panoptic quality, merges and splits). One JSON line per model, then one comparing them.
//
// The runs are written under --runs DIR (kept; a folder that exists is refused) or a temporary folder
// (removed). Figures are printed, never asserted.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_args.h"
#include "unet/config/config.h"
#include "unet/data/synthetic.h"
#include "unet/infer/predictor.h"
#include "unet/objects/threshold_search.h"
#include "unet/step/data_plan.h"
#include "unet/train/trainer.h"

namespace {

using namespace unet;
namespace fs = std::filesystem;

constexpr const char* program = "unet-instance-demo-bench";

int usage() {
  std::fprintf(stderr,
               "usage: %s [--epochs N] [--samples N] [--seed N] [--targets semantic,boundary,weight_map] "
               "[--runs DIR]\n",
               program);
  return 2;
}

// The last validation's report, for the pixel IoU and (task instances) the trainer's own object metrics.
struct LastEpoch : TrainerObserver {
  std::optional<EpochReport> report;
  void on_epoch(const EpochReport& r) override {
    if (!r.within_epoch) report = r;
  }
};

// The demo's config, trained as `target` says: "semantic" (the binary mask), "boundary" or "weight_map".
Config demo_config(const std::string& target, int epochs, int samples, int seed, const fs::path& run_dir) {
  nlohmann::json j = {{"data", {{"synthetic_samples", samples}, {"seed", seed}}},
                      {"train", {{"epochs", epochs}, {"seed", seed}}},
                      {"checkpoint", {{"dir", run_dir.string()}, {"every_epochs", 0}}}};
  if (target != "semantic") {
    j["task"] = "instances";
    j["instances"] = {{"target", target}};
    j["model"] = {{"classes", target == "boundary" ? 3 : 1}};
  }
  return config_from_json(j);
}

// The demo's validation images as 8-bit images (what a user would predict) and their cells' instance labels.
struct ValidationSet {
  std::vector<Image> images;
  std::vector<std::string> names;
  std::vector<LabelImage> truths;
};

ValidationSet validation_set(const Config& instances_config) {
  const auto dataset = make_dataset(instances_config);
  const DataSplit split =
      split_dataset(dataset->size(), instances_config.data.val_fraction, instances_config.data.seed);
  ValidationSet v;
  for (const std::size_t i : split.val) {
    Sample sample = dataset->get(i);
    v.images.push_back(eight_bit_image(sample));
    v.names.push_back(sample.source);
    v.truths.push_back(std::move(sample.instances));
  }
  return v;
}

nlohmann::json measure(const std::string& target, const Config& c, const ValidationSet& validation) {
  LastEpoch last;
  const auto started = std::chrono::steady_clock::now();
  Trainer trainer(c, &last);
  trainer.run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!last.report)
    throw Error(ErrorKind::data, target + ": the run reported no validation (data.val_fraction 0?)");

  const std::vector<Prediction> predicted =
      Predictor(c, trainer.snapshot().parameters, DeviceId{}).predict(validation.images, validation.names);
  std::vector<ObjectMaps> maps;
  for (std::size_t k = 0; k < predicted.size(); ++k) {
    const Prediction& p = predicted[k];
    maps.push_back(object_maps(p.probabilities, p.height, p.width, p.channels, validation.truths[k]));
  }
  const ThresholdChoice best = best_thresholds(maps, c.instances.min_size);
  const ObjectMetricsSummary& m = best.metrics;
  nlohmann::json line = {{"model", target},
                         {"epochs", last.report->epoch},
                         {"val_images", m.images},
                         {"val_iou", last.report->val_iou},
                         {"dsb", m.dsb_score},
                         {"f1", m.f1},
                         {"precision", m.precision},
                         {"recall", m.recall},
                         {"pq", m.pq},
                         {"true_objects", m.true_objects},
                         {"predicted_objects", m.predicted_objects},
                         {"merges", m.merges},
                         {"splits", m.splits},
                         {"seed_threshold", best.thresholds.seed},
                         {"foreground_threshold", best.thresholds.foreground},
                         {"min_size", best.thresholds.min_size},
                         {"seconds", seconds}};
  // The trainer's own validation does the same search on the same images: the two must agree.
  if (last.report->objects) line["trainer_val_dsb"] = last.report->val_dsb;
  return line;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 10, samples = 512, seed = 0;
  std::vector<std::string> targets{"semantic", "boundary"};
  fs::path runs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    std::optional<int> n;
    if (a == "--epochs") {
      if (!(n = bench::parse_count(program, a, v, 1, 1000))) return 2;
      epochs = *n;
    } else if (a == "--samples") {
      if (!(n = bench::parse_count(program, a, v, 20, 1000000))) return 2;
      samples = *n;
    } else if (a == "--seed") {
      if (!(n = bench::parse_count(program, a, v, 0, 1 << 30))) return 2;
      seed = *n;
    } else if (a == "--targets") {
      targets = split_list(v);
      for (const std::string& t : targets) {
        if (t != "semantic" && t != "boundary" && t != "weight_map") {
          std::fprintf(stderr, "%s: --targets: '%s' is not semantic, boundary or weight_map\n", program,
                       t.c_str());
          return 2;
        }
      }
      if (targets.empty()) return usage();
    } else if (a == "--runs") {
      runs = v;
    } else {
      return usage();
    }
  }
  const bool keep = !runs.empty();
  try {
    if (keep && fs::exists(runs)) {
      std::fprintf(stderr, "%s: --runs %s exists; give a new folder\n", program, runs.c_str());
      return 2;
    }
    if (!keep) runs = fs::temp_directory_path() / ("unet-instance-demo-" + std::to_string(::getpid()));
    // Every model is scored on the same images and labels: those of the boundary config's split, which draws
    // the same images as the binary demo (synthetic.h) and the same split (the same seed and fraction).
    const ValidationSet validation =
        validation_set(demo_config("boundary", epochs, samples, seed, runs / "labels"));
    nlohmann::json comparison = {{"kind", "comparison"}};
    for (const std::string& target : targets) {
      const nlohmann::json line =
          measure(target, demo_config(target, epochs, samples, seed, runs / target), validation);
      std::cout << line.dump() << std::endl;
      comparison["dsb_" + target] = line["dsb"];
    }
    std::cout << comparison.dump() << std::endl;
    if (!keep) fs::remove_all(runs);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    if (!keep) fs::remove_all(runs);
    return 1;
  }
}
