#include "unet/train/process_agreement.h"

#include <string>

namespace unet {

void agree_on_run_start(ProcessGroup& group, const Config& c, const RunState& start, bool resuming,
                        const std::string& optimizer, const std::filesystem::path& checkpoint) {
  agree_on_config(group, c);
  // What this process starts from: its kind, step and a hash of the whole state (what training continues
  // from, so a byte-identical copy of the checkpoint agrees and another step or run does not).
  StartState from;
  const bool has_state = !start.adam_m.empty() || !start.sgd_momentum.empty();
  from.kind = !resuming   ? (start.parameters.empty() ? "a fresh model" : "a model set by the caller")
              : has_state ? "a full checkpoint"
                          : "a checkpoint without optimizer state (weights only)";
  from.step = start.position.step;
  from.file = checkpoint.string();
  from.sha256 =
      hash_of_state({&start.parameters, &start.adam_m, &start.adam_v, &start.sgd_momentum},
                    std::to_string(start.position.step) + " " + std::to_string(start.position.epoch) + " " +
                        std::to_string(start.position.epoch_step) + " " + optimizer);
  agree_on_start(group, from);
}

void agree_on_run_data(ProcessGroup& group, const Dataset& dataset, const DataSplit& split,
                       const std::vector<SampleDigest>& content) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the split's sample indices
  for (const auto* part : {&split.train, &split.val})
    for (const std::size_t i : *part) hash = (hash ^ i) * 1099511628211ull;
  agree_on_dataset(group, std::to_string(dataset.size()) + " samples of " + std::to_string(dataset.height()) +
                              "x" + std::to_string(dataset.width()) + "x" +
                              std::to_string(dataset.channels()) + " (" + std::to_string(split.train.size()) +
                              " train, " + std::to_string(split.val.size()) + " validation, split " +
                              std::to_string(hash) + ")");
  agree_on_content(group, content);
}

}  // namespace unet
