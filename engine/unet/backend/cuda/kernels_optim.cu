// The optimizer steps over the parameter slab, the non-finite count of the gradients (dynamic loss scaling's
// overflow check) and their sum of squares (the norm for clipping): thin loops over kernel_math.h for the
// steps, CUB's DeviceReduce for the two reductions (run-to-run deterministic on one GPU: replicas holding the
// same summed gradients reach the same counts and norms).
#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>
#include <type_traits>

#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

__device__ void adam_float4(const km::AdamScalars& a, float4& p, const float4& g, float4& m, float4& v) {
  km::adam_update(a, p.x, g.x, m.x, v.x);
  km::adam_update(a, p.y, g.y, m.y, v.y);
  km::adam_update(a, p.z, g.z, m.z, v.z);
  km::adam_update(a, p.w, g.w, m.w, v.w);
}

// 16-byte loads and stores for the bulk (the slab's tensors start 64-byte aligned), then the last count % 4
// values one by one. Each value's arithmetic is the same either way.
__global__ void adam_vector_kernel(km::AdamScalars a, float* params, const float* grads, float* m, float* v,
                                   std::int64_t count) {
  const std::int64_t groups = count / 4;
  auto* p4 = reinterpret_cast<float4*>(params);
  const auto* g4 = reinterpret_cast<const float4*>(grads);
  auto* m4 = reinterpret_cast<float4*>(m);
  auto* v4 = reinterpret_cast<float4*>(v);
  for (std::int64_t i = first_index(); i < groups; i += grid_stride()) {
    float4 p = p4[i], mi = m4[i], vi = v4[i];
    adam_float4(a, p, g4[i], mi, vi);
    p4[i] = p;
    m4[i] = mi;
    v4[i] = vi;
  }
  for (std::int64_t i = groups * 4 + first_index(); i < count; i += grid_stride())
    km::adam_update(a, params[i], grads[i], m[i], v[i]);
}

__global__ void adam_scalar_kernel(km::AdamScalars a, float* params, const float* grads, float* m, float* v,
                                   std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    km::adam_update(a, params[i], grads[i], m[i], v[i]);
}

__global__ void sgd_kernel(km::SgdScalars a, float* params, const float* grads, float* momentum,
                           std::int64_t count) {
  for (std::int64_t i = first_index(); i < count; i += grid_stride())
    km::sgd_update(a, params[i], grads[i], momentum ? momentum + i : nullptr);
}

template <class E>
__device__ bool non_finite(typename E::storage value) {
  if constexpr (std::is_same_v<E, km::F32>)
    return km::is_non_finite(value);
  else if constexpr (std::is_same_v<E, km::BF16>)
    return km::is_non_finite_bf16(value);
  else
    return km::is_non_finite_f16(value);
}

// The per-element terms of the two reductions, for CUB's TransformReduce (device code only).
template <class E>
struct NonFiniteTerm {
  __device__ std::int64_t operator()(typename E::storage value) const { return non_finite<E>(value) ? 1 : 0; }
};
struct SquareTerm {
  __device__ double operator()(float value) const {
    const double v = value;
    return v * v;
  }
};

// The two reductions as CUB runs them: TransformReduce with a plus over f64 (squares) or i64 (counts). With
// temp == nullptr CUB only writes the bytes it needs into temp_bytes.
cudaError_t reduce_squares(void* temp, std::size_t& temp_bytes, const float* data, std::int64_t count,
                           double* sum_out, cudaStream_t stream) {
  return cub::DeviceReduce::TransformReduce(temp, temp_bytes, data, sum_out, count, cuda::std::plus<double>{},
                                            SquareTerm{}, 0.0, stream);
}
template <class E>
cudaError_t reduce_non_finite(void* temp, std::size_t& temp_bytes, const void* data, std::int64_t count,
                              std::int64_t* count_out, cudaStream_t stream) {
  return cub::DeviceReduce::TransformReduce(temp, temp_bytes, static_cast<const typename E::storage*>(data),
                                            count_out, count, cuda::std::plus<std::int64_t>{},
                                            NonFiniteTerm<E>{}, std::int64_t{0}, stream);
}

// Calls fn with the codec of an element type count_non_finite takes; false for any other type.
template <class Fn>
bool with_float_codec(ElemType type, Fn&& fn) {
  switch (type) {
    case ElemType::f32:
      fn(km::F32{});
      return true;
    case ElemType::bf16:
      fn(km::BF16{});
      return true;
    case ElemType::f16:
      fn(km::F16{});
      return true;
    default:
      return false;
  }
}

cudaError_t finish(cudaError_t status) {
  const cudaError_t last = cudaGetLastError();  // CUB reports launch errors too; clear what it left
  return status != cudaSuccess ? status : last;
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

cudaError_t launch_adam(const kmath::AdamScalars& scalars, float* params, const float* grads, float* m,
                        float* v, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (aligned16(params) && aligned16(grads) && aligned16(m) && aligned16(v))
    adam_vector_kernel<<<blocks_for((count + 3) / 4), kThreads, 0, stream>>>(scalars, params, grads, m, v,
                                                                             count);
  else
    adam_scalar_kernel<<<blocks_for(count), kThreads, 0, stream>>>(scalars, params, grads, m, v, count);
  return cudaGetLastError();
}

cudaError_t launch_sgd(const kmath::SgdScalars& scalars, float* params, const float* grads, float* momentum,
                       std::int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  sgd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(scalars, params, grads, momentum, count);
  return cudaGetLastError();
}

cudaError_t reduction_temp_bytes(std::int64_t max_bytes, std::size_t& squares_bytes,
                                 std::size_t& count_bytes) {
  squares_bytes = count_bytes = 0;
  cudaError_t status = reduce_squares(nullptr, squares_bytes, nullptr, max_bytes / 4, nullptr, nullptr);
  if (status != cudaSuccess) return finish(status);
  for (ElemType type : {ElemType::f32, ElemType::bf16, ElemType::f16}) {
    with_float_codec(type, [&]<class E>(E) {
      std::size_t bytes = 0;
      const std::int64_t count = max_bytes / static_cast<std::int64_t>(sizeof(typename E::storage));
      if (status == cudaSuccess)
        status = reduce_non_finite<E>(nullptr, bytes, nullptr, count, nullptr, nullptr);
      count_bytes = bytes > count_bytes ? bytes : count_bytes;
    });
  }
  return finish(status);
}

cudaError_t launch_sum_of_squares(const float* data, std::int64_t count, void* temp, std::size_t temp_bytes,
                                  double* sum_out, cudaStream_t stream) {
  if (count == 0) return cudaMemsetAsync(sum_out, 0, sizeof(double), stream);  // 0.0: all bits zero
  return finish(reduce_squares(temp, temp_bytes, data, count, sum_out, stream));
}

cudaError_t launch_count_non_finite(const void* data, ElemType type, std::int64_t count, void* temp,
                                    std::size_t temp_bytes, std::int64_t* count_out, cudaStream_t stream) {
  if (count == 0) return cudaMemsetAsync(count_out, 0, sizeof(std::int64_t), stream);
  cudaError_t status = cudaErrorInvalidValue;
  with_float_codec(type, [&]<class E>(E) {
    status = reduce_non_finite<E>(temp, temp_bytes, data, count, count_out, stream);
  });
  return finish(status);
}

}  // namespace unet::cuda_kernels
