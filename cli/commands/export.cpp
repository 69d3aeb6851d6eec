// `unet-train export`: a checkpoint's model alone, as safetensors weights or an ONNX graph.
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/io/checkpoint.h"
#include "unet/io/onnx_export.h"

namespace unet::cli {

int export_model(const Invocation& inv) {
  const std::string format = inv.format.value_or("safetensors");
  if (format != "safetensors" && format != "onnx")
    throw ConfigError("--format", "export writes safetensors or onnx, got '" + format + "'");
  if (!inv.checkpoint)
    throw ConfigError("--checkpoint", "export needs --checkpoint CKPT, the checkpoint to read");
  if (!inv.out)
    throw ConfigError("--out", "export needs --out FILE, the " +
                                   std::string(format == "onnx" ? "ONNX model" : "weights file") +
                                   " to write");
  std::error_code ec;
  if (std::filesystem::equivalent(*inv.checkpoint, *inv.out, ec))
    throw ConfigError(
        "--out",
        *inv.out + " is the checkpoint being exported (--checkpoint " + *inv.checkpoint + "): " +
            (format == "onnx" ? "the ONNX model would replace it" : "its optimizer state would be lost") +
            "; choose another file");
  refuse_to_replace(*inv.out, inv);
  const Checkpoint c = load_checkpoint(*inv.checkpoint);
  if (format == "onnx") {
    export_onnx(c, *inv.out, {.source = std::filesystem::path(*inv.checkpoint).filename().string()});
    const UNetSpec& m = c.config.model;
    const std::string input(kOnnxInputName);
    std::printf(
        "wrote %s: the model of %s at step %lld as ONNX (opset %lld): input %s float32 [N, %d, H, W], "
        "output %s [N, %d, H, W]; H and W divisible by %lld\n"
        "input %s: %s\n",
        printable(*inv.out).c_str(), printable(*inv.checkpoint).c_str(),
        static_cast<long long>(c.position.step), static_cast<long long>(kOnnxOpset), input.c_str(),
        m.in_channels, std::string(kOnnxOutputName).c_str(), m.classes,
        static_cast<long long>(m.size_multiple()), input.c_str(),
        onnx_input_contract(c.config.data.normalize).c_str());
    return 0;
  }
  save_checkpoint(*inv.out, c, CheckpointKind::weights_only);
  std::printf("wrote %s: the weights of %s at step %lld, without optimizer state\n",
              printable(*inv.out).c_str(), printable(*inv.checkpoint).c_str(),
              static_cast<long long>(c.position.step));
  return 0;
}

}  // namespace unet::cli
