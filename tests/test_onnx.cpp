// ONNX export (issue 13), read back with ONNX's own protobuf classes: the graph's input and output, every
// weight under its spec name in the spec's layout with the checkpoint's values, the nodes of the canonical
// U-Net in an order that computes, the metadata; ONNX's C++ checker accepts the file. Exports that cannot be
// made are refused naming the file, and `unet-train export --format onnx` writes the same model and never
// replaces a file unasked. What other programs make of the file (python3-onnx's full check, OpenCV's DNN
// module against the engine's probabilities) is tests/onnx_consumer_check.py.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "test_support.h"
#include "unet/core/memory.h"
#include "unet/io/checkpoint.h"
#include "unet/io/onnx_export.h"
#include "unet/model/normalize.h"
#include "unet/model/unet.h"

using namespace unet;

namespace {

// A checkpoint of `config` with He-normal weights and non-zero biases.
Checkpoint random_checkpoint(const nlohmann::json& config, std::uint64_t seed) {
  Checkpoint c;
  c.config = config_from_json(config, {});
  c.parameters = UNet::initial_slab(c.config.model, seed);
  CountingAllocator shapes_only("test", 0);
  const UNet layout(c.config.model, shapes_only);
  for (std::size_t i = 0; i < layout.params().size(); ++i) {
    if (!layout.params()[i].spec.is_bias) continue;
    Rng rng(seed, i);
    for (std::int64_t k = 0; k < layout.params()[i].spec.shape.numel(); ++k)
      c.parameters[static_cast<std::size_t>(layout.offsets()[i] + k)] =
          static_cast<float>(rng.uniform(-1, 1));
  }
  c.position.step = 123;
  c.position.epoch = 4;
  c.created = "2026-12-01T05:00:00Z";
  return c;
}

onnx::ModelProto read_model(const QString& path) {
  const std::vector<std::byte> bytes = test::read_all(path.toStdString());
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    QTest::qFail("the file does not parse as an ONNX ModelProto", __FILE__, __LINE__);
  return model;
}

// The shape of a graph input or output: each dimension's value, or its name when it has one.
QStringList dims_of(const onnx::ValueInfoProto& v) {
  QStringList out;
  for (const auto& d : v.type().tensor_type().shape().dim())
    out << (d.has_dim_param() ? QString::fromStdString(d.dim_param()) : QString::number(d.dim_value()));
  return out;
}

std::vector<std::int64_t> dims_of(const onnx::TensorProto& t) {
  return {t.dims().begin(), t.dims().end()};
}

std::vector<std::int64_t> dims_of(const Shape& s) {
  std::vector<std::int64_t> out;
  for (int d = 0; d < s.rank; ++d) out.push_back(s[d]);
  return out;
}

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t absent) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.i();
  return absent;
}

nlohmann::json small_config(int in_channels, int classes, int depth, bool separable) {
  return {{"model",
           {{"in_channels", in_channels},
            {"classes", classes},
            {"width", 4},
            {"depth", depth},
            {"separable", separable}}},
          {"data", {{"image_size", {32, 48}}}}};
}

// An initialiser's float values, from float_data or raw_data.
std::vector<float> values_of(const onnx::TensorProto& t) {
  if (t.float_data_size() > 0) return {t.float_data().begin(), t.float_data().end()};
  std::vector<float> out(t.raw_data().size() / sizeof(float));
  std::memcpy(out.data(), t.raw_data().data(), out.size() * sizeof(float));
  return out;
}

// What the graph's nodes before its first Conv (its normalisation: Sub, Mul, the clip) make of
// `values` ([1, channels, H, W]), computed as ONNX defines them, in float; the name of the value the first
// Conv reads. A constant is one value per channel shaped [C, 1, 1]; the clip is HardSigmoid with alpha 1 and
// beta 0; anything else, or another operator, throws.
struct Prologue {
  std::vector<float> values;
  QStringList ops;
  std::string first_conv_reads;
};

Prologue run_prologue(const onnx::GraphProto& g, std::vector<float> values, std::int64_t channels) {
  std::map<std::string, const onnx::TensorProto*> constants;
  for (const onnx::TensorProto& t : g.initializer()) constants[t.name()] = &t;
  auto constant = [&](const std::string& name) {
    const onnx::TensorProto& t = *constants.at(name);
    const std::vector<float> v = values_of(t);
    if (dims_of(t) != std::vector<std::int64_t>{channels, 1, 1} ||
        static_cast<std::int64_t>(v.size()) != channels)
      throw std::runtime_error(name + " is not [C, 1, 1]");
    return v;
  };
  auto float_attribute = [](const onnx::NodeProto& node, const std::string& name) {
    for (const auto& a : node.attribute())
      if (a.name() == name) return a.f();
    throw std::runtime_error(node.name() + " has no attribute " + name);
  };
  Prologue p{std::move(values), {}, {}};
  const std::size_t plane = p.values.size() / static_cast<std::size_t>(channels);
  std::string current(kOnnxInputName);
  for (const onnx::NodeProto& node : g.node()) {
    if (node.op_type() == "Conv") {
      p.first_conv_reads = node.input(0);
      return p;
    }
    if (node.input(0) != current) throw std::runtime_error(node.name() + " does not read " + current);
    p.ops << QString::fromStdString(node.op_type());
    const bool clip = node.op_type() == "HardSigmoid";
    if (clip && (float_attribute(node, "alpha") != 1 || float_attribute(node, "beta") != 0))
      throw std::runtime_error(node.name() + " is not a clip to [0, 1]");
    const std::vector<float> a = clip ? std::vector<float>{} : constant(node.input(1));
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      float& v = p.values[i];
      if (node.op_type() == "Sub")
        v = v - a[i / plane];
      else if (node.op_type() == "Mul")
        v = v * a[i / plane];
      else if (clip)
        v = std::max(0.0f, std::min(1.0f, 1.0f * v + 0.0f));
      else
        throw std::runtime_error("an unexpected " + node.op_type() + " before the first Conv");
    }
    current = node.output(0);
  }
  throw std::runtime_error("the graph has no Conv");
}

// [pixels, channels] (HWC) as [channels, pixels] (the planes of NCHW).
std::vector<float> planes_of(const std::vector<float>& hwc, std::int64_t channels) {
  const std::size_t n = static_cast<std::size_t>(channels), pixels = hwc.size() / n;
  std::vector<float> out(hwc.size());
  for (std::size_t i = 0; i < pixels; ++i)
    for (std::size_t c = 0; c < n; ++c) out[c * pixels + i] = hwc[i * n + c];
  return out;
}

}  // namespace

class TestOnnx : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // A task-instances checkpoint exports the same graph as the network would under task semantic (the
  // post-processing is not in it), and its metadata says how predict makes objects: unet.task, unet.instances
  // (the maps in terms of the output, the checkpoint's thresholds and minimum size), unet.post_processing. A
  // semantic checkpoint says its task and nothing of objects.
  void instanceCheckpointsDescribeTheirPostProcessing_data() {
    QTest::addColumn<QString>("target");
    QTest::addColumn<int>("classes");
    QTest::addColumn<QString>("expected");
    QTest::newRow("boundary") << "boundary" << 3 << R"({"target": "boundary", "seed": "probabilities[:, 1]",
                                     "foreground": "probabilities[:, 1] + probabilities[:, 2]",
                                     "seed_threshold": 0.7, "foreground_threshold": 0.35, "min_size": 9})";
    QTest::newRow("weight_map") << "weight_map" << 1
                                << R"({"target": "weight_map", "seed": "probabilities[:, 0]",
                                       "foreground": "probabilities[:, 0]",
                                       "seed_threshold": 0.7, "foreground_threshold": 0.35, "min_size": 9})";
  }
  void instanceCheckpointsDescribeTheirPostProcessing() {
    QFETCH(QString, target);
    QFETCH(int, classes);
    QFETCH(QString, expected);
    nlohmann::json config = small_config(3, classes, 2, false);
    const Checkpoint semantic = random_checkpoint(config, 7);
    config["task"] = "instances";
    config["instances"] = {{"target", target.toStdString()},
                           {"seed_threshold", 0.7},
                           {"foreground_threshold", 0.35},
                           {"min_size", 9}};
    const Checkpoint instances = random_checkpoint(config, 7);
    QCOMPARE(instances.config.task, ModelTask::instances);
    QTemporaryDir dir;
    export_onnx(semantic, dir.filePath("semantic.onnx").toStdString());
    export_onnx(instances, dir.filePath("instances.onnx").toStdString());
    const onnx::ModelProto a = read_model(dir.filePath("semantic.onnx"));
    const onnx::ModelProto b = read_model(dir.filePath("instances.onnx"));
    QVERIFY2(a.graph().SerializeAsString() == b.graph().SerializeAsString(), "the graphs differ");
    std::map<std::string, std::string> sm, im;
    for (const auto& p : a.metadata_props()) sm[p.key()] = p.value();
    for (const auto& p : b.metadata_props()) im[p.key()] = p.value();
    QCOMPARE(sm["unet.task"], std::string("semantic"));
    QVERIFY(!sm.count("unet.instances") && !sm.count("unet.post_processing"));
    QCOMPARE(im["unet.task"], std::string("instances"));
    QVERIFY2(im.count("unet.instances"), "no unet.instances");
    QCOMPARE(nlohmann::json::parse(im["unet.instances"]), nlohmann::json::parse(expected.toStdString()));
    QVERIFY2(im["unet.post_processing"].find("seeded watershed") != std::string::npos,
             im["unet.post_processing"].c_str());
  }

  void theFileIsTheModelOfTheSpec_data() {
    QTest::addColumn<int>("in_channels");
    QTest::addColumn<int>("classes");
    QTest::addColumn<int>("depth");
    QTest::addColumn<bool>("separable");
    QTest::newRow("binary, RGB") << 3 << 1 << 2 << false;
    QTest::newRow("3 classes, gray, separable") << 1 << 3 << 3 << true;
    QTest::newRow("2 classes, depth 1") << 2 << 2 << 1 << false;
  }
  void theFileIsTheModelOfTheSpec() {
    QFETCH(int, in_channels);
    QFETCH(int, classes);
    QFETCH(int, depth);
    QFETCH(bool, separable);
    QTemporaryDir dir;
    const Checkpoint c = random_checkpoint(small_config(in_channels, classes, depth, separable), 5);
    const QString file = dir.filePath("model.onnx");
    export_onnx(c, file.toStdString(), {.source = "run/last.safetensors"});
    const onnx::ModelProto model = read_model(file);
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      QFAIL(qPrintable(QString("ONNX's checker refuses the file: ") + e.what()));
    }

    QCOMPARE(model.ir_version(), kOnnxIrVersion);
    QCOMPARE(model.opset_import_size(), 1);
    QCOMPARE(model.opset_import(0).domain(), std::string());
    QCOMPARE(model.opset_import(0).version(), kOnnxOpset);
    QCOMPARE(model.producer_name(), std::string("UNet Workbench"));
    QCOMPARE(model.model_version(), std::int64_t{123});
    QVERIFY(model.doc_string().find("pixel values 0..255") != std::string::npos);
    std::map<std::string, std::string> metadata;
    for (const auto& p : model.metadata_props()) metadata[p.key()] = p.value();
    QCOMPARE(metadata["unet.step"], std::string("123"));
    QCOMPARE(metadata["unet.epoch"], std::string("4"));
    QCOMPARE(metadata["unet.source"], std::string("run/last.safetensors"));
    QCOMPARE(metadata["unet.created"], std::string("2026-12-01T05:00:00Z"));
    QCOMPARE(metadata["unet.training_size"], std::string("[32,48]"));
    QCOMPARE(nlohmann::json::parse(metadata["unet.model"]), config_to_json(c.config).at("model"));

    // What a user has in, probabilities out; N, H and W free.
    const onnx::GraphProto& g = model.graph();
    QCOMPARE(g.input_size(), 1);
    QCOMPARE(g.input(0).name(), std::string(kOnnxInputName));
    QCOMPARE(g.input(0).type().tensor_type().elem_type(), static_cast<int>(onnx::TensorProto::FLOAT));
    QCOMPARE(dims_of(g.input(0)), (QStringList{"N", QString::number(in_channels), "H", "W"}));
    QCOMPARE(g.output_size(), 1);
    QCOMPARE(g.output(0).name(), std::string(kOnnxOutputName));
    QCOMPARE(g.output(0).type().tensor_type().elem_type(), static_cast<int>(onnx::TensorProto::FLOAT));
    QCOMPARE(dims_of(g.output(0)), (QStringList{"N", QString::number(classes), "H", "W"}));

    // Every parameter, in module order, under its spec name, in its spec shape, with the checkpoint's values
    // bit for bit; then the input scale of data.normalize scale_255, per channel.
    CountingAllocator shapes_only("test", 0);
    const UNet layout(c.config.model, shapes_only);
    QCOMPARE(static_cast<std::size_t>(g.initializer_size()), layout.params().size() + 1);
    std::map<std::string, const onnx::TensorProto*> initializers;
    for (std::size_t i = 0; i < layout.params().size(); ++i) {
      const ParamSpec& ps = layout.params()[i].spec;
      const onnx::TensorProto& t = g.initializer(static_cast<int>(i));
      QCOMPARE(t.name(), ps.name);
      QCOMPARE(t.data_type(), static_cast<int>(onnx::TensorProto::FLOAT));
      QCOMPARE(dims_of(t), dims_of(ps.shape));
      const auto bytes = static_cast<std::size_t>(ps.shape.numel()) * sizeof(float);
      QCOMPARE(t.raw_data().size(), bytes);
      QVERIFY2(std::memcmp(t.raw_data().data(), c.parameters.data() + layout.offsets()[i], bytes) == 0,
               ps.name.c_str());
      initializers[t.name()] = &t;
    }
    const onnx::TensorProto& scale = g.initializer(g.initializer_size() - 1);
    QCOMPARE(scale.name(), std::string("input_scale"));
    QCOMPARE(dims_of(scale), (std::vector<std::int64_t>{in_channels, 1, 1}));
    QCOMPARE(values_of(scale), std::vector<float>(static_cast<std::size_t>(in_channels), 1.0f / 255.0f));
    initializers[scale.name()] = &scale;

    // The nodes compute in order: each input is the graph's input, a weight, or an earlier node's output.
    std::set<std::string> known = {std::string(kOnnxInputName)};
    for (const auto& [name, tensor] : initializers) known.insert(name);
    std::map<std::string, int> ops;
    std::set<std::string> weights_used;
    for (const onnx::NodeProto& node : g.node()) {
      for (const std::string& in : node.input()) {
        QVERIFY2(known.count(in),
                 qPrintable(QString::fromStdString(node.name() + " reads " + in + ", unknown yet")));
        if (initializers.count(in)) weights_used.insert(in);
      }
      QCOMPARE(node.output_size(), 1);
      QVERIFY2(known.insert(node.output(0)).second, node.output(0).c_str());
      ++ops[node.op_type()];

      if (node.op_type() == "Conv") {
        // ONNX's Conv weight is [out, in/group, kh, kw], the spec's layout: the kernel and the "same" padding
        // follow from it.
        const onnx::TensorProto& w = *initializers.at(node.input(1));
        const std::int64_t k = w.dims(2), group = int_attribute(node, "group", 1);
        QCOMPARE(ints_attribute(node, "kernel_shape"), (std::vector<std::int64_t>{k, k}));
        QCOMPARE(ints_attribute(node, "pads"), (std::vector<std::int64_t>(4, k / 2)));
        const bool depthwise = node.input(1).ends_with(".dw.weight");
        QCOMPARE(group, depthwise ? w.dims(0) : std::int64_t{1});
        QCOMPARE(node.input_size(), depthwise ? 2 : 3);
      } else if (node.op_type() == "ConvTranspose") {
        // up.i: [in, out, 2, 2], PyTorch's ConvTranspose2d layout and ONNX's; stride 2.
        const int i = std::stoi(node.name().substr(3));
        const onnx::TensorProto& w = *initializers.at(node.input(1));
        const auto& m = c.config.model;
        QCOMPARE(dims_of(w),
                 (std::vector<std::int64_t>{m.channels(depth - i), m.channels(depth - 1 - i), 2, 2}));
        QCOMPARE(ints_attribute(node, "strides"), (std::vector<std::int64_t>{2, 2}));
      } else if (node.op_type() == "Concat") {
        // The up-sampled first, the skip second, along the channels.
        const int i = std::stoi(node.name().substr(4));
        QCOMPARE(node.input(0), "up." + std::to_string(i));
        QCOMPARE(node.input(1), "enc." + std::to_string(depth - 1 - i) + ".c2");
        QCOMPARE(int_attribute(node, "axis", -1), std::int64_t{1});
      } else if (node.op_type() == "MaxPool") {
        QCOMPARE(ints_attribute(node, "kernel_shape"), (std::vector<std::int64_t>{2, 2}));
        QCOMPARE(ints_attribute(node, "strides"), (std::vector<std::int64_t>{2, 2}));
      }
    }
    QCOMPARE(weights_used.size(), initializers.size());
    const int conv3x3_layers = 2 * (2 * depth + 1);
    QCOMPARE(ops["Mul"], 1);
    QCOMPARE(ops["Conv"], conv3x3_layers * (separable ? 2 : 1) + 1);
    QCOMPARE(ops["Relu"], conv3x3_layers);
    QCOMPARE(ops["MaxPool"], depth);
    QCOMPARE(ops["ConvTranspose"], depth);
    QCOMPARE(ops["Concat"], depth);
    QCOMPARE(g.node(0).op_type(), std::string("Mul"));
    QCOMPARE(g.node(0).input(0), std::string(kOnnxInputName));
    const onnx::NodeProto& last = g.node(g.node_size() - 1);
    QCOMPARE(last.output(0), std::string(kOnnxOutputName));
    QCOMPARE(last.input(0), std::string("head"));
    if (classes == 1) {
      QCOMPARE(last.op_type(), std::string("Sigmoid"));
    } else {
      QCOMPARE(last.op_type(), std::string("Softmax"));
      QCOMPARE(int_attribute(last, "axis", -1), std::int64_t{1});
    }
    QCOMPARE(ops.size(), std::size_t{7});  // Mul, Conv, Relu, MaxPool, ConvTranspose, Concat, the activation
  }

  // The graph's input follows the checkpoint's data.normalize: for a mode that does not depend on the image
  // the graph takes stored values and normalises them itself, exactly as the engine does on the host; for a
  // per-image mode it takes the values the engine's normalisation gives (and clips them, when the mode
  // clips). Either way the file says what its input must be ("unet.input", the input's doc_string) and holds
  // the normalisation ("unet.normalize", the config's keys for the mode).
  void theInputFollowsTheNormalisation_data() {
    QTest::addColumn<int>("channels");
    QTest::addColumn<QString>("normalize");  // data.normalize's keys for the checkpoint
    QTest::addColumn<QString>("expected_metadata");
    QTest::addColumn<int>("bit_depth");
    QTest::addColumn<bool>("takes_stored_values");
    QTest::addColumn<QStringList>("prologue");
    QTest::addColumn<QString>("unet_reads");
    QTest::addColumn<QString>("contract_says");
    QTest::newRow("scale_255") << 3 << "{}"
                               << R"({"normalize": "scale_255"})" << 8 << true << QStringList{"Mul"}
                               << "normalize.mul"
                               << "pixel values 0..255";
    QTest::newRow("range, clipped")
        << 2 << R"({"normalize": "range", "normalize_range": [1000, 40000], "normalize_clip": true})"
        << R"({"normalize": "range", "normalize_range": [1000, 40000], "normalize_clip": true})" << 16 << true
        << QStringList{"Sub", "Mul", "HardSigmoid"} << "normalize.clip"
        << "maps 1000..40000 to 0..1, clipping";
    QTest::newRow("range from 0")
        << 1 << R"({"normalize": "range", "normalize_range": [0, 4095]})"
        << R"({"normalize": "range", "normalize_range": [0, 4095], "normalize_clip": false})" << 16 << true
        << QStringList{"Mul"} << "normalize.mul"
        << "maps 0..4095 to 0..1";
    QTest::newRow("zscore over the dataset")
        << 3
        << R"({"normalize": "zscore", "normalize_scope": "dataset", "normalize_mean": [110.5, 128, 90.25],
              "normalize_std": [60, 70.5, 50]})"
        << R"({"normalize": "zscore", "normalize_scope": "dataset", "normalize_mean": [110.5, 128, 90.25],
              "normalize_std": [60, 70.5, 50]})"
        << 8 << true << QStringList{"Sub", "Mul"} << "normalize.mul"
        << "mean of the training data (110.5, 128, 90.25)";
    QTest::newRow("percentile")
        << 1 << R"({"normalize": "percentile", "normalize_percentiles": [2, 99.5]})"
        << R"({"normalize": "percentile", "normalize_percentiles": [2, 99.5], "normalize_clip": false})" << 16
        << false << QStringList{} << "pixels"
        << "(x - p2) / (p99.5 - p2)";
    QTest::newRow("percentile, clipped")
        << 2 << R"({"normalize": "percentile", "normalize_clip": true})"
        << R"({"normalize": "percentile", "normalize_percentiles": [1, 99.8], "normalize_clip": true})" << 16
        << false << QStringList{"HardSigmoid"} << "normalize.clip"
        << "not clipped: the model clips them to [0, 1]";
    QTest::newRow("zscore per image")
        << 3 << R"({"normalize": "zscore", "normalize_scope": "image"})"
        << R"({"normalize": "zscore", "normalize_scope": "image"})" << 8 << false << QStringList{} << "pixels"
        << "(x - mean) / std";
  }
  void theInputFollowsTheNormalisation() {
    QFETCH(int, channels);
    QFETCH(QString, normalize);
    QFETCH(QString, expected_metadata);
    QFETCH(int, bit_depth);
    QFETCH(bool, takes_stored_values);
    QFETCH(QStringList, prologue);
    QFETCH(QString, unet_reads);
    QFETCH(QString, contract_says);
    QTemporaryDir dir;
    nlohmann::json config = small_config(channels, 2, 2, false);
    config["data"].update(nlohmann::json::parse(normalize.toStdString()));
    const Checkpoint c = random_checkpoint(config, 9);
    const QString file = dir.filePath("model.onnx");
    export_onnx(c, file.toStdString());
    const onnx::ModelProto model = read_model(file);
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      QFAIL(qPrintable(QString("ONNX's checker refuses the file: ") + e.what()));
    }

    std::map<std::string, std::string> metadata;
    for (const auto& p : model.metadata_props()) metadata[p.key()] = p.value();
    QVERIFY2(metadata.count("unet.normalize"), "no unet.normalize");
    QCOMPARE(nlohmann::json::parse(metadata["unet.normalize"]),
             nlohmann::json::parse(expected_metadata.toStdString()));
    const std::string contract = metadata["unet.input"];
    QVERIFY2(contract.find(contract_says.toStdString()) != std::string::npos, contract.c_str());
    QCOMPARE(model.graph().input(0).doc_string(), contract);
    QVERIFY2(model.doc_string().find(contract) != std::string::npos, model.doc_string().c_str());

    // An image of stored values, normalised by the engine as it normalises an image it reads.
    const std::int64_t pixels = 7 * 5;
    std::vector<float> stored(static_cast<std::size_t>(pixels * channels));
    Rng rng(11, static_cast<std::uint64_t>(channels));
    for (float& v : stored) v = static_cast<float>(std::floor(rng.uniform(0, std::ldexp(1.0, bit_depth))));
    const NormalizeDesc& desc = c.config.data.normalize;
    const ChannelAffine affine = image_normalization(desc, stored, channels, bit_depth, false, "test image");
    std::vector<float> engine = stored;
    normalize_in_place(affine, engine, channels);
    // A per-image mode's graph is given the normalised values as the contract says, before any clipping.
    std::vector<float> given = stored;
    if (!takes_stored_values) normalize_in_place({affine.offset, affine.scale, false}, given, channels);

    Prologue p;
    try {
      p = run_prologue(model.graph(), planes_of(given, channels), channels);
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
    QCOMPARE(p.ops, prologue);
    QCOMPARE(p.first_conv_reads, unet_reads.toStdString());
    QCOMPARE(p.values, planes_of(engine, channels));
    // Not a comparison of equal inputs: the normalisation moved the values.
    if (takes_stored_values) QVERIFY(planes_of(stored, channels) != p.values);
  }

  void refusesWhatItCannotExport() {
    QTemporaryDir dir;
    const Checkpoint good = random_checkpoint(small_config(3, 1, 2, false), 1);
    const QString file = dir.filePath("model.onnx");
    auto refusal = [&](const Checkpoint& c, const std::filesystem::path& path) -> std::optional<Error> {
      try {
        export_onnx(c, path);
      } catch (const Error& e) {
        return e;
      }
      return std::nullopt;
    };

    Checkpoint short_slab = good;
    short_slab.parameters.pop_back();
    std::optional<Error> e = refusal(short_slab, file.toStdString());
    QVERIFY(e);
    QCOMPARE(e->kind(), ErrorKind::usage);
    QVERIFY2(e->message().starts_with(file.toStdString()) &&
                 e->message().find("parameter values") != std::string::npos,
             e->what());

    Checkpoint not_finite = good;
    CountingAllocator shapes_only("test", 0);
    const UNet layout(good.config.model, shapes_only);
    not_finite.parameters[static_cast<std::size_t>(layout.offsets().back())] = std::nanf("");
    e = refusal(not_finite, file.toStdString());
    QVERIFY(e);
    QCOMPARE(e->kind(), ErrorKind::data);
    QVERIFY2(
        e->message().starts_with(file.toStdString()) && e->message().find("head.bias") != std::string::npos,
        e->what());
    QVERIFY(!QFileInfo::exists(file));

    // A dataset zscore that was never measured (a checkpoint never trained): the graph cannot hold its
    // values.
    for (const nlohmann::json& values : {nlohmann::json::array(), nlohmann::json::array({100.0, 120.0})}) {
      nlohmann::json config = small_config(3, 1, 2, false);
      config["data"].update(
          {{"normalize", "zscore"}, {"normalize_scope", "dataset"}, {"normalize_mean", values}});
      config["data"]["normalize_std"] = values;
      e = refusal(random_checkpoint(config, 1), file.toStdString());
      QVERIFY(e);
      QCOMPARE(e->kind(), ErrorKind::data);
      QVERIFY2(e->message().starts_with(file.toStdString()) &&
                   e->message().find("data.normalize_mean") != std::string::npos,
               e->what());
      QVERIFY(!QFileInfo::exists(file));
    }

    const std::string unwritable = dir.filePath("no-such-folder/model.onnx").toStdString();
    e = refusal(good, unwritable);
    QVERIFY(e);
    QCOMPARE(e->kind(), ErrorKind::io);
    QVERIFY2(std::string(e->what()).find(unwritable) != std::string::npos, e->what());
  }

  // `unet-train export --format onnx`: the model of the checkpoint, the same bytes as the engine's export;
  // an existing file is replaced only with --overwrite; --format is export's alone, and safetensors when
  // not given.
  void exportFromTheCommandLine() {
    QTemporaryDir dir;
    const QString checkpoint = dir.filePath("init.safetensors"), out = dir.filePath("model.onnx");
    QCOMPARE(
        test::unet_train({"init", "--set", "model.width=4", "--set", "model.depth=2", "--out", checkpoint})
            .code,
        0);
    test::ProcessResult r =
        test::unet_train({"export", "--format", "onnx", "--checkpoint", checkpoint, "--out", out});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains(out) && r.out.contains("opset 13"), qPrintable(r.out));
    QVERIFY2(r.out.contains(QString::fromStdString(onnx_input_contract(NormalizeDesc{}))), qPrintable(r.out));
    const QString direct = dir.filePath("direct.onnx");
    export_onnx(load_checkpoint(checkpoint.toStdString()), direct.toStdString(),
                {.source = "init.safetensors"});
    QVERIFY(test::read_all(out.toStdString()) == test::read_all(direct.toStdString()));

    const std::vector<std::byte> before = test::read_all(out.toStdString());
    QCOMPARE(test::unet_train({"init", "--set", "model.width=8", "--out", checkpoint, "--overwrite"}).code,
             0);
    r = test::unet_train({"export", "--format", "onnx", "--checkpoint", checkpoint, "--out", out});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--out") && r.err.contains(out) && r.err.contains("--overwrite"),
             qPrintable(r.err));
    QVERIFY(test::read_all(out.toStdString()) == before);
    r = test::unet_train(
        {"export", "--format", "onnx", "--checkpoint", checkpoint, "--out", out, "--overwrite"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(read_model(out).graph().initializer(0).dims(0), std::int64_t{8});

    r = test::unet_train(
        {"export", "--format", "onnx", "--checkpoint", checkpoint, "--out", checkpoint, "--overwrite"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("is the checkpoint being exported"), qPrintable(r.err));
    QCOMPARE(load_checkpoint(checkpoint.toStdString()).config.model.width, 8);

    r = test::unet_train(
        {"export", "--format", "tflite", "--checkpoint", checkpoint, "--out", dir.filePath("m")});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--format") && r.err.contains("tflite"), qPrintable(r.err));
    r = test::unet_train({"summary", "--format", "onnx"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("summary does not take --format (export does)"), qPrintable(r.err));

    // A per-image normalisation: the output says what the input must then be.
    const QString percentile = dir.filePath("percentile.safetensors");
    QCOMPARE(test::unet_train({"init", "--set", "model.width=4", "--set", "model.depth=2", "--set",
                               "data.normalize=percentile", "--out", percentile})
                 .code,
             0);
    r = test::unet_train(
        {"export", "--format", "onnx", "--checkpoint", percentile, "--out", dir.filePath("p.onnx")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("values normalised per image and channel: (x - p1) / (p99.8 - p1)"),
             qPrintable(r.out));

    const QString weights = dir.filePath("weights.safetensors");
    r = test::unet_train({"export", "--checkpoint", checkpoint, "--out", weights});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(load_checkpoint(weights.toStdString()).parameters,
             load_checkpoint(checkpoint.toStdString()).parameters);
  }
};

QTEST_GUILESS_MAIN(TestOnnx)
#include "test_onnx.moc"
