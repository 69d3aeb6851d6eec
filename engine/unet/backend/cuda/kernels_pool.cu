// Max pooling 2x2 stride 2, forward (value and window index) and backward: thin loops over kernel_math.h.
// Own kernels rather than cuDNN's: cuDNN recomputes the arg-max in the backward pass and lists max pooling
// backward as non-reproducible; the saved u8 index keeps the CPU backend's tie and NaN rule.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

km::Dims pooled(const km::Dims& in) {
  return {in.n, in.c, in.h / 2, in.w / 2, in.nhwc};
}

// One thread per output.
template <class E>
__global__ void maxpool_forward_kernel(const typename E::storage* x, typename E::storage* y,
                                       std::uint8_t* saved, km::Dims in, km::Dims out) {
  const std::int64_t count = out.n * out.c * out.h * out.w;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const km::Coord o = km::coord_of(out, i);
    std::int64_t offsets[4];
    km::pool_window_offsets(in, o.n, o.c, o.h, o.w, offsets);
    const float window[4] = {E::load(x[offsets[0]]), E::load(x[offsets[1]]), E::load(x[offsets[2]]),
                             E::load(x[offsets[3]])};
    const km::PoolResult r = km::max_of_window(window);
    y[i] = E::store(r.value);
    saved[i] = r.index;
  }
}

// One thread per input element: it finds its window, if any, and whether it was that window's maximum.
template <class E>
__global__ void maxpool_backward_kernel(const typename E::storage* dy, const std::uint8_t* saved,
                                        typename E::storage* dx, km::Dims in, km::Dims out, bool accumulate) {
  const std::int64_t count = in.n * in.c * in.h * in.w;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const km::Coord at = km::coord_of(in, i);
    const std::int64_t oy = at.h / 2, ox = at.w / 2;
    const float before = accumulate ? E::load(dx[i]) : 0.0f;
    float value;
    if (oy < out.h && ox < out.w) {
      const std::int64_t o = km::offset_of(out, at.n, at.c, oy, ox);
      const bool is_max = saved[o] == (at.h % 2) * 2 + at.w % 2;
      value = km::pool_backward(E::load(dy[o]), is_max, before, accumulate);
    } else {
      value = km::pool_backward(0.0f, false, before, accumulate);
    }
    dx[i] = E::store(value);
  }
}

}  // namespace

cudaError_t launch_maxpool_forward(const void* x, void* y, std::uint8_t* saved, ElemType type, kmath::Dims in,
                                   cudaStream_t stream) {
  const kmath::Dims out = pooled(in);
  if (numel(out) == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    maxpool_forward_kernel<E><<<blocks_for(numel(out)), kThreads, 0, stream>>>(
        static_cast<const S*>(x), static_cast<S*>(y), saved, in, out);
  });
}

cudaError_t launch_maxpool_backward(const void* dy, const std::uint8_t* saved, void* dx, ElemType type,
                                    kmath::Dims in, bool accumulate, cudaStream_t stream) {
  if (numel(in) == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    maxpool_backward_kernel<E><<<blocks_for(numel(in)), kThreads, 0, stream>>>(
        static_cast<const S*>(dy), saved, static_cast<S*>(dx), in, pooled(in), accumulate);
  });
}

}  // namespace unet::cuda_kernels
