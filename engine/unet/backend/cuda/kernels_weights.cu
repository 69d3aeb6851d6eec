// Weight packing for cuDNN: the canonical f32 filters to cuDNN's filter layout in the compute type (with
// zero padding for tensor-core channel counts) and the filter gradient back. The bias gradient is cuDNN's
// (cudnnConvolutionBackwardBias, cuda_backend.cpp).
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

// One thread per packed element (coalesced writes): the canonical value it comes from, or zero for padding.
template <class E>
__global__ void pack_weights_kernel(const float* canonical, typename E::storage* packed, std::int64_t k_count,
                                    std::int64_t c_count, std::int64_t rs_count, std::int64_t k_pad,
                                    std::int64_t c_pad, bool krsc) {
  const std::int64_t count = k_pad * c_pad * rs_count;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const std::int64_t source = km::packed_filter_source(i, k_count, c_count, rs_count, c_pad, krsc);
    packed[i] = E::store(source >= 0 ? canonical[source] : 0.0f);
  }
}

// One thread per canonical element: the padding of the packed gradient is never read.
template <class E>
__global__ void unpack_weights_kernel(const typename E::storage* packed, float* canonical,
                                      std::int64_t k_count, std::int64_t c_count, std::int64_t rs_count,
                                      std::int64_t c_pad, bool krsc, bool accumulate) {
  const std::int64_t count = k_count * c_count * rs_count;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const std::int64_t rs = i % rs_count, c = i / rs_count % c_count, k = i / (rs_count * c_count);
    const float value = E::load(packed[km::packed_filter_index(k, c, rs, c_pad, rs_count, krsc)]);
    canonical[i] = accumulate ? canonical[i] + value : value;
  }
}

}  // namespace

cudaError_t launch_pack_weights(const float* canonical, void* packed, ElemType type, std::int64_t k,
                                std::int64_t c, std::int64_t rs, std::int64_t k_pad, std::int64_t c_pad,
                                bool krsc, cudaStream_t stream) {
  if (k_pad < k || c_pad < c) return cudaErrorInvalidValue;
  const std::int64_t count = k_pad * c_pad * rs;
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&](auto codec) {
    using E = decltype(codec);
    pack_weights_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(
        canonical, static_cast<typename E::storage*>(packed), k, c, rs, k_pad, c_pad, krsc);
  });
}

cudaError_t launch_unpack_weights(const void* packed, ElemType type, float* canonical, std::int64_t k,
                                  std::int64_t c, std::int64_t rs, std::int64_t c_pad, bool krsc,
                                  bool accumulate, cudaStream_t stream) {
  if (c_pad < c) return cudaErrorInvalidValue;
  const std::int64_t count = k * c * rs;
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&](auto codec) {
    using E = decltype(codec);
    unpack_weights_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(packed), canonical, k, c, rs, c_pad, krsc, accumulate);
  });
}

}  // namespace unet::cuda_kernels
