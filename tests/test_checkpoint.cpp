// Checkpoint files (docs/MODEL.md "Checkpoint file"): round trips over several models, the file's exact
// layout read back with the plain safetensors reader (names, shapes, order, metadata, checksum, hand-computed
// element positions), every refusal of load and inspect with its message, save's refusals, and files that
// load whatever devices wrote them or whatever tool wrote them to the spec alone.
#include <QTemporaryDir>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <limits>

#include "test_support.h"
#include "unet/config/config.h"
#include "unet/core/error.h"
#include "unet/core/memory.h"
#include "unet/io/checkpoint.h"
#include "unet/io/safetensors.h"
#include "unet/io/sha256.h"
#include "unet/model/unet.h"

using namespace unet;
using json = nlohmann::json;

namespace fs = std::filesystem;

namespace QTest {
template <>
char* toString(const std::string& s) {
  return qstrdup(s.c_str());
}
template <>
char* toString(const std::vector<std::int64_t>& v) {
  return qstrdup(json(v).dump().c_str());
}
template <>
char* toString(const std::vector<std::string>& v) {
  return qstrdup(json(v).dump().c_str());
}
template <>
char* toString(const fs::path& p) {
  return qstrdup(p.string().c_str());
}
template <>
char* toString(const json& j) {
  return qstrdup(j.dump().c_str());
}
}  // namespace QTest

namespace {

// ---- building checkpoints ----

struct SlabLayout {
  std::vector<std::string> names;
  std::vector<std::int64_t> offsets, numels;
  std::int64_t slab_elements = 0;
  std::int64_t parameter_count = 0;
};

SlabLayout layout_of(const UNetSpec& spec) {
  CountingAllocator counting("test", 0);
  const UNet model(spec, counting);
  SlabLayout l;
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    const ParamSpec& ps = model.params()[i].spec;
    l.names.push_back(ps.name);
    l.offsets.push_back(model.offsets()[i]);
    l.numels.push_back(ps.shape.numel());
  }
  l.slab_elements = model.slab_elements();
  l.parameter_count = model.parameter_count();
  return l;
}

// A slab whose parameters hold `seed`-dependent values (with a few awkward bit patterns) and whose alignment
// gaps hold `gap`, so that a test sees whether gaps are written or carried.
std::vector<float> slab_of(const SlabLayout& l, std::uint64_t seed, bool non_negative, float gap) {
  std::vector<float> slab(static_cast<std::size_t>(l.slab_elements), gap);
  const std::vector<float> values = test::random_values(l.slab_elements, seed);
  for (std::size_t p = 0; p < l.names.size(); ++p) {
    for (std::int64_t k = 0; k < l.numels[p]; ++k) {
      const auto i = static_cast<std::size_t>(l.offsets[p] + k);
      slab[i] = non_negative ? std::fabs(values[i]) : values[i];
    }
  }
  const auto first = static_cast<std::size_t>(l.offsets[0]);
  slab[first] = non_negative ? 0.0f : -0.0f;
  slab[first + 1] = std::numeric_limits<float>::denorm_min();
  slab[first + 2] = std::numeric_limits<float>::max();
  return slab;
}

std::vector<float> without_gaps(const SlabLayout& l, std::vector<float> slab) {
  std::vector<float> out(slab.size(), 0.0f);
  for (std::size_t p = 0; p < l.names.size(); ++p) {
    const auto at = static_cast<std::ptrdiff_t>(l.offsets[p]);
    std::copy(slab.begin() + at, slab.begin() + at + l.numels[p], out.begin() + at);
  }
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

UNetSpec small_spec() {
  return UNetSpec{.in_channels = 3, .classes = 1, .width = 4, .depth = 1, .separable = false};
}

Checkpoint make_checkpoint(const UNetSpec& spec, const fs::path& folder) {
  const SlabLayout l = layout_of(spec);
  Checkpoint c;
  c.config.model = spec;
  c.config.data.image_height = c.config.data.image_width = 64;
  c.config.data.seed = 42;
  c.config.train.lr = 3e-4;
  c.config.train.seed = std::numeric_limits<std::uint64_t>::max();
  c.config.precision = Precision::mixed_fp16;
  c.config.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}};
  c.config.base_dir = fs::absolute(folder);
  c.parameters = slab_of(l, 1, false, 7.0f);
  c.adam_m = slab_of(l, 2, false, -3.0f);
  c.adam_v = slab_of(l, 3, true, 5.0f);
  c.position =
      TrainingPosition{.step = 1234,
                       .epoch = 7,
                       .epoch_step = 56,
                       .loss_scale = 0.1,
                       .clean_steps = 789,
                       .metrics = json{{"val_loss", 0.123456789012345}, {"val_iou", 0.5}, {"loss", 1e-7}}};
  c.training_seconds = 661.25;  // the run's time so far, 11m01.25s
  c.created = "2026-11-29T23:07:22Z";
  return c;
}

// ---- outcomes ----

struct Outcome {
  bool accepted = false;
  ErrorKind kind = ErrorKind::io;
  std::string message;
};

template <class F>
Outcome outcome_of(F&& call) {
  Outcome out;
  try {
    call();
    out.accepted = true;
  } catch (const Error& e) {
    out.kind = e.kind();
    out.message = e.message();
  }
  return out;
}

void write_all(const fs::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// ---- hand-made files: a valid file's tensors and metadata, edited, then written with the plain writer ----

struct DraftTensor {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;

  float get(std::size_t i) const {
    float v;
    std::memcpy(&v, bytes.data() + i * 4, 4);
    return v;
  }
  void set(std::size_t i, float v) { std::memcpy(bytes.data() + i * 4, &v, 4); }
};

struct Draft {
  std::vector<DraftTensor> tensors;
  std::map<std::string, std::string> metadata;
  bool rehash = true;  // recompute the sha256 key over the edited data

  DraftTensor& tensor(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return t;
    throw std::logic_error("no tensor " + name);
  }
  void drop(const std::string& name) {
    std::erase_if(tensors, [&](const DraftTensor& t) { return t.name == name; });
  }
  void drop_prefix(const std::string& prefix) {
    std::erase_if(tensors, [&](const DraftTensor& t) { return t.name.starts_with(prefix); });
  }
  void edit_config(const std::function<void(json&)>& edit) {
    json j = json::parse(metadata.at("config"));
    edit(j);
    metadata["config"] = j.dump();
  }
  void edit_position(const std::function<void(json&)>& edit) {
    json j = json::parse(metadata.at("position"));
    edit(j);
    metadata["position"] = j.dump();
  }
};

Draft draft_of(const fs::path& path) {
  const SafetensorsFile file = SafetensorsFile::read(path);
  Draft d;
  d.metadata = file.metadata();
  for (const auto& t : file.tensors()) {
    const auto data = file.data(t);
    d.tensors.push_back({t.name, t.dtype, t.shape, {data.begin(), data.end()}});
  }
  return d;
}

void write_draft(const Draft& d, const fs::path& path) {
  SafetensorsWriter w;
  for (const auto& t : d.tensors) w.add(t.name, t.dtype, t.shape, t.bytes);
  std::map<std::string, std::string> metadata = d.metadata;
  if (d.rehash && metadata.contains("sha256")) metadata["sha256"] = w.data_section_sha256_hex();
  w.set_metadata(metadata);
  w.write(path);
}

// One refusal: an edit of the small model's full checkpoint, and what load must say (after "<path>: ").
struct Refusal {
  const char* row;
  std::function<void(Draft&)> edit;
  ErrorKind kind;
  std::string message;
  bool data_only = false;  // found only by reading the tensor data: inspect accepts the file
};

const std::vector<Refusal>& load_refusals() {
  static const std::vector<Refusal> cases = [] {
    std::vector<Refusal> r;
    const auto missing_key = [&](const std::string& key) {
      r.push_back({"", [key](Draft& d) { d.metadata.erase(key); }, ErrorKind::io,
                   "metadata key '" + key + "' is missing"});
    };
    const auto bad_value = [&](const std::string& key, const std::string& value, const std::string& what) {
      r.push_back({"",
                   [key, value](Draft& d) {
                     d.metadata[key] = value;
                     d.rehash = key != "sha256";
                   },
                   ErrorKind::io, "metadata " + key + ": " + what + ", got '" + value + "'"});
    };

    // The format.
    r.push_back({"format of a newer version", [](Draft& d) { d.metadata["format"] = "unet-workbench/2"; },
                 ErrorKind::io,
                 "written by a newer or other program: format 'unet-workbench/2' (this program reads "
                 "unet-workbench/1)"});
    r.push_back({"format of another program", [](Draft& d) { d.metadata["format"] = "pt"; }, ErrorKind::io,
                 "written by a newer or other program: format 'pt' (this program reads unet-workbench/1)"});
    r.push_back({"no format", [](Draft& d) { d.metadata.erase("format"); }, ErrorKind::io,
                 "not a UNet Workbench checkpoint: the metadata has no 'format' key"});
    r.push_back({"no metadata at all", [](Draft& d) { d.metadata.clear(); }, ErrorKind::io,
                 "not a UNet Workbench checkpoint: the metadata has no 'format' key"});

    // Required keys and their values.
    for (const char* key : {"sha256", "step", "epoch", "loss_scale", "metrics", "created", "config"})
      missing_key(key);
    const std::string not_count = "must be a whole number >= 0";
    bad_value("step", "-1", not_count);
    bad_value("step", "+1", not_count);
    bad_value("step", "1.5", not_count);
    bad_value("step", "", not_count);
    bad_value("step", " 1", not_count);
    bad_value("step", "9223372036854775808", not_count);  // 2^63: past int64
    bad_value("epoch", "seven", not_count);
    const std::string not_scale = "must be a positive finite number";
    for (const char* v : {"0", "-1", "inf", "nan", "", "2x", "1e999"}) bad_value("loss_scale", v, not_scale);
    bad_value("metrics", "[1, 2]", "must be a JSON object");
    bad_value("metrics", "{\"val_loss\": ", "must be a JSON object");
    const std::string not_time = "must be an ISO 8601 date and time such as 2026-11-29T23:07:22Z";
    for (const char* v : {"yesterday", "2026-11-29T23:07:22", "2026-13-01T00:00:00Z", "2026-11-29 23:07:22Z",
                          "2026-11-29T23:07:22.Z", "2026-11-29T23:07:22+1:00", ""})
      bad_value("created", v, not_time);
    bad_value("sha256", "abc", "not a SHA-256 digest (64 hexadecimal digits)");
    bad_value("sha256", std::string(64, 'g'), "not a SHA-256 digest (64 hexadecimal digits)");
    bad_value("config", "{\"model\": ", "not valid JSON");

    // The extra key.
    bad_value("position", "[]", "must be a JSON object");
    bad_value("position", "{", "must be a JSON object");
    r.push_back({"position: unknown field",
                 [](Draft& d) { d.edit_position([](json& j) { j["speed"] = 1; }); }, ErrorKind::io,
                 "metadata position: unknown field 'speed'"});
    r.push_back({"position: missing field",
                 [](Draft& d) { d.edit_position([](json& j) { j.erase("clean_steps"); }); }, ErrorKind::io,
                 "metadata position: missing field 'clean_steps'"});
    r.push_back({"position: negative count",
                 [](Draft& d) { d.edit_position([](json& j) { j["epoch_step"] = -2; }); }, ErrorKind::io,
                 "metadata position: epoch_step must be a whole number >= 0, got -2"});
    r.push_back({"position: fraction",
                 [](Draft& d) { d.edit_position([](json& j) { j["clean_steps"] = 1.5; }); }, ErrorKind::io,
                 "metadata position: clean_steps must be a whole number >= 0, got 1.5"});
    r.push_back({"position: step disagrees",
                 [](Draft& d) { d.edit_position([](json& j) { j["step"] = 1235; }); }, ErrorKind::io,
                 "metadata position: step 1235 disagrees with the metadata key step"});
    r.push_back({"position: loss_scale disagrees",
                 [](Draft& d) { d.edit_position([](json& j) { j["loss_scale"] = 0.2; }); }, ErrorKind::io,
                 "metadata position: loss_scale 0.2 disagrees with the metadata key loss_scale"});
    r.push_back({"position: loss_scale zero",
                 [](Draft& d) { d.edit_position([](json& j) { j["loss_scale"] = 0; }); }, ErrorKind::io,
                 "metadata position: loss_scale must be a positive finite number, got 0"});
    // Positions the trainer's arithmetic could not take (issue 11): more steps into the epoch than in the
    // run, more samples per step than any config gives.
    r.push_back({"position: epoch_step past step",
                 [](Draft& d) { d.edit_position([](json& j) { j["epoch_step"] = 1235; }); }, ErrorKind::io,
                 "metadata position: epoch_step must be <= step (1234), got 1235"});
    r.push_back(
        {"position: effective_batch out of range",
         [](Draft& d) { d.edit_position([](json& j) { j["effective_batch"] = std::int64_t{1} << 62; }); },
         ErrorKind::io,
         "metadata position: effective_batch must be <= 4294967296 (train.batch_size x "
         "train.accumulation), got 4611686018427387904"});

    // A well-formed file whose config the config rules refuse, or whose tensors do not fit it.
    r.push_back({"config: invalid value",
                 [](Draft& d) { d.edit_config([](json& j) { j["train"]["batch_size"] = 0; }); },
                 ErrorKind::data, "metadata config: train.batch_size: must be in 1..65536, got 0"});
    r.push_back(
        {"config: unknown precision",
         [](Draft& d) { d.edit_config([](json& j) { j["precision"] = "fp8"; }); }, ErrorKind::data,
         "metadata config: precision: must be one of \"fp32\", \"mixed-fp16\", \"mixed-bf16\", got \"fp8\""});
    r.push_back({"config: deeper model than the tensors",
                 [](Draft& d) { d.edit_config([](json& j) { j["model"]["depth"] = 2; }); }, ErrorKind::data,
                 "missing tensor enc.1.c1.pw.weight"});
    r.push_back({"config: other input channels",
                 [](Draft& d) { d.edit_config([](json& j) { j["model"]["in_channels"] = 1; }); },
                 ErrorKind::data, "enc.0.c1.pw.weight: shape [4, 1, 3, 3] expected, got [4, 3, 3, 3]"});
    r.push_back({"missing tensor", [](Draft& d) { d.drop("enc.0.c2.pw.bias"); }, ErrorKind::data,
                 "missing tensor enc.0.c2.pw.bias"});
    r.push_back({"unexpected tensor",
                 [](Draft& d) {
                   d.tensors.push_back({"foo", StDType::F32, {1}, std::vector<std::byte>(4)});
                 },
                 ErrorKind::data, "unexpected tensor 'foo'"});
    r.push_back({"unexpected optimizer tensor",
                 [](Draft& d) {
                   d.tensors.push_back({"optimizer.m.foo", StDType::F32, {}, std::vector<std::byte>(4)});
                 },
                 ErrorKind::data, "unexpected tensor 'optimizer.m.foo'"});
    r.push_back({"hostile tensor name",
                 [](Draft& d) {
                   d.tensors.push_back({"bad\nname" + std::string(100, 'x'), StDType::U8, {0}, {}});
                 },
                 ErrorKind::data, "unexpected tensor 'bad\\x0aname" + std::string(56, 'x') + "'..."});
    r.push_back({"wrong shape",
                 [](Draft& d) {
                   DraftTensor& t = d.tensor("enc.0.c1.pw.weight");
                   t.shape = {4, 1, 3, 3};
                   t.bytes.resize(4 * 1 * 3 * 3 * 4);
                 },
                 ErrorKind::data, "enc.0.c1.pw.weight: shape [4, 3, 3, 3] expected, got [4, 1, 3, 3]"});
    r.push_back({"transposed shape",
                 [](Draft& d) {
                   d.tensor("up.0.weight").shape = {4, 8, 2, 2};
                 },
                 ErrorKind::data, "up.0.weight: shape [8, 4, 2, 2] expected, got [4, 8, 2, 2]"});
    r.push_back({"moment of the wrong shape",
                 [](Draft& d) { d.tensor("optimizer.v.head.weight").shape = {4}; }, ErrorKind::data,
                 "optimizer.v.head.weight: shape [1, 4, 1, 1] expected, got [4]"});
    r.push_back({"wrong dtype",
                 [](Draft& d) {
                   DraftTensor& t = d.tensor("head.bias");
                   t.dtype = StDType::F16;
                   t.bytes.resize(2);
                 },
                 ErrorKind::data, "head.bias: dtype F32 expected, got F16"});
    r.push_back(
        {"one moment missing", [](Draft& d) { d.drop("optimizer.v.head.bias"); }, ErrorKind::data,
         "optimizer state is incomplete: missing tensor optimizer.v.head.bias (31 of 32 state tensors "
         "present; a checkpoint holds all of its optimizer's state or none)"});
    r.push_back({"first moments only", [](Draft& d) { d.drop_prefix("optimizer.v."); }, ErrorKind::data,
                 "optimizer state is incomplete: missing tensor optimizer.v.enc.0.c1.pw.weight (16 of 32 "
                 "state tensors present; a checkpoint holds all of its optimizer's state or none)"});

    // Found only in the data.
    r.push_back({"checksum of other data",
                 [](Draft& d) {
                   d.metadata["sha256"] = std::string(64, '0');
                   d.rehash = false;
                 },
                 ErrorKind::io, "", true});
    r.push_back({"nan in a parameter", [](Draft& d) { d.tensor("enc.0.c2.pw.weight").set(5, std::nanf("")); },
                 ErrorKind::data, "enc.0.c2.pw.weight: non-finite value nan at element 5", true});
    r.push_back({"-inf in a parameter",
                 [](Draft& d) { d.tensor("head.weight").set(3, -std::numeric_limits<float>::infinity()); },
                 ErrorKind::data, "head.weight: non-finite value -inf at element 3", true});
    r.push_back({"inf in a first moment",
                 [](Draft& d) {
                   d.tensor("optimizer.m.mid.c1.pw.bias").set(0, std::numeric_limits<float>::infinity());
                 },
                 ErrorKind::data, "optimizer.m.mid.c1.pw.bias: non-finite value inf at element 0", true});
    r.push_back(
        {"negative second moment", [](Draft& d) { d.tensor("optimizer.v.head.weight").set(2, -0.5f); },
         ErrorKind::data,
         "optimizer.v.head.weight: negative value -0.5 at element 2 (a second moment is never negative)",
         true});

    return r;
  }();
  return cases;
}

std::string row_name(const Refusal& c) {
  return c.row[0] != '\0' ? std::string(c.row) : c.message;
}

std::string utc_now_text() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  return std::string(text, std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm));
}

}  // namespace

class TestCheckpoint : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void roundTrip_data();
  void roundTrip();
  void fileIsWhatTheSpecSays();
  void separableNamesAndShapes();
  void createdIsSetWhenEmpty();
  void configPathsResolveAgainstTheCheckpointFolder();
  void loadsWhateverDevicesWroteIt();
  void loadsAFileWrittenToTheSpecAlone();
  void refusals_data();
  void refusals();
  void checksumMismatchNamesBothHashes();
  void safetensorsRulesStillApply();
  void saveRefuses_data();
  void saveRefuses();
  void lacksOptimizerState_data();
  void lacksOptimizerState();
};

void TestCheckpoint::roundTrip_data() {
  QTest::addColumn<int>("inChannels");
  QTest::addColumn<int>("classes");
  QTest::addColumn<int>("width");
  QTest::addColumn<int>("depth");
  QTest::addColumn<bool>("separable");
  QTest::addColumn<bool>("full");
  QTest::newRow("in 3, classes 1, width 4, depth 1, plain, full") << 3 << 1 << 4 << 1 << false << true;
  QTest::newRow("in 1, classes 3, width 4, depth 2, separable, full") << 1 << 3 << 4 << 2 << true << true;
  QTest::newRow("in 3, classes 3, width 2, depth 3, separable, weights") << 3 << 3 << 2 << 3 << true << false;
  QTest::newRow("in 1, classes 1, width 2, depth 4, plain, weights") << 1 << 1 << 2 << 4 << false << false;
  QTest::newRow("in 3, classes 3, width 3, depth 4, separable, full") << 3 << 3 << 3 << 4 << true << true;
}

void TestCheckpoint::roundTrip() {
  QFETCH(int, inChannels);
  QFETCH(int, classes);
  QFETCH(int, width);
  QFETCH(int, depth);
  QFETCH(bool, separable);
  QFETCH(bool, full);
  const UNetSpec spec{
      .in_channels = inChannels, .classes = classes, .width = width, .depth = depth, .separable = separable};
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "run.safetensors";
  const Checkpoint saved = make_checkpoint(spec, path.parent_path());
  const SlabLayout l = layout_of(spec);
  QVERIFY(l.slab_elements > l.parameter_count);  // there are gaps, and they hold junk in `saved`

  save_checkpoint(path, saved, full ? CheckpointKind::full : CheckpointKind::weights_only);
  const Checkpoint loaded = load_checkpoint(path);

  QVERIFY(loaded.config == saved.config);
  QCOMPARE(loaded.config.base_dir, saved.config.base_dir);
  QVERIFY(loaded.position == saved.position);
  QCOMPARE(loaded.position.metrics, saved.position.metrics);
  QCOMPARE(loaded.training_seconds, 661.25);
  QCOMPARE(loaded.created, saved.created);
  QVERIFY(bitwise_equal(loaded.parameters, without_gaps(l, saved.parameters)));
  if (full) {
    QVERIFY(bitwise_equal(loaded.adam_m, without_gaps(l, saved.adam_m)));
    QVERIFY(bitwise_equal(loaded.adam_v, without_gaps(l, saved.adam_v)));
  } else {
    QVERIFY(loaded.adam_m.empty());
    QVERIFY(loaded.adam_v.empty());
  }
  // The awkward bit patterns survive: -0, the smallest denormal, the largest float.
  QCOMPARE(std::signbit(loaded.parameters[0]), true);
  QCOMPARE(loaded.parameters[1], std::numeric_limits<float>::denorm_min());
  QCOMPARE(loaded.parameters[2], std::numeric_limits<float>::max());

  const CheckpointInfo info = inspect_checkpoint(path);
  QVERIFY(info.config == saved.config);
  QVERIFY(info.position == saved.position);
  QCOMPARE(info.created, saved.created);
  QCOMPARE(info.has_optimizer, full);
  QCOMPARE(info.parameter_count, l.parameter_count);

  // Saving what was loaded writes the same file.
  const fs::path again = path.parent_path() / "again.safetensors";
  save_checkpoint(again, loaded, full ? CheckpointKind::full : CheckpointKind::weights_only);
  QVERIFY(test::read_all(again) == test::read_all(path));
}

void TestCheckpoint::fileIsWhatTheSpecSays() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "small.safetensors";
  const Checkpoint c = make_checkpoint(small_spec(), path.parent_path());
  save_checkpoint(path, c);
  const SafetensorsFile file = SafetensorsFile::read(path);

  // The model in3/classes1/width4/depth1, by hand: module order, canonical shapes.
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> params = {
      {"enc.0.c1.pw.weight", {4, 3, 3, 3}}, {"enc.0.c1.pw.bias", {4}},
      {"enc.0.c2.pw.weight", {4, 4, 3, 3}}, {"enc.0.c2.pw.bias", {4}},
      {"mid.c1.pw.weight", {8, 4, 3, 3}},   {"mid.c1.pw.bias", {8}},
      {"mid.c2.pw.weight", {8, 8, 3, 3}},   {"mid.c2.pw.bias", {8}},
      {"up.0.weight", {8, 4, 2, 2}},        {"up.0.bias", {4}},
      {"dec.0.c1.pw.weight", {4, 8, 3, 3}}, {"dec.0.c1.pw.bias", {4}},
      {"dec.0.c2.pw.weight", {4, 4, 3, 3}}, {"dec.0.c2.pw.bias", {4}},
      {"head.weight", {1, 4, 1, 1}},        {"head.bias", {1}}};
  std::vector<std::string> expected_names;
  std::vector<std::vector<std::int64_t>> expected_shapes;
  for (const char* prefix : {"", "optimizer.m.", "optimizer.v."}) {
    for (const auto& [name, shape] : params) {
      expected_names.push_back(prefix + name);
      expected_shapes.push_back(shape);
    }
  }
  std::vector<std::string> names;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < file.tensors().size(); ++i) {
    const StTensorInfo& t = file.tensors()[i];
    names.push_back(t.name);
    QVERIFY(t.dtype == StDType::F32);
    if (i < expected_shapes.size()) QCOMPARE(t.shape, expected_shapes[i]);
    QCOMPARE(t.begin, offset);  // no gaps in the file
    offset = t.end;
  }
  QCOMPARE(names, expected_names);
  // 1717 parameters: 112 + 148 (enc.0) + 296 + 584 (mid) + 132 (up.0) + 292 + 148 (dec.0) + 5 (head).
  QCOMPARE(layout_of(small_spec()).parameter_count, std::int64_t{1717});
  QCOMPARE(file.data_section().size(), std::size_t{3 * 1717 * 4});

  // Every tensor's bytes are its slab range; the slab offsets of this model, by hand: 108 weights padded to
  // 112, 4 biases padded to 16.
  const SlabLayout l = layout_of(small_spec());
  QCOMPARE(l.slab_elements, std::int64_t{1824});
  QCOMPARE(l.offsets[1], std::int64_t{112});
  QCOMPARE(l.offsets[2], std::int64_t{128});
  for (std::size_t p = 0; p < params.size(); ++p) {
    for (const auto& [prefix, slab] : {std::pair{"", &c.parameters}, std::pair{"optimizer.m.", &c.adam_m},
                                       std::pair{"optimizer.v.", &c.adam_v}}) {
      const auto bytes = file.data(*file.find(prefix + params[p].first));
      QCOMPARE(bytes.size(), static_cast<std::size_t>(l.numels[p]) * 4);
      QVERIFY(std::memcmp(bytes.data(), slab->data() + l.offsets[p], bytes.size()) == 0);
    }
  }
  const auto element = [&](const std::string& name, std::size_t index) {
    float v;
    std::memcpy(&v, file.data(*file.find(name)).data() + index * 4, 4);
    return v;
  };
  // enc.0.c1.pw.weight [o=2][i=1][kh=0][kw=2] of [4, 3, 3, 3]: ((2*3 + 1)*3 + 0)*3 + 2 = 65.
  QCOMPARE(element("enc.0.c1.pw.weight", 65), c.parameters[0 + 65]);
  // enc.0.c2.pw.weight [3][2][1][1] of [4, 4, 3, 3] at slab offset 128: ((3*4 + 2)*3 + 1)*3 + 1 = 130.
  QCOMPARE(element("enc.0.c2.pw.weight", 130), c.parameters[128 + 130]);
  QCOMPARE(element("optimizer.v.enc.0.c2.pw.weight", 130), c.adam_v[128 + 130]);

  // The metadata: exactly the spec's keys plus position, training_state and the run's time.
  const auto& m = file.metadata();
  std::vector<std::string> keys;
  for (const auto& [key, value] : m) keys.push_back(key);
  QCOMPARE(keys,
           (std::vector<std::string>{"config", "created", "epoch", "format", "loss_scale", "metrics",
                                     "position", "sha256", "step", "training_seconds", "training_state"}));
  QCOMPARE(m.at("training_seconds"), std::string("661.25"));
  QCOMPARE(m.at("format"), std::string("unet-workbench/1"));
  QCOMPARE(m.at("config"), config_to_string(c.config));
  QCOMPARE(m.at("step"), std::string("1234"));
  QCOMPARE(m.at("epoch"), std::string("7"));
  QCOMPARE(m.at("loss_scale"), std::string("0.1"));
  QCOMPARE(json::parse(m.at("metrics")), c.position.metrics);
  QCOMPARE(m.at("created"), std::string("2026-11-29T23:07:22Z"));
  QCOMPARE(
      json::parse(m.at("position")),
      (json{{"step", 1234}, {"epoch", 7}, {"epoch_step", 56}, {"loss_scale", 0.1}, {"clean_steps", 789}}));
  QCOMPARE(m.at("sha256"), sha256_hex(file.data_section()));
  QCOMPARE(m.at("sha256").size(), std::size_t{64});

  // A weights-only export holds the 16 parameters and the same metadata keys.
  const fs::path weights = path.parent_path() / "weights.safetensors";
  save_checkpoint(weights, c, CheckpointKind::weights_only);
  const SafetensorsFile w = SafetensorsFile::read(weights);
  names.clear();
  for (const auto& t : w.tensors()) names.push_back(t.name);
  QCOMPARE(names, std::vector<std::string>(expected_names.begin(), expected_names.begin() + 16));
  QCOMPARE(w.data_section().size(), std::size_t{1717 * 4});
  QCOMPARE(w.metadata().at("sha256"), sha256_hex(w.data_section()));
  QCOMPARE(w.metadata().size(), m.size());
}

void TestCheckpoint::separableNamesAndShapes() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "sep.safetensors";
  const UNetSpec spec{.in_channels = 1, .classes = 3, .width = 2, .depth = 1, .separable = true};
  save_checkpoint(path, make_checkpoint(spec, path.parent_path()), CheckpointKind::weights_only);
  const SafetensorsFile file = SafetensorsFile::read(path);
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& t : file.tensors()) {
    names.push_back(t.name);
    shapes.push_back(t.shape);
  }
  QCOMPARE(names, (std::vector<std::string>{
                      "enc.0.c1.dw.weight", "enc.0.c1.pw.weight", "enc.0.c1.pw.bias",   "enc.0.c2.dw.weight",
                      "enc.0.c2.pw.weight", "enc.0.c2.pw.bias",   "mid.c1.dw.weight",   "mid.c1.pw.weight",
                      "mid.c1.pw.bias",     "mid.c2.dw.weight",   "mid.c2.pw.weight",   "mid.c2.pw.bias",
                      "up.0.weight",        "up.0.bias",          "dec.0.c1.dw.weight", "dec.0.c1.pw.weight",
                      "dec.0.c1.pw.bias",   "dec.0.c2.dw.weight", "dec.0.c2.pw.weight", "dec.0.c2.pw.bias",
                      "head.weight",        "head.bias"}));
  const std::vector<std::vector<std::int64_t>> expected = {
      {1, 1, 3, 3}, {2, 1, 1, 1}, {2}, {2, 1, 3, 3}, {2, 2, 1, 1}, {2},  // enc.0: 1 -> 2
      {2, 1, 3, 3}, {4, 2, 1, 1}, {4}, {4, 1, 3, 3}, {4, 4, 1, 1}, {4},  // mid: 2 -> 4
      {4, 2, 2, 2}, {2},                                                 // up.0: 4 -> 2
      {4, 1, 3, 3}, {2, 4, 1, 1}, {2}, {2, 1, 3, 3}, {2, 2, 1, 1}, {2},  // dec.0: 2 + 2 -> 2
      {3, 2, 1, 1}, {3}};                                                // head: 2 -> 3 classes
  QCOMPARE(shapes.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) QCOMPARE(shapes[i], expected[i]);
}

void TestCheckpoint::createdIsSetWhenEmpty() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "now.safetensors";
  Checkpoint c = make_checkpoint(small_spec(), path.parent_path());
  c.created.clear();
  const std::string before = utc_now_text();
  save_checkpoint(path, c);
  const std::string after = utc_now_text();
  const std::string created = load_checkpoint(path).created;
  // YYYY-MM-DDTHH:MM:SSZ, between the two clock readings (this form sorts as time does).
  QCOMPARE(created.size(), std::size_t{20});
  QCOMPARE(created[10], 'T');
  QCOMPARE(created.back(), 'Z');
  QVERIFY2(before <= created && created <= after, (before + " <= " + created + " <= " + after).c_str());
}

void TestCheckpoint::configPathsResolveAgainstTheCheckpointFolder() {
  // The config travels as text without its base_dir: a copied checkpoint resolves paths next to itself.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path folder = dir.path().toStdString();
  Checkpoint c = make_checkpoint(small_spec(), "/somewhere/else");
  c.config.data.source = DataSource::folder;
  c.config.data.path = "cells";
  save_checkpoint(folder / "moved.safetensors", c);
  const Checkpoint loaded = load_checkpoint(folder / "moved.safetensors");
  QCOMPARE(loaded.config.base_dir, folder);
  QCOMPARE(loaded.config.resolve(loaded.config.data.path), folder / "cells");
  QCOMPARE(inspect_checkpoint(folder / "moved.safetensors").config.base_dir, folder);
  Config expected = c.config;
  expected.base_dir = folder;
  QVERIFY(loaded.config == expected);
}

void TestCheckpoint::loadsWhateverDevicesWroteIt() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path folder = dir.path().toStdString();
  Checkpoint three = make_checkpoint(small_spec(), folder);
  three.config.devices = {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}};
  Checkpoint one = three;
  one.config.devices = {{DeviceKind::cpu, 0}};
  save_checkpoint(folder / "three.safetensors", three);
  save_checkpoint(folder / "one.safetensors", one);

  const Checkpoint loaded = load_checkpoint(folder / "three.safetensors");
  QCOMPARE(device_names(loaded.config.devices), (std::vector<std::string>{"cpu:0", "cpu:1", "cpu:2"}));
  QVERIFY(loaded.config == three.config);
  const Checkpoint loaded_one = load_checkpoint(folder / "one.safetensors");
  QVERIFY(bitwise_equal(loaded.parameters, loaded_one.parameters));
  QVERIFY(bitwise_equal(loaded.adam_v, loaded_one.adam_v));

  // The two files differ in the config text only: same tensors, same data, same checksum.
  const SafetensorsFile a = SafetensorsFile::read(folder / "three.safetensors");
  const SafetensorsFile b = SafetensorsFile::read(folder / "one.safetensors");
  QVERIFY(a.tensors() == b.tensors());
  QVERIFY(std::ranges::equal(a.data_section(), b.data_section()));
  auto ma = a.metadata(), mb = b.metadata();
  QVERIFY(ma.at("config") != mb.at("config"));
  ma.erase("config");
  mb.erase("config");
  QVERIFY(ma == mb);
}

void TestCheckpoint::loadsAFileWrittenToTheSpecAlone() {
  // Another tool: tensors sorted by name (as Python's safetensors writes them), no position key, an
  // upper-case checksum, a created time with a fraction and an offset, a metadata key of its own.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path folder = dir.path().toStdString();
  const Checkpoint c = make_checkpoint(small_spec(), folder);
  save_checkpoint(folder / "ours.safetensors", c);
  Draft d = draft_of(folder / "ours.safetensors");
  std::sort(d.tensors.begin(), d.tensors.end(),
            [](const DraftTensor& x, const DraftTensor& y) { return x.name < y.name; });
  d.metadata.erase("position");
  d.metadata.erase("training_seconds");
  d.metadata["created"] = "2026-11-30T00:07:22.5+01:00";
  d.metadata["written_by"] = "a script";
  d.rehash = false;
  {
    SafetensorsWriter w;
    for (const auto& t : d.tensors) w.add(t.name, t.dtype, t.shape, t.bytes);
    std::string upper = w.data_section_sha256_hex();
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    d.metadata["sha256"] = upper;
  }
  write_draft(d, folder / "theirs.safetensors");
  QCOMPARE(SafetensorsFile::read(folder / "theirs.safetensors").tensors().front().name,
           std::string("dec.0.c1.pw.bias"));

  const Checkpoint loaded = load_checkpoint(folder / "theirs.safetensors");
  TrainingPosition expected = c.position;
  expected.epoch_step = 0;  // the start of the epoch
  expected.clean_steps = 0;
  QVERIFY(loaded.position == expected);
  // A file without the run's time (written before it was recorded, or by another tool) loads with 0.
  QCOMPARE(loaded.training_seconds, 0.0);
  QCOMPARE(loaded.created, std::string("2026-11-30T00:07:22.5+01:00"));
  const SlabLayout l = layout_of(small_spec());
  QVERIFY(bitwise_equal(loaded.parameters, without_gaps(l, c.parameters)));
  QVERIFY(bitwise_equal(loaded.adam_m, without_gaps(l, c.adam_m)));
  QVERIFY(bitwise_equal(loaded.adam_v, without_gaps(l, c.adam_v)));
  QVERIFY(inspect_checkpoint(folder / "theirs.safetensors").position == expected);
}

void TestCheckpoint::refusals_data() {
  QTest::addColumn<int>("index");
  const auto& cases = load_refusals();
  for (std::size_t i = 0; i < cases.size(); ++i)
    QTest::newRow(row_name(cases[i]).c_str()) << static_cast<int>(i);
}

void TestCheckpoint::refusals() {
  QFETCH(int, index);
  const Refusal& c = load_refusals()[static_cast<std::size_t>(index)];
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path folder = dir.path().toStdString();
  save_checkpoint(folder / "valid.safetensors", make_checkpoint(small_spec(), folder));
  Draft d = draft_of(folder / "valid.safetensors");
  c.edit(d);
  const fs::path path = folder / "edited.safetensors";
  write_draft(d, path);

  const Outcome loaded = outcome_of([&] { load_checkpoint(path); });
  QVERIFY2(!loaded.accepted, "load accepted the file");
  QCOMPARE(static_cast<int>(loaded.kind), static_cast<int>(c.kind));
  if (c.message.empty()) {
    QVERIFY2(loaded.message.starts_with(path.string() + ": checksum mismatch: the file is corrupt"),
             loaded.message.c_str());
  } else {
    QCOMPARE(loaded.message, path.string() + ": " + c.message);
  }

  // inspect reads no data: it says the same as load, or accepts what only the data gives away.
  const Outcome inspected = outcome_of([&] { inspect_checkpoint(path); });
  if (c.data_only) {
    QVERIFY2(inspected.accepted, inspected.message.c_str());
  } else {
    QVERIFY2(!inspected.accepted, "inspect accepted the file");
    QCOMPARE(static_cast<int>(inspected.kind), static_cast<int>(loaded.kind));
    QCOMPARE(inspected.message, loaded.message);
  }
}

void TestCheckpoint::checksumMismatchNamesBothHashes() {
  // One flipped bit in the last byte of the data section: still valid safetensors, refused by the checksum.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "flip.safetensors";
  save_checkpoint(path, make_checkpoint(small_spec(), path.parent_path()));
  std::vector<std::byte> bytes = test::read_all(path);
  const std::string stored = SafetensorsFile::read(path).metadata().at("sha256");
  bytes.back() ^= std::byte{0x01};
  write_all(path, bytes);
  const std::string actual = sha256_hex(SafetensorsFile::read(path).data_section());
  QVERIFY(actual != stored);

  const Outcome o = outcome_of([&] { load_checkpoint(path); });
  QVERIFY(!o.accepted);
  QCOMPARE(static_cast<int>(o.kind), static_cast<int>(ErrorKind::io));
  QCOMPARE(o.message, path.string() +
                          ": checksum mismatch: the file is corrupt (the data section's SHA-256 is " +
                          actual + ", the metadata says " + stored + ")");
  QVERIFY(outcome_of([&] { inspect_checkpoint(path); }).accepted);  // the header is intact
}

void TestCheckpoint::safetensorsRulesStillApply() {
  // The format layer's refusals reach the caller as io errors naming the file, from load and from inspect.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path folder = dir.path().toStdString();
  const fs::path valid = folder / "valid.safetensors";
  save_checkpoint(valid, make_checkpoint(small_spec(), folder));
  const std::vector<std::byte> bytes = test::read_all(valid);

  struct Case {
    const char* what;
    std::vector<std::byte> bytes;
  };
  std::vector<Case> cases;
  cases.push_back({"truncated by one byte", {bytes.begin(), bytes.end() - 1}});
  cases.push_back({"a trailing byte", bytes});
  cases.back().bytes.push_back(std::byte{0});
  cases.push_back({"only the length field", {bytes.begin(), bytes.begin() + 8}});
  cases.push_back({"empty", {}});
  std::vector<std::byte> huge = bytes;
  huge[7] = std::byte{0x01};  // header length 2^56
  cases.push_back({"header length past the end", huge});
  std::vector<std::byte> not_json = bytes;
  not_json[8] = std::byte{'['};
  cases.push_back({"header not an object", not_json});
  // Edits of the header text, with the length field rewritten to match.
  const auto header_edit = [&](const std::string& from, const std::string& to) {
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
      n |= std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]) << (8 * i);
    std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
    const std::size_t at = header.find(from);
    if (at == std::string::npos) throw std::logic_error("no " + from + " in the header");
    header.replace(at, from.size(), to);
    std::vector<std::byte> out;
    out.reserve(8 + header.size() + bytes.size());
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(header.size() >> (8 * i)));
    for (const char ch : header) out.push_back(static_cast<std::byte>(ch));
    out.insert(out.end(), bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), bytes.end());
    return out;
  };
  cases.push_back({"a duplicate metadata key",
                   header_edit("\"__metadata__\":{", "\"__metadata__\":{\"format\":\"unet-workbench/1\",")});
  cases.push_back({"a nested shape", header_edit("\"shape\":[4]", "\"shape\":[[4]]")});
  cases.push_back(
      {"a metadata value that is not a string", header_edit("\"step\":\"1234\"", "\"step\":1234")});

  for (const auto& c : cases) {
    const fs::path path = folder / "bad.safetensors";
    write_all(path, c.bytes);
    for (const bool inspect : {false, true}) {
      const Outcome o =
          outcome_of([&] { inspect ? (void)inspect_checkpoint(path) : (void)load_checkpoint(path); });
      const std::string label = std::string(c.what) + (inspect ? " (inspect)" : " (load)") + ": " + o.message;
      QVERIFY2(!o.accepted, label.c_str());
      QVERIFY2(o.kind == ErrorKind::io, label.c_str());
      QVERIFY2(o.message.starts_with(path.string() + ": "), label.c_str());
    }
  }
  const Outcome absent = outcome_of([&] { load_checkpoint(folder / "absent.safetensors"); });
  QCOMPARE(absent.message,
           (folder / "absent.safetensors").string() + ": cannot open: No such file or directory");
  const Outcome absent_inspect = outcome_of([&] { inspect_checkpoint(folder / "absent.safetensors"); });
  QCOMPARE(absent_inspect.message, absent.message);
}

namespace {

struct SaveRefusal {
  const char* row;
  std::function<void(Checkpoint&)> edit;
  CheckpointKind save_as;
  ErrorKind kind;
  std::string message;  // after "save_checkpoint <path>: "
};

const std::vector<SaveRefusal>& save_refusals() {
  static const std::vector<SaveRefusal> cases = [] {
    const auto full = CheckpointKind::full;
    const std::string slab = "1824";  // 1717 parameters + gaps, see fileIsWhatTheSpecSays
    std::vector<SaveRefusal> r;
    r.push_back({"parameters too short", [](Checkpoint& c) { c.parameters.pop_back(); }, full,
                 ErrorKind::usage, "parameters holds 1823 floats, the config's model needs " + slab});
    r.push_back(
        {"parameters of another model", [](Checkpoint& c) { c.config.model.depth = 2; },
         CheckpointKind::weights_only, ErrorKind::usage,
         "parameters holds " + slab + " floats, the config's model needs " +
             std::to_string(
                 layout_of(UNetSpec{.in_channels = 3, .classes = 1, .width = 4, .depth = 2}).slab_elements)});
    r.push_back({"full without moments", [](Checkpoint& c) { c.adam_m.clear(); }, full, ErrorKind::usage,
                 "adam_m holds 0 floats, the config's model needs " + slab});
    r.push_back({"full without second moments", [](Checkpoint& c) { c.adam_v.resize(3); }, full,
                 ErrorKind::usage, "adam_v holds 3 floats, the config's model needs " + slab});
    r.push_back({"invalid config", [](Checkpoint& c) { c.config.train.batch_size = 0; }, full,
                 ErrorKind::usage, "invalid config: train.batch_size: must be in 1..65536, got 0"});
    r.push_back({"invalid model", [](Checkpoint& c) { c.config.model.width = 0; }, full, ErrorKind::usage,
                 "invalid config: model.width: must be in 1..1024, got 0"});
    r.push_back({"negative step", [](Checkpoint& c) { c.position.step = -1; }, full, ErrorKind::usage,
                 "invalid position: step must be >= 0, got -1"});
    r.push_back({"negative clean steps", [](Checkpoint& c) { c.position.clean_steps = -5; }, full,
                 ErrorKind::usage, "invalid position: clean_steps must be >= 0, got -5"});
    r.push_back({"zero loss scale", [](Checkpoint& c) { c.position.loss_scale = 0.0; }, full,
                 ErrorKind::usage, "invalid position: loss_scale must be a positive finite number, got 0"});
    r.push_back({"infinite loss scale",
                 [](Checkpoint& c) { c.position.loss_scale = std::numeric_limits<double>::infinity(); }, full,
                 ErrorKind::usage, "invalid position: loss_scale must be a positive finite number, got inf"});
    r.push_back({"metrics not an object", [](Checkpoint& c) { c.position.metrics = json::array({1}); }, full,
                 ErrorKind::usage, "invalid position: metrics must be a JSON object, got [1]"});
    r.push_back({"created not ISO 8601", [](Checkpoint& c) { c.created = "29/11/2026"; }, full,
                 ErrorKind::usage, "created must be an ISO 8601 date and time, got '29/11/2026'"});
    r.push_back({"nan parameter", [](Checkpoint& c) { c.parameters[112 + 3] = std::nanf(""); }, full,
                 ErrorKind::data, "enc.0.c1.pw.bias: non-finite value nan at element 3"});
    r.push_back({"nan parameter in a weights export", [](Checkpoint& c) { c.parameters[1] = std::nanf(""); },
                 CheckpointKind::weights_only, ErrorKind::data,
                 "enc.0.c1.pw.weight: non-finite value nan at element 1"});
    r.push_back({"inf first moment",
                 [](Checkpoint& c) { c.adam_m[128] = -std::numeric_limits<float>::infinity(); }, full,
                 ErrorKind::data, "optimizer.m.enc.0.c2.pw.weight: non-finite value -inf at element 0"});
    r.push_back({"negative second moment", [](Checkpoint& c) { c.adam_v[0] = -1.0f; }, full, ErrorKind::data,
                 "optimizer.v.enc.0.c1.pw.weight: negative value -1 at element 0 (a second moment is never "
                 "negative)"});
    return r;
  }();
  return cases;
}

}  // namespace

void TestCheckpoint::saveRefuses_data() {
  QTest::addColumn<int>("index");
  const auto& cases = save_refusals();
  for (std::size_t i = 0; i < cases.size(); ++i) QTest::newRow(cases[i].row) << static_cast<int>(i);
}

void TestCheckpoint::saveRefuses() {
  QFETCH(int, index);
  const SaveRefusal& s = save_refusals()[static_cast<std::size_t>(index)];
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "old.safetensors";
  Checkpoint c = make_checkpoint(small_spec(), path.parent_path());
  save_checkpoint(path, c);
  const std::vector<std::byte> old_bytes = test::read_all(path);

  s.edit(c);
  const Outcome o = outcome_of([&] { save_checkpoint(path, c, s.save_as); });
  QVERIFY2(!o.accepted, "save accepted the checkpoint");
  QCOMPARE(static_cast<int>(o.kind), static_cast<int>(s.kind));
  QCOMPARE(o.message, "save_checkpoint " + path.string() + ": " + s.message);
  // Nothing was written: the old file is whole and alone in its folder.
  QVERIFY(test::read_all(path) == old_bytes);
  QCOMPARE(
      static_cast<int>(std::distance(fs::directory_iterator(path.parent_path()), fs::directory_iterator{})),
      1);
}

// Which checkpoints lack the optimizer state their config's optimizer keeps: a weights-only file of an
// optimizer with state does; plain SGD (momentum 0) keeps none, so its full file lacks nothing, although the
// file holds no optimizer tensor (has_optimizer false: the rule the GUI used warned there).
void TestCheckpoint::lacksOptimizerState_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<double>("momentum");
  QTest::addColumn<bool>("full");
  QTest::addColumn<bool>("lacks");
  QTest::newRow("adam full") << "adam" << 0.9 << true << false;
  QTest::newRow("adam weights only") << "adam" << 0.9 << false << true;
  QTest::newRow("adamw weights only") << "adamw" << 0.9 << false << true;
  QTest::newRow("sgd momentum full") << "sgd" << 0.9 << true << false;
  QTest::newRow("sgd momentum weights only") << "sgd" << 0.9 << false << true;
  QTest::newRow("sgd momentum 0 full") << "sgd" << 0.0 << true << false;
  QTest::newRow("sgd momentum 0 weights only") << "sgd" << 0.0 << false << false;
}

void TestCheckpoint::lacksOptimizerState() {
  QFETCH(QString, kind);
  QFETCH(double, momentum);
  QFETCH(bool, full);
  QFETCH(bool, lacks);
  QTemporaryDir dir;
  Config config = make_checkpoint(small_spec(), dir.path().toStdString()).config;
  config.optimizer.kind = *parse_optimizer_kind(kind.toStdString());
  config.optimizer.momentum = momentum;
  // What `unet-train init` writes: the initial model and the optimizer's state at zero.
  Checkpoint c;
  static_cast<RunState&>(c) = initial_run_state(config);
  c.config = config;
  QCOMPARE(lacks_optimizer_state(c), false);
  const fs::path path = fs::path(dir.path().toStdString()) / "c.safetensors";
  save_checkpoint(path, c, full ? CheckpointKind::full : CheckpointKind::weights_only);
  QCOMPARE(lacks_optimizer_state(inspect_checkpoint(path)), lacks);
  QCOMPARE(lacks_optimizer_state(load_checkpoint(path)), lacks);
}

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
