// Launchers of the CUDA backend's own kernels: plain data arguments and a stream, no engine headers, so that
// the .cu files need nothing from the engine and the host code (cuda_backend.cpp, g++) nothing from nvcc.
// Each launcher queues its kernel(s) on `stream` and returns cudaGetLastError() (launch errors only; what
// goes wrong while a kernel runs shows up at the next synchronization). The per-element math is
// kernel_math.h's; see there for the rules and tests/test_kernel_math.cpp for their check against the CPU
// backend.
//
// Pointers are device pointers. Activations are [n, c, h, w] in NHWC (nhwc = true) or NCHW order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "unet/backend/cuda/kernel_math.h"

namespace unet::cuda_kernels {

// Element types, in the order of the engine's DType (the backend maps one onto the other).
enum class ElemType : std::uint8_t { f32, f16, bf16, u8, i32, i64, f64 };

// Reductions run on a fixed grid, so that their order, and hence a floating-point result, is the same from
// run to run: kReduceBlocks partial results (in a scratch buffer of the caller's), then one block adds them
// in a fixed order.
inline constexpr int kReduceBlocks = 256;
inline constexpr int kReduceThreads = 256;

// --- kernels_elementwise.cu
// --------------------------------------------------------------------------

// x = T(scale * pixel); pixels are u8 [n, h, w, c], x f32/bf16/f16 in its layout.
cudaError_t launch_input_from_u8(const std::uint8_t* pixels, void* x, ElemType x_type, kmath::Dims dims,
                                 float scale, cudaStream_t stream);

// dz = dy * (y > 0) (kmath::relu_backward); dz may be dy. f32/bf16/f16.
cudaError_t launch_relu_backward(const void* y, const void* dy, void* dz, ElemType type, std::int64_t count,
                                 cudaStream_t stream);

// In place after the convolution: y = [relu](y + bias[c]); bias f32 [c]. f32/bf16/f16.
cudaError_t launch_bias_relu(void* y, const float* bias, ElemType type, kmath::Dims dims, bool relu,
                             cudaStream_t stream);

// data[i] = value converted as the CPU backend's fill does (float types through float, integers by a cast).
cudaError_t launch_fill(void* data, ElemType type, std::int64_t count, double value, cudaStream_t stream);

// data[i] *= factor (f32).
cudaError_t launch_scale(float* data, std::int64_t count, float factor, cudaStream_t stream);

// y[i] = y[i] + x[i] in float, stored in the element type (f32/bf16/f16).
cudaError_t launch_add(const void* x, void* y, ElemType type, std::int64_t count, cudaStream_t stream);

// out[i] = in[i] converted between f32 and bf16/f16 (round to nearest even); f32 -> f32 copies.
cudaError_t launch_cast(const void* in, ElemType in_type, void* out, ElemType out_type, std::int64_t count,
                        cudaStream_t stream);

// --- kernels_optim.cu
// --------------------------------------------------------------------------------

// One Adam/AdamW step over `count` f32 values (the whole parameter slab at once). `scalars` from
// kmath::adam_scalars on the host.
cudaError_t launch_adam(const kmath::AdamScalars& scalars, float* params, const float* grads, float* m,
                        float* v, std::int64_t count, cudaStream_t stream);

// *count_out (i64) = number of inf/NaN values among `count` f32/bf16/f16 values. `partials` is scratch of
// kReduceBlocks values. Two passes on a fixed grid, no atomics.
cudaError_t launch_count_non_finite(const void* data, ElemType type, std::int64_t count,
                                    unsigned long long* partials, std::int64_t* count_out,
                                    cudaStream_t stream);

}  // namespace unet::cuda_kernels
