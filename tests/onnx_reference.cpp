// The engine's side of the ONNX consumer check (tests/onnx_consumer_check.py), as a small program:
//
//   onnx_reference checkpoint OUT CONFIG_JSON SEED
//       writes a weights-only checkpoint of the model CONFIG_JSON describes, its weights He-normal from SEED
//       and its biases uniform in [-0.25, 0.25] (not zero as at initialisation, so that a misplaced bias
//       shows)
//   onnx_reference probabilities CKPT VALUES N H W OUT [NORMALISED]
//       runs the checkpoint's model on the CPU on the stored values VALUES (raw [N, H, W, in_channels], u8
//       when the file name ends in .u8, u16 when in .u16; any H and W divisible by 2^depth: no resize, unlike
//       predict), each image normalised on the host by the checkpoint's data.normalize as the engine
//       normalises an image it reads, and writes its probabilities to OUT as raw f32 [N, classes, H, W], the
//       layout of the ONNX graph's output; NORMALISED, when given, gets the normalised values before any
//       clipping as raw f32 [N, in_channels, H, W]: what the graph of a per-image normalisation takes
//
// Exit code 0 on success; 1 with the message on stderr otherwise.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/devices.h"
#include "unet/core/memory.h"
#include "unet/core/rng.h"
#include "unet/io/checkpoint.h"
#include "unet/model/normalize.h"
#include "unet/model/unet.h"

using namespace unet;

namespace {

void write_checkpoint(const std::string& out, const std::string& config_json, std::uint64_t seed) {
  Checkpoint c;
  c.config = config_from_json(nlohmann::json::parse(config_json), {});
  c.parameters = UNet::initial_slab(c.config.model, seed);
  CountingAllocator shapes_only("onnx_reference", 0);
  const UNet layout(c.config.model, shapes_only);
  for (std::size_t i = 0; i < layout.params().size(); ++i) {
    const ParamSpec& ps = layout.params()[i].spec;
    if (!ps.is_bias) continue;
    Rng rng(seed, 5000 + i);
    float* bias = c.parameters.data() + layout.offsets()[i];
    for (std::int64_t k = 0; k < ps.shape.numel(); ++k)
      bias[k] = static_cast<float>(rng.uniform(-0.25, 0.25));
  }
  c.position.step = 42;
  c.position.epoch = 3;
  save_checkpoint(out, c, CheckpointKind::weights_only);
}

// A raw file of `count` unsigned samples of `bytes_per_sample` bytes (1 or 2, little-endian) as floats.
std::vector<float> read_samples(const std::string& path, std::int64_t count, int bytes_per_sample) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
  UNET_CHECK(static_cast<std::int64_t>(bytes.size()) == count * bytes_per_sample, data,
             path + ": " + std::to_string(bytes.size()) + " bytes, not " + std::to_string(count) +
                 " samples of " + std::to_string(bytes_per_sample) + " byte(s)");
  std::vector<float> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = bytes_per_sample == 1 ? bytes[i] : static_cast<float>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  return out;
}

// [N, H, W, C] as [N, C, H, W].
std::vector<float> nchw_of(const std::vector<float>& nhwc, std::int64_t n, std::int64_t h, std::int64_t w,
                           std::int64_t c) {
  std::vector<float> out(nhwc.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t k = 0; k < c; ++k)
          out[static_cast<std::size_t>(((b * c + k) * h + y) * w + x)] =
              nhwc[static_cast<std::size_t>(((b * h + y) * w + x) * c + k)];
  return out;
}

void write_floats(const std::string& path, const std::vector<float>& values) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(values.data()),
             static_cast<std::streamsize>(values.size() * sizeof(float)));
  UNET_CHECK(file.good(), io, path + ": cannot write");
}

void write_probabilities(const std::string& checkpoint_path, const std::string& values_path, std::int64_t n,
                         std::int64_t h, std::int64_t w, const std::string& out,
                         const std::string& normalised_out) {
  const Checkpoint c = load_checkpoint(checkpoint_path);
  const std::int64_t channels = c.config.model.in_channels, classes = c.config.model.classes;
  const int bit_depth = values_path.ends_with(".u16") ? 16 : 8;
  std::vector<float> values = read_samples(values_path, n * h * w * channels, bit_depth / 8);
  std::vector<float> unclipped = values;
  const std::size_t image = static_cast<std::size_t>(h * w * channels);
  for (std::int64_t b = 0; b < n; ++b) {
    const std::span<float> one(values.data() + static_cast<std::size_t>(b) * image, image);
    const ChannelAffine affine =
        image_normalization(c.config.data.normalize, one, channels, bit_depth, false, values_path);
    normalize_in_place(affine, one, channels);
    normalize_in_place({affine.offset, affine.scale, false},
                       std::span<float>(unclipped.data() + static_cast<std::size_t>(b) * image, image),
                       channels);
  }
  if (!normalised_out.empty()) write_floats(normalised_out, nchw_of(unclipped, n, h, w, channels));

  const std::unique_ptr<Backend> backend = create_backend(DeviceId{}, {});
  const std::unique_ptr<Stream> stream = backend->create_stream();
  ExecContext ctx{*backend, *stream, DType::f32, Layout::nhwc};
  UNet model(c.config.model, backend->allocator());
  model.set_parameters(ctx, c.parameters);
  Tensor input =
      Tensor::empty(backend->allocator(), Shape{n, h, w, channels}, DType::f32, MemoryCategory::input_batch);
  backend->copy_from_host(*stream, values.data(), input);
  const UNet::Pass pass = model.forward(ctx, input, false);
  Tensor probs =
      Tensor::empty(backend->allocator(), Shape{n * h * w * classes}, DType::f32, MemoryCategory::other);
  backend->probabilities(*stream, pass.logits, probs);
  std::vector<float> nhwc(static_cast<std::size_t>(probs.numel()));
  backend->copy_to_host(*stream, probs, nhwc.data());
  stream->synchronize();

  write_floats(out, nchw_of(nhwc, n, h, w, classes));
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "checkpoint") {
      write_checkpoint(args[1], args[2], std::stoull(args[3]));
      return 0;
    }
    if ((args.size() == 7 || args.size() == 8) && args[0] == "probabilities") {
      write_probabilities(args[1], args[2], std::stoll(args[3]), std::stoll(args[4]), std::stoll(args[5]),
                          args[6], args.size() == 8 ? args[7] : std::string());
      return 0;
    }
    std::fputs(
        "usage: onnx_reference checkpoint OUT CONFIG_JSON SEED\n"
        "       onnx_reference probabilities CKPT VALUES N H W OUT [NORMALISED]\n",
        stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_reference: %s\n", e.what());
    return 1;
  }
}
