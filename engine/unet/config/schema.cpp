// The key table: every config key declared once, with its type, bounds, group, label, help text, its own
// check where it has one, and how it is read from and written to the typed Config (config.h says why). Also
// how a dotted path finds its key or section. What is checked with the table is in validate.cpp.
#include <algorithm>
#include <cstdint>

#include "unet/backend/communicator_choice.h"
#include "unet/config/checkpoint_name.h"
#include "unet/config/config.h"
#include "unet/config/schema_rows.h"
#include "unet/config/schema_rules.h"

namespace unet {

using config_detail::check_template;
using config_detail::section_of;
using config_detail::show;

namespace {

using json = nlohmann::json;
using schema_rows::add_augment_keys;
using schema_rows::add_data_keys;
using schema_rows::add_instance_keys;
using schema_rows::bind;
using schema_rows::bind_names;
using schema_rows::kMaxBatch;
using schema_rows::kMaxEpochs;
using schema_rows::kMaxImageSide;
using schema_rows::kMaxSamples;
using schema_rows::kMaxSteps;
using schema_rows::SchemaRows;

// --- devices -----------------------------------------------------------------------------------------------

std::optional<std::string> check_devices(const json& v) {
  std::vector<DeviceId> seen;
  std::optional<DeviceId> first_cpu, first_cuda;
  for (const json& e : v) {
    const std::optional<DeviceId> device = parse_device(e.get_ref<const std::string&>());
    if (!device) return show(e) + " is not a device; use " + device_forms() + " (N = 0, 1, ...)";
    // Two replicas on one GPU sum through the device communicator, which tests use; for a run, a larger
    // batch on one replica does the same work with less memory, and NCCL refuses it.
    if (std::find(seen.begin(), seen.end(), *device) != seen.end())
      return "lists " + device->str() + " twice" +
             (device->kind == DeviceKind::cuda
                  ? std::string(": NCCL cannot put two replicas on one GPU; for a larger batch than fits, "
                                "use train.accumulation, which splits it exactly")
                  : std::string());
    seen.push_back(*device);
    std::optional<DeviceId>& first = device->kind == DeviceKind::cpu ? first_cpu : first_cuda;
    if (!first) first = *device;
  }
  if (first_cpu && first_cuda)
    return "cannot mix CPU and CUDA devices in one run, got " + first_cpu->str() + " and " +
           first_cuda->str();
  return std::nullopt;
}

std::vector<ConfigKey> build_schema() {
  std::vector<ConfigKey> keys;
  SchemaRows rows{keys};

  // Model: the ranges validate(UNetSpec) enforces.
  bind(rows.integer("model.in_channels", "Model", "Input channels",
                    "Channels of the input images: 1 grayscale, 3 RGB.", 1, 64),
       &Config::model, &UNetSpec::in_channels);
  bind(
      rows.integer("model.classes", "Model", "Classes",
                   "Output channels: 1 for binary masks (sigmoid), more for one channel per class (softmax).",
                   1, 255),
      &Config::model, &UNetSpec::classes);
  bind(rows.integer("model.width", "Model", "Base width",
                    "Channels of the first level; each level down doubles them.", 1, 1024),
       &Config::model, &UNetSpec::width);
  bind(rows.integer("model.depth", "Model", "Depth",
                    "Down-sampling levels; image height and width must be multiples of 2^depth.", 1, 6),
       &Config::model, &UNetSpec::depth);
  bind(rows.add("model.separable", ConfigType::boolean, "Model", "Separable convolutions",
                "Depthwise-separable 3x3 convolutions: fewer parameters and less compute."),
       &Config::model, &UNetSpec::separable);

  // Loss: docs/MODEL.md, "Losses". The cross-key rules against model.classes are in config_problems().
  {
    // The kinds, their names and help text: the table kLossKinds in unet/loss/terms.h.
    ConfigKey& k = rows.add("loss.kind", ConfigType::enumeration, "Loss", "Loss", "");
    k.help = loss_kinds_help();
    k.choices = loss_kind_names();
    k.get = [](const Config& c) { return json(to_string(c.loss.kind)); };
    k.set = [](Config& c, const json& v) { c.loss.kind = *parse_loss_kind(v.get<std::string>()); };
  }
  {
    ConfigKey& k =
        rows.add("loss.cross_entropy_weight", ConfigType::number, "Loss", "Cross-entropy weight",
                 "The cross-entropy (or focal) term's weight, in every loss kind that has the term "
                 "(alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::cross_entropy_weight);
  }
  {
    ConfigKey& k =
        rows.add("loss.dice_weight", ConfigType::number, "Loss", "Dice weight",
                 "The Dice term's weight, in every loss kind that has the term (alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::dice_weight);
  }
  {
    ConfigKey& k = rows.add("loss.focal_gamma", ConfigType::number, "Loss", "Focal gamma",
                            "Focal kinds: the focusing exponent of (1 - p_t)^gamma; 0 gives cross-entropy.");
    k.min = 0;
    k.max = 100;
    bind(k, &Config::loss, &LossConfig::focal_gamma);
  }
  {
    ConfigKey& k =
        rows.add("loss.focal_alpha", ConfigType::number, "Loss", "Focal alpha",
                 "Focal kinds, binary models only: the foreground's weight alpha (the background's 1 - "
                 "alpha), as torchvision's sigmoid_focal_loss; -1 turns it off.");
    k.min = -1;
    k.max = 1;
    k.check = [](const json& v) -> std::optional<std::string> {
      const double a = v.get<double>();
      if (a < 0 && a != -1) return "must be -1 (off) or in [0, 1], got " + show(v);
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::focal_alpha);
  }
  {
    ConfigKey& k =
        rows.add("loss.class_weights", ConfigType::number_list, "Loss", "Class weights",
                 "One weight per class, background first (a binary model: [background, foreground]); "
                 "they weight each pixel's cross-entropy/focal term by its class, and the Dice term's "
                 "mean over classes. Empty: all 1.");
    k.min = 0;
    k.check = [](const json& v) -> std::optional<std::string> {
      if (v.size() > static_cast<std::size_t>(kMaxLossClasses - 1))
        return "holds " + std::to_string(v.size()) + " weights; a model has at most 255 classes";
      if (!v.empty() && std::all_of(v.begin(), v.end(), [](const json& w) { return w.get<double>() == 0; }))
        return std::string("must hold at least one weight > 0");
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::class_weights);
  }
  bind(rows.integer(
           "loss.ignore_index", "Loss", "Ignore label",
           "A mask value whose pixels add no loss, no gradient and no metric (unlabelled pixels, e.g. "
           "255); -1: none.",
           -1, 255),
       &Config::loss, &LossConfig::ignore_index);
  {
    ConfigKey& k =
        rows.add("loss.dice_smooth", ConfigType::number, "Loss", "Dice smoothing",
                 "s in (2 sum(p t) + s) / (sum(p) + sum(t) + s): keeps Dice defined for a class absent "
                 "from an image and its prediction.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::loss, &LossConfig::dice_smooth);
  }
  bind(rows.add(
           "loss.dice_include_background", ConfigType::boolean, "Loss", "Dice of the background",
           "Include class 0 (the background) in the Dice term's mean over classes; false, as nnU-Net, scores "
           "the foreground classes only."),
       &Config::loss, &LossConfig::dice_include_background);

  add_data_keys(rows);
  add_augment_keys(rows);
  add_instance_keys(rows);

  bind(rows.integer("train.epochs", "Training", "Epochs", "Passes over the training set.", 1, kMaxEpochs),
       &Config::train, &TrainConfig::epochs);
  bind(rows.integer("train.steps", "Training", "Steps", "Optimizer steps to run; > 0 overrides epochs.", 0,
                    kMaxSteps),
       &Config::train, &TrainConfig::steps);
  bind(rows.integer("train.batch_size", "Training", "Batch size", "The global batch: all devices together.",
                    1, kMaxBatch),
       &Config::train, &TrainConfig::batch_size);
  bind(rows.integer("train.accumulation", "Training", "Gradient accumulation",
                    "Micro-batches whose gradients are summed before each optimizer step.", 1, kMaxBatch),
       &Config::train, &TrainConfig::accumulation);
  {
    ConfigKey& k =
        rows.add("train.lr", ConfigType::number, "Training", "Learning rate", "The optimizer's step size.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::train, &TrainConfig::lr);
  }
  {
    ConfigKey& k =
        rows.add("train.weight_decay", ConfigType::number, "Training", "Weight decay",
                 "Added to the gradient as weight_decay x weight (L2) by adam and sgd; decoupled by adamw "
                 "(each weight multiplied by 1 - lr x weight_decay); 0 turns it off.");
    k.min = 0;
    bind(k, &Config::train, &TrainConfig::weight_decay);
  }
  bind(rows.seed("train.seed", "Training", "Seeds the weight initialisation."), &Config::train,
       &TrainConfig::seed);
  bind(rows.integer(
           "train.val_every_steps", "Training", "Validate every N steps",
           "> 0: validate also every this many optimizer steps, for long epochs; best.safetensors, the "
           "plateau schedule and early stopping see each validation. 0: at each epoch's end only.",
           0, kMaxSteps),
       &Config::train, &TrainConfig::val_every_steps);

  // A number key with inclusive bounds unless said otherwise.
  const auto number = [&rows](std::string path, const char* group, const char* label, const char* help,
                              std::optional<double> min, std::optional<double> max) -> ConfigKey& {
    ConfigKey& k = rows.add(std::move(path), ConfigType::number, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto choice = [&rows](std::string path, const char* group, const char* label, const char* help,
                              std::vector<std::string> choices) -> ConfigKey& {
    ConfigKey& k = rows.add(std::move(path), ConfigType::enumeration, group, label, help);
    k.choices = std::move(choices);
    return k;
  };
  // val_dsb, val_f1 and val_pq: the object metrics of task "instances" (a rule in validate.cpp).
  const std::vector<std::string> monitors{"val_loss", "val_iou", "val_dice", "val_acc",
                                          "loss",     "val_dsb", "val_f1",   "val_pq"};

  bind_names(
      rows.add("optimizer.kind", ConfigType::enumeration, "Optimizer", "Optimizer",
               "adam: torch.optim.Adam (weight decay as L2); adamw: AdamW (decoupled weight decay); sgd: "
               "SGD with momentum (Nesterov optional), as nnU-Net trains."),
      kOptimizerKindNames, [](auto& c) -> auto& { return c.optimizer.kind; });
  {
    ConfigKey& k = number("optimizer.beta1", "Optimizer", "Beta 1",
                          "adam, adamw: decay of the gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta1);
  }
  {
    ConfigKey& k = number("optimizer.beta2", "Optimizer", "Beta 2",
                          "adam, adamw: decay of the squared gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta2);
  }
  {
    ConfigKey& k = number("optimizer.eps", "Optimizer", "Epsilon",
                          "adam, adamw: added to the denominator for numerical stability.", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::eps);
  }
  {
    ConfigKey& k = number("optimizer.momentum", "Optimizer", "Momentum",
                          "sgd: momentum in [0, 1); 0 is plain SGD. nnU-Net uses 0.99 with Nesterov.", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::momentum);
  }
  bind(rows.add("optimizer.nesterov", ConfigType::boolean, "Optimizer", "Nesterov momentum",
                "sgd: Nesterov's momentum (needs optimizer.momentum > 0)."),
       &Config::optimizer, &OptimizerConfig::nesterov);
  bind(number("optimizer.clip_grad_norm", "Optimizer", "Clip gradient norm",
              "> 0: gradients whose global L2 norm exceeds this are scaled down to it before each step "
              "(torch.nn.utils.clip_grad_norm_); 0 turns clipping off. The norm is logged either way.",
              0, {}),
       &Config::optimizer, &OptimizerConfig::clip_grad_norm);

  bind_names(
      rows.add("schedule.kind", ConfigType::enumeration, "Schedule", "Learning-rate schedule",
               "constant; step (x gamma every step_epochs epochs); cosine (down to min_lr); one_cycle (up "
               "to train.lr and down, per step); poly (nnU-Net's (1 - t/T)^power); plateau (x gamma when "
               "the monitored metric stops improving)."),
      kScheduleKindNames, [](auto& c) -> auto& { return c.schedule.kind; });
  bind(rows.integer(
           "schedule.warmup_steps", "Schedule", "Warm-up steps",
           "Optimizer steps over which the rate rises linearly from warmup_start_factor x train.lr to "
           "train.lr before the schedule begins; 0: none. Not with one_cycle, which warms up itself.",
           0, kMaxSteps),
       &Config::schedule, &ScheduleConfig::warmup_steps);
  {
    ConfigKey& k = number("schedule.warmup_start_factor", "Schedule", "Warm-up start factor",
                          "The share of train.lr the warm-up starts from, in (0, 1].", 0, 1);
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::warmup_start_factor);
  }
  bind(rows.integer("schedule.step_epochs", "Schedule", "Step every (epochs)",
                    "step: the rate is multiplied by gamma every this many epochs.", 1, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::step_epochs);
  {
    ConfigKey& k = number("schedule.gamma", "Schedule", "Gamma",
                          "step and plateau: the factor the rate is multiplied by, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::gamma);
  }
  bind(number("schedule.min_lr", "Schedule", "Minimum rate",
              "cosine: the rate it ends at (eta_min); plateau: the rate it never goes below. Below train.lr.",
              0, {}),
       &Config::schedule, &ScheduleConfig::min_lr);
  {
    ConfigKey& k = number("schedule.power", "Schedule", "Power", "poly: the exponent (nnU-Net: 0.9).", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::power);
  }
  {
    ConfigKey& k = number("schedule.pct_start", "Schedule", "Rising share",
                          "one_cycle: the share of the run spent rising to train.lr, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::pct_start);
  }
  {
    ConfigKey& k = number("schedule.div_factor", "Schedule", "Start divisor",
                          "one_cycle: the rate starts at train.lr / div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::div_factor);
  }
  {
    ConfigKey& k = number("schedule.final_div_factor", "Schedule", "End divisor",
                          "one_cycle: the rate ends at the start rate / final_div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::final_div_factor);
  }
  bind(
      rows.add("schedule.cycle_momentum", ConfigType::boolean, "Schedule", "Cycle momentum",
               "one_cycle: cycle Adam's beta1 or SGD's momentum inversely to the rate, between 0.85 and 0.95 "
               "(torch.optim.lr_scheduler.OneCycleLR's default)."),
      &Config::schedule, &ScheduleConfig::cycle_momentum);
  bind(choice("schedule.monitor", "Schedule", "Plateau monitor",
              "plateau: the metric watched after each validation; losses improve downwards, the others "
              "upwards.",
              monitors),
       &Config::schedule, &ScheduleConfig::monitor);
  bind(rows.integer("schedule.patience", "Schedule", "Plateau patience",
                    "plateau: validations without improvement before the rate is lowered.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::patience);
  bind(number("schedule.threshold", "Schedule", "Plateau threshold",
              "plateau: the relative improvement that counts (1e-4: 0.01 %).", 0, {}),
       &Config::schedule, &ScheduleConfig::threshold);
  bind(rows.integer("schedule.cooldown", "Schedule", "Plateau cooldown",
                    "plateau: validations after a reduction before patience counts again.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::cooldown);

  bind(
      rows.integer("early_stopping.patience", "Early stopping", "Patience",
                   "Stop when the monitored metric has not improved for this many validations; 0 turns early "
                   "stopping off.",
                   0, kMaxEpochs),
      &Config::early_stopping, &EarlyStoppingConfig::patience);
  bind(choice("early_stopping.monitor", "Early stopping", "Monitor",
              "The metric early stopping watches; losses improve downwards, the others upwards.", monitors),
       &Config::early_stopping, &EarlyStoppingConfig::monitor);
  bind(number("early_stopping.min_delta", "Early stopping", "Minimum change",
              "An improvement smaller than this does not count.", 0, {}),
       &Config::early_stopping, &EarlyStoppingConfig::min_delta);
  bind(rows.add("early_stopping.restore_best", ConfigType::boolean, "Early stopping", "Restore best weights",
                "When early stopping ends the run, go back to the weights of its best validation: the run's "
                "model and last.safetensors are those."),
       &Config::early_stopping, &EarlyStoppingConfig::restore_best);

  {
    ConfigKey& k = rows.add("precision", ConfigType::enumeration, "Precision", "Precision",
                            "fp32, or mixed precision computing in fp16 (with loss scaling) or bf16.");
    bind_names(
        k, kPrecisionNames, [](auto& c) -> auto& { return c.precision; });
  }

  bind(rows.add(
           "memory.checkpointing", ConfigType::boolean, "Memory", "Activation checkpointing",
           "Recompute activations in the backward pass instead of keeping them: less memory, more compute."),
       &Config::memory, &MemoryConfig::checkpointing);
  bind(rows.add("memory.growth", ConfigType::boolean, "Memory", "Grow on demand",
                "Reserve device memory as it is needed rather than up front."),
       &Config::memory, &MemoryConfig::growth);
  // The upper bound keeps cap_mib * 2^20 bytes inside int64.
  bind(rows.integer("memory.cap_mib", "Memory", "Memory cap (MiB)",
                    "> 0 makes every device behave as if it had this much memory; 0: no cap.", 0,
                    static_cast<double>(INT64_MAX >> 20)),
       &Config::memory, &MemoryConfig::cap_mib);
  bind(rows.add("memory.auto_recover_oom", ConfigType::boolean, "Memory", "Recover from out-of-memory",
                "Try to continue after an out-of-memory error instead of stopping the run."),
       &Config::memory, &MemoryConfig::auto_recover_oom);

  {
    ConfigKey& k =
        rows.add("devices", ConfigType::string_list, "Devices", "Devices",
                 "cpu, cpu:N (CPU replicas, data-parallel on one CPU) or cuda:N; CPU and CUDA devices do not "
                 "mix in one run.");
    k.non_empty = true;
    k.check = check_devices;
    k.get = [](const Config& c) { return json(device_names(c.devices)); };
    k.set = [](Config& c, const json& v) {
      c.devices.clear();
      for (const json& e : v) c.devices.push_back(*parse_device(e.get_ref<const std::string&>()));
    };
  }

  bind(rows.add(
           "cuda.tf32", ConfigType::boolean, "Devices", "TF32 on GPUs",
           "GPUs only: let fp32 convolutions use TF32 tensor cores (Ampere and newer): faster, with inputs "
           "rounded to 10-bit mantissas. No effect on CPUs or in mixed precision."),
       &Config::cuda, &CudaConfig::tf32);
  bind(rows.add(
           "cuda.deterministic", ConfigType::boolean, "Devices", "Deterministic GPU convolutions",
           "GPUs only: use only convolution algorithms cuDNN reports as deterministic, so that a run repeats "
           "bit for bit on the same GPU; false may pick faster ones. No effect on CPUs."),
       &Config::cuda, &CudaConfig::deterministic);
  bind(rows.add(
           "cuda.expandable_arena", ConfigType::boolean, "Devices", "Expandable GPU memory arena",
           "GPUs only: take device memory as one address range backed page by page (2 MiB) as the run "
           "grows, so that memory is not split between block sizes and the plan's reserved bytes are exact; "
           "false: one cudaMalloc per new block, for tools that follow only cudaMalloc. Used only where the "
           "driver supports virtual memory management. No effect on CPUs."),
       &Config::cuda, &CudaConfig::expandable_arena);
  {
    ConfigKey& k =
        rows.add("cuda.communicator", ConfigType::enumeration, "Devices", "GPU communicator",
                 "Several GPUs only: how replicas sum their gradients. auto: NCCL between distinct GPUs "
                 "when it is installed, else the device communicator; nccl: NCCL or an error saying why "
                 "not; device: the project's own sum, in rank order as CPU replicas add (through peer "
                 "pointers, or the host without peer access). No effect on CPUs or one GPU.");
    k.choices = {"auto", "nccl", "device"};
    k.get = [](const Config& c) { return json(to_string(c.cuda.communicator)); };
    k.set = [](Config& c, const json& v) {
      c.cuda.communicator = *parse_communicator_choice(v.get<std::string>());
    };
  }

  {
    ConfigKey& k = rows.add(
        "cuda.comm_dtype", ConfigType::enumeration, "Devices", "GPU gradient sums in",
        "Several GPUs summing through NCCL only: f32, or bf16 (the gradients cast to bf16, summed, cast "
        "back: half the traffic between GPUs, with 8 significant bits, as PyTorch DDP's bf16 compression "
        "hook). A run whose GPUs sum otherwise (the device communicator) refuses bf16; CPU replicas always "
        "sum in f32.");
    k.choices = {"f32", "bf16"};
    k.get = [](const Config& c) { return json(c.cuda.bf16_sums ? "bf16" : "f32"); };
    k.set = [](Config& c, const json& v) { c.cuda.bf16_sums = v.get<std::string>() == "bf16"; };
  }

  bind(rows.integer(
           "comm.bucket_mib", "Devices", "Gradient bucket (MiB)",
           "Several replicas only: gradients are summed across replicas in buckets of this many MiB as "
           "backward finishes them (the decoder's first), on the last micro-batch of a step, so that the "
           "sums overlap the rest of backward; 0: one sum of all gradients after backward. The sums "
           "are the same either way.",
           0, 1024),
       &Config::comm, &CommConfig::bucket_mib);

  {
    ConfigKey& k = rows.add("checkpoint.dir", ConfigType::path, "Checkpoints", "Run folder",
                            "Where checkpoints and metrics.jsonl go; relative to the config file.");
    k.non_empty = true;
    bind(k, &Config::checkpoint, &CheckpointConfig::dir);
  }
  bind(rows.integer(
           "checkpoint.every_epochs", "Checkpoints", "Every N epochs",
           "Periodic checkpoint interval; 0 turns periodic checkpoints off (last.safetensors is still "
           "written).",
           0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::every_epochs);
  {
    ConfigKey& k =
        rows.add("checkpoint.template", ConfigType::string, "Checkpoints", "File name template",
                 "Placeholders {epoch}, {step}, {loss}, {val_loss}, {val_iou}, {val_dice}, {val_acc}, each "
                 "with an optional {fmt} format spec such as {epoch:02d}, {val_loss:.4f} or {val_acc:.1%}.");
    k.non_empty = true;
    k.check = check_template;
    bind(k, &Config::checkpoint, &CheckpointConfig::filename_template);
  }
  bind(rows.add("checkpoint.save_best_only", ConfigType::boolean, "Checkpoints", "Save best only",
                "Write a periodic checkpoint only when the monitored metric improves."),
       &Config::checkpoint, &CheckpointConfig::save_best_only);
  {
    ConfigKey& k = rows.add("checkpoint.monitor", ConfigType::enumeration, "Checkpoints", "Monitor",
                            "The metric best.safetensors follows and save_best_only compares: losses improve "
                            "downwards, the others upwards.");
    k.choices = monitors;
    bind(k, &Config::checkpoint, &CheckpointConfig::monitor);
  }
  {
    ConfigKey& k =
        rows.add("checkpoint.monitor_class", ConfigType::string, "Checkpoints", "Monitored class",
                 "Which class val_iou and val_dice follow, for best.safetensors, early stopping and the "
                 "plateau schedule alike: \"mean\" (the mean over the foreground classes) or a class's "
                 "number, 0 being the background (a binary model's foreground is 1).");
    k.check = [](const json& v) -> std::optional<std::string> {
      const std::string text = v.get<std::string>();
      if (text == "mean" || monitor_class_index(text)) return std::nullopt;
      return "must be \"mean\" or a class number from 0 to 254, got " + show(v);
    };
    bind(k, &Config::checkpoint, &CheckpointConfig::monitor_class);
  }
  bind(rows.integer("checkpoint.keep_last", "Checkpoints", "Keep last",
                    "How many of the newest periodic checkpoints to keep.", 0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::keep_last);

  const Config defaults;
  for (ConfigKey& k : keys) k.default_value = k.get(defaults);
  return keys;
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = build_schema();
  return schema;
}

const ConfigKey* find_config_key(std::string_view path) {
  for (const ConfigKey& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

const std::vector<std::string>& config_detail::section_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ConfigKey& k : config_schema()) {
      const std::string s(section_of(k.path));
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }();
  return names;
}

bool config_detail::is_section(std::string_view name) {
  const auto& names = section_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The value at a dotted path, or nullptr when it or its section is missing (or the section is not an object).
const json* config_detail::lookup(const json& j, std::string_view path) {
  const auto dot = path.find('.');
  if (dot == std::string_view::npos) {
    const auto it = j.find(std::string(path));
    return it == j.end() ? nullptr : &*it;
  }
  const auto section = j.find(std::string(path.substr(0, dot)));
  if (section == j.end() || !section->is_object()) return nullptr;
  const auto it = section->find(std::string(path.substr(dot + 1)));
  return it == section->end() ? nullptr : &*it;
}

}  // namespace unet
