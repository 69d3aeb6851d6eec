// The config contract of docs/CONFIG.md: the documented defaults, every rule's exact message naming its
// key, unknown keys with suggestions, --set overrides, config files and their errors, relative paths, and
// checkpoint file names.
#include <QTemporaryDir>
#include <clocale>
#include <fstream>
#include <limits>

#include "test_support.h"
#include "unet/config/config.h"

using namespace unet;
using json = nlohmann::json;

// Readable QCOMPARE failures for the types these tests compare.
namespace QTest {
template <>
char* toString(const std::string& s) {
  return qstrdup(s.c_str());
}
template <>
char* toString(const std::filesystem::path& p) {
  return qstrdup(p.string().c_str());
}
template <>
char* toString(const json& j) {
  return qstrdup(j.dump().c_str());
}
template <>
char* toString(const std::vector<std::string>& v) {
  return qstrdup(json(v).dump().c_str());
}
template <>
char* toString(const std::optional<std::string>& v) {
  return qstrdup(v ? v->c_str() : "(none)");
}
template <>
char* toString(const std::vector<ConfigProblem>& v) {
  std::string s;
  for (const auto& p : v) s += "[" + p.key + ": " + p.problem + "] ";
  return qstrdup(s.c_str());
}
}  // namespace QTest

namespace {

// what() of the ConfigError that config_from_json throws, or "(accepted)".
std::string error_of(const json& j) {
  try {
    config_from_json(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string override_error(json j, const std::string& assignment) {
  try {
    apply_override(j, assignment);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

void write_file(const QString& path, const std::string& text) {
  std::ofstream out(path.toStdString(), std::ios::binary);
  out << text;
}

std::string error_of_file(const std::string& file) {
  try {
    load_config_file(file);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

// The defaults of docs/CONFIG.md, written out by hand ("cpu" is the short form of "cpu:0").
const char* const kDocumentedDefaults = R"({
  "model":     { "in_channels": 3, "classes": 1, "width": 16, "depth": 4, "separable": false },
  "loss":      { "kind": "cross_entropy", "cross_entropy_weight": 1.0, "dice_weight": 1.0, "focal_gamma": 2.0,
                 "focal_alpha": 0.25, "class_weights": [], "ignore_index": -1, "dice_smooth": 1.0,
                 "dice_include_background": false },
  "data":      { "source": "synthetic", "path": "", "image_size": [128, 128], "val_fraction": 0.1,
                 "augment": true, "shuffle": true, "synthetic_samples": 512, "seed": 0,
                 "skip_bad": false, "max_image_side": 16384, "prefetch": 4, "prefetch_mib": 1024,
                 "workers": 0, "cache_mib": 2048, "validation_split": "", "val_path": "", "mode": "resize",
                 "patch_size": [256, 256], "foreground_oversample": 0.33, "patches_per_epoch": 0, "channels": [],
                 "normalize": "scale_255", "normalize_percentiles": [1.0, 99.8], "normalize_clip": false,
                 "normalize_scope": "image", "normalize_range": [0.0, 65535.0], "normalize_mean": [],
                 "normalize_std": [] },
  "augment":   { "flips": true, "rotation_p": 0.2, "rotation_deg": 180.0, "scale_p": 0.2,
                 "scale_range": [0.7, 1.4], "elastic_p": 0.0, "elastic_grid": 3, "elastic_sigma": 10.0,
                 "brightness_p": 0.15, "brightness_range": [0.75, 1.25], "contrast_p": 0.15,
                 "contrast_range": [0.75, 1.25], "gamma_p": 0.3, "gamma_range": [0.7, 1.5], "noise_p": 0.1,
                 "noise_sigma": 0.1, "blur_p": 0.2, "blur_sigma": [0.5, 1.0] },
  "task":      "semantic",
  "instances": { "target": "boundary", "boundary_width": 2, "border_w0": 10.0, "border_sigma": 5.0,
                 "balance_classes": true, "min_size": 16, "tune_thresholds": true, "seed_threshold": 0.5,
                 "foreground_threshold": 0.5 },
  "train":     { "epochs": 10, "steps": 0, "batch_size": 8, "accumulation": 1, "lr": 0.001,
                 "weight_decay": 0.0, "seed": 0, "val_every_steps": 0 },
  "optimizer": { "kind": "adamw", "beta1": 0.9, "beta2": 0.999, "eps": 1e-08, "momentum": 0.9,
                 "nesterov": false, "clip_grad_norm": 0.0 },
  "schedule":  { "kind": "constant", "warmup_steps": 0, "warmup_start_factor": 0.01, "step_epochs": 10,
                 "gamma": 0.1, "min_lr": 0.0, "power": 0.9, "pct_start": 0.3, "div_factor": 25.0,
                 "final_div_factor": 10000.0, "cycle_momentum": true, "monitor": "val_loss", "patience": 10,
                 "threshold": 0.0001, "cooldown": 0 },
  "early_stopping": { "patience": 0, "monitor": "val_loss", "min_delta": 0.0, "restore_best": false },
  "precision": "fp32",
  "memory":    { "checkpointing": false, "growth": true, "cap_mib": 0, "auto_recover_oom": false },
  "devices":   ["cpu"],
  "cuda":      { "tf32": true, "deterministic": true, "expandable_arena": true, "communicator": "auto",
                 "comm_dtype": "f32" },
  "comm":      { "bucket_mib": 25 },
  "checkpoint":{ "dir": "runs/demo", "every_epochs": 1, "template": "unet-{epoch:02d}-{val_loss:.4f}.safetensors",
                 "save_best_only": false, "monitor": "val_loss", "monitor_class": "mean", "keep_last": 5 }
})";

}  // namespace

class TestConfig : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase();
  void emptyConfigHasDocumentedDefaults();
  void documentedExampleIsTheDefault();
  void schemaDeclaresEveryKeyOnce();
  void schemaDescribesKeysForForms();
  void roundTripsEveryKey();
  void badValueNamesItsKey_data();
  void badValueNamesItsKey();
  void unknownKeys_data();
  void unknownKeys();
  void problemsListsEveryBadKey();
  void acceptsEdgeValues();
  void devicesAreNormalised();
  void precisionNames();
  void typedValuesRoundTrip_data();
  void typedValuesRoundTrip();
  void applyOverride_data();
  void applyOverride();
  void applyOverrideErrors_data();
  void applyOverrideErrors();
  void applyOverrideLeavesBadSectionsAlone();
  void overridesThenConfig();
  void loadsFileAndResolvesAgainstIt();
  void resolveWithoutFolder();
  void fileErrors_data();
  void fileErrors();
  void unreadableFiles();
  void checkpointNames_data();
  void checkpointNames();
  void checkpointNameErrors();
  void checkpointNamesIgnoreLocale();
  void trainingProblemsNameTheKeys_data();
  void trainingProblemsNameTheKeys();
  void trainingProblemsLeaveDefaultsAndReadableDocuments();
};

// moc misreads raw string literals whose braces do not balance, so it sees only the declarations above.
#ifndef Q_MOC_RUN

void TestConfig::initTestCase() {
  test::fail_on_warnings();
}

void TestConfig::emptyConfigHasDocumentedDefaults() {
  const Config c = config_from_json(json::object());
  QCOMPARE(c.model.in_channels, 3);
  QCOMPARE(c.model.classes, 1);
  QCOMPARE(c.model.width, 16);
  QCOMPARE(c.model.depth, 4);
  QCOMPARE(c.model.separable, false);
  QVERIFY(c.loss.kind == LossKind::cross_entropy);
  QCOMPARE(c.loss.cross_entropy_weight, 1.0);
  QCOMPARE(c.loss.dice_weight, 1.0);
  QCOMPARE(c.loss.focal_gamma, 2.0);
  QCOMPARE(c.loss.focal_alpha, 0.25);
  QVERIFY(c.loss.class_weights.empty());
  QCOMPARE(c.loss.ignore_index, -1);
  QCOMPARE(c.loss.dice_smooth, 1.0);
  QCOMPARE(c.loss.dice_include_background, false);
  QCOMPARE(c.data.source, DataSource::synthetic);
  QCOMPARE(c.data.path, std::string(""));
  QCOMPARE(c.data.image_height, 128);
  QCOMPARE(c.data.image_width, 128);
  QCOMPARE(c.data.val_fraction, 0.1);
  QCOMPARE(c.data.augment, true);
  QCOMPARE(c.data.shuffle, true);
  QCOMPARE(c.data.synthetic_samples, 512);
  QCOMPARE(c.data.seed, 0u);
  QCOMPARE(c.data.skip_bad, false);
  QCOMPARE(c.data.max_image_side, 16384);
  QCOMPARE(c.data.prefetch, 4);
  QCOMPARE(c.data.prefetch_mib, 1024);
  QCOMPARE(c.data.workers, 0);
  QCOMPARE(c.data.cache_mib, 2048);
  QCOMPARE(c.train.epochs, 10);
  QCOMPARE(c.train.steps, 0);
  QCOMPARE(c.train.batch_size, 8);
  QCOMPARE(c.train.accumulation, 1);
  QCOMPARE(c.train.lr, 0.001);
  QCOMPARE(c.train.weight_decay, 0.0);
  QCOMPARE(c.train.seed, 0u);
  QVERIFY(c.precision == Precision::fp32);
  QCOMPARE(c.memory.checkpointing, false);
  QCOMPARE(c.memory.growth, true);
  QCOMPARE(c.memory.cap_mib, 0);
  QCOMPARE(c.memory.auto_recover_oom, false);
  QCOMPARE(device_names(c.devices), std::vector<std::string>{"cpu:0"});  // "cpu", normalised
  QCOMPARE(c.checkpoint.dir, std::string("runs/demo"));
  QCOMPARE(c.checkpoint.every_epochs, 1);
  QCOMPARE(c.checkpoint.filename_template, std::string("unet-{epoch:02d}-{val_loss:.4f}.safetensors"));
  QCOMPARE(c.checkpoint.save_best_only, false);
  QCOMPARE(c.checkpoint.monitor, std::string("val_loss"));
  QCOMPARE(c.checkpoint.keep_last, 5);
  QVERIFY(c.base_dir.empty());
  QVERIFY(c == Config{});
}

void TestConfig::documentedExampleIsTheDefault() {
  const json documented = json::parse(kDocumentedDefaults);
  QVERIFY(config_from_json(documented) == Config{});
  json expected = documented;
  expected["devices"] = {"cpu:0"};
  QCOMPARE(config_to_json(Config{}).dump(), expected.dump());
  // The schema's defaults are the documented values, key by key.
  for (const ConfigKey& k : config_schema()) {
    const auto dot = k.path.find('.');
    const json& doc =
        dot == std::string::npos ? expected[k.path] : expected[k.path.substr(0, dot)][k.path.substr(dot + 1)];
    QVERIFY2(k.default_value == doc, k.path.c_str());
  }
}

void TestConfig::schemaDeclaresEveryKeyOnce() {
  const auto& schema = config_schema();
  const std::vector<std::string> expected_paths{"model.in_channels",
                                                "model.classes",
                                                "model.width",
                                                "model.depth",
                                                "model.separable",
                                                "loss.kind",
                                                "loss.cross_entropy_weight",
                                                "loss.dice_weight",
                                                "loss.focal_gamma",
                                                "loss.focal_alpha",
                                                "loss.class_weights",
                                                "loss.ignore_index",
                                                "loss.dice_smooth",
                                                "loss.dice_include_background",
                                                "data.source",
                                                "data.path",
                                                "data.image_size",
                                                "data.val_fraction",
                                                "data.augment",
                                                "data.shuffle",
                                                "data.synthetic_samples",
                                                "data.seed",
                                                "data.skip_bad",
                                                "data.max_image_side",
                                                "data.prefetch",
                                                "data.prefetch_mib",
                                                "data.workers",
                                                "data.cache_mib",
                                                "data.validation_split",
                                                "data.val_path",
                                                "data.mode",
                                                "data.patch_size",
                                                "data.foreground_oversample",
                                                "data.patches_per_epoch",
                                                "data.channels",
                                                "data.normalize",
                                                "data.normalize_percentiles",
                                                "data.normalize_clip",
                                                "data.normalize_scope",
                                                "data.normalize_range",
                                                "data.normalize_mean",
                                                "data.normalize_std",
                                                "augment.flips",
                                                "augment.rotation_p",
                                                "augment.rotation_deg",
                                                "augment.scale_p",
                                                "augment.scale_range",
                                                "augment.elastic_p",
                                                "augment.elastic_grid",
                                                "augment.elastic_sigma",
                                                "augment.brightness_p",
                                                "augment.brightness_range",
                                                "augment.contrast_p",
                                                "augment.contrast_range",
                                                "augment.gamma_p",
                                                "augment.gamma_range",
                                                "augment.noise_p",
                                                "augment.noise_sigma",
                                                "augment.blur_p",
                                                "augment.blur_sigma",
                                                "task",
                                                "instances.target",
                                                "instances.boundary_width",
                                                "instances.border_w0",
                                                "instances.border_sigma",
                                                "instances.balance_classes",
                                                "instances.min_size",
                                                "instances.tune_thresholds",
                                                "instances.seed_threshold",
                                                "instances.foreground_threshold",
                                                "train.epochs",
                                                "train.steps",
                                                "train.batch_size",
                                                "train.accumulation",
                                                "train.lr",
                                                "train.weight_decay",
                                                "train.seed",
                                                "train.val_every_steps",
                                                "optimizer.kind",
                                                "optimizer.beta1",
                                                "optimizer.beta2",
                                                "optimizer.eps",
                                                "optimizer.momentum",
                                                "optimizer.nesterov",
                                                "optimizer.clip_grad_norm",
                                                "schedule.kind",
                                                "schedule.warmup_steps",
                                                "schedule.warmup_start_factor",
                                                "schedule.step_epochs",
                                                "schedule.gamma",
                                                "schedule.min_lr",
                                                "schedule.power",
                                                "schedule.pct_start",
                                                "schedule.div_factor",
                                                "schedule.final_div_factor",
                                                "schedule.cycle_momentum",
                                                "schedule.monitor",
                                                "schedule.patience",
                                                "schedule.threshold",
                                                "schedule.cooldown",
                                                "early_stopping.patience",
                                                "early_stopping.monitor",
                                                "early_stopping.min_delta",
                                                "early_stopping.restore_best",
                                                "precision",
                                                "memory.checkpointing",
                                                "memory.growth",
                                                "memory.cap_mib",
                                                "memory.auto_recover_oom",
                                                "devices",
                                                "cuda.tf32",
                                                "cuda.deterministic",
                                                "cuda.expandable_arena",
                                                "cuda.communicator",
                                                "cuda.comm_dtype",
                                                "comm.bucket_mib",
                                                "checkpoint.dir",
                                                "checkpoint.every_epochs",
                                                "checkpoint.template",
                                                "checkpoint.save_best_only",
                                                "checkpoint.monitor",
                                                "checkpoint.monitor_class",
                                                "checkpoint.keep_last"};
  std::vector<std::string> paths;
  for (const ConfigKey& k : schema) paths.push_back(k.path);
  QCOMPARE(paths, expected_paths);

  const std::vector<std::string> groups{"Model",    "Loss",      "Data",       "Augment",        "Task",
                                        "Training", "Optimizer", "Schedule",   "Early stopping", "Precision",
                                        "Memory",   "Devices",   "Checkpoints"};
  for (const ConfigKey& k : schema) {
    QVERIFY2(std::find(groups.begin(), groups.end(), k.group) != groups.end(), k.path.c_str());
    QVERIFY2(!k.label.empty() && !k.help.empty(), k.path.c_str());
    QVERIFY2(k.get && k.set, k.path.c_str());
    QVERIFY2(!validate_value(k, k.default_value), k.path.c_str());
    QCOMPARE(find_config_key(k.path), &k);
  }
  QCOMPARE(find_config_key("train.batchsize"), nullptr);
  QCOMPARE(find_config_key("train"), nullptr);
}

void TestConfig::schemaDescribesKeysForForms() {
  const ConfigKey* batch = find_config_key("train.batch_size");
  QVERIFY(batch);
  QVERIFY(batch->type == ConfigType::integer);
  QCOMPARE(batch->min, std::optional<double>(1.0));
  QCOMPARE(batch->max, std::optional<double>(65536.0));
  QCOMPARE(batch->group, std::string("Training"));
  QCOMPARE(batch->default_value, json(8));

  const ConfigKey* lr = find_config_key("train.lr");
  QVERIFY(lr->type == ConfigType::number);
  QVERIFY(lr->min_exclusive);
  QCOMPARE(validate_value(*lr, 0.01), std::optional<std::string>());
  QCOMPARE(validate_value(*lr, json(0)), std::optional<std::string>("must be > 0, got 0"));
  QCOMPARE(validate_value(*lr, "fast"), std::optional<std::string>("must be a number, got \"fast\""));

  const ConfigKey* precision = find_config_key("precision");
  QVERIFY(precision->type == ConfigType::enumeration);
  QCOMPARE(precision->choices, (std::vector<std::string>{"fp32", "mixed-fp16", "mixed-bf16"}));
  QCOMPARE(precision->group, std::string("Precision"));

  QVERIFY(find_config_key("data.image_size")->type == ConfigType::integer_pair);
  QVERIFY(find_config_key("data.path")->type == ConfigType::path);
  QVERIFY(find_config_key("devices")->type == ConfigType::string_list);
  QVERIFY(find_config_key("memory.growth")->type == ConfigType::boolean);
  QVERIFY(find_config_key("checkpoint.template")->type == ConfigType::string);
  QCOMPARE(find_config_key("checkpoint.monitor")->choices,
           (std::vector<std::string>{"val_loss", "val_iou", "val_dice", "val_acc", "loss", "val_dsb",
                                     "val_f1", "val_pq"}));
  QCOMPARE(std::string(to_string(ConfigType::integer_pair)), std::string("integer_pair"));
  const ConfigKey* weights = find_config_key("loss.class_weights");
  QVERIFY(weights->type == ConfigType::number_list);
  QCOMPARE(weights->group, std::string("Loss"));
  QCOMPARE(std::string(to_string(ConfigType::number_list)), std::string("number_list"));
  QCOMPARE(find_config_key("loss.kind")->choices,
           (std::vector<std::string>{"cross_entropy", "dice", "cross_entropy_dice", "focal", "focal_dice"}));
  for (LossKind k : {LossKind::cross_entropy, LossKind::dice, LossKind::cross_entropy_dice, LossKind::focal,
                     LossKind::focal_dice})
    QVERIFY(parse_loss_kind(to_string(k)) == k);
  QVERIFY(!parse_loss_kind("bce"));

  // The key's own rule runs too.
  QCOMPARE(validate_value(*find_config_key("devices"), json{"cpu", "cuda:0"}),
           std::optional<std::string>("cannot mix CPU and CUDA devices in one run, got cpu:0 and cuda:0"));
}

void TestConfig::roundTripsEveryKey() {
  Config c;
  c.model = {1, 3, 8, 3, true};
  c.loss.kind = LossKind::focal_dice;
  c.loss.cross_entropy_weight = 0.3;
  c.loss.dice_weight = 1.7;
  c.loss.focal_gamma = 1.5;
  c.loss.focal_alpha = -1;
  c.loss.class_weights = {0.1, 2.5, 1};
  c.loss.ignore_index = 255;
  c.loss.dice_smooth = 1e-5;
  c.loss.dice_include_background = true;
  c.data = {DataSource::folder, "data/cells", 64, 96, 0.25, false, false, 40, 18446744073709551615ull};
  c.data.skip_bad = true;
  c.data.max_image_side = 4096;
  c.data.prefetch = 9;
  c.data.prefetch_mib = 0;
  c.data.workers = 3;
  c.data.cache_mib = 0;
  c.data.validation_split = "runs/a";
  c.train = {3, 500, 32, 4, 2.5e-4, 0.01, 1234567890123ull, 50};
  c.optimizer = {OptimizerKind::sgd, 0.8, 0.99, 1e-6, 0.99, true, 12.5};
  c.schedule = {
      ScheduleKind::one_cycle, 0, 0.2, 3, 0.5, 1e-6, 2.0, 0.25, 10.0, 100.0, false, "val_dice", 4, 2, 1e-3};
  c.early_stopping = {7, "val_iou", 0.002, true};
  c.precision = Precision::mixed_bf16;
  c.memory = {true, false, 2048, true};
  c.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 3}};
  c.checkpoint = {"out/run 1", 0, "m-{step:06d}-{val_iou:.3f}.safetensors", true, "val_iou", 0};
  c.checkpoint.monitor_class = "2";
  c.base_dir = "/some/where";

  const json j = config_to_json(c);
  QVERIFY(config_from_json(j, c.base_dir) == c);
  QVERIFY(config_from_json(json::parse(j.dump()), c.base_dir) == c);
  QVERIFY(config_from_json(json::parse(config_to_string(c)), c.base_dir) == c);
  QCOMPARE(j["checkpoint"]["template"], json("m-{step:06d}-{val_iou:.3f}.safetensors"));
  QCOMPARE(j["data"]["image_size"], json({64, 96}));
  QCOMPARE(j["precision"], json("mixed-bf16"));
  QCOMPARE(j["loss"]["kind"], json("focal_dice"));
  QCOMPARE(j["loss"]["class_weights"].dump(), std::string("[0.1,2.5,1.0]"));  // as written, not as floats
  QCOMPARE(j["data"]["seed"].get<std::uint64_t>(), 18446744073709551615ull);

  // Every key is written, and config_to_string keeps the schema's order.
  std::vector<std::string> schema_paths, in_json, in_text;
  for (const ConfigKey& k : config_schema()) schema_paths.push_back(k.path);
  for (const auto& [name, v] : j.items()) {
    if (!v.is_object())
      in_json.push_back(name);
    else
      for (const auto& member : v.items()) in_json.push_back(name + "." + member.key());
  }
  std::sort(in_json.begin(), in_json.end());
  std::vector<std::string> sorted_paths = schema_paths;
  std::sort(sorted_paths.begin(), sorted_paths.end());
  QCOMPARE(in_json, sorted_paths);
  const auto text = nlohmann::ordered_json::parse(config_to_string(c));
  for (const auto& [name, v] : text.items()) {
    if (!v.is_object())
      in_text.push_back(name);
    else
      for (const auto& member : v.items()) in_text.push_back(name + "." + member.key());
  }
  QCOMPARE(in_text, schema_paths);
}

void TestConfig::badValueNamesItsKey_data() {
  QTest::addColumn<QByteArray>("config");
  QTest::addColumn<QByteArray>("message");
  const auto row = [](const char* name, const char* config, const char* message) {
    QTest::newRow(name) << QByteArray(config) << QByteArray(message);
  };
  // The document and its sections.
  row("not an object", R"([1,2])", "a config must be a JSON object, got [1,2]");
  row("section not an object", R"({"train":5})", "train: must be an object, got 5");
  row("model is a list", R"({"model":[1]})", "model: must be an object, got [1]");
  // JSON types.
  row("integer as string", R"({"model":{"width":"16"}})", R"(model.width: must be an integer, got "16")");
  row("integer as fraction", R"({"train":{"batch_size":8.5}})",
      "train.batch_size: must be an integer, got 8.5");
  row("integer as float", R"({"train":{"batch_size":8.0}})", "train.batch_size: must be an integer, got 8.0");
  row("boolean as number", R"({"data":{"augment":1}})", "data.augment: must be true or false, got 1");
  row("boolean as string", R"({"memory":{"growth":"yes"}})",
      R"(memory.growth: must be true or false, got "yes")");
  row("separable null", R"({"model":{"separable":null}})",
      "model.separable: must be true or false, got null");
  row("number as string", R"({"data":{"val_fraction":"0.1"}})",
      R"(data.val_fraction: must be a number, got "0.1")");
  row("path as number", R"({"data":{"path":3}})", "data.path: must be a string, got 3");
  // Model ranges, as validate(UNetSpec) words them.
  row("in_channels 0", R"({"model":{"in_channels":0}})", "model.in_channels: must be in 1..64, got 0");
  row("in_channels 65", R"({"model":{"in_channels":65}})", "model.in_channels: must be in 1..64, got 65");
  row("classes 0", R"({"model":{"classes":0}})", "model.classes: must be in 1..255, got 0");
  row("classes 256", R"({"model":{"classes":256}})", "model.classes: must be in 1..255, got 256");
  row("width 1025", R"({"model":{"width":1025}})", "model.width: must be in 1..1024, got 1025");
  row("depth 0", R"({"model":{"depth":0}})", "model.depth: must be in 1..6, got 0");
  row("depth 7", R"({"model":{"depth":7}})", "model.depth: must be in 1..6, got 7");
  row("width past int", R"({"model":{"width":4294967312}})",
      "model.width: must be in 1..1024, got 4294967312");
  // Data.
  row("source", R"({"data":{"source":"png"}})",
      R"(data.source: must be one of "synthetic", "folder", "dsb2018", got "png")");
  row("folder without path", R"({"data":{"source":"folder"}})",
      R"(data.path: required when data.source is "folder")");
  row("dsb2018 empty path", R"({"data":{"source":"dsb2018","path":""}})",
      R"(data.path: required when data.source is "dsb2018")");
  row("height not multiple", R"({"data":{"image_size":[100,128]}})",
      "data.image_size: height 100 is not a multiple of 2^depth = 16 (model.depth 4); try 96 or 112");
  row("width not multiple", R"({"data":{"image_size":[128,100]}})",
      "data.image_size: width 100 is not a multiple of 2^depth = 16 (model.depth 4); try 96 or 112");
  row("smaller than multiple", R"({"model":{"depth":6},"data":{"image_size":[32,64]}})",
      "data.image_size: height 32 is not a multiple of 2^depth = 64 (model.depth 6); try 64");
  row("image_size one value", R"({"data":{"image_size":[128]}})",
      "data.image_size: must be [height, width], two integers, got [128]");
  row("image_size scalar", R"({"data":{"image_size":128}})",
      "data.image_size: must be [height, width], two integers, got 128");
  row("image_size fraction", R"({"data":{"image_size":[128,128.5]}})",
      "data.image_size: width must be an integer, got 128.5");
  row("image_size zero", R"({"data":{"image_size":[0,128]}})",
      "data.image_size: height must be in 1..65536, got 0");
  row("val_fraction 1", R"({"data":{"val_fraction":1}})", "data.val_fraction: must be >= 0 and < 1, got 1");
  row("val_fraction negative", R"({"data":{"val_fraction":-0.1}})",
      "data.val_fraction: must be >= 0 and < 1, got -0.1");
  row("synthetic_samples 1", R"({"data":{"synthetic_samples":1}})",
      "data.synthetic_samples: must be in 2..16777216, got 1");
  row("data seed negative", R"({"data":{"seed":-1}})", "data.seed: must be >= 0, got -1");
  row("data seed fraction", R"({"data":{"seed":1.5}})", "data.seed: must be an integer, got 1.5");
  row("skip_bad as string", R"({"data":{"skip_bad":"yes"}})",
      R"(data.skip_bad: must be true or false, got "yes")");
  row("max_image_side 15", R"({"data":{"max_image_side":15}})",
      "data.max_image_side: must be in 16..65536, got 15");
  row("max_image_side 65537", R"({"data":{"max_image_side":65537}})",
      "data.max_image_side: must be in 16..65536, got 65537");
  row("prefetch 0", R"({"data":{"prefetch":0}})", "data.prefetch: must be in 1..64, got 0");
  row("prefetch 65", R"({"data":{"prefetch":65}})", "data.prefetch: must be in 1..64, got 65");
  row("prefetch_mib -1", R"({"data":{"prefetch_mib":-1}})",
      "data.prefetch_mib: must be in 0..8796093022207, got -1");
  row("workers 257", R"({"data":{"workers":257}})", "data.workers: must be in 0..256, got 257");
  row("cache_mib negative", R"({"data":{"cache_mib":-1}})",
      "data.cache_mib: must be in 0..8796093022207, got -1");
  row("dsb2018 with classes 3",
      R"({"model":{"classes":3},"data":{"source":"dsb2018","path":"stage1_train"}})",
      R"(model.classes: must be 1 with data.source "dsb2018" (its nucleus masks are binary), got 3)");
  row("instances boundary with classes 1", R"({"task":"instances"})",
      R"(model.classes: must be 3 with task "instances" and instances.target "boundary" (background, interior, boundary), got 1)");
  row("instances weight_map with classes 3",
      R"({"task":"instances","model":{"classes":3},"instances":{"target":"weight_map"}})",
      R"(model.classes: must be 1 with task "instances" and instances.target "weight_map" (a binary mask), got 3)");
  row("instances weight_map with the Dice loss alone",
      R"({"task":"instances","loss":{"kind":"dice"},"instances":{"target":"weight_map"}})",
      R"(loss.kind: has no per-pixel term for instances.target "weight_map"'s border weights to weigh (cross_entropy, cross_entropy_dice, focal, focal_dice have one), got "dice")");
  row("task unknown", R"({"task":"objects"})",
      R"(task: must be one of "semantic", "instances", got "objects")");
  row("boundary_width 0", R"({"instances":{"boundary_width":0}})",
      "instances.boundary_width: must be in 1..64, got 0");
  // Loss.
  row("loss kind unknown", R"({"loss":{"kind":"bce"}})",
      R"(loss.kind: must be one of "cross_entropy", "dice", "cross_entropy_dice", "focal", "focal_dice", got "bce")");
  row("dice_weight negative", R"({"loss":{"dice_weight":-1}})", "loss.dice_weight: must be >= 0, got -1");
  row("cross_entropy_weight text", R"({"loss":{"cross_entropy_weight":"1"}})",
      R"(loss.cross_entropy_weight: must be a number, got "1")");
  row("focal_gamma negative", R"({"loss":{"focal_gamma":-0.5}})",
      "loss.focal_gamma: must be >= 0 and <= 100, got -0.5");
  row("focal_alpha -0.5", R"({"loss":{"focal_alpha":-0.5}})",
      "loss.focal_alpha: must be -1 (off) or in [0, 1], got -0.5");
  row("focal_alpha 2", R"({"loss":{"focal_alpha":2}})", "loss.focal_alpha: must be >= -1 and <= 1, got 2");
  row("focal_alpha on softmax", R"({"model":{"classes":3},"loss":{"kind":"focal","focal_alpha":0.5}})",
      "loss.focal_alpha: applies to binary models only (model.classes 1), got 0.5; weight a softmax model's "
      "classes with loss.class_weights");
  row("class_weights not a list", R"({"loss":{"class_weights":2}})",
      "loss.class_weights: must be a list of numbers, got 2");
  row("class_weights text entry", R"({"loss":{"class_weights":[1,"x"]}})",
      R"(loss.class_weights: entry 1 must be a finite number, got "x")");
  row("class_weights negative", R"({"loss":{"class_weights":[1,-2]}})",
      "loss.class_weights: entry 1 must be >= 0, got -2");
  row("class_weights all zero", R"({"loss":{"class_weights":[0,0]}})",
      "loss.class_weights: must hold at least one weight > 0");
  row("class_weights count binary", R"({"loss":{"class_weights":[1,2,3]}})",
      "loss.class_weights: holds 3 weights but model.classes 1 needs 2 ([background, foreground]), or none");
  row("class_weights count softmax", R"({"model":{"classes":4},"loss":{"class_weights":[1,2]}})",
      "loss.class_weights: holds 2 weights but model.classes 4 needs 4 (one per class, background first), or "
      "none");
  row("class_weights binary dice", R"({"loss":{"kind":"dice","class_weights":[1,2]}})",
      R"(loss.class_weights: has no effect with loss.kind "dice" on a binary model, whose Dice has the )"
      "foreground alone; set loss.dice_include_background or leave the weights empty");
  row("ignore_index 256", R"({"loss":{"ignore_index":256}})",
      "loss.ignore_index: must be in -1..255, got 256");
  row("ignore_index -2", R"({"loss":{"ignore_index":-2}})", "loss.ignore_index: must be in -1..255, got -2");
  row("ignore_index fraction", R"({"loss":{"ignore_index":2.5}})",
      "loss.ignore_index: must be an integer, got 2.5");
  row("dice_smooth 0", R"({"loss":{"dice_smooth":0}})", "loss.dice_smooth: must be > 0, got 0");
  row("dice_include_background text", R"({"loss":{"dice_include_background":"no"}})",
      R"(loss.dice_include_background: must be true or false, got "no")");
  // Training.
  row("batch_size 0", R"({"train":{"batch_size":0}})", "train.batch_size: must be in 1..65536, got 0");
  row("epochs 0", R"({"train":{"epochs":0}})", "train.epochs: must be in 1..1000000, got 0");
  row("steps -1", R"({"train":{"steps":-1}})", "train.steps: must be in 0..1000000000000, got -1");
  row("accumulation 0", R"({"train":{"accumulation":0}})", "train.accumulation: must be in 1..65536, got 0");
  row("lr 0", R"({"train":{"lr":0}})", "train.lr: must be > 0, got 0");
  row("lr negative", R"({"train":{"lr":-0.001}})", "train.lr: must be > 0, got -0.001");
  row("weight_decay negative", R"({"train":{"weight_decay":-1}})",
      "train.weight_decay: must be >= 0, got -1");
  row("epochs past int64", R"({"train":{"epochs":9223372036854775808}})",
      "train.epochs: must be at most 9223372036854775807, got 9223372036854775808");
  row("train seed negative", R"({"train":{"seed":-5}})", "train.seed: must be >= 0, got -5");
  // Precision and memory.
  row("precision", R"({"precision":"fp16"})",
      R"(precision: must be one of "fp32", "mixed-fp16", "mixed-bf16", got "fp16")");
  row("precision number", R"({"precision":32})",
      R"(precision: must be one of "fp32", "mixed-fp16", "mixed-bf16", got 32)");
  row("cap_mib negative", R"({"memory":{"cap_mib":-1}})",
      "memory.cap_mib: must be in 0..8796093022207, got -1");
  row("cap_mib overflows bytes", R"({"memory":{"cap_mib":8796093022208}})",
      "memory.cap_mib: must be in 0..8796093022207, got 8796093022208");
  // Devices.
  row("devices string", R"({"devices":"cpu"})", R"(devices: must be a list of strings, got "cpu")");
  row("devices empty", R"({"devices":[]})", "devices: must not be empty");
  row("devices number", R"({"devices":["cpu",3]})", "devices: entry 1 must be a string, got 3");
  row("devices gpu", R"({"devices":["gpu:0"]})",
      R"(devices: "gpu:0" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices negative", R"({"devices":["cuda:-1"]})",
      R"(devices: "cuda:-1" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices no index", R"({"devices":["cpu:"]})",
      R"(devices: "cpu:" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("bf16 sums on a cpu", R"({"devices":["cpu:0","cpu:1"],"cuda":{"comm_dtype":"bf16"}})",
      R"(cuda.comm_dtype: "bf16" is for GPUs summing through NCCL; CPU replicas (cpu:0) sum in f32: set it to "f32")");
  row("devices bare cuda", R"({"devices":["cuda"]})",
      R"(devices: "cuda" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices upper case", R"({"devices":["CPU"]})",
      R"(devices: "CPU" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  // The one device grammar takes digits only: from_chars alone would read "-0" and "+1".
  row("devices signed zero", R"({"devices":["cuda:-0"]})",
      R"(devices: "cuda:-0" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices plus sign", R"({"devices":["cpu:+1"]})",
      R"(devices: "cpu:+1" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices index overflow", R"({"devices":["cuda:99999999999"]})",
      R"(devices: "cuda:99999999999" is not a device; use cpu, cpu:N or cuda:N (N = 0, 1, ...))");
  row("devices duplicate", R"({"devices":["cpu","cpu:0"]})", "devices: lists cpu:0 twice");
  row("devices GPU twice", R"({"devices":["cuda:1","cuda:01"]})",
      "devices: lists cuda:1 twice: NCCL cannot put two replicas on one GPU; for a larger batch than fits, "
      "use "
      "train.accumulation, which splits it exactly");
  row("cuda.communicator unknown", R"({"cuda":{"communicator":"mpi"}})",
      R"(cuda.communicator: must be one of "auto", "nccl", "device", got "mpi")");
  row("devices mixed", R"({"devices":["cpu:0","cuda:0"]})",
      "devices: cannot mix CPU and CUDA devices in one run, got cpu:0 and cuda:0");
  // Checkpoints.
  row("dir empty", R"({"checkpoint":{"dir":""}})", "checkpoint.dir: must not be empty");
  row("every_epochs -1", R"({"checkpoint":{"every_epochs":-1}})",
      "checkpoint.every_epochs: must be in 0..1000000, got -1");
  row("monitor_class not a class", R"({"checkpoint":{"monitor_class":"first"}})",
      R"(checkpoint.monitor_class: must be "mean" or a class number from 0 to 254, got "first")");
  row("monitor_class past the binary model's classes", R"({"checkpoint":{"monitor_class":"2"}})",
      "checkpoint.monitor_class: is class 2, but model.classes 1 gives classes 0..1 (background, "
      "foreground)");
  row("keep_last -1", R"({"checkpoint":{"keep_last":-1}})",
      "checkpoint.keep_last: must be in 0..1000000, got -1");
  row("save_best_only string", R"({"checkpoint":{"save_best_only":"false"}})",
      R"(checkpoint.save_best_only: must be true or false, got "false")");
  row("monitor", R"({"checkpoint":{"monitor":"accuracy"}})",
      R"(checkpoint.monitor: must be one of "val_loss", "val_iou", "val_dice", "val_acc", "loss", "val_dsb", "val_f1", "val_pq", got "accuracy")");
  row("val_dsb without instances", R"({"early_stopping":{"patience":3,"monitor":"val_dsb"}})",
      R"(early_stopping.monitor: "val_dsb" is an object metric, measured with task "instances" only)");
  row("template empty", R"({"checkpoint":{"template":""}})", "checkpoint.template: must not be empty");
  row("template number", R"({"checkpoint":{"template":5}})", "checkpoint.template: must be a string, got 5");
  row("template unclosed", R"({"checkpoint":{"template":"ckpt-{epoch"}})",
      R"(checkpoint.template: "ckpt-{epoch": missing '}' in format string; write {{ and }} for literal braces)");
  row("template stray brace", R"({"checkpoint":{"template":"a}b"}})",
      R"(checkpoint.template: "a}b": unmatched '}' in format string; write {{ and }} for literal braces)");
  row("template unknown name", R"({"checkpoint":{"template":"{foo}.st"}})",
      R"(checkpoint.template: {foo}: unknown placeholder "foo"; use epoch, step, loss, val_loss, val_iou, val_dice, val_acc)");
  row("template positional", R"({"checkpoint":{"template":"x{}"}})",
      "checkpoint.template: {}: a placeholder needs a name: epoch, step, loss, val_loss, val_iou, "
      "val_dice, "
      "val_acc");
  row("template bad type", R"({"checkpoint":{"template":"{val_loss:.4q}"}})",
      "checkpoint.template: {val_loss:.4q}: invalid type specifier; val_loss is a real number: use a spec "
      "such as .4f, .2e, g or .1%");
  row("template d for metric", R"({"checkpoint":{"template":"{val_loss:d}"}})",
      "checkpoint.template: {val_loss:d}: 'd' needs an integer, but val_loss is a real number; use f, e, g "
      "or %");
  row("template precision for int", R"({"checkpoint":{"template":"{epoch:.2d}"}})",
      "checkpoint.template: {epoch:.2d}: precision not allowed for this argument type; epoch is an integer: "
      "use a spec such as 03d");
  row("template trailing text", R"({"checkpoint":{"template":"{epoch:02dx}"}})",
      "checkpoint.template: {epoch:02dx}: invalid format spec; epoch is an integer: use a spec such as 03d");
  row("template dot alone", R"({"checkpoint":{"template":"{val_loss:.}"}})",
      "checkpoint.template: {val_loss:.}: missing precision specifier; val_loss is a real number: use a spec "
      "such as .4f, .2e, g or .1%");
  row("template conversion", R"({"checkpoint":{"template":"{epoch!r}"}})",
      "checkpoint.template: {epoch!r}: conversions such as !r are not supported");
  row("template grouping", R"({"checkpoint":{"template":"{step:,d}"}})",
      "checkpoint.template: {step:,d}: invalid type specifier; step is an integer: use a spec such as 03d");
  row("template equals align", R"({"checkpoint":{"template":"{loss:=+8.2f}"}})",
      "checkpoint.template: {loss:=+8.2f}: invalid type specifier; loss is a real number: use a spec such as "
      ".4f, .2e, g or .1%");
  row("template character", R"({"checkpoint":{"template":"{epoch:c}"}})",
      "checkpoint.template: {epoch:c}: 'c' (a character) cannot be part of a file name");
  row("template index", R"({"checkpoint":{"template":"{0}"}})",
      "checkpoint.template: {0}: a placeholder needs a name: epoch, step, loss, val_loss, val_iou, val_dice, "
      "val_acc");
  row("template long name", R"({"checkpoint":{"template":"{step:999d}"}})",
      "checkpoint.template: renders file names of 999 characters; a file name has at most 255");
  row("template wide", R"({"checkpoint":{"template":"{step:9999d}"}})",
      "checkpoint.template: {step:9999d}: widths and precisions must be below 1000");
  row("template nested", R"({"checkpoint":{"template":"{epoch:{w}}"}})",
      R"(checkpoint.template: {w}: unknown placeholder "w"; use epoch, step, loss, val_loss, val_iou, val_dice, val_acc)");
  row("template nested field", R"({"checkpoint":{"template":"{epoch:{step}}"}})",
      "checkpoint.template: {epoch:{step}: a format spec cannot hold another field");
  row("template path", R"({"checkpoint":{"template":"sub/{epoch}.st"}})",
      R"(checkpoint.template: must be a file name, not a path, got "sub/{epoch}.st")");
}

void TestConfig::badValueNamesItsKey() {
  QFETCH(QByteArray, config);
  QFETCH(QByteArray, message);
  const json j = json::parse(config.toStdString());
  try {
    config_from_json(j);
    QFAIL("accepted");
  } catch (const ConfigError& e) {
    QCOMPARE(std::string(e.what()), message.toStdString());
    QCOMPARE(e.kind(), ErrorKind::config);
    // key() is the text before the first ": ", the dotted path.
    const std::string expected_key =
        message.startsWith("a config") ? "" : message.left(message.indexOf(": ")).toStdString();
    QCOMPARE(e.key(), expected_key);
  }
}

void TestConfig::unknownKeys_data() {
  QTest::addColumn<QByteArray>("config");
  QTest::addColumn<QByteArray>("message");
  QTest::newRow("typo") << QByteArray(R"({"train":{"batchsize":8}})")
                        << QByteArray("train.batchsize: unknown key (did you mean train.batch_size?)");
  QTest::newRow("swapped letters") << QByteArray(R"({"trian":{"lr":0.1}})")
                                   << QByteArray("trian: unknown key (did you mean train?)");
  QTest::newRow("leaf in wrong place")
      << QByteArray(R"({"batch_size":8})")
      << QByteArray("batch_size: unknown key (did you mean train.batch_size?)");
  QTest::newRow("key in wrong section") << QByteArray(R"({"model":{"lr":0.1}})")
                                        << QByteArray("model.lr: unknown key (did you mean train.lr?)");
  QTest::newRow("template typo")
      << QByteArray(R"({"checkpoint":{"templte":"x"}})")
      << QByteArray("checkpoint.templte: unknown key (did you mean checkpoint.template?)");
  QTest::newRow("precision typo") << QByteArray(R"({"precison":"fp32"})")
                                  << QByteArray("precison: unknown key (did you mean precision?)");
  QTest::newRow("far from everything")
      << QByteArray(R"({"model":{"colour":1}})") << QByteArray("model.colour: unknown key");
  QTest::newRow("unrelated") << QByteArray(R"({"foo":1})") << QByteArray("foo: unknown key");
  QTest::newRow("dotted at top level")
      << QByteArray(R"({"model.width":16})")
      << QByteArray(R"(model.width: unknown key; write it inside its section: {"model": {"width": ...}})");
  QTest::newRow("dotted inside section")
      << QByteArray(R"({"model":{"width.x":16}})") << QByteArray("model.width.x: unknown key");
}

void TestConfig::unknownKeys() {
  QFETCH(QByteArray, config);
  QFETCH(QByteArray, message);
  QCOMPARE(error_of(json::parse(config.toStdString())), message.toStdString());
}

void TestConfig::problemsListsEveryBadKey() {
  QVERIFY(config_problems(json::object()).empty());
  QVERIFY(config_problems(json::parse(kDocumentedDefaults)).empty());
  const json j = json::parse(
      R"({"zzz":1, "train":{"batch_size":0,"lr":-1}, "model":{"width":0}, "data":{"image_size":[100,128]}})");
  const std::vector<ConfigProblem> expected{
      {"zzz", "unknown key"},
      {"model.width", "must be in 1..1024, got 0"},
      {"train.batch_size", "must be in 1..65536, got 0"},
      {"train.lr", "must be > 0, got -1"},
      {"data.image_size", "height 100 is not a multiple of 2^depth = 16 (model.depth 4); try 96 or 112"},
  };
  QCOMPARE(config_problems(j), expected);
  // A cross-key rule stays quiet while a key it reads is wrong on its own: one mistake, one message.
  const json bad_depth = json::parse(R"({"model":{"depth":9},"data":{"image_size":[100,100]}})");
  QCOMPARE(config_problems(bad_depth),
           (std::vector<ConfigProblem>{{"model.depth", "must be in 1..6, got 9"}}));
  const json bad_source = json::parse(R"({"data":{"source":"web","path":""}})");
  QCOMPARE(config_problems(bad_source).size(), std::size_t{1});
  QCOMPARE(config_problems(bad_source)[0].key, std::string("data.source"));
}

void TestConfig::acceptsEdgeValues() {
  const Config c = config_from_json(json::parse(R"({
    "model": {"depth": 6, "width": 1024, "in_channels": 64, "classes": 255},
    "loss": {"kind": "focal", "focal_alpha": -1, "focal_gamma": 0, "ignore_index": 255, "dice_weight": 0},
    "data": {"image_size": [64, 192], "val_fraction": 0, "synthetic_samples": 2, "seed": 18446744073709551615},
    "train": {"steps": 0, "lr": 1e-9, "weight_decay": 0, "seed": 9223372036854775808},
    "memory": {"cap_mib": 8796093022207},
    "checkpoint": {"every_epochs": 0, "keep_last": 0, "template": "{{literal}}-{epoch}"}
  })"));
  QCOMPARE(c.model.depth, 6);
  QCOMPARE(c.loss.ignore_index, 255);
  QCOMPARE(c.loss.focal_alpha, -1.0);
  QCOMPARE(c.data.image_width, 192);
  QCOMPARE(c.data.val_fraction, 0.0);
  QCOMPARE(c.data.seed, 18446744073709551615ull);
  QCOMPARE(c.train.seed, 9223372036854775808ull);
  QCOMPARE(c.train.weight_decay, 0.0);  // an integer is a fine number
  QCOMPARE(c.memory.cap_mib, 8796093022207LL);
  QCOMPARE(c.checkpoint.filename_template, std::string("{{literal}}-{epoch}"));
}

void TestConfig::devicesAreNormalised() {
  const Config c = config_from_json(json::parse(R"({"devices":["cpu","cpu:1","cpu:02"]})"));
  QCOMPARE(device_names(c.devices), (std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"}));
  QCOMPARE(config_to_json(c)["devices"], json({"cpu:0", "cpu:1", "cpu:2"}));
  const Config g = config_from_json(json::parse(R"({"devices":["cuda:1","cuda:0"]})"));
  QCOMPARE(device_names(g.devices), (std::vector<std::string>{"cuda:1", "cuda:0"}));
}

void TestConfig::precisionNames() {
  QCOMPARE(std::string(to_string(Precision::fp32)), std::string("fp32"));
  QCOMPARE(std::string(to_string(Precision::mixed_fp16)), std::string("mixed-fp16"));
  QCOMPARE(std::string(to_string(Precision::mixed_bf16)), std::string("mixed-bf16"));
  for (Precision p : {Precision::fp32, Precision::mixed_fp16, Precision::mixed_bf16})
    QVERIFY(parse_precision(to_string(p)) == p);
  QVERIFY(!parse_precision("fp16"));
  QVERIFY(!parse_precision("mixed_bf16"));
  QVERIFY(config_from_json(json{{"precision", "mixed-fp16"}}).precision == Precision::mixed_fp16);
}

// Each typed key's every text, written as a file would hold it, read into a Config and written back: the
// names are spelled out here, not taken from the tables, because files already hold them.
void TestConfig::typedValuesRoundTrip_data() {
  QTest::addColumn<QByteArray>("key");
  QTest::addColumn<QByteArray>("value");    // JSON, as the file holds it
  QTest::addColumn<QByteArray>("written");  // JSON, as config_to_string() writes it back
  const std::pair<const char*, std::vector<const char*>> names[] = {
      {"precision", {"fp32", "mixed-fp16", "mixed-bf16"}},
      {"loss.kind", {"cross_entropy", "dice", "cross_entropy_dice", "focal", "focal_dice"}},
      {"optimizer.kind", {"adam", "adamw", "sgd"}},
      {"schedule.kind", {"constant", "step", "cosine", "one_cycle", "poly", "plateau"}},
      {"data.source", {"synthetic", "folder", "dsb2018"}},
  };
  for (const auto& [key, values] : names) {
    QCOMPARE(find_config_key(key)->choices, std::vector<std::string>(values.begin(), values.end()));
    for (const char* v : values) {
      const QByteArray text = QByteArray::fromStdString(json(v).dump());
      QTest::newRow(qPrintable(QString("%1 %2").arg(key, v))) << QByteArray(key) << text << text;
    }
  }
  QTest::newRow("devices cuda") << QByteArray("devices") << QByteArray(R"(["cuda:2","cuda:0","cuda:1"])")
                                << QByteArray(R"(["cuda:2","cuda:0","cuda:1"])");
  QTest::newRow("devices cpu, normalised")
      << QByteArray("devices") << QByteArray(R"(["cpu","cpu:01","cpu:2"])")
      << QByteArray(R"(["cpu:0","cpu:1","cpu:2"])");
}

void TestConfig::typedValuesRoundTrip() {
  QFETCH(QByteArray, key);
  QFETCH(QByteArray, value);
  QFETCH(QByteArray, written);
  json doc = json::object();
  apply_override(doc, (key + "=" + value).toStdString());
  if (value.contains("folder") || value.contains("dsb2018")) apply_override(doc, "data.path=data");
  const Config c = config_from_json(parse_config_text(doc.dump(2), "the test's file"));
  const std::string text = config_to_string(c);
  const json back = parse_config_text(text, "the written file");
  const json::json_pointer at("/" + key.replace('.', '/').toStdString());
  QCOMPARE(back.at(at), json::parse(written.toStdString()));
  QVERIFY(config_from_json(back) == c);
  QCOMPARE(config_to_string(config_from_json(back)), text);
}

void TestConfig::applyOverride_data() {
  QTest::addColumn<QByteArray>("before");
  QTest::addColumn<QByteArray>("assignment");
  QTest::addColumn<QByteArray>("after");
  QTest::newRow("integer") << QByteArray("{}") << QByteArray("train.batch_size=16")
                           << QByteArray(R"({"train":{"batch_size":16}})");
  QTest::newRow("bare string") << QByteArray("{}") << QByteArray("precision=mixed-bf16")
                               << QByteArray(R"({"precision":"mixed-bf16"})");
  QTest::newRow("json list") << QByteArray("{}") << QByteArray(R"(devices=["cpu:0","cpu:1"])")
                             << QByteArray(R"({"devices":["cpu:0","cpu:1"]})");
  QTest::newRow("pair") << QByteArray("{}") << QByteArray("data.image_size=[64, 96]")
                        << QByteArray(R"({"data":{"image_size":[64,96]}})");
  QTest::newRow("number list") << QByteArray("{}") << QByteArray("loss.class_weights=[0.5, 2]")
                               << QByteArray(R"({"loss":{"class_weights":[0.5,2]}})");
  QTest::newRow("number") << QByteArray("{}") << QByteArray("train.lr=1e-4")
                          << QByteArray(R"({"train":{"lr":0.0001}})");
  QTest::newRow("boolean") << QByteArray("{}") << QByteArray("memory.checkpointing=true")
                           << QByteArray(R"({"memory":{"checkpointing":true}})");
  QTest::newRow("numeric path stays text")
      << QByteArray("{}") << QByteArray("data.path=2024") << QByteArray(R"({"data":{"path":"2024"}})");
  QTest::newRow("quoted string") << QByteArray("{}") << QByteArray(R"(data.path="my data")")
                                 << QByteArray(R"({"data":{"path":"my data"}})");
  QTest::newRow("text with equals") << QByteArray("{}") << QByteArray("checkpoint.dir=runs/a=b")
                                    << QByteArray(R"({"checkpoint":{"dir":"runs/a=b"}})");
  QTest::newRow("spaces around key") << QByteArray("{}") << QByteArray(" train.epochs =3")
                                     << QByteArray(R"({"train":{"epochs":3}})");
  QTest::newRow("keeps siblings") << QByteArray(R"({"train":{"lr":0.1}})") << QByteArray("train.epochs=2")
                                  << QByteArray(R"({"train":{"epochs":2,"lr":0.1}})");
  QTest::newRow("replaces value") << QByteArray(R"({"train":{"epochs":5},"precision":"fp32"})")
                                  << QByteArray("train.epochs=7")
                                  << QByteArray(R"({"precision":"fp32","train":{"epochs":7}})");
  QTest::newRow("null document") << QByteArray("null") << QByteArray("model.width=32")
                                 << QByteArray(R"({"model":{"width":32}})");
}

void TestConfig::applyOverride() {
  QFETCH(QByteArray, before);
  QFETCH(QByteArray, assignment);
  QFETCH(QByteArray, after);
  json j = json::parse(before.toStdString());
  apply_override(j, assignment.toStdString());
  QCOMPARE(j.dump(), json::parse(after.toStdString()).dump());
  config_from_json(j);  // and the result is a valid config
}

void TestConfig::applyOverrideErrors_data() {
  QTest::addColumn<QByteArray>("assignment");
  QTest::addColumn<QByteArray>("message");
  QTest::newRow("no equals") << QByteArray("train.batch_size")
                             << QByteArray(R"(--set: expected key=value, got "train.batch_size")");
  QTest::newRow("empty key") << QByteArray("=3")
                             << QByteArray(R"(--set: the key before '=' is empty in "=3")");
  QTest::newRow("blank key") << QByteArray("  =3")
                             << QByteArray(R"(--set: the key before '=' is empty in "  =3")");
  QTest::newRow("unknown key") << QByteArray("train.batchsize=3")
                               << QByteArray("train.batchsize: unknown key (did you mean train.batch_size?)");
  QTest::newRow("section") << QByteArray("train=3")
                           << QByteArray(
                                  "train: is a section; set its keys one at a time, e.g. train.<key>=...");
  QTest::newRow("out of range") << QByteArray("train.batch_size=0")
                                << QByteArray("train.batch_size: must be in 1..65536, got 0");
  QTest::newRow("text for integer") << QByteArray("train.batch_size=abc")
                                    << QByteArray(R"(train.batch_size: must be an integer, got "abc")");
  QTest::newRow("empty value") << QByteArray("train.lr=")
                               << QByteArray(R"(train.lr: must be a number, got "")");
  QTest::newRow("bad precision")
      << QByteArray("precision=fp16")
      << QByteArray(R"(precision: must be one of "fp32", "mixed-fp16", "mixed-bf16", got "fp16")");
  QTest::newRow("single device") << QByteArray("devices=cpu")
                                 << QByteArray(R"(devices: must be a list of strings, got "cpu")");
}

void TestConfig::applyOverrideErrors() {
  QFETCH(QByteArray, assignment);
  QFETCH(QByteArray, message);
  QCOMPARE(override_error(json::object(), assignment.toStdString()), message.toStdString());
}

void TestConfig::applyOverrideLeavesBadSectionsAlone() {
  json j = json::parse(R"({"train":5})");
  QCOMPARE(override_error(j, "train.lr=0.1"), std::string("train: must be an object, got 5"));
  QCOMPARE(override_error(json::array(), "train.lr=0.1"),
           std::string("a config must be a JSON object, got []"));
}

void TestConfig::overridesThenConfig() {
  json j = json::parse(kDocumentedDefaults);
  for (const char* a : {"train.batch_size=16", "precision=mixed-bf16", R"(devices=["cpu:0","cpu:1"])",
                        "data.image_size=[256,64]", "checkpoint.monitor=val_dice"})
    apply_override(j, a);
  const Config c = config_from_json(j);
  QCOMPARE(c.train.batch_size, 16);
  QVERIFY(c.precision == Precision::mixed_bf16);
  QCOMPARE(device_names(c.devices), (std::vector<std::string>{"cpu:0", "cpu:1"}));
  QCOMPARE(c.data.image_height, 256);
  QCOMPARE(c.data.image_width, 64);
  QCOMPARE(c.checkpoint.monitor, std::string("val_dice"));
}

void TestConfig::loadsFileAndResolvesAgainstIt() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath("run.json");
  write_file(path, R"({"data": {"source": "folder", "path": "cells"}, "checkpoint": {"dir": "../out"}})");
  const Config c = load_config_file(path.toStdString());
  const std::filesystem::path folder = std::filesystem::path(dir.path().toStdString());
  QCOMPARE(c.base_dir, folder);
  QCOMPARE(c.data.source, DataSource::folder);
  QCOMPARE(c.resolve(c.data.path), folder / "cells");
  QCOMPARE(c.resolve(c.checkpoint.dir), folder.parent_path() / "out");
  QCOMPARE(c.resolve("/abs/data"), std::filesystem::path("/abs/data"));
  QCOMPARE(c.resolve(""), std::filesystem::path());
}

void TestConfig::resolveWithoutFolder() {
  Config c;
  QCOMPARE(c.resolve("images"), std::filesystem::path("images"));
  c.base_dir = "/data/configs";
  QCOMPARE(c.resolve("images"), std::filesystem::path("/data/configs/images"));
  QCOMPARE(c.resolve("./a/../images"), std::filesystem::path("/data/configs/images"));
  QCOMPARE(c.resolve("../shared/x"), std::filesystem::path("/data/shared/x"));
  QCOMPARE(c.resolve("/elsewhere"), std::filesystem::path("/elsewhere"));
}

void TestConfig::fileErrors_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<QByteArray>("problem");  // after "<file>: "
  QTest::newRow("trailing comma") << QByteArray("{\n  \"train\": {\n    \"lr\": 0.1,\n  }\n}")
                                  << QByteArray("line 4, column 3 (byte 33): invalid JSON: ");
  QTest::newRow("missing colon") << QByteArray("{\"model\" {}}")
                                 << QByteArray("line 1, column 10 (byte 10): invalid JSON: ");
  QTest::newRow("empty") << QByteArray("") << QByteArray("line 1, column 1 (byte 1): invalid JSON: ");
  QTest::newRow("truncated") << QByteArray("{\"train\":\n{\"lr\":")
                             << QByteArray("line 2, column 7 (byte 17): invalid JSON: ");
}

void TestConfig::fileErrors() {
  QFETCH(QByteArray, text);
  QFETCH(QByteArray, problem);
  QTemporaryDir dir;
  const QString path = dir.filePath("bad.json");
  write_file(path, text.toStdString());
  try {
    load_config_file(path.toStdString());
    QFAIL("accepted");
  } catch (const ConfigError& e) {
    const std::string expected = path.toStdString() + ": " + problem.toStdString();
    const std::string what = e.what();
    QVERIFY2(what.starts_with(expected), what.c_str());
    QVERIFY2(what.size() > expected.size() + 10, what.c_str());  // nlohmann's reason follows
    QVERIFY2(what.find("json.exception") == std::string::npos, what.c_str());
    QCOMPARE(e.key(), path.toStdString());
  }
}

void TestConfig::unreadableFiles() {
  QTemporaryDir dir;
  const std::string missing = dir.filePath("nope.json").toStdString();
  QCOMPARE(std::string(error_of_file(missing)), missing + ": the config file does not exist");
  QCOMPARE(std::string(error_of_file(dir.path().toStdString())),
           dir.path().toStdString() + ": is a folder, not a config file");
  // A valid file with a bad value reports the key, as config_from_json does.
  const QString path = dir.filePath("bad_value.json");
  write_file(path, R"({"train": {"batch_size": 0}})");
  QCOMPARE(error_of_file(path.toStdString()), std::string("train.batch_size: must be in 1..65536, got 0"));
}

void TestConfig::checkpointNames_data() {
  QTest::addColumn<QByteArray>("tmpl");
  QTest::addColumn<int>("epoch");
  QTest::addColumn<int>("step");
  QTest::addColumn<QByteArray>("metric");
  QTest::addColumn<double>("value");
  QTest::addColumn<QByteArray>("expected");
  int n = 0;
  const auto row = [&n](const char* tmpl, int epoch, int step, const char* metric, double value,
                        const char* expected) {
    const QByteArray tag = QByteArray::number(++n) + " " + tmpl;
    QTest::newRow(tag.constData()) << QByteArray(tmpl) << epoch << step << QByteArray(metric) << value
                                   << QByteArray(expected);
  };
  row("unet-{epoch:02d}-{val_loss:.4f}.safetensors", 3, 120, "val_loss", 0.12344,
      "unet-03-0.1234.safetensors");
  row("{epoch:02d}", 12, 0, "", 0, "12");
  row("{epoch:02d}", 123, 0, "", 0, "123");
  row("{step}", 0, 120, "", 0, "120");
  row("{epoch}", 7, 0, "", 0, "7");
  row("{epoch:03d}", 7, 0, "", 0, "007");
  row("{epoch:05d}", -3, 0, "", 0, "-0003");
  row("{epoch:+d}", 7, 0, "", 0, "+7");
  row("{epoch: d}", 7, 0, "", 0, " 7");
  row("{epoch:>4}", 7, 0, "", 0, "   7");
  row("{epoch:<4}|", 7, 0, "", 0, "7   |");
  row("{epoch:^5}", 7, 0, "", 0, "  7  ");
  row("{epoch:*^6}", 7, 0, "", 0, "**7***");
  row("{epoch:x<3d}", 7, 0, "", 0, "7xx");
  row("{epoch:.1f}", 3, 0, "", 0, "3.0");
  row("{{epoch}}-{epoch}", 3, 0, "", 0, "{epoch}-3");
  row("{val_loss:.2e}", 0, 0, "val_loss", 0.12344, "1.23e-01");
  row("{val_loss:.3g}", 0, 0, "val_loss", 0.12344, "0.123");
  row("{val_loss:g}", 0, 0, "val_loss", 0.5, "0.5");
  row("{val_acc:.1%}", 0, 0, "val_acc", 0.9876, "98.8%");
  row("{val_loss}", 0, 0, "val_loss", 0.25, "0.25");
  row("{val_loss}", 0, 0, "val_loss", 1.0, "1.0");
  row("{val_loss}", 0, 0, "val_loss", 1e-5, "1e-05");
  row("{loss:08.3f}", 0, 0, "loss", -1.5, "-001.500");
  row("{loss:+08.2f}", 0, 0, "loss", 1.5, "+0001.50");
  row("{val_iou:.3}", 0, 0, "val_iou", 0.5, "0.5");
  row("{val_iou:.3}", 0, 0, "val_iou", 123.0, "123");
  row("{val_iou:.3}", 0, 0, "val_iou", 1234.0, "1.23e+03");
  row("{val_iou:.3}", 0, 0, "val_iou", 12.0, "12");
  row("{val_dice:F}", 0, 0, "val_dice", std::numeric_limits<double>::infinity(), "INF");
  row("{val_dice:f}", 0, 0, "val_dice", 0.5, "0.500000");
  row("{val_dice:E}", 0, 0, "val_dice", 1234.5, "1.234500E+03");
  row("{val_acc:8.1%}", 0, 0, "val_acc", 0.9876, "    98.8%");  // the width counts the digits only
  row("{step:#d}", 0, 99, "", 0, "99");
  row("{step:#x}", 0, 255, "", 0, "0xff");
}

void TestConfig::checkpointNames() {
  QFETCH(QByteArray, tmpl);
  QFETCH(int, epoch);
  QFETCH(int, step);
  QFETCH(QByteArray, metric);
  QFETCH(double, value);
  QFETCH(QByteArray, expected);
  std::map<std::string, double> metrics;
  if (!metric.isEmpty()) metrics[metric.toStdString()] = value;
  QCOMPARE(format_checkpoint_name(tmpl.toStdString(), epoch, step, metrics), expected.toStdString());
}

void TestConfig::checkpointNameErrors() {
  try {
    format_checkpoint_name("unet-{epoch:02d}-{val_loss:.4f}.safetensors", 1, 10, {{"loss", 0.3}});
    QFAIL("rendered without val_loss");
  } catch (const ConfigError& e) {
    QCOMPARE(e.key(), std::string("checkpoint.template"));
    QCOMPARE(
        std::string(e.what()),
        std::string("checkpoint.template: {val_loss:.4f} needs the metric val_loss, which is not available"));
  }
  try {
    format_checkpoint_name("{epoch", 1, 10, {});
    QFAIL("rendered a broken template");
  } catch (const ConfigError& e) {
    QCOMPARE(std::string(e.what()), std::string(R"(checkpoint.template: "{epoch": missing '}' in format )"
                                                "string; write {{ and }} for literal braces"));
  }
  // Metrics the template does not name are not needed.
  QCOMPARE(format_checkpoint_name("last-{step}.safetensors", 4, 99, {}), std::string("last-99.safetensors"));
}

// A GUI runs with the user's locale (QCoreApplication calls setlocale); file names must not change with it.
void TestConfig::checkpointNamesIgnoreLocale() {
  const std::string before = std::setlocale(LC_NUMERIC, nullptr);
  const char* found = nullptr;
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"})
    if ((found = std::setlocale(LC_NUMERIC, name))) break;
  if (!found) QSKIP("no locale with a decimal comma is installed");
  const std::string name =
      format_checkpoint_name("{val_loss:.4f}-{val_iou:.2e}-{val_acc}", 1, 1,
                             {{"val_loss", 0.12344}, {"val_iou", 0.5}, {"val_acc", 0.75}});
  std::setlocale(LC_NUMERIC, before.c_str());
  QCOMPARE(name, std::string("0.1234-5.00e-01-0.75"));
}

// The rules a run adds (docs/CONFIG.md, "Rules a run adds"): each row a valid document that a run refuses,
// with the keys named, in order.
void TestConfig::trainingProblemsNameTheKeys_data() {
  QTest::addColumn<QString>("document");
  QTest::addColumn<QStringList>("keys");
  QTest::newRow("both loss weights 0")
      << R"({"loss": {"kind": "cross_entropy_dice", "cross_entropy_weight": 0, "dice_weight": 0}})"
      << QStringList{"loss.cross_entropy_weight"};
  QTest::newRow("weight_map's border weights reach the loss")
      << R"({"task": "instances", "model": {"classes": 1}, "instances": {"target": "weight_map"}})"
      << QStringList{};
  QTest::newRow("one of two weights 0 learns")
      << R"({"loss": {"kind": "cross_entropy_dice", "cross_entropy_weight": 0}})" << QStringList{};
  QTest::newRow("the Dice weight of cross_entropy is not read")
      << R"({"loss": {"kind": "cross_entropy", "dice_weight": 0}})" << QStringList{};
  QTest::newRow("dice weighed 0") << R"({"loss": {"kind": "dice", "dice_weight": 0}})"
                                  << QStringList{"loss.dice_weight"};
  QTest::newRow("Dice classes weighed 0")
      << R"({"model": {"classes": 3}, "loss": {"kind": "dice", "class_weights": [1, 0, 0]}})"
      << QStringList{"loss.class_weights"};
  QTest::newRow("Dice with the background counts it") << R"({"model": {"classes": 3},
            "loss": {"kind": "dice", "class_weights": [1, 0, 0], "dice_include_background": true}})"
                                                      << QStringList{};
  QTest::newRow("momentum and nesterov under adamw")
      << R"({"optimizer": {"momentum": 0.95, "nesterov": true}})"
      << QStringList{"optimizer.momentum", "optimizer.nesterov"};
  QTest::newRow("betas under sgd") << R"({"optimizer": {"kind": "sgd", "beta1": 0.8, "beta2": 0.99}})"
                                   << QStringList{"optimizer.beta1", "optimizer.beta2"};
  QTest::newRow("val_fraction 0 with the defaults")
      << R"({"data": {"val_fraction": 0}})" << QStringList{"checkpoint.monitor", "checkpoint.template"};
  QTest::newRow("val_fraction 0 without periodic files")
      << R"({"data": {"val_fraction": 0}, "checkpoint": {"monitor": "loss", "every_epochs": 0}})"
      << QStringList{};
  QTest::newRow("val_fraction 0 with a validation split")
      << R"({"data": {"val_fraction": 0, "validation_split": "runs/a"}})" << QStringList{};
  QTest::newRow("a monitored class no monitor reads")
      << R"({"checkpoint": {"monitor_class": "1"}})" << QStringList{"checkpoint.monitor_class"};
  QTest::newRow("a monitored class early stopping reads")
      << R"({"checkpoint": {"monitor_class": "0"}, "early_stopping": {"patience": 3, "monitor": "val_dice"}})"
      << QStringList{};
  QTest::newRow("warm-up as long as train.steps")
      << R"({"train": {"steps": 20}, "schedule": {"warmup_steps": 20}})"
      << QStringList{"schedule.warmup_steps"};
  QTest::newRow("warm-up shorter than train.steps")
      << R"({"train": {"steps": 21}, "schedule": {"warmup_steps": 20}})" << QStringList{};
}

void TestConfig::trainingProblemsNameTheKeys() {
  QFETCH(QString, document);
  QFETCH(QStringList, keys);
  // A valid document: config_from_json reads it.
  const Config c = config_from_json(json::parse(document.toStdString()));
  QStringList found;
  for (const ConfigProblem& p : training_problems(c)) found << QString::fromStdString(p.key);
  QCOMPARE(found, keys);
  if (keys.isEmpty()) return;
  try {
    throw_config_problems(training_problems(c));
    QFAIL("nothing thrown");
  } catch (const ConfigError& e) {
    QCOMPARE(QString::fromStdString(e.key()), keys.front());
    for (const QString& k : keys.mid(1)) QVERIFY2(QString(e.what()).contains("; and " + k + ": "), e.what());
  }
}

// The defaults train; a whole written-out config of the other optimizer, its unread keys at their defaults,
// trains too; and config_problems (what checkpoints are read by) never carries these rules.
void TestConfig::trainingProblemsLeaveDefaultsAndReadableDocuments() {
  QVERIFY(training_problems(Config{}).empty());
  Config sgd;
  sgd.optimizer.kind = OptimizerKind::sgd;
  sgd.optimizer.momentum = 0.99;
  sgd.optimizer.nesterov = true;
  const Config read = config_from_json(json::parse(config_to_string(sgd)));
  QVERIFY(training_problems(read).empty());
  Config refused;
  refused.optimizer.momentum = 0.95;
  refused.data.val_fraction = 0;
  QCOMPARE(training_problems(refused).size(), std::size_t{3});
  QVERIFY(config_problems(config_to_json(refused)).empty());
  // Every recipe the project ships trains.
  int recipes = 0;
  for (const char* folder : {"resources/configs", "examples"})
    for (const auto& entry :
         std::filesystem::directory_iterator(std::filesystem::path(UNET_SOURCE_DIR) / folder)) {
      if (entry.path().extension() != ".json") continue;
      ++recipes;
      const std::vector<ConfigProblem> problems = training_problems(load_config_file(entry.path()));
      QVERIFY2(problems.empty(),
               qPrintable(QString::fromStdString(entry.path().string() + ": " +
                                                 (problems.empty() ? "" : problems[0].problem))));
    }
  QVERIFY(recipes >= 5);
}

#endif  // Q_MOC_RUN

QTEST_GUILESS_MAIN(TestConfig)
#include "test_config.moc"
