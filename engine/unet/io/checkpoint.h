// Checkpoints: the base model, optionally Adam's moments, and where training stands, in one .safetensors
// file laid out as docs/MODEL.md "Checkpoint file" says, so that the file loads into a PyTorch module of the
// same shape and resumes on any number or kind of devices. The one non-obvious rule: the engine's slab (with
// its 64-byte alignment gaps) never reaches the file. Each parameter is written on its own, under its spec
// name and in its canonical shape, and load rebuilds the slab from the model the file's config describes,
// gaps zero.
//
// The file:
//   tensors   every parameter (module order), then, in a full checkpoint, the optimizer's state: for adam and
//             adamw optimizer.m.<name> for each, then optimizer.v.<name> for each; for sgd with momentum
//             optimizer.momentum.<name> for each (plain SGD has none); all F32, row-major. Load accepts any
//             order (other writers sort).
//   metadata  format     "unet-workbench/1"
//             config     the run's config as JSON text (config_to_string); on load its base_dir is the
//                        checkpoint's folder
//             step, epoch          decimal integers >= 0
//             loss_scale           a positive finite number (shortest text that reads back exactly)
//             metrics              JSON object text: the last epoch's metrics
//             created              ISO 8601, e.g. 2026-11-29T23:07:22Z
//             sha256               lower-case hex SHA-256 of the whole data section
//   and one key beyond the spec:
//             training_state  JSON object: what the schedule and early stopping carry between validations
//                        ({"schedule": {...}, "early_stopping": {...}}); optional, {} when absent
//             position   JSON object {"step", "epoch", "epoch_step", "loss_scale", "clean_steps"} and, when
//                        not 0, "effective_batch" and "skipped_steps" (<= step): the whole TrainingPosition
//                        but the metrics (which have their own key). Its step, epoch and loss_scale must
//                        equal the keys of those names. Optional on load, for files written by other tools to
//                        the spec alone: absent means epoch_step 0, clean_steps 0 and skipped_steps 0 (the
//                        start of an epoch, a fresh loss-scale count).
//   Other metadata keys are ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "unet/config/config.h"
#include "unet/io/run_state.h"

namespace unet {

inline constexpr std::string_view kCheckpointFormat = "unet-workbench/1";

// A run's state (io/run_state.h) with the config it was trained with.
struct Checkpoint : RunState {
  Config config;        // the run's config; config.model decides the tensors
  std::string created;  // ISO 8601; save sets the current UTC time when empty
};

// Whether a checkpoint lacks the optimizer state its config's optimizer keeps (lacks_optimizer_state,
// run_state.h): resuming from it starts the optimizer afresh.
inline bool lacks_optimizer_state(const Checkpoint& c) {
  return lacks_optimizer_state(c, c.config.optimizer);
}

enum class CheckpointKind { full, weights_only };

// Writes `c` atomically (a crash leaves the old file whole). Never writes a file load_checkpoint would
// refuse: slab sizes that do not fit config.model, a full save without both moments, an invalid config,
// position or `created` throw unet::Error(usage); a non-finite parameter or moment, or a negative second
// moment, throws unet::Error(data) naming the tensor. unet::Error(io) when the file system fails.
void save_checkpoint(const std::filesystem::path& path, const Checkpoint& c,
                     CheckpointKind kind = CheckpointKind::full);

// Reads and validates the whole file, then returns it: nothing is half-loaded. Every refusal is a unet::Error
// whose message starts with the file's path: ErrorKind::io when the file is not a valid checkpoint (the
// safetensors rules, the format, a missing or unreadable metadata key, a checksum mismatch), ErrorKind::data
// when a well-formed file does not fit itself (a config the config rules refuse, missing, unexpected or
// misshapen tensors, a partial optimizer state, non-finite values). The slabs' gaps are zero; the
// optimizer's slabs are empty for a weights-only file.
Checkpoint load_checkpoint(const std::filesystem::path& path);

// What a file is, from its header alone (the tensor data is not read): for a GUI's "what is this file" and
// for messages. Checks everything load_checkpoint checks but the checksum and the values themselves, with the
// same messages (only the safetensors layer's structural refusals are worded more briefly), so a file it
// accepts can still be refused by load_checkpoint as corrupt.
struct CheckpointInfo {
  Config config;
  TrainingPosition position;
  std::string created;
  bool has_optimizer = false;
  std::int64_t parameter_count = 0;  // the model's parameters, without the alignment gaps
};
CheckpointInfo inspect_checkpoint(const std::filesystem::path& path);
// The same rule as for a loaded Checkpoint, from the header alone.
inline bool lacks_optimizer_state(const CheckpointInfo& info) {
  return !info.has_optimizer && optimizer_slabs(info.config.optimizer) != OptimizerSlabs::none;
}

}  // namespace unet
