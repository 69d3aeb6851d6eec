// ONNX export: a checkpoint's model as one self-contained .onnx file that other runtimes (ONNX Runtime,
// OpenCV's DNN module, TensorRT) can run without this program. The graph takes what a user has and gives
// what `unet-train predict` gives, before any resizing:
//
//   input   "pixels"         float32 [N, in_channels, H, W]: what onnx_input_contract says for the
//   checkpoint's
//                            data.normalize: the stored values when the normalisation does not depend on the
//                            image (scale_255, range, zscore over the dataset: it is inside the graph), the
//                            normalised values for a per-image one (percentile, zscore per image)
//   output  "probabilities"  float32 [N, classes, H, W]: a binary model (classes 1) the foreground's
//                            sigmoid, otherwise the softmax over the classes (axis 1)
//
// N, H and W are free (named dimensions); H and W must be divisible by 2^depth, as for the engine. The
// weights are the checkpoint's parameters under their spec names (docs/MODEL.md), in the spec's layouts,
// which are ONNX's own: Conv [out, in/groups, kh, kw], ConvTranspose [in, out, kh, kw]. The file is written
// with the protobuf classes of the ONNX project (libonnx-dev); this header keeps them out of its includers.
// A task-instances model is exported as the network alone; its metadata says how `predict` makes objects of
// the probabilities ("unet.task", "unet.instances": the seed and foreground maps, the thresholds and the
// minimum size of the checkpoint's instances.*; "unet.post_processing": the steps).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "unet/io/checkpoint.h"
#include "unet/model/normalize.h"

namespace unet {

// Opset 13: the first in which Softmax normalises over its one axis (opsets up to 12 flatten every axis from
// it onwards, which on [N, classes, H, W] would mix the pixels). OpenCV 4.6's importer and ONNX 1.12's
// checker accept it; its IR version is 7.
inline constexpr std::int64_t kOnnxOpset = 13;
inline constexpr std::int64_t kOnnxIrVersion = 7;
inline constexpr std::string_view kOnnxInputName = "pixels";
inline constexpr std::string_view kOnnxOutputName = "probabilities";

struct OnnxExportOptions {
  // Where the checkpoint came from, recorded in the file's metadata ("unet.source"); empty: not recorded.
  std::string source;
};

// What the graph's input must hold for a model normalised by `desc`, in one sentence: written into the file
// ("unet.input" in its metadata, the input's doc_string) and printed by `unet-train export`.
std::string onnx_input_contract(const NormalizeDesc& desc);

// Writes the model of `checkpoint` to `path` atomically (a crash leaves any old file whole). Throws
// unet::Error naming `path`: usage when the parameters do not fit config.model, data when one is not
// finite (naming it) or data.normalize is a dataset zscore without its measured values (naming
// data.normalize_mean), unsupported when the model is too large for one protobuf (2 GiB), io when the file
// system fails.
void export_onnx(const Checkpoint& checkpoint, const std::filesystem::path& path,
                 const OnnxExportOptions& options = {});

}  // namespace unet
