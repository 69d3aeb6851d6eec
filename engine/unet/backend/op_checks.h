// What every backend's operations say about their arguments: an operation's name in messages
// ("conv3x3 [n,c,h,w]->64 bf16") and the check of a parameter tensor, one wording for the CPU backend and
// the CUDA module alike. Header-only: the CUDA module compiles it in too.
#pragma once

#include <string>

#include "unet/backend/backend.h"
#include "unet/core/error.h"

namespace unet {

inline std::string describe(const ConvDesc& d) {
  return "conv" + std::to_string(d.kernel) + "x" + std::to_string(d.kernel) +
         (d.depthwise ? " depthwise" : "") + " " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}

inline std::string describe(const UpConvDesc& d) {
  return "upconv2x2 " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}

// A weight, bias or optimizer-state tensor: f32 with `want`'s element count (its layout is canonical).
inline void check_param(const Tensor& t, const Shape& want, const char* what) {
  UNET_CHECK(t.defined() && t.shape().numel() == want.numel() && t.dtype() == DType::f32, usage,
             std::string(what) + ": expected f32 " + want.str() + ", got " +
                 (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

}  // namespace unet
