// Channel concatenation and split: one thread per element of the concatenation, through kmath's index map;
// and the channel padding of NHWC activations for tensor-core convolutions (kmath::channel_copy_source).
// Copies move the stored bits (NaN payloads included), as the CPU backend's memcpy does; only split's
// accumulate does arithmetic. (Phase 1: plain loops; 16-byte vectors and 2-D copies are a later speed-up.)
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

template <class S>
__global__ void concat_kernel(const S* a, const S* b, S* out, km::Dims dims, std::int64_t a_channels) {
  const std::int64_t count = dims.n * dims.c * dims.h * dims.w;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const km::ConcatSource src = km::concat_source(dims, a_channels, i);
    out[i] = src.from_b ? b[src.index] : a[src.index];
  }
}

template <class E>
__global__ void split_kernel(const typename E::storage* dout, typename E::storage* da,
                             typename E::storage* db, km::Dims dims, std::int64_t a_channels,
                             bool accumulate_b) {
  const std::int64_t count = dims.n * dims.c * dims.h * dims.w;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const km::ConcatSource dst = km::concat_source(dims, a_channels, i);
    if (!dst.from_b)
      da[dst.index] = dout[i];
    else if (accumulate_b)
      db[dst.index] = E::store(km::add_into(E::load(db[dst.index]), E::load(dout[i])));
    else
      db[dst.index] = dout[i];
  }
}

// One thread per dst element: the same pixel and channel of src, or zero bits (0.0 in every float type).
template <class S>
__global__ void copy_channels_kernel(const S* src, std::int64_t src_channels, S* dst,
                                     std::int64_t dst_channels, std::int64_t pixels) {
  const std::int64_t count = pixels * dst_channels;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const std::int64_t source = km::channel_copy_source(i, src_channels, dst_channels);
    dst[i] = source >= 0 ? src[source] : S{};
  }
}

}  // namespace

cudaError_t launch_copy_channels(const void* src, std::int64_t src_channels, void* dst,
                                 std::int64_t dst_channels, std::int64_t pixels, ElemType type,
                                 cudaStream_t stream) {
  const std::int64_t count = pixels * dst_channels;
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    copy_channels_kernel<S><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const S*>(src), src_channels, static_cast<S*>(dst), dst_channels, pixels);
  });
}

cudaError_t launch_concat_channels(const void* a, const void* b, void* out, ElemType type,
                                   kmath::Dims out_dims, std::int64_t a_channels, cudaStream_t stream) {
  const std::int64_t count = numel(out_dims);
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    concat_kernel<S><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const S*>(a), static_cast<const S*>(b), static_cast<S*>(out), out_dims, a_channels);
  });
}

cudaError_t launch_split_channels(const void* dout, void* da, void* db, ElemType type, kmath::Dims out_dims,
                                  std::int64_t a_channels, bool accumulate_b, cudaStream_t stream) {
  const std::int64_t count = numel(out_dims);
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    split_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const S*>(dout),
                                                                static_cast<S*>(da), static_cast<S*>(db),
                                                                out_dims, a_channels, accumulate_b);
  });
}

}  // namespace unet::cuda_kernels
