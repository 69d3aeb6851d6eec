// How fast training batches are made (issue 26: real 1024x768 images, 256x256 patches): images/s of the
// loader alone (the trainer's steps, built by data.workers threads and popped in order) with augmentation off
// and with every augmentation at p = 1, for 1, 2 and N workers; then training itself (the CPU engine, a small
// U-Net) with and without augmentation, with the mean time a step waited for its data (data_wait_s). One JSON
// line per measurement.
//
//   unet-loader-bench [--data DIR] [--steps N] [--train-steps N] [--cache-mib N]
//
// --data is a folder dataset (DIR/images, DIR/masks); by default ../shared/data/epfl-em/train when it exists
// (27 gray 1024x768 EM slices), else 16 synthetic 1024x768 images written to a temporary folder.
//
// Speed is measured here, never asserted by tests.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_args.h"
#include "unet/config/config.h"
#include "unet/data/open_dataset.h"
#include "unet/data/synthetic.h"
#include "unet/io/image.h"
#include "unet/step/data_plan.h"
#include "unet/train/epoch_plan.h"
#include "unet/train/prefetcher.h"
#include "unet/train/trainer.h"

namespace {

using namespace unet;
namespace fs = std::filesystem;

int usage() {
  std::fputs("usage: unet-loader-bench [--data DIR] [--steps N] [--train-steps N] [--cache-mib N]\n", stderr);
  return 2;
}

std::optional<int> parse_count(const std::string& flag, const std::string& text, int lowest, int highest) {
  return bench::parse_count("unet-loader-bench", flag, text, lowest, highest);
}

// 16 synthetic gray 1024x768 images and their 0/255 masks under `root`.
void write_synthetic_folder(const fs::path& root) {
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  const SyntheticCells cells({.count = 16, .height = 768, .width = 1024, .channels = 1, .seed = 3});
  for (std::size_t i = 0; i < 16; ++i) {
    const Sample s = cells.get(i);
    const std::string name = "slice" + std::to_string(i) + ".png";
    write_png(root / "images" / name, eight_bit_image(s));
    std::vector<std::uint8_t> mask(s.mask.size());
    for (std::size_t k = 0; k < mask.size(); ++k) mask[k] = s.mask[k] ? 255 : 0;
    write_png(root / "masks" / name, {s.height, s.width, 1, mask});
  }
}

// Patch mode over `data`: 256x256 patches, batch 8, gray in, binary out; every augmentation at p = 1 or none.
Config bench_config(const fs::path& data, bool augment, int cache_mib, const fs::path& run_dir) {
  nlohmann::json j = {{"model", {{"in_channels", 1}, {"classes", 1}, {"width", 8}, {"depth", 3}}},
                      {"data",
                       {{"source", "folder"},
                        {"path", data.string()},
                        {"mode", "patch"},
                        {"patch_size", {256, 256}},
                        {"augment", augment},
                        {"cache_mib", cache_mib},
                        {"val_fraction", 0.1}}},
                      {"augment",
                       {{"rotation_p", 1.0},
                        {"scale_p", 1.0},
                        {"elastic_p", 1.0},
                        {"brightness_p", 1.0},
                        {"contrast_p", 1.0},
                        {"gamma_p", 1.0},
                        {"noise_p", 1.0},
                        {"blur_p", 1.0}}},
                      {"train", {{"batch_size", 8}}},
                      {"checkpoint", {{"dir", run_dir.string()}, {"every_epochs", 0}}}};
  return config_from_json(j);
}

// Images per second of `steps` steps built by `workers` threads and popped in order, timed from the loader's
// start (the sample cache fills on the way, as it does in training).
double loader_images_per_s(const Config& c, const Dataset& dataset, int workers, int steps) {
  const BatchRecipe recipe = training_recipe(c);
  std::vector<std::size_t> train(dataset.size());
  std::iota(train.begin(), train.end(), std::size_t{0});
  const std::int64_t epoch_samples = samples_per_epoch(c, dataset, train);
  const std::int64_t batch = c.train.batch_size;
  const std::int64_t spe = std::max<std::int64_t>(1, epoch_samples / batch);
  const TrainingSteps source(c, dataset, recipe, train, epoch_samples, batch, {});
  PrefetchLimits limits = prefetch_limits(c.data);
  limits.workers = workers;
  limits.steps = std::max<std::int64_t>(limits.steps, workers);
  const auto t0 = std::chrono::steady_clock::now();
  BatchPrefetcher loader(
      [&](std::int64_t e, std::int64_t s, std::int64_t m) { return source.build(e, s, m); }, limits, 0, 0,
      spe, steps, 1);
  std::int64_t images = 0;
  double waited = 0;
  for (int i = 0; i < steps; ++i) images += loader.pop(waited).batches.samples();
  return static_cast<double>(images) /
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The steps' images, seconds and data waits of a training run.
struct StepTimes : TrainerObserver {
  std::int64_t images = 0, steps = 0;
  double seconds = 0, waited = 0;
  std::int64_t batch = 8;
  void on_step(const StepReport& r) override {
    if (r.step <= 2) return;  // warm-up: the first steps allocate and fill the cache
    ++steps;
    images += batch;
    seconds += r.step_seconds;
    waited += r.data_wait_seconds;
  }
};

}  // namespace

int main(int argc, char** argv) {
  fs::path data;
  int steps = 40, train_steps = 12, cache_mib = 2048;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) return usage();
      const std::string v = argv[++i];
      std::optional<int> n;
      if (a == "--data") {
        data = v;
        continue;
      }
      if (a == "--steps") {
        if (!(n = parse_count(a, v, 1, 100000))) return 2;
        steps = *n;
      } else if (a == "--train-steps") {
        if (!(n = parse_count(a, v, 3, 100000))) return 2;
        train_steps = *n;
      } else if (a == "--cache-mib") {
        if (!(n = parse_count(a, v, 0, 1 << 20))) return 2;
        cache_mib = *n;
      } else {
        return usage();
      }
    }
    const fs::path scratch = fs::temp_directory_path() / ("unet-loader-bench-" + std::to_string(::getpid()));
    std::string data_name = data.string();
    if (data.empty()) {
      data = "../shared/data/epfl-em/train";
      data_name = "epfl-em/train";
      if (!fs::exists(data / "images")) {
        data = scratch / "data";
        data_name = "synthetic 1024x768 x16";
        write_synthetic_folder(data);
      }
    }
    const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<int> worker_counts{1, 2};
    if (hardware > 2) worker_counts.push_back(hardware);
    for (const bool augment : {false, true}) {
      const Config c = bench_config(data, augment, cache_mib, scratch / "loader");
      for (const int workers : worker_counts) {
        const auto dataset = open_dataset(c);  // each with its cache empty
        const double rate = loader_images_per_s(c, *dataset, workers, steps);
        std::cout << nlohmann::json{{"bench", "loader"},      {"data", data_name},   {"augment", augment},
                                    {"workers", workers},     {"patch", {256, 256}}, {"batch", 8},
                                    {"cache_mib", cache_mib}, {"steps", steps},      {"img_per_s", rate}}
                         .dump()
                  << std::endl;
      }
    }
    // The first run of a process is slower all through (the backend's first primitives, the allocator's
    // first blocks): a short run before the timed ones, whichever comes first, so that both see the same.
    bool warmed_up = false;
    int run = 0;
    for (const bool augment : {false, false, true}) {
      Config c = bench_config(data, augment, cache_mib, scratch / ("run" + std::to_string(run++)));
      c.train.steps = warmed_up ? train_steps : 3;
      StepTimes times;
      Trainer trainer(c, &times);
      trainer.run();
      if (!std::exchange(warmed_up, true)) continue;
      std::cout << nlohmann::json{{"bench", "training"},
                                  {"data", data_name},
                                  {"augment", augment},
                                  {"workers", prefetch_limits(c.data).workers},
                                  {"model", {{"width", c.model.width}, {"depth", c.model.depth}}},
                                  {"steps_timed", times.steps},
                                  {"img_per_s", times.seconds > 0 ? times.images / times.seconds : 0.0},
                                  {"data_wait_s_mean", times.steps ? times.waited / times.steps : 0.0}}
                       .dump()
                << std::endl;
    }
    fs::remove_all(scratch);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unet-loader-bench: %s\n", e.what());
    return 1;
  }
}
