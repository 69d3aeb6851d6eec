// How much memory a config needs on each device, before anything is trained. The planner builds the run's
// replicas on PlanningBackends and runs the real schedule (a training step over its first two micro-batches,
// which the later ones repeat exactly, the optimizer step, a validation pass, and the training step again, as
// the cache settles) against counting allocators: its prediction is the engine's own allocation pattern,
// block for block, not a formula.
//
// It also answers what to do when a config does not fit: each remedy (a higher memory cap, mixed precision,
// activation checkpointing, gradient accumulation with the same effective batch, more devices, a smaller
// image or patch, separable convolutions, half the width) is planned in turn and ranked. The largest batch
// that fits is plan/batch_fit.h's, the largest patch plan/patch_fit.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/core/memory.h"
#include "unet/model/unet.h"

namespace unet {

struct DevicePlan {
  std::string device;  // "cpu:0"
  std::string name;
  std::int64_t batch = 0;          // this device's share of a micro-batch
  std::int64_t capacity = 0;       // the device's bytes (a CPU replica: its share of the host's), or the cap
  std::int64_t peak = 0;           // predicted peak in use
  std::int64_t peak_reserved = 0;  // predicted peak held by the caching allocator
  CategoryBytes at_peak{};         // in use by category at the peak
  CategoryBytes peak_by{};         // each category's own peak
  // What the device holds beyond the allocator (a GPU's context, cuDNN, NCCL): 0 on CPUs; on GPUs as the
  // first run there measured it (plan/device_overhead.h), -1 until then.
  std::int64_t overhead = 0;
  std::string overhead_measured;  // when (GPUs), ISO 8601 UTC
  std::int64_t device_peak = 0;  // the device's own reading at the peak: peak_reserved + overhead; -1 unknown
  bool fits = true;              // the planned run completes within capacity
  // Why capacity is less than the device's bytes, when something else sets it: the address-space limit
  // (fit_address_space_limit). Empty: the device's bytes, or memory.cap_mib.
  std::string capacity_note;
};

struct MemoryPlan {
  std::vector<DevicePlan> devices;
  bool fits = true;
  double seconds = 0;  // how long planning took
};

struct DataParallelOptions;
struct DeviceInfo;

// The replicated step the planner runs for `config`: step_options() on the config's devices, the step the
// trainer runs, on PlanningBackends that count instead of compute, with a communicator that only makes the
// replicas meet where a real sum would; under memory.cap_mib when `capped`, else uncapped (what the run
// needs). Exposed for tests: the planner plans the trainer's step.
DataParallelOptions planned_step_options(const Config& config, bool capped);

// A device's capacity for a run: its bytes (a CPU replica: its share of the host's, with `cpu_replicas` of
// the run sharing it), or `cap_bytes` (memory.cap_bytes()) when one is set and smaller. Where the device's
// bytes are unknown (total_bytes <= 0) the cap is the capacity; without a cap too, the capacity is unknown
// (total_bytes as it is, <= 0).
std::int64_t device_capacity(const DeviceInfo& device, std::int64_t cpu_replicas, std::int64_t cap_bytes);

// The planner's schedule run for real on `config`'s devices, with synthetic images: what plan_memory()
// predicts, measured. For tests and benchmarks.
std::vector<MemoryStats> measure_memory(const Config& config);

// Plans `config` on its devices. Throws like the trainer would for a config it cannot run (unsupported
// precision on a device, CUDA unavailable).
MemoryPlan plan_memory(const Config& config);

struct AddressSpace;
// Under an address-space limit (ulimit -v), the CPU replicas have only what the limit leaves after what the
// process maps (`space`, read once the data is in memory), less room for the run's threads' stacks and
// oneDNN's generated code, and for what the run holds on the host beside the replicas' allocators (the
// checkpoint writer's copy of the weights and optimizer state, the prefetched batches); they share the rest.
// What the caching allocator reserves must fit, since every reserved byte is mapped. Lowers those devices'
// capacity (capacity_note says why) and their `fits`; returns whether any was lowered. Nothing changes
// without a limit.
bool fit_address_space_limit(MemoryPlan& plan, const Config& config, const AddressSpace& space);

struct Remedy {
  std::string name;         // "mixed-bf16", "accumulation x2", ...
  std::string description;  // one line for a user
  nlohmann::json changes;   // dotted key -> value, as --set takes them: {"train.batch_size": 4, ...}
  bool changes_model = false;
  MemoryPlan plan;
};

struct PlanningProgress;  // plan/remedy_search.h

// What would make `config` fit, best first: remedies that fit, the least intrusive first; then the others by
// predicted peak. Each is the config with `changes` applied. A remedy that does not fit is offered only when
// it lowers the peak by at least 1 %, and no two remedies make the same changes. Besides the fixed ones
// (precision, checkpointing, accumulation, devices, the model's), two are searched (plan/remedy_search.h):
// a memory cap raised to what the run needs, and the largest smaller image size (patch size in patch mode)
// that fits.
// `planned`, when given, is plan_memory(config) already made (it is not made again). `progress`, when given,
// hears of each plan and can stop the search (it throws Error(ErrorKind::cancelled) then).
std::vector<Remedy> rank_remedies(const Config& config, const MemoryPlan* planned = nullptr,
                                  const PlanningProgress* progress = nullptr);
Config apply_changes(const Config& config, const nlohmann::json& changes);

// Activation memory layer by layer, from a planned training pass on one device: after each layer's forward,
// what the activations in use grew (or shrank) by since the previous layer's. Their sum is what the forward
// pass keeps for backward; peak_bytes is the activations' peak over forward and backward.
struct LayerMemory {
  std::string name;
  std::int64_t activation_bytes = 0;
};
struct LayerPlan {
  std::vector<LayerMemory> layers;
  std::int64_t kept_bytes = 0;  // activations alive when the forward pass ends
  std::int64_t peak_bytes = 0;  // activations' peak in the step
};
LayerPlan plan_layers(const Config& config);

// The per-layer table of `unet-train summary` and the workbench's model tab: shapes and parameters from the
// model, activation bytes kept for backward from plan_layers (the inner layers of a separable convolution
// counted with it), at the first device's share of the batch.
struct ModelSummary {
  std::vector<LayerSummary> layers;
  std::int64_t parameters = 0;
  std::int64_t batch_per_device = 0;
  std::int64_t kept_bytes = 0;  // all activations the forward pass keeps for backward
  std::int64_t peak_bytes = 0;  // the activations' peak in the step
};
ModelSummary summarize_model(const Config& config);

}  // namespace unet
