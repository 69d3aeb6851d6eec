// Shared by the .cu files: grid sizes, grid-stride indices and the dispatch from an element type to its
// kernel_math.h codec. nvcc only.
#pragma once

#include <cstdint>

#include "unet/backend/cuda/kernels.h"

namespace unet::cuda_kernels::detail {

inline constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; larger tensors are covered by the grid stride.
inline constexpr std::int64_t kMaxBlocks = 65536;

inline int blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Calls fn with the kmath codec of a floating-point activation type and returns the launch's error; other
// element types are not activations.
template <class Fn>
cudaError_t with_codec(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::f32:
      fn(kmath::F32{});
      break;
    case ElemType::bf16:
      fn(kmath::BF16{});
      break;
    case ElemType::f16:
      fn(kmath::F16{});
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

inline std::int64_t numel(const kmath::Dims& d) {
  return d.n * d.c * d.h * d.w;
}

}  // namespace unet::cuda_kernels::detail
