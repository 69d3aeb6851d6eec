// Training throughput and memory for a config: runs warm-up steps, then timed steps of the real training step
// (forward, loss, backward, gradient sum across replicas, Adam) on synthetic batches, and prints one JSON
// line.
//
//   unet-bench [--config F] [--set key=value]... [--steps N] [--warmup N] [--replicas-per-device N]
//
// --replicas-per-device N runs N replicas on each device of the config (configs refuse a GPU listed twice),
// so that one GPU can time several replicas' gradient sums (the device communicator) and the buckets'
// overlap.
//
// Speed is measured here, never asserted by tests.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/config/config.h"
#include "unet/data/synthetic.h"
#include "unet/step/data_parallel.h"
#include "unet/step/step_options.h"

namespace {

using namespace unet;

int usage() {
  std::fputs(
      "usage: unet-bench [--config F] [--set key=value]... [--steps N] [--warmup N] [--replicas-per-device "
      "N]\n",
      stderr);
  return 2;
}

std::optional<int> parse_count(const std::string& flag, const std::string& text, int lowest, int highest) {
  return bench::parse_count("unet-bench", flag, text, lowest, highest);
}

}  // namespace

int main(int argc, char** argv) {
  nlohmann::json doc = nlohmann::json::object();
  std::filesystem::path base_dir;
  int steps = 20, warmup = 3, replicas_per_device = 1;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (i + 1 >= argc) return usage();
      const std::string v = argv[++i];
      if (a == "--config") {
        doc = read_config_document(v);
        base_dir = std::filesystem::absolute(v).parent_path();
      } else if (a == "--set") {
        apply_override(doc, v);
      } else if (a == "--steps") {
        const auto n = parse_count(a, v, 1, 1000000);
        if (!n) return 2;
        steps = *n;
      } else if (a == "--replicas-per-device") {
        const auto n = parse_count(a, v, 1, 64);
        if (!n) return 2;
        replicas_per_device = *n;
      } else if (a == "--warmup") {
        const auto n = parse_count(a, v, 0, 1000000);
        if (!n) return 2;
        warmup = *n;
      } else {
        return usage();
      }
    }
    const Config c = config_from_json(doc, base_dir);

    // The trainer's step (step_options), on every device `replicas_per_device` times.
    std::vector<DeviceId> replicas;
    for (const DeviceId& d : c.devices)
      replicas.insert(replicas.end(), static_cast<std::size_t>(replicas_per_device), d);
    DataParallel dp(step_options(c, replicas));
    dp.set_parameters(UNet::initial_slab(c.model, c.train.seed));

    const std::int64_t per_step = c.train.batch_size * c.train.accumulation;
    SyntheticCells cells({.count = static_cast<std::size_t>(per_step),
                          .height = c.data.image_height,
                          .width = c.data.image_width,
                          .channels = c.model.in_channels,
                          .classes = c.model.classes,
                          .seed = c.data.seed});
    StepBatches step;
    std::size_t next = 0;
    for (std::int64_t j = 0; j < c.train.accumulation; ++j) {
      std::vector<HostBatch> shares(static_cast<std::size_t>(dp.replicas()));
      const auto sizes = replica_split(c.train.batch_size, dp.replicas());
      for (int r = 0; r < dp.replicas(); ++r) {
        std::vector<std::size_t> samples;
        for (std::int64_t k = 0; k < sizes[static_cast<std::size_t>(r)]; ++k) samples.push_back(next++);
        const std::vector<std::int64_t> positions(samples.size(), 0);
        assemble_batch(cells, samples, positions, 0, false, 0, shares[static_cast<std::size_t>(r)]);
      }
      step.micro.push_back(std::move(shares));
    }

    // The steps' times, sorted, after the warm-up.
    const auto time_steps = [&](DataParallel& parallel) {
      const auto run_step = [&] {
        const StepOutcome out = parallel.compute_gradients(step);
        if (!out.ok) std::rethrow_exception(out.error);
        parallel.apply_optimizer(
            {.lr = static_cast<float>(c.train.lr), .momentum = std::nullopt, .grad_scale = 1.0f});
      };
      for (int i = 0; i < warmup; ++i) run_step();
      for (int r = 0; r < parallel.replicas(); ++r) parallel.backend(r).allocator().reset_peak();
      std::vector<double> times;
      for (int i = 0; i < steps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        run_step();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(times.begin(), times.end());
      return times;
    };
    const std::vector<double> times = time_steps(dp);
    double total = 0;
    for (double t : times) total += t;

    nlohmann::json devices = nlohmann::json::array();
    for (int r = 0; r < dp.replicas(); ++r) {
      const MemoryStats s = dp.backend(r).allocator().stats();
      nlohmann::json by = nlohmann::json::object();
      for (int k = 0; k < memory_category_count; ++k)
        by[std::string(to_string(static_cast<MemoryCategory>(k)))] =
            s.at_peak_by[static_cast<std::size_t>(k)];
      devices.push_back({{"device", dp.backend(r).info().id},
                         {"name", dp.backend(r).info().name},
                         {"peak_bytes", s.peak_in_use},
                         {"peak_reserved_bytes", s.peak_reserved},
                         {"peak_by_category", by}});
    }
    // Several replicas: how much of the gradient sum the buckets hide behind backward. The sum alone, timed
    // on the replicas' gradients, and steps with one sum after backward and with the buckets, alternating so
    // that both see the same machine; hidden = (median one-sum step - median bucketed step) / the sum alone.
    nlohmann::json comm = nullptr;
    if (dp.replicas() > 1) {
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::vector<double> sums, one_sum, buckets;
      for (int i = 0; i < std::max(steps, 3); ++i) {
        sums.push_back(dp.time_gradient_sum());
        for (const bool bucketing : {false, true}) {
          dp.set_bucketing(bucketing);
          const auto t0 = std::chrono::steady_clock::now();
          const StepOutcome out = dp.compute_gradients(step);
          if (!out.ok) std::rethrow_exception(out.error);
          (bucketing ? buckets : one_sum)
              .push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
      }
      const double sum_s = median(sums), one_sum_s = median(one_sum), buckets_s = median(buckets);
      comm = {{"bucket_mib", c.comm.bucket_mib},
              {"sum_ms", 1e3 * sum_s},
              {"gradients_ms_median_one_sum", 1e3 * one_sum_s},
              {"gradients_ms_median_buckets", 1e3 * buckets_s},
              {"hidden_fraction", sum_s > 0 ? std::clamp((one_sum_s - buckets_s) / sum_s, 0.0, 1.0) : 0.0}};
    }
    rusage usage_now{};
    getrusage(RUSAGE_SELF, &usage_now);
    const nlohmann::json result = {{"model",
                                    {{"width", c.model.width},
                                     {"depth", c.model.depth},
                                     {"separable", c.model.separable},
                                     {"in_channels", c.model.in_channels},
                                     {"classes", c.model.classes}}},
                                   {"image_size", {c.data.image_height, c.data.image_width}},
                                   {"batch_size", c.train.batch_size},
                                   {"accumulation", c.train.accumulation},
                                   {"precision", to_string(c.precision)},
                                   {"steps", steps},
                                   {"img_per_s", static_cast<double>(per_step * steps) / total},
                                   {"step_ms_mean", 1e3 * total / steps},
                                   {"step_ms_median", 1e3 * times[times.size() / 2]},
                                   {"devices", devices},
                                   {"max_rss_bytes", static_cast<std::int64_t>(usage_now.ru_maxrss) * 1024},
                                   {"cpu_native_bf16", cpu_has_native_bf16()},
                                   {"comm", comm}};
    std::cout << result.dump() << std::endl;
    return 0;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "unet-bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unet-bench: %s\n", e.what());
    return 1;
  }
}
