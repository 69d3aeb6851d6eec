// Elementwise kernels: thin grid-stride loops over kernel_math.h.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

template <class E, class Pixel>
__global__ void input_from_pixels_kernel(const Pixel* pixels, typename E::storage* x, km::Dims dims,
                                         float scale, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    x[i] = E::store(km::input_from_pixels(pixels[km::input_pixel_index(dims, i)], scale));
}

template <class E>
__global__ void relu_backward_kernel(const typename E::storage* y, const typename E::storage* dy,
                                     typename E::storage* dz, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    dz[i] = E::store(km::relu_backward(E::load(y[i]), E::load(dy[i])));
}

template <class E>
__global__ void bias_relu_kernel(typename E::storage* y, const float* bias, km::Dims dims, bool relu,
                                 std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    y[i] = E::store(km::bias_relu(E::load(y[i]), bias[km::channel_of(dims, i)], relu));
}

template <class T>
__global__ void fill_kernel(T* data, T value, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) data[i] = value;
}

__global__ void scale_kernel(float* data, float factor, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    data[i] = km::scale_value(data[i], factor);
}

template <class E>
__global__ void add_kernel(const typename E::storage* x, typename E::storage* y, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    y[i] = E::store(km::add_into(E::load(y[i]), E::load(x[i])));
}

template <class From, class To>
__global__ void cast_kernel(const typename From::storage* in, typename To::storage* out, std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) out[i] = To::store(From::load(in[i]));
}

template <class T>
cudaError_t launch_fill_typed(void* data, T value, std::int64_t count, cudaStream_t stream) {
  fill_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(data), value, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_input_from_pixels(const void* pixels, bool pixels_f32, void* x, ElemType x_type,
                                     kmath::Dims dims, float scale, cudaStream_t stream) {
  const std::int64_t count = dims.n * dims.c * dims.h * dims.w;
  if (count == 0) return cudaSuccess;
  return with_codec(x_type, [&]<class E>(E) {
    auto* out = static_cast<typename E::storage*>(x);
    if (pixels_f32) {
      input_from_pixels_kernel<E, float><<<blocks_for(count), kThreads, 0, stream>>>(
          static_cast<const float*>(pixels), out, dims, scale, count);
    } else {
      input_from_pixels_kernel<E, std::uint8_t><<<blocks_for(count), kThreads, 0, stream>>>(
          static_cast<const std::uint8_t*>(pixels), out, dims, scale, count);
    }
  });
}

cudaError_t launch_relu_backward(const void* y, const void* dy, void* dz, ElemType type, std::int64_t count,
                                 cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    relu_backward_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const S*>(y), static_cast<const S*>(dy), static_cast<S*>(dz), count);
  });
}

cudaError_t launch_bias_relu(void* y, const float* bias, ElemType type, kmath::Dims dims, bool relu,
                             cudaStream_t stream) {
  const std::int64_t count = dims.n * dims.c * dims.h * dims.w;
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    bias_relu_kernel<E><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<typename E::storage*>(y),
                                                                    bias, dims, relu, count);
  });
}

cudaError_t launch_fill(void* data, ElemType type, std::int64_t count, double value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  // The CPU backend converts through float for the float types and casts for the integers.
  switch (type) {
    case ElemType::f32:
      return launch_fill_typed(data, static_cast<float>(value), count, stream);
    case ElemType::bf16:
      return launch_fill_typed(data, kmath::float_to_bf16(static_cast<float>(value)), count, stream);
    case ElemType::f16:
      return launch_fill_typed(data, kmath::float_to_f16(static_cast<float>(value)), count, stream);
    case ElemType::u8:
      return launch_fill_typed(data, static_cast<std::uint8_t>(value), count, stream);
    case ElemType::i32:
      return launch_fill_typed(data, static_cast<std::int32_t>(value), count, stream);
    case ElemType::i64:
      return launch_fill_typed(data, static_cast<std::int64_t>(value), count, stream);
    case ElemType::f64:
      return launch_fill_typed(data, value, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_scale(float* data, std::int64_t count, float factor, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  scale_kernel<<<blocks_for(count), kThreads, 0, stream>>>(data, factor, count);
  return cudaGetLastError();
}

cudaError_t launch_add(const void* x, void* y, ElemType type, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  return with_codec(type, [&]<class E>(E) {
    using S = typename E::storage;
    add_kernel<E>
        <<<blocks_for(count), kThreads, 0, stream>>>(static_cast<const S*>(x), static_cast<S*>(y), count);
  });
}

cudaError_t launch_cast(const void* in, ElemType in_type, void* out, ElemType out_type, std::int64_t count,
                        cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  cudaError_t inner = cudaSuccess;
  const cudaError_t outer = with_codec(in_type, [&]<class From>(From) {
    inner = with_codec(out_type, [&]<class To>(To) {
      cast_kernel<From, To><<<blocks_for(count), kThreads, 0, stream>>>(
          static_cast<const typename From::storage*>(in), static_cast<typename To::storage*>(out), count);
    });
  });
  return outer != cudaSuccess ? outer : inner;
}

cudaError_t kernel_image_status(int& binary_version) {
  binary_version = 0;
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, scale_kernel);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; the caller reports it
    return status;
  }
  binary_version = attributes.binaryVersion;
  return cudaSuccess;
}

}  // namespace unet::cuda_kernels
