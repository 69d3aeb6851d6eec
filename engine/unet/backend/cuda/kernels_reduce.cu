// Loss (value and gradient), segmentation counts and probabilities: one thread per pixel over
// kernel_math.h and the loss math (unet/loss/terms.h), with fixed-grid reductions.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
namespace lm = unet::loss_math;
using namespace detail;

// Adds the block's kReduceThreads values in a fixed tree; the sum ends in sums[0].
__device__ void block_sum(double* sums) {
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
  }
  __syncthreads();
}

// Dice pass 1: block (image, Dice class) sums its pixels' {p t, p, t} in a fixed tree.
template <class E>
__global__ void dice_sums_kernel(lm::LossParams params, const typename E::storage* logits, km::Dims dims,
                                 const std::uint8_t* targets, double* dice_scratch) {
  __shared__ double sums[3][kReduceThreads];
  const std::int64_t dice_classes = lm::dice_classes(dims.c);
  const std::int64_t image = blockIdx.x / dice_classes, dice_class = blockIdx.x % dice_classes;
  const std::int64_t plane = dims.h * dims.w;
  const std::int64_t stride = km::channel_stride(dims);
  lm::DiceSums mine;
  for (std::int64_t p = image * plane + threadIdx.x; p < (image + 1) * plane; p += blockDim.x) {
    if (lm::loss_ignores(params, targets[p])) continue;
    const lm::DiceSums d =
        km::dice_pixel_sums<E>(logits + km::pixel_base(dims, p), stride, dims.c, targets[p], dice_class);
    mine.intersection += d.intersection;
    mine.probability += d.probability;
    mine.truth += d.truth;
  }
  sums[0][threadIdx.x] = mine.intersection;
  sums[1][threadIdx.x] = mine.probability;
  sums[2][threadIdx.x] = mine.truth;
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half)
      for (int k = 0; k < 3; ++k) sums[k][threadIdx.x] += sums[k][threadIdx.x + half];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double* out = dice_scratch + (image * dice_classes + dice_class) * 3;
    for (int k = 0; k < 3; ++k) out[k] = sums[k][0];
  }
}

// Dice pass 2: one thread per image turns its sums into its loss and the gradient's terms, in place.
__global__ void dice_finish_kernel(lm::LossParams params, km::Dims dims, double* dice_scratch) {
  const std::int64_t image = first_index();
  if (image >= dims.n) return;
  const std::int64_t dice_classes = lm::dice_classes(dims.c);
  dice_scratch[dims.n * dice_classes * 3 + image] =
      lm::dice_image_loss(params, dice_scratch + image * dice_classes * 3, dims.c);
}

template <class E>
__global__ void loss_partials(lm::LossParams params, const typename E::storage* logits, km::Dims dims,
                              const std::uint8_t* targets, const float* pixel_weights,
                              typename E::storage* dlogits, float ce_scale, float dice_scale,
                              const double* dice_scratch, double* partials, int* bad_target) {
  __shared__ double sums[kReduceThreads];
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  const std::int64_t plane = dims.h * dims.w;
  const std::int64_t stride = km::channel_stride(dims);
  const std::int64_t dice_classes = lm::dice_classes(dims.c);
  double sum = 0.0;
  bool bad = false;
  for (std::int64_t p = first_index(); p < pixels; p += grid_stride()) {
    const std::int64_t base = km::pixel_base(dims, p);
    const double* dice_terms =
        lm::has_image_term(params) ? dice_scratch + (p / plane) * dice_classes * 3 : nullptr;
    const lm::PixelLossResult l = km::pixel_loss<E>(
        params, logits + base, stride, dims.c, targets[p], pixel_weights ? pixel_weights[p] : 1.0f, ce_scale,
        dice_scale, dice_terms, dlogits ? dlogits + base : nullptr);
    sum += l.loss;
    bad = bad || !l.target_in_range;
  }
  if (bad) *bad_target = 1;  // any writer, same value: no atomic needed
  sums[threadIdx.x] = sum;
  block_sum(sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// The cross-entropy partials in a fixed tree; the images' Dice losses in image order.
__global__ void loss_total(const double* partials, const double* image_dice_losses, std::int64_t images,
                           double* loss_sums) {
  static_assert(kReduceBlocks == kReduceThreads, "one partial per thread of the final block");
  __shared__ double sums[kReduceThreads];
  sums[threadIdx.x] = partials[threadIdx.x];
  block_sum(sums);
  if (threadIdx.x == 0) {
    loss_sums[0] += sums[0];
    double dice = 0.0;
    for (std::int64_t i = 0; i < images; ++i) dice += image_dice_losses[i];
    loss_sums[1] += dice;
  }
}

// Per block in shared memory, then one atomic add per counter and block (integers: any order is exact).
// Targets are u8, so classes <= 256 and the counters fit: 3 * 256 + 2.
constexpr int kMaxCounters = 3 * 256 + 2;

template <class E>
__global__ void segmentation_counts_kernel(const typename E::storage* logits, km::Dims dims,
                                           const std::uint8_t* targets, int ignore_index,
                                           std::int64_t* counts) {
  __shared__ unsigned long long local[kMaxCounters];
  const std::int64_t classes = dims.c > 1 ? dims.c : 2;
  const int size = static_cast<int>(3 * classes + 2);
  for (int i = threadIdx.x; i < size; i += blockDim.x) local[i] = 0;
  __syncthreads();
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  for (std::int64_t p = first_index(); p < pixels; p += grid_stride()) {
    if (static_cast<int>(targets[p]) == ignore_index) continue;
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
      out[0] = lm::sigmoid(E::load(z[0]));
    else
      km::softmax_probabilities<E>(z, km::channel_stride(dims), dims.c, out);
  }
}

}  // namespace

cudaError_t launch_loss(const loss_math::LossParams& params, const void* logits, ElemType type,
                        kmath::Dims dims, const std::uint8_t* targets, const float* pixel_weights,
                        void* dlogits, float ce_scale, float dice_scale, double* partials,
                        double* dice_scratch, double* loss_sums, int* bad_target, cudaStream_t stream) {
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    const std::int64_t dice_classes = lm::dice_classes(dims.c);
    if (lm::has_image_term(params) && dims.n > 0) {
      dice_sums_kernel<E><<<static_cast<unsigned>(dims.n * dice_classes), kReduceThreads, 0, stream>>>(
          params, static_cast<const S*>(logits), dims, targets, dice_scratch);
      dice_finish_kernel<<<blocks_for(dims.n), kThreads, 0, stream>>>(params, dims, dice_scratch);
    }
    loss_partials<E><<<kReduceBlocks, kReduceThreads, 0, stream>>>(
        params, static_cast<const S*>(logits), dims, targets, pixel_weights, static_cast<S*>(dlogits),
        ce_scale, dice_scale, dice_scratch, partials, bad_target);
    loss_total<<<1, kReduceThreads, 0, stream>>>(
        partials, lm::has_image_term(params) ? dice_scratch + dims.n * dice_classes * 3 : nullptr,
        lm::has_image_term(params) ? dims.n : 0, loss_sums);
  });
}

cudaError_t launch_segmentation_counts(const void* logits, ElemType type, kmath::Dims dims,
                                       const std::uint8_t* targets, int ignore_index, std::int64_t* counts,
                                       cudaStream_t stream) {
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  if (pixels == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    segmentation_counts_kernel<E><<<blocks_for(pixels), kThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(logits), dims, targets, ignore_index, counts);
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
