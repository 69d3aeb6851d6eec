// Weight packing for cuDNN and the bias gradient: the convolution's own kernels around the cuDNN calls.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

// Index of element (k, c, rs) of a [k, c, rs] f32 canonical filter in the packed order: KRSC (channels
// last) or KCRS (the canonical order itself).
__device__ inline std::int64_t packed_index(std::int64_t k, std::int64_t c, std::int64_t rs, std::int64_t cs,
                                            std::int64_t rss, bool krsc) {
  return krsc ? (k * rss + rs) * cs + c : (k * cs + c) * rss + rs;
}

template <class E>
__global__ void pack_weights_kernel(const float* canonical, typename E::storage* packed, std::int64_t k_count,
                                    std::int64_t c_count, std::int64_t rs_count, bool krsc) {
  const std::int64_t count = k_count * c_count * rs_count;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const std::int64_t rs = i % rs_count, c = i / rs_count % c_count, k = i / (rs_count * c_count);
    packed[packed_index(k, c, rs, c_count, rs_count, krsc)] = E::store(canonical[i]);
  }
}

template <class E>
__global__ void unpack_weights_kernel(const typename E::storage* packed, float* canonical,
                                      std::int64_t k_count, std::int64_t c_count, std::int64_t rs_count,
                                      bool krsc, bool accumulate) {
  const std::int64_t count = k_count * c_count * rs_count;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const std::int64_t rs = i % rs_count, c = i / rs_count % c_count, k = i / (rs_count * c_count);
    const float value = E::load(packed[packed_index(k, c, rs, c_count, rs_count, krsc)]);
    canonical[i] = accumulate ? canonical[i] + value : value;
  }
}

// One block per channel; each thread sums a fixed, strided set of pixels, then the block adds the threads'
// sums in a fixed tree: the same order every run.
template <class E>
__global__ void bias_grad_kernel(const typename E::storage* dz, float* db, km::Dims dims, bool accumulate) {
  __shared__ float sums[kReduceThreads];
  const std::int64_t c = blockIdx.x;
  const std::int64_t pixels = dims.n * dims.h * dims.w;
  const std::int64_t plane = dims.h * dims.w;
  float sum = 0.0f;
  for (std::int64_t p = threadIdx.x; p < pixels; p += blockDim.x) {
    const std::int64_t index = dims.nhwc ? p * dims.c + c : (p / plane * dims.c + c) * plane + p % plane;
    sum += E::load(dz[index]);
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = accumulate ? db[c] + sums[0] : sums[0];
}

}  // namespace

cudaError_t launch_pack_weights(const float* canonical, void* packed, ElemType type, std::int64_t k,
                                std::int64_t c, std::int64_t rs, bool krsc, cudaStream_t stream) {
  const std::int64_t count = k * c * rs;
  return with_codec(type, [&](auto codec) {
    using E = decltype(codec);
    pack_weights_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(
        canonical, static_cast<typename E::storage*>(packed), k, c, rs, krsc);
  });
}

cudaError_t launch_unpack_weights(const void* packed, ElemType type, float* canonical, std::int64_t k,
                                  std::int64_t c, std::int64_t rs, bool krsc, bool accumulate,
                                  cudaStream_t stream) {
  const std::int64_t count = k * c * rs;
  return with_codec(type, [&](auto codec) {
    using E = decltype(codec);
    unpack_weights_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(packed), canonical, k, c, rs, krsc, accumulate);
  });
}

cudaError_t launch_bias_grad(const void* dz, ElemType type, kmath::Dims dims, float* db, bool accumulate,
                             cudaStream_t stream) {
  if (dims.c == 0) return cudaSuccess;
  return with_codec(type, [&](auto codec) {
    using E = decltype(codec);
    bias_grad_kernel<E><<<static_cast<unsigned>(dims.c), kReduceThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(dz), db, dims, accumulate);
  });
}

}  // namespace unet::cuda_kernels
