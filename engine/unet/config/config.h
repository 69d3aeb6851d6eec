// The run configuration that unet-train and the GUI share (docs/CONFIG.md). Every key is declared once, in
// config_schema(), with its type, bounds, default, help text and validation; reading, writing, --set
// overrides and the GUI's form all go through that table, so a key cannot be accepted in one place and
// rejected in another. The rule to keep: a key's default lives in the struct initialisers below, and the
// schema reads it from there.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unet/backend/cuda_options.h"
#include "unet/config/config_enums.h"
#include "unet/core/device_id.h"
#include "unet/core/dtype.h"
#include "unet/core/error.h"
#include "unet/model/unet.h"

namespace unet {

// The dtype activations and convolutions run in: f32, or the half type of a mixed precision.
DType compute_dtype(Precision p) noexcept;

struct DataConfig {
  DataSource source = DataSource::synthetic;
  std::string path;  // as written; Config::resolve() makes it usable
  std::int64_t image_height = 128, image_width = 128;
  double val_fraction = 0.1;
  bool augment = true, shuffle = true;
  std::int64_t synthetic_samples = 512;
  std::uint64_t seed = 0;
  bool skip_bad = false;                // false: any bad file stops the run before it starts
  std::int64_t max_image_side = 16384;  // the largest width or height a file may declare
  std::int64_t prefetch = 4;            // steps' batches prepared ahead by the loader's workers
  std::int64_t prefetch_mib = 1024;     // and at most this many MiB of them (0: no byte bound)
  std::int64_t workers = 0;             // threads that build them; 0: one per hardware thread, at most 8
  std::int64_t cache_mib = 2048;  // decoded samples kept in memory up to this; the rest decoded on demand
  // A run folder or its validation.json whose validation samples this run uses (instead of val_fraction and
  // seed): runs compared on the same images. Empty: val_fraction and seed choose them.
  std::string validation_split{};
  // A folder of the same layout as data.path whose samples are the validation set (val_fraction and
  // validation_split unused). Empty: validation samples come from data.path.
  std::string val_path{};
  DataMode mode = DataMode::resize;
  std::int64_t patch_height = 256, patch_width = 256;  // patch mode: the training crop
  double foreground_oversample = 0.33;                 // patch mode: share of patches centred on foreground
  std::int64_t patches_per_epoch = 0;  // patch mode: 0: the training images' area over the patch's
  // The file's channels the model reads, by index (0 first); empty: model.in_channels by the conversion
  // rules.
  std::vector<std::int64_t> channels{};
  NormalizeDesc normalize{};
  // The size of the images a training step takes: the patch in patch mode, else data.image_size.
  std::int64_t input_height() const noexcept { return mode == DataMode::patch ? patch_height : image_height; }
  std::int64_t input_width() const noexcept { return mode == DataMode::patch ? patch_width : image_width; }
  bool operator==(const DataConfig&) const = default;
};

// Training-time augmentation (unet/data/augment_draw.h, augment_warp.h): each transform's probability per
// sample and the range its value is drawn from; nnU-Net's defaults for rotation, scale and intensity, the
// U-Net paper's coarse elastic grid. data.augment is the master switch: off, none of these is read. Ranges
// are [low, high].
struct AugmentConfig {
  bool flips = true;                            // flips and quarter turns (odd turns on square images only)
  double rotation_p = 0.2, rotation_deg = 180;  // angle uniform in [-rotation_deg, rotation_deg]
  double scale_p = 0.2;
  std::array<double, 2> scale_range{0.7, 1.4};  // zoom factor: > 1 magnifies
  double elastic_p = 0;                         // off by default, as in nnU-Net: strong on small patches
  std::int64_t elastic_grid = 3;                // points per side of the coarse grid of displacements
  double elastic_sigma = 10;  // pixels: the standard deviation of each grid point's displacement
  double brightness_p = 0.15;
  std::array<double, 2> brightness_range{0.75, 1.25};  // multiplies the values
  double contrast_p = 0.15;
  std::array<double, 2> contrast_range{0.75, 1.25};  // around the mean, clipped to the old min and max
  double gamma_p = 0.3;
  std::array<double, 2> gamma_range{0.7, 1.5};  // on the values rescaled to [0, 1] by their min and max
  double noise_p = 0.1, noise_sigma = 0.1;      // Gaussian; its std uniform in [0, noise_sigma]
  double blur_p = 0.2;
  std::array<double, 2> blur_sigma{0.5, 1.0};  // Gaussian blur's sigma in pixels
  bool operator==(const AugmentConfig&) const = default;
};

// task "instances" (docs/MODEL.md, "Instance targets and post-processing"): the target made from instance
// labels, and how the network's output becomes objects again.
struct InstancesConfig {
  InstanceTarget target = InstanceTarget::boundary;
  std::int64_t boundary_width = 2;  // boundary: pixels of each object within this distance of its edge
  double border_w0 = 10.0, border_sigma = 5.0;  // weight_map: the U-Net paper's w0 and sigma (pixels)
  bool balance_classes = true;                  // weight_map: w_c balances background and foreground
  std::int64_t min_size = 16;                   // objects of fewer pixels are dropped
  // Seed and foreground thresholds on the probabilities: found on the validation set after each
  // validation when tuned, these values otherwise (and where there is no validation set).
  bool tune_thresholds = true;
  double seed_threshold = 0.5, foreground_threshold = 0.5;
  bool operator==(const InstancesConfig&) const = default;
};

struct TrainConfig {
  std::int64_t epochs = 10, steps = 0, batch_size = 8, accumulation = 1;
  double lr = 1e-3, weight_decay = 0.0;
  std::uint64_t seed = 0;
  std::int64_t val_every_steps = 0;  // > 0: validate also every this many steps, not only at epoch ends
  bool operator==(const TrainConfig&) const = default;
};

// The optimizer (docs/MODEL.md, "Optimizers"); train.lr and train.weight_decay apply to each.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.9;                          // sgd; 0: plain SGD
  bool nesterov = false;                          // sgd
  double clip_grad_norm = 0;                      // > 0: the gradients' global norm is clipped to this
  bool operator==(const OptimizerConfig&) const = default;
};

// The learning-rate schedule (docs/MODEL.md, "Learning-rate schedules"), over optimizer steps.
struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::constant;
  std::int64_t warmup_steps = 0;  // linear warm-up from warmup_start_factor x train.lr
  double warmup_start_factor = 0.01;
  std::int64_t step_epochs = 10;  // step: the rate is multiplied by gamma every step_epochs epochs
  double gamma = 0.1;             // step and plateau: the factor
  double min_lr = 0;              // cosine's floor (eta_min) and plateau's
  double power = 0.9;             // poly
  double pct_start = 0.3, div_factor = 25, final_div_factor = 1e4;  // one_cycle
  bool cycle_momentum = true;        // one_cycle: Adam's beta1 or SGD's momentum cycles 0.95 -> 0.85 -> 0.95
  std::string monitor = "val_loss";  // plateau
  std::int64_t patience = 10, cooldown = 0;
  double threshold = 1e-4;  // plateau: relative improvement that counts
  bool operator==(const ScheduleConfig&) const = default;
};

// Stops a run whose monitored metric has not improved for `patience` validations (Keras's EarlyStopping).
struct EarlyStoppingConfig {
  std::int64_t patience = 0;  // 0: off
  std::string monitor = "val_loss";
  double min_delta = 0;
  bool restore_best = false;  // the run ends with the best validation's weights (and last.safetensors too)
  bool operator==(const EarlyStoppingConfig&) const = default;
};

struct MemoryConfig {
  bool checkpointing = false, growth = true;
  std::int64_t cap_mib = 0;  // 0: no cap
  std::int64_t cap_bytes() const noexcept { return cap_mib * (std::int64_t{1} << 20); }
  bool auto_recover_oom = false;
  bool operator==(const MemoryConfig&) const = default;
};

// Read only by GPU backends, which take it as it is (BackendOptions::cuda).
using CudaConfig = CudaOptions;

// The training loss, as every backend takes it (Backend::loss).
using LossConfig = LossDesc;

// How replicas sum their gradients (docs/MODEL.md, "Data parallelism").
struct CommConfig {
  // Buckets of this many MiB are summed as backward finishes them, overlapping the sums with the rest of
  // backward; 0: one sum of all gradients after backward.
  std::int64_t bucket_mib = 25;
  std::int64_t bucket_bytes() const noexcept { return bucket_mib * (std::int64_t{1} << 20); }
  bool operator==(const CommConfig&) const = default;
};

struct CheckpointConfig {
  std::string dir = "runs/demo";
  std::int64_t every_epochs = 1;                                                  // 0: only last.safetensors
  std::string filename_template = "unet-{epoch:02d}-{val_loss:.4f}.safetensors";  // JSON key "template"
  bool save_best_only = false;
  std::string monitor = "val_loss";
  std::int64_t keep_last = 5;
  // Which value val_iou and val_dice stand for in every monitor (this one, early_stopping.monitor and
  // schedule.monitor): "mean", the mean over the foreground classes they report, or a class's index ("0" the
  // background, ...), that class's own IoU or Dice. Checked by the schema; read through
  // monitor_class_index().
  std::string monitor_class = "mean";
  bool operator==(const CheckpointConfig&) const = default;
};

// The class checkpoint.monitor_class names: none for "mean" (and for text that names no class, which the
// schema refuses).
std::optional<std::int64_t> monitor_class_index(std::string_view monitor_class);

struct Config {
  UNetSpec model;
  LossConfig loss;
  DataConfig data;
  AugmentConfig augment;
  ModelTask task = ModelTask::semantic;
  InstancesConfig instances;
  TrainConfig train;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  EarlyStoppingConfig early_stopping;
  Precision precision = Precision::fp32;
  MemoryConfig memory;
  // Parsed once, when the config is read ("cpu" is cpu:0); written back as "cpu:0", "cuda:1".
  std::vector<DeviceId> devices{DeviceId{}};
  CudaConfig cuda;
  CommConfig comm;
  CheckpointConfig checkpoint;
  // The config file's folder; relative paths in the config resolve against it. Empty: the working directory.
  std::filesystem::path base_dir;

  // Empty stays empty; absolute stays as is; relative is joined to base_dir.
  std::filesystem::path resolve(const std::string& p) const;
  bool operator==(const Config&) const = default;
};

// --- the schema --------------------------------------------------------------------------------------------

enum class ConfigType {
  integer,       // JSON integer (never 8.5 or 8.0)
  number,        // JSON number, finite
  boolean,       // JSON true/false
  string,        // JSON string
  enumeration,   // JSON string, one of choices
  path,          // JSON string, relative to the config file
  integer_pair,  // [a, b], two integers, each within min/max (data.image_size: [height, width])
  string_list,   // list of strings
  number_list,   // list of finite numbers, each within min/max (loss.class_weights)
};

const char* to_string(ConfigType t) noexcept;

// clang-tidy 16 assumes the implicit move of the std::function and nlohmann::json members may throw; both are
// noexcept.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ConfigKey {
  std::string path;  // dotted: "train.batch_size"
  ConfigType type = ConfigType::string;
  nlohmann::json default_value;  // what a missing key means
  // Bounds; inclusive unless the *_exclusive flag says otherwise. For integer keys they are whole numbers.
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
  bool unsigned64 = false;           // integer stored as uint64 (seeds); other integers must fit int64
  bool non_empty = false;            // strings and lists: "" or [] is an error
  std::vector<std::string> choices;  // enumeration: the allowed values; integer_pair: the two values' names
  std::string group;  // "Model", "Loss", "Data", "Augment", "Task", "Training", ..., "Checkpoints"
  std::string label;  // short, for a form
  std::string help;   // one or two sentences, for a tooltip or --help
  // The key's own rule beyond type, bounds and choices (device names, template syntax): the problem, if any.
  std::function<std::optional<std::string>(const nlohmann::json&)> check;
  // Between the typed Config and JSON. set() receives only values validate_value() accepted.
  std::function<nlohmann::json(const Config&)> get;
  std::function<void(Config&, const nlohmann::json&)> set;
};

// Every key, in the order of docs/CONFIG.md (which is also the order config_to_string() writes).
const std::vector<ConfigKey>& config_schema();
// nullptr for an unknown path.
const ConfigKey* find_config_key(std::string_view path);

// The problem with one value, judged on its own (type, bounds, choices, the key's check), without the key
// prefix: "must be >= 1, got 0". Cross-key rules (image size vs depth, data.path vs source) need the whole
// config.
std::optional<std::string> validate_value(const ConfigKey& key, const nlohmann::json& value);

struct ConfigProblem {
  std::string key;  // dotted path, or "" for the document itself
  std::string problem;
  bool operator==(const ConfigProblem&) const = default;
};

// Every problem in a config document, in schema order after unknown keys: for a form that marks all bad
// fields at once. Empty means config_from_json() will accept it.
std::vector<ConfigProblem> config_problems(const nlohmann::json& j);

// --- what a run can train with -----------------------------------------------------------------------------

// The rules a training run adds to a valid config (docs/CONFIG.md, "Rules a run adds"): a run that cannot
// learn (no loss term with a weight above 0, every class weighed 0, a warm-up as long as train.steps) and a
// setting the run would never read (momentum or Nesterov under adam/adamw, beta1/beta2/eps under sgd, a
// validation metric watched without validation samples). They are not part of config_problems(), because a
// checkpoint or a config for predict may hold such a config and stays readable. Judged on the Config alone;
// the trainer adds the rules that need the data and the run's length (validation_problems() for a split
// that gives no validation sample, warmup_problem() against the run's steps, the masks' labelled pixels).
std::vector<ConfigProblem> training_problems(const Config& c);

// The settings that need validation samples, for a run that has none: a plateau schedule, early stopping,
// checkpoint.monitor (best.safetensors, checkpoint.save_best_only) watching a val_ metric, and a
// checkpoint.template that names one. `why` says why there are none ("data.val_fraction is 0").
std::vector<ConfigProblem> validation_problems(const Config& c, const std::string& why);

// A warm-up at or beyond the run's `total_steps` (the whole run below train.lr); `steps_text` says where the
// count comes from ("train.steps 50", "train.epochs 3 x 20 steps per epoch").
std::optional<ConfigProblem> warmup_problem(const Config& c, std::int64_t total_steps,
                                            const std::string& steps_text);

// Throws ConfigError for the first problem, its message listing the others too; nothing when empty.
void throw_config_problems(const std::vector<ConfigProblem>& problems);

// --- reading and writing -----------------------------------------------------------------------------------

// Validates everything; throws ConfigError for the first problem ("train.batch_size: must be >= 1, got 0").
// {} is the built-in demo.
Config config_from_json(const nlohmann::json& j, const std::filesystem::path& base_dir = {});
// Every key. nlohmann::json keeps object keys sorted; config_to_string() writes them in schema order.
nlohmann::json config_to_json(const Config& c);
// The config as a file would hold it: every key, sections in schema order, `indent` spaces.
std::string config_to_string(const Config& c, int indent = 2);

// Reads a config file as JSON, without validating its keys (so that --set overrides can apply first). An
// unreadable file or bad JSON throws ConfigError naming the file and, for syntax errors, the line and column.
nlohmann::json read_config_document(const std::filesystem::path& file);
// The JSON of a config document from elsewhere (a checkpoint's stored config), under the rules a config file
// is read by: duplicate keys and nesting past kMaxJsonDepth (unet/core/json_limits.h) are refused, and bad
// JSON throws ConfigError naming `source` and the line and column.
nlohmann::json parse_config_text(std::string_view text, const std::string& source);
// Reads and validates a JSON file; base_dir becomes the file's folder (made absolute). An unreadable file or
// bad JSON throws ConfigError naming the file and, for syntax errors, the line and column.
Config load_config_file(const std::filesystem::path& file);

// `--set key=value`: the dotted key must be in the schema; nested objects are created as needed. The value is
// JSON when it parses, else the text itself; for string, enum and path keys a value that is not a JSON string
// is taken as text, so `data.path=2024` means the folder "2024". Throws ConfigError for a missing '=', an
// empty or unknown key, or a value validate_value() rejects.
void apply_override(nlohmann::json& j, std::string_view assignment);
// The key of a --set assignment ("train.lr" of " train.lr = 0.1"), trimmed as apply_override reads it.
std::string override_key(std::string_view assignment);

// --- checkpoint names --------------------------------------------------------------------------------------

// Renders a Keras-style checkpoint file name: "{epoch:02d}" -> "03", "{val_loss:.4f}" -> "0.1234",
// "{step}" -> "120". The template is a {fmt} format string (fmt::format's syntax) with named fields: epoch,
// step and the metrics loss, val_loss, val_iou, val_dice, val_acc, each with an optional {fmt} format spec
// ([[fill]align][sign][#][0][width][.precision][type]). Kept from Python's format(): type '%', and real types
// (e, f, g, ...) on epoch and step. "{{" and "}}" are literal braces. Throws
// ConfigError("checkpoint.template",
// ...) for a bad template or a metric missing from `metrics`.
std::string format_checkpoint_name(const std::string& tmpl, std::int64_t epoch, std::int64_t step,
                                   const std::map<std::string, double>& metrics);

// The names a run gives its own files in checkpoint.dir. checkpoint.template may not render any of them, nor
// a name of the run's temporary files (which begin with '.'), so that a periodic checkpoint never replaces
// the log, the last or best checkpoint, a requested one or the folder's lock.
inline constexpr std::string_view kMetricsFileName = "metrics.jsonl";
inline constexpr std::string_view kLastCheckpointName = "last.safetensors";
inline constexpr std::string_view kBestCheckpointName = "best.safetensors";
inline constexpr std::string_view kRunLockName = "run.lock";
inline constexpr std::string_view kValidationSplitName = "validation.json";  // the run's validation samples
inline constexpr std::string_view kRequestedCheckpointPrefix = "manual-step-";  // + step + ".safetensors"

// Whether `file_name` is one of the names above, a requested checkpoint's, or begins with '.' (the atomic
// writes' temporary files, "." and "..").
bool is_reserved_run_file_name(std::string_view file_name);

// Whether `file_name` is one that `tmpl` (a valid checkpoint.template) can render: its literal text with each
// field standing for the characters a number can be written with. Reserved names never match.
bool matches_checkpoint_template(const std::string& tmpl, std::string_view file_name);

}  // namespace unet
