#include "unet/io/onnx_export.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "unet/core/error.h"
#include "unet/core/memory.h"
#include "unet/io/atomic_file.h"
#include "unet/model/unet.h"

namespace unet {

namespace {

// TensorProto.raw_data is little-endian; the parameters are copied into it as they lie in memory.
static_assert(std::endian::native == std::endian::little, "ONNX raw_data needs a little-endian host");

constexpr const char* kBatchDim = "N";
constexpr const char* kHeightDim = "H";
constexpr const char* kWidthDim = "W";

struct ParamView {
  Shape shape;
  std::span<const float> values;
};

void set_tensor_type(onnx::ValueInfoProto& value, std::string_view name, std::int64_t channels) {
  value.set_name(std::string(name));
  onnx::TypeProto_Tensor& tensor = *value.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  shape.add_dim()->set_dim_param(kBatchDim);
  shape.add_dim()->set_dim_value(channels);
  shape.add_dim()->set_dim_param(kHeightDim);
  shape.add_dim()->set_dim_param(kWidthDim);
}

void add_ints(onnx::NodeProto& node, const char* name, std::initializer_list<std::int64_t> values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (std::int64_t v : values) a.add_ints(v);
}

void add_float(onnx::NodeProto& node, const char* name, float value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(value);
}

void add_int(onnx::NodeProto& node, const char* name, std::int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

// Adds the nodes of the canonical U-Net (docs/MODEL.md) to a graph whose initializers are the parameters
// under their spec names. Each value is named after the layer that produces it ("enc.0.c1" is the output of
// the first conv block's first ReLU); each node after its output.
class UNetGraph {
 public:
  UNetGraph(onnx::GraphProto& graph, const UNetSpec& spec, const std::map<std::string, ParamView>& params)
      : graph_(graph), spec_(spec), params_(params) {}

  // From the graph's input to its output: `normalization` (normalization_graph), then the U-Net.
  void build(const ChannelAffine& normalization) {
    std::string x = normalize(normalization);
    std::vector<std::string> skips;
    for (int l = 0; l < spec_.depth; ++l) {
      const std::string level = "enc." + std::to_string(l);
      x = conv_block(level, x);
      skips.push_back(x);
      x = max_pool(level + ".pool", x);
    }
    x = conv_block("mid", x);
    for (int i = 0; i < spec_.depth; ++i) {
      const std::string step = std::to_string(i);
      const std::string up = up_conv("up." + step, x);
      const std::string cat = "dec." + step + ".cat";
      add_int(node("Concat", {up, skips[static_cast<std::size_t>(spec_.depth - 1 - i)]}, cat), "axis", 1);
      x = conv_block("dec." + step, cat);
    }
    const std::string logits = conv("head", x, "head", 0);
    const std::string output(kOnnxOutputName);
    if (spec_.classes == 1)
      node("Sigmoid", {logits}, output);
    else
      add_int(node("Softmax", {logits}, output), "axis", 1);
  }

  // The parameters the nodes used, to check that every one of the checkpoint's was.
  const std::set<std::string>& used() const noexcept { return used_; }

 private:
  onnx::NodeProto& node(const char* op, std::initializer_list<std::string> inputs,
                        const std::string& output) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(output);
    for (const std::string& in : inputs) n.add_input(in);
    n.add_output(output);
    return n;
  }

  // The input's normalisation, as the engine computes it on the host, in float: Sub the offsets (left out
  // when all are 0: x - 0 is x), Mul by the scales, one per channel; then the clip to [0, 1], written as
  // HardSigmoid with alpha 1 and beta 0 (max(0, min(1, 1 * x + 0)), the same values): OpenCV 4.6 reads Clip
  // only in its opset-6 form, without the bounds as inputs. Returns the value the U-Net reads.
  std::string normalize(const ChannelAffine& affine) {
    std::string x(kOnnxInputName);
    if (std::any_of(affine.offset.begin(), affine.offset.end(), [](float v) { return v != 0; }))
      x = node("Sub", {x, per_channel("input_offset", affine.offset)}, "normalize.sub").output(0);
    if (!affine.scale.empty())
      x = node("Mul", {x, per_channel("input_scale", affine.scale)}, "normalize.mul").output(0);
    if (affine.clip) {
      onnx::NodeProto& clip = node("HardSigmoid", {x}, "normalize.clip");
      add_float(clip, "alpha", 1);
      add_float(clip, "beta", 0);
      x = clip.output(0);
    }
    return x;
  }

  // A float initialiser of one value per channel, shaped [C, 1, 1], which broadcasts over [N, C, H, W]
  // (OpenCV 4.6 refuses [1, C, 1, 1] in Sub and Add).
  std::string per_channel(const std::string& name, const std::vector<float>& values) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (const std::int64_t d : {static_cast<std::int64_t>(values.size()), std::int64_t{1}, std::int64_t{1}})
      t.add_dims(d);
    for (const float v : values) t.add_float_data(v);
    return name;
  }

  const ParamView& param(const std::string& name) {
    const auto it = params_.find(name);
    UNET_CHECK(it != params_.end(), usage, "ONNX export: the model has no parameter " + name);
    used_.insert(name);
    return it->second;
  }

  // A convolution with the weight `prefix`.weight (and `prefix`.bias when `bias`), stride 1, its kernel the
  // weight's spatial shape, `pad` on every side; `groups` is the input channels for a depthwise one.
  std::string conv(const std::string& prefix, const std::string& x, const std::string& output,
                   std::int64_t pad, bool bias = true, std::int64_t groups = 1) {
    const std::string weight = prefix + ".weight";
    const Shape& w = param(weight).shape;
    if (bias) param(prefix + ".bias");
    onnx::NodeProto& n =
        bias ? node("Conv", {x, weight, prefix + ".bias"}, output) : node("Conv", {x, weight}, output);
    add_ints(n, "kernel_shape", {w[2], w[3]});
    add_ints(n, "pads", {pad, pad, pad, pad});
    add_ints(n, "strides", {1, 1});
    add_ints(n, "dilations", {1, 1});
    add_int(n, "group", groups);
    return output;
  }

  // conv3x3 -> ReLU, or, separable, depthwise 3x3 (no bias) -> pointwise 1x1 -> ReLU.
  std::string conv_relu(const std::string& name, const std::string& x) {
    std::string y;
    if (spec_.separable) {
      const std::int64_t channels = param(name + ".dw.weight").shape[0];
      const std::string dw = conv(name + ".dw", x, name + ".dw", 1, false, channels);
      y = conv(name + ".pw", dw, name + ".pw", 0);
    } else {
      y = conv(name + ".pw", x, name + ".pw", 1);
    }
    node("Relu", {y}, name);
    return name;
  }

  std::string conv_block(const std::string& prefix, const std::string& x) {
    return conv_relu(prefix + ".c2", conv_relu(prefix + ".c1", x));
  }

  std::string max_pool(const std::string& name, const std::string& x) {
    onnx::NodeProto& n = node("MaxPool", {x}, name);
    add_ints(n, "kernel_shape", {2, 2});
    add_ints(n, "strides", {2, 2});
    add_ints(n, "pads", {0, 0, 0, 0});
    return name;
  }

  // Transposed conv 2x2 stride 2; the weight is [in, out, 2, 2], ONNX's ConvTranspose layout (group 1).
  std::string up_conv(const std::string& name, const std::string& x) {
    param(name + ".weight");
    param(name + ".bias");
    onnx::NodeProto& n = node("ConvTranspose", {x, name + ".weight", name + ".bias"}, name);
    add_ints(n, "kernel_shape", {2, 2});
    add_ints(n, "strides", {2, 2});
    add_ints(n, "pads", {0, 0, 0, 0});
    add_ints(n, "dilations", {1, 1});
    add_int(n, "group", 1);
    return name;
  }

  onnx::GraphProto& graph_;
  const UNetSpec& spec_;
  const std::map<std::string, ParamView>& params_;
  std::set<std::string> used_;
};

// What the graph does to its input: the per-channel affine of a normalisation that does not depend on the
// image; for a per-image one, whose statistics the graph cannot take, only its clip (the input is normalised
// already). A dataset zscore without its values (a checkpoint never trained) cannot be exported.
ChannelAffine normalization_graph(const NormalizeDesc& desc, std::int64_t channels, const std::string& file) {
  ChannelAffine affine;
  if (fixed_normalization(desc, channels, affine)) return affine;
  if (!desc.per_image())
    throw Error(ErrorKind::data,
                file +
                    ": cannot export: data.normalize is zscore over the dataset, and data.normalize_mean "
                    "and data.normalize_std hold " +
                    std::to_string(desc.mean.size()) + " and " + std::to_string(desc.std.size()) +
                    " value(s), not one per channel (" + std::to_string(channels) +
                    "): the data scan measures them when the model is trained; train it first, or set them");
  affine.clip = desc.mode == NormalizeMode::percentile && desc.clip;
  return affine;
}

// "unet.normalize": data.normalize and the keys its mode reads, named and valued as in the config.
nlohmann::json normalize_metadata(const nlohmann::json& config, const NormalizeDesc& desc) {
  const nlohmann::json& data = config.at("data");
  std::vector<const char*> keys;
  switch (desc.mode) {
    case NormalizeMode::scale_255:
      break;
    case NormalizeMode::percentile:
      keys = {"normalize_percentiles", "normalize_clip"};
      break;
    case NormalizeMode::range:
      keys = {"normalize_range", "normalize_clip"};
      break;
    case NormalizeMode::zscore:
      keys = {"normalize_scope"};
      if (desc.scope == NormalizeScope::dataset) keys.insert(keys.end(), {"normalize_mean", "normalize_std"});
      break;
  }
  nlohmann::json out = {{"normalize", data.at("normalize")}};
  for (const char* key : keys) out[key] = data.at(key);
  return out;
}

// "unet.instances": how a task-instances model's probabilities become objects, as `unet-train predict` makes
// them (infer/instance_output.h): the target, the seed and foreground maps in terms of the output, and the
// thresholds and minimum size of the config's instances.*, named and valued as in the config. The graph
// stays the network: the post-processing is described, not exported.
nlohmann::json instances_metadata(const nlohmann::json& config, InstanceTarget target) {
  const nlohmann::json& instances = config.at("instances");
  const std::string p = std::string(kOnnxOutputName);
  nlohmann::json out = {{"target", instances.at("target")}};
  if (target == InstanceTarget::boundary) {
    out["seed"] = p + "[:, 1]";
    out["foreground"] = p + "[:, 1] + " + p + "[:, 2]";
  } else {
    out["seed"] = out["foreground"] = p + "[:, 0]";
  }
  for (const char* key : {"seed_threshold", "foreground_threshold", "min_size"}) out[key] = instances.at(key);
  return out;
}

// "unet.post_processing": the steps from the two maps to objects, in one paragraph.
constexpr const char* kPostProcessing =
    "Objects from the probabilities (unet.instances gives the maps and values): seeds are the 8-connected "
    "components of seed > seed_threshold and foreground > foreground_threshold; they grow over the pixels of "
    "foreground > foreground_threshold by a seeded watershed (4-connected) flooding in order of 1 - seed; "
    "foreground pixels left unclaimed join the nearest object through the foreground; a foreground component "
    "without a seed is one object; objects of fewer than min_size pixels are dropped; the rest are numbered "
    "1..n in raster order of their first pixel (UNet Workbench, docs/MODEL.md, Instance targets and "
    "post-processing).";

std::string model_description(const Checkpoint& c) {
  const UNetSpec& m = c.config.model;
  const std::string k = std::to_string(m.classes);
  return "U-Net (in_channels " + std::to_string(m.in_channels) + ", classes " + k + ", width " +
         std::to_string(m.width) + ", depth " + std::to_string(m.depth) + (m.separable ? ", separable" : "") +
         ") exported by UNet Workbench " UNET_VERSION " at step " + std::to_string(c.position.step) +
         " (epoch " + std::to_string(c.position.epoch) + "), trained at " +
         std::to_string(c.config.data.image_height) + "x" + std::to_string(c.config.data.image_width) +
         ". Input '" + std::string(kOnnxInputName) + "': float32 [N, " + std::to_string(m.in_channels) +
         ", H, W], " + onnx_input_contract(c.config.data.normalize) + "; H and W divisible by " +
         std::to_string(m.size_multiple()) + ". Output '" + std::string(kOnnxOutputName) + "': float32 [N, " +
         k + ", H, W], " +
         (m.classes == 1 ? std::string("the foreground probability (sigmoid)")
                         : "the probability of each class (softmax over axis 1)") +
         ".";
}

// A number as short as it reads back exactly: 99.8, 1, 40000.
std::string number(double value) {
  std::array<char, 32> text{};
  const auto end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
  return {text.data(), end};
}

std::string numbers(const std::vector<double>& values) {
  std::string out;
  for (const double v : values) out += (out.empty() ? "" : ", ") + number(v);
  return out;
}

}  // namespace

std::string onnx_input_contract(const NormalizeDesc& desc) {
  const std::string whole_image = "of the whole image as stored (before any resize, crop or tiling)";
  switch (desc.mode) {
    case NormalizeMode::scale_255:
      return "pixel values 0..255, as an 8-bit image file holds them; the model divides them by 255";
    case NormalizeMode::range:
      return "values as the image file stores them (0..65535 for 16-bit); the model maps " +
             number(desc.range_min) + ".." + number(desc.range_max) + " to 0..1" +
             (desc.clip ? ", clipping to [0, 1]" : ", not clipped");
    case NormalizeMode::zscore:
      if (desc.scope == NormalizeScope::dataset)
        return "values as the image file stores them; the model subtracts the per-channel mean of the "
               "training data (" +
               numbers(desc.mean) + ") and divides by its standard deviation (" + numbers(desc.std) + ")";
      return "values normalised per image and channel: (x - mean) / std, the mean and standard deviation " +
             whole_image + "; x - mean alone where a channel is constant";
    case NormalizeMode::percentile: {
      const std::string low = "p" + number(desc.low_percentile), high = "p" + number(desc.high_percentile);
      return "values normalised per image and channel: (x - " + low + ") / (" + high + " - " + low +
             "), percentiles " + whole_image + "; x - " + low + " alone where a channel is constant; " +
             (desc.clip ? "not clipped: the model clips them to [0, 1]" : "not clipped");
    }
  }
  return {};
}

void export_onnx(const Checkpoint& checkpoint, const std::filesystem::path& path,
                 const OnnxExportOptions& options) {
  const std::string file = path.string();
  const UNetSpec& spec = checkpoint.config.model;
  // The parameters' names, shapes and slab offsets, from a model description: no memory is allocated.
  CountingAllocator shapes_only("onnx-export", 0);
  const UNet layout(spec, shapes_only);
  if (static_cast<std::int64_t>(checkpoint.parameters.size()) != layout.slab_elements())
    throw Error(ErrorKind::usage, file + ": cannot export: the checkpoint holds " +
                                      std::to_string(checkpoint.parameters.size()) +
                                      " parameter values, its model needs " +
                                      std::to_string(layout.slab_elements()));

  std::map<std::string, ParamView> params;
  for (std::size_t i = 0; i < layout.params().size(); ++i) {
    const ParamSpec& ps = layout.params()[i].spec;
    const std::span<const float> values(checkpoint.parameters.data() + layout.offsets()[i],
                                        static_cast<std::size_t>(ps.shape.numel()));
    for (std::size_t k = 0; k < values.size(); ++k)
      if (!std::isfinite(values[k]))
        throw Error(ErrorKind::data, file + ": cannot export: parameter " + ps.name +
                                         " holds a non-finite value (" + std::to_string(values[k]) +
                                         ") at index " + std::to_string(k));
    params.emplace(ps.name, ParamView{ps.shape, values});
  }
  const NormalizeDesc& normalize = checkpoint.config.data.normalize;
  const ChannelAffine normalization = normalization_graph(normalize, spec.in_channels, file);

  onnx::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOnnxOpset);
  model.set_producer_name("UNet Workbench");
  model.set_producer_version(UNET_VERSION);
  model.set_model_version(checkpoint.position.step);
  model.set_doc_string(model_description(checkpoint));
  auto metadata = [&](const char* key, const std::string& value) {
    onnx::StringStringEntryProto& entry = *model.add_metadata_props();
    entry.set_key(key);
    entry.set_value(value);
  };
  const nlohmann::json config = config_to_json(checkpoint.config);
  metadata("unet.model", config.at("model").dump());
  metadata("unet.training_size",
           nlohmann::json::array({checkpoint.config.data.image_height, checkpoint.config.data.image_width})
               .dump());
  metadata("unet.step", std::to_string(checkpoint.position.step));
  metadata("unet.epoch", std::to_string(checkpoint.position.epoch));
  metadata("unet.metrics", checkpoint.position.metrics.dump());
  if (!checkpoint.created.empty()) metadata("unet.created", checkpoint.created);
  if (!options.source.empty()) metadata("unet.source", options.source);
  metadata("unet.normalize", normalize_metadata(config, normalize).dump());
  const std::string input_contract = onnx_input_contract(normalize);
  metadata("unet.input", input_contract);
  metadata("unet.config", config.dump());
  metadata("unet.task", to_string(checkpoint.config.task));
  if (checkpoint.config.task == ModelTask::instances) {
    metadata("unet.instances", instances_metadata(config, checkpoint.config.instances.target).dump());
    metadata("unet.post_processing", kPostProcessing);
  }

  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("unet");
  graph.set_doc_string(model.doc_string());
  onnx::ValueInfoProto& input = *graph.add_input();
  set_tensor_type(input, kOnnxInputName, spec.in_channels);
  input.set_doc_string(input_contract);
  set_tensor_type(*graph.add_output(), kOnnxOutputName, spec.classes);

  // The weights, in module order, under their spec names and in their spec shapes.
  for (const Param& p : layout.params()) {
    const ParamView& view = params.at(p.spec.name);
    onnx::TensorProto& t = *graph.add_initializer();
    t.set_name(p.spec.name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < view.shape.rank; ++d) t.add_dims(view.shape[d]);
    t.set_raw_data(view.values.data(), view.values.size_bytes());
  }

  UNetGraph builder(graph, spec, params);
  builder.build(normalization);
  UNET_CHECK(builder.used().size() == params.size(), usage,
             "ONNX export: the graph uses " + std::to_string(builder.used().size()) + " of the model's " +
                 std::to_string(params.size()) + " parameters");

  // A protobuf message is limited to 2 GiB; larger models need ONNX's external data, which this does not
  // write.
  const std::size_t bytes = model.ByteSizeLong();
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(ErrorKind::unsupported,
                file + ": cannot export: the model is " + std::to_string(bytes) +
                    " bytes, over the 2 GiB an ONNX file holds without external data (not written by this "
                    "export)");
  std::string serialized;
  if (!model.SerializeToString(&serialized))
    throw Error(ErrorKind::io, file + ": cannot export: protobuf could not serialise the model");
  write_file_atomically(path, std::as_bytes(std::span(serialized.data(), serialized.size())));
}

}  // namespace unet
