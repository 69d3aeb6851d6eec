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

#include <cstddef>
#include <cstdint>

#include "unet/backend/cuda/kernel_math.h"

namespace unet::cuda_kernels {

// Element types, in the order of the engine's DType (the backend maps one onto the other).
enum class ElemType : std::uint8_t { f32, f16, bf16, u8, i32, i64, f64 };

// The loss's reductions run on a fixed grid, so that their order, and hence a floating-point result, is the
// same from run to run: kReduceBlocks partial results (in a scratch buffer of the caller's), then one block
// adds them in a fixed order.
inline constexpr int kReduceBlocks = 256;
inline constexpr int kReduceThreads = 256;

// --- kernels_elementwise.cu --------------------------------------------------------------------------------

// Whether this build holds code the current device can run: cudaFuncGetAttributes on one of these kernels
// (which loads it). cudaErrorNoKernelImageForDevice / cudaErrorInvalidDeviceFunction when the build's
// architectures do not cover the device; binary_version = the loaded code's compute capability x 10.
cudaError_t kernel_image_status(int& binary_version);

// x = T(scale * pixel); pixels are u8 or f32 (pixels_f32) [n, h, w, c], x f32/bf16/f16 in its layout.
cudaError_t launch_input_from_pixels(const void* pixels, bool pixels_f32, void* x, ElemType x_type,
                                     kmath::Dims dims, float scale, cudaStream_t stream);

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

// --- kernels_optim.cu --------------------------------------------------------------------------------------

// One Adam/AdamW step over `count` f32 values (the whole parameter slab at once). `scalars` from
// kmath::adam_scalars on the host.
cudaError_t launch_adam(const kmath::AdamScalars& scalars, float* params, const float* grads, float* m,
                        float* v, std::int64_t count, cudaStream_t stream);

// One SGD step (torch.optim.SGD, dampening 0) over `count` f32 values; `momentum` may be null when
// scalars.momentum is 0.
cudaError_t launch_sgd(const kmath::SgdScalars& scalars, float* params, const float* grads, float* momentum,
                       std::int64_t count, cudaStream_t stream);

// The two flat reductions run on CUB's DeviceReduce (TransformReduce), whose temporary storage the caller
// provides. reduction_temp_bytes gives the bytes each needs for an input of up to `max_bytes` bytes (count
// non-finite: the most over f32/bf16/f16); it asks CUB, which reads the current device's properties, so a
// device must be current. CUB's need grows with the input up to a bound set by the GPU's size, so the
// figure for the largest input serves every smaller one; a call given too little storage fails
// (cudaErrorInvalidValue) rather than writing past it.
cudaError_t reduction_temp_bytes(std::int64_t max_bytes, std::size_t& squares_bytes,
                                 std::size_t& count_bytes);

// *sum_out (f64) = the sum of the squares of `count` f32 values, each squared and summed in double. CUB's
// order: the same from run to run on one GPU, not across GPU models.
cudaError_t launch_sum_of_squares(const float* data, std::int64_t count, void* temp, std::size_t temp_bytes,
                                  double* sum_out, cudaStream_t stream);

// *count_out (i64) = number of inf/NaN values among `count` f32/bf16/f16 values (integers: exact).
cudaError_t launch_count_non_finite(const void* data, ElemType type, std::int64_t count, void* temp,
                                    std::size_t temp_bytes, std::int64_t* count_out, cudaStream_t stream);

// --- kernels_reduce.cu -------------------------------------------------------------------------------------

// Bytes of the caller's scratch launch_loss needs with an image term (every image's terms, then the
// images' losses); 0 without.
inline std::size_t loss_scratch_bytes(const loss_math::LossParams& params, kmath::Dims dims) {
  if (!loss_math::has_image_term(params)) return 0;
  return static_cast<std::size_t>(loss_math::image_scratch_doubles(dims.n, dims.c)) * sizeof(double);
}

// loss_sums (f64 [2]) += {sum over labelled pixels of the weighted per-pixel term, sum over images of the
// Dice loss}; dlogits (may be null) = ce_scale * d(first)/dz + dice_scale * d(second)/dz in the logits' type
// and layout (loss_math::pixel_loss, unet/loss/terms.h). targets u8 [n, h, w]; pixel_weights f32 [n, h, w]
// multiply each pixel's per-pixel term (null: every pixel weighs 1). `partials` is scratch of
// kReduceBlocks doubles; the sums are formed per thread, per block in a fixed tree and over the blocks in a
// fixed tree: the same every run (its order differs from the CPU backend's, so the two agree to rounding, not
// bits). `dice_scratch` (loss_scratch_bytes) holds the Dice term's per-image sums between its passes.
// *bad_target (i32, zeroed by the caller) becomes non-zero when a softmax target that is not ignored is >=
// classes, where the CPU backend throws.
cudaError_t launch_loss(const loss_math::LossParams& params, const void* logits, ElemType type,
                        kmath::Dims dims, const std::uint8_t* targets, const float* pixel_weights,
                        void* dlogits, float ce_scale, float dice_scale, double* partials,
                        double* dice_scratch, double* loss_sums, int* bad_target, cudaStream_t stream);

// counts (i64 [3 * max(classes, 2) + 2]) += the confusion counts of the pixels whose target is not
// ignore_index (-1: none) (integers: exact in any order).
cudaError_t launch_segmentation_counts(const void* logits, ElemType type, kmath::Dims dims,
                                       const std::uint8_t* targets, int ignore_index, std::int64_t* counts,
                                       cudaStream_t stream);

// probs f32 [n, h, w, classes] = sigmoid (one logit) or softmax of each pixel.
cudaError_t launch_probabilities(const void* logits, ElemType type, kmath::Dims dims, float* probs,
                                 cudaStream_t stream);

// --- kernels_pool.cu ---------------------------------------------------------------------------------------

// Max pooling 2x2 stride 2, x dims `in` -> y [n, c, h/2, w/2] in the same layout; saved: one u8 window index
// (0..3) per output, in y's order.
cudaError_t launch_maxpool_forward(const void* x, void* y, std::uint8_t* saved, ElemType type, kmath::Dims in,
                                   cudaStream_t stream);
// dx (+)= dy routed to the saved position of each window; one thread per dx element (no atomics), so the
// rows and columns no window covers are written too.
cudaError_t launch_maxpool_backward(const void* dy, const std::uint8_t* saved, void* dx, ElemType type,
                                    kmath::Dims in, bool accumulate, cudaStream_t stream);

// --- kernels_layout.cu -------------------------------------------------------------------------------------

// out = [a, b] along channels; out dims `out` (out.c = a_channels + b's channels). Bit copies.
cudaError_t launch_concat_channels(const void* a, const void* b, void* out, ElemType type,
                                   kmath::Dims out_dims, std::int64_t a_channels, cudaStream_t stream);
// da = dout[:, :a_channels]; db (+)= dout[:, a_channels:].
cudaError_t launch_split_channels(const void* dout, void* da, void* db, ElemType type, kmath::Dims out_dims,
                                  std::int64_t a_channels, bool accumulate_b, cudaStream_t stream);

// dst [pixels, dst_channels] = src [pixels, src_channels] channel by channel (NHWC), zero in the channels
// src lacks (kmath::channel_copy_source): pads activations to a tensor-core channel count, or with fewer
// dst channels drops the padding again. Bit copies.
cudaError_t launch_copy_channels(const void* src, std::int64_t src_channels, void* dst,
                                 std::int64_t dst_channels, std::int64_t pixels, ElemType type,
                                 cudaStream_t stream);

// --- kernels_weights.cu ------------------------------------------------------------------------------------

// packed = T(canonical) for a filter of k x c x rs f32 values in canonical [k, c, r, s] order, stored as
// KRSC (krsc = true: cuDNN's NHWC filter layout) or KCRS, with k_pad >= k filters of c_pad >= c channels:
// the padding (kmath::packed_filter_source) is zero. f32/bf16/f16.
cudaError_t launch_pack_weights(const float* canonical, void* packed, ElemType type, std::int64_t k,
                                std::int64_t c, std::int64_t rs, std::int64_t k_pad, std::int64_t c_pad,
                                bool krsc, cudaStream_t stream);
// canonical (+)= float(packed): the inverse of launch_pack_weights for weight gradients; the padding of the
// packed filter (channels past c, filters past k) is not read.
cudaError_t launch_unpack_weights(const void* packed, ElemType type, float* canonical, std::int64_t k,
                                  std::int64_t c, std::int64_t rs, std::int64_t c_pad, bool krsc,
                                  bool accumulate, cudaStream_t stream);

// --- kernels_collective.cu ---------------------------------------------------------------------------------

// The most ranks one launch_share_sum joins (their pointers travel by value in the kernel's parameters).
inline constexpr int kMaxShareRanks = 32;
struct ShareBuffers {
  float* data[kMaxShareRanks];  // each rank's f32 buffer, all of the same length
};

// For i in [begin, end): every buffer's element i = kmath::rank_order_sum over the first `ranks` buffers. The
// buffers may lie on other devices that this one can address (the same device, or peers with access).
cudaError_t launch_share_sum(const ShareBuffers& buffers, int ranks, std::int64_t begin, std::int64_t end,
                             cudaStream_t stream);

}  // namespace unet::cuda_kernels
