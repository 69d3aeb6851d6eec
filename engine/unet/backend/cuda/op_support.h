// What both halves of the CUDA backend's operations use (cuda_backend.cpp: device, streams, the project's
// kernels; cuda_convolution.cpp: cuDNN's plans and the convolutions): the kernels' element types, a tensor's
// dims for them, and the checks of activations and workspaces. Private to backend/cuda/.
#pragma once

#include <string>

#include "unet/backend/backend.h"
#include "unet/backend/cuda/kernels.h"
#include "unet/backend/op_checks.h"
#include "unet/core/error.h"

namespace unet::cuda {

namespace ck = unet::cuda_kernels;

inline ck::ElemType elem(DType t) {
  return static_cast<ck::ElemType>(t);  // the same order (kernels.h)
}
static_assert(static_cast<int>(ck::ElemType::f64) == static_cast<int>(DType::f64) &&
              static_cast<int>(ck::ElemType::bf16) == static_cast<int>(DType::bf16));

inline kmath::Dims dims_of(const ActShape& s, Layout l) {
  return kmath::Dims{s.n, s.c, s.h, s.w, l == Layout::nhwc};
}
inline kmath::Dims dims_of(const Tensor& t) {
  return dims_of(t.act(), t.layout());
}

inline void check_act(const Tensor& t, const ActShape& want, DType dtype, Layout layout, const char* what) {
  UNET_CHECK(
      t.defined() && t.shape().rank == 4 && t.act() == want && t.dtype() == dtype && t.layout() == layout,
      usage,
      std::string(what) + ": expected " + want.str() + " " + std::string(to_string(dtype)) + ", got " +
          (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

// The caller's workspace for a pass that needs `needed` bytes (conv_workspace_bytes).
inline char* checked_workspace(Workspace ws, std::size_t needed, const std::string& what) {
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             what + ": workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  return static_cast<char*>(ws.data);
}

}  // namespace unet::cuda
