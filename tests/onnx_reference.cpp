// The engine's side of the ONNX consumer check (tests/onnx_consumer_check.py), as a small program:
//
//   onnx_reference checkpoint OUT CONFIG_JSON SEED
//       writes a weights-only checkpoint of the model CONFIG_JSON describes, its weights He-normal from SEED
//       and its biases uniform in [-0.25, 0.25] (not zero as at initialisation, so that a misplaced bias
//       shows)
//   onnx_reference probabilities CKPT PIXELS N H W OUT
//       runs the checkpoint's model on the CPU on PIXELS (raw u8 [N, H, W, in_channels], any H and W
//       divisible by 2^depth: no resize, unlike predict) and writes its probabilities to OUT as raw f32 [N,
//       classes, H, W], the layout of the ONNX graph's output
//
// Exit code 0 on success; 1 with the message on stderr otherwise.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "unet/backend/devices.h"
#include "unet/core/memory.h"
#include "unet/core/rng.h"
#include "unet/io/checkpoint.h"
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

void write_probabilities(const std::string& checkpoint_path, const std::string& pixels_path, std::int64_t n,
                         std::int64_t h, std::int64_t w, const std::string& out) {
  const Checkpoint c = load_checkpoint(checkpoint_path);
  const std::int64_t channels = c.config.model.in_channels, classes = c.config.model.classes;
  std::ifstream in(pixels_path, std::ios::binary);
  const std::vector<std::uint8_t> pixels((std::istreambuf_iterator<char>(in)),
                                         std::istreambuf_iterator<char>());
  UNET_CHECK(static_cast<std::int64_t>(pixels.size()) == n * h * w * channels, data,
             pixels_path + ": " + std::to_string(pixels.size()) + " bytes, not [" + std::to_string(n) + ", " +
                 std::to_string(h) + ", " + std::to_string(w) + ", " + std::to_string(channels) + "] pixels");

  const std::unique_ptr<Backend> backend = create_backend(DeviceId{}, {});
  const std::unique_ptr<Stream> stream = backend->create_stream();
  ExecContext ctx{*backend, *stream, DType::f32, Layout::nhwc};
  UNet model(c.config.model, backend->allocator());
  model.set_parameters(ctx, c.parameters);
  Tensor input =
      Tensor::empty(backend->allocator(), Shape{n, h, w, channels}, DType::u8, MemoryCategory::input_batch);
  backend->copy_from_host(*stream, pixels.data(), input);
  const UNet::Pass pass = model.forward(ctx, input, false);
  Tensor probs =
      Tensor::empty(backend->allocator(), Shape{n * h * w * classes}, DType::f32, MemoryCategory::other);
  backend->probabilities(*stream, pass.logits, probs);
  std::vector<float> nhwc(static_cast<std::size_t>(probs.numel()));
  backend->copy_to_host(*stream, probs, nhwc.data());
  stream->synchronize();

  std::vector<float> nchw(nhwc.size());
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x)
        for (std::int64_t k = 0; k < classes; ++k)
          nchw[static_cast<std::size_t>(((b * classes + k) * h + y) * w + x)] =
              nhwc[static_cast<std::size_t>(((b * h + y) * w + x) * classes + k)];
  std::ofstream file(out, std::ios::binary);
  file.write(reinterpret_cast<const char*>(nchw.data()),
             static_cast<std::streamsize>(nchw.size() * sizeof(float)));
  UNET_CHECK(file.good(), io, out + ": cannot write the probabilities");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 4 && args[0] == "checkpoint") {
      write_checkpoint(args[1], args[2], std::stoull(args[3]));
      return 0;
    }
    if (args.size() == 7 && args[0] == "probabilities") {
      write_probabilities(args[1], args[2], std::stoll(args[3]), std::stoll(args[4]), std::stoll(args[5]),
                          args[6]);
      return 0;
    }
    std::fputs(
        "usage: onnx_reference checkpoint OUT CONFIG_JSON SEED\n"
        "       onnx_reference probabilities CKPT PIXELS N H W OUT\n",
        stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "onnx_reference: %s\n", e.what());
    return 1;
  }
}
