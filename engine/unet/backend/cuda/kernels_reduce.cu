// Loss (value and gradient), segmentation counts and probabilities: one thread per pixel over
// kernel_math.h, with fixed-grid reductions.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

// Adds the block's kReduceThreads values in a fixed tree; the sum ends in sums[0].
__device__ void block_sum(double* sums) {
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
  }
  __syncthreads();
}

template <class E>
__global__ void loss_partials(LossType loss, const typename E::storage* logits, km::Dims dims,
                              const std::uint8_t* targets, typename E::storage* dlogits, float grad_scale,
                              double* partials, int* bad_target) {
  __shared__ double sums[kReduceThreads];
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  const std::int64_t stride = km::channel_stride(dims);
  double sum = 0.0;
  bool bad = false;
  for (std::int64_t p = first_index(); p < pixels; p += grid_stride()) {
    const std::int64_t base = km::pixel_base(dims, p);
    if (loss == LossType::binary_cross_entropy) {
      const float z = E::load(logits[base]);
      const bool foreground = targets[p] != 0;
      sum += static_cast<double>(km::bce_loss(z, foreground));
      if (dlogits) dlogits[base] = E::store(km::bce_gradient(z, foreground, grad_scale));
    } else {
      const km::SoftmaxLoss l = km::softmax_cross_entropy<E>(logits + base, stride, dims.c, targets[p],
                                                             grad_scale, dlogits ? dlogits + base : nullptr);
      sum += l.loss;
      bad = bad || !l.target_in_range;
    }
  }
  if (bad) *bad_target = 1;  // any writer, same value: no atomic needed
  sums[threadIdx.x] = sum;
  block_sum(sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void loss_total(const double* partials, double* loss_sum) {
  static_assert(kReduceBlocks == kReduceThreads, "one partial per thread of the final block");
  __shared__ double sums[kReduceThreads];
  sums[threadIdx.x] = partials[threadIdx.x];
  block_sum(sums);
  if (threadIdx.x == 0) *loss_sum += sums[0];
}

// Per block in shared memory, then one atomic add per counter and block (integers: any order is exact).
// Targets are u8, so classes <= 256 and the counters fit: 3 * 256 + 2.
constexpr int kMaxCounters = 3 * 256 + 2;

template <class E>
__global__ void segmentation_counts_kernel(const typename E::storage* logits, km::Dims dims,
                                           const std::uint8_t* targets, std::int64_t* counts) {
  __shared__ unsigned long long local[kMaxCounters];
  const std::int64_t classes = dims.c > 1 ? dims.c : 2;
  const int size = static_cast<int>(3 * classes + 2);
  for (int i = threadIdx.x; i < size; i += blockDim.x) local[i] = 0;
  __syncthreads();
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  for (std::int64_t p = first_index(); p < pixels; p += grid_stride()) {
    const km::PixelClasses pc =
        km::classify_pixel<E>(logits + km::pixel_base(dims, p), km::channel_stride(dims), dims.c, targets[p]);
    const km::CountIncrements inc = km::count_increments(pc, classes);
#pragma unroll
    for (int k = 0; k < km::CountIncrements::slot_count; ++k)
      if (inc.index[k] >= 0) atomicAdd(&local[inc.index[k]], 1ull);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < size; i += blockDim.x)
    if (local[i]) atomicAdd(reinterpret_cast<unsigned long long*>(counts) + i, local[i]);
}

template <class E>
__global__ void probabilities_kernel(const typename E::storage* logits, km::Dims dims, float* probs) {
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  for (std::int64_t p = first_index(); p < pixels; p += grid_stride()) {
    const typename E::storage* z = logits + km::pixel_base(dims, p);
    float* out = probs + p * dims.c;
    if (dims.c == 1)
      out[0] = km::sigmoid(E::load(z[0]));
    else
      km::softmax_probabilities<E>(z, km::channel_stride(dims), dims.c, out);
  }
}

}  // namespace

cudaError_t launch_loss(LossType loss, const void* logits, ElemType type, kmath::Dims dims,
                        const std::uint8_t* targets, void* dlogits, float grad_scale, double* partials,
                        double* loss_sum, int* bad_target, cudaStream_t stream) {
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    loss_partials<E><<<kReduceBlocks, kReduceThreads, 0, stream>>>(loss, static_cast<const S*>(logits), dims,
                                                                   targets, static_cast<S*>(dlogits),
                                                                   grad_scale, partials, bad_target);
    loss_total<<<1, kReduceThreads, 0, stream>>>(partials, loss_sum);
  });
}

cudaError_t launch_segmentation_counts(const void* logits, ElemType type, kmath::Dims dims,
                                       const std::uint8_t* targets, std::int64_t* counts,
                                       cudaStream_t stream) {
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  if (pixels == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    segmentation_counts_kernel<E><<<blocks_for(pixels), kThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(logits), dims, targets, counts);
  });
}

cudaError_t launch_probabilities(const void* logits, ElemType type, kmath::Dims dims, float* probs,
                                 cudaStream_t stream) {
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  if (pixels == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    probabilities_kernel<E><<<blocks_for(pixels), kThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(logits), dims, probs);
  });
}

}  // namespace unet::cuda_kernels
