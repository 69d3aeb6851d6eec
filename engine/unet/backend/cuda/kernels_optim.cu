// The optimizer steps over the parameter slab, the non-finite count of the gradients (dynamic loss scaling's
// overflow check) and their sum of squares (the norm for clipping): thin loops over kernel_math.h.
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

// Adds the block's kReduceThreads values in a fixed tree; the sum ends in sums[0].
template <class T>
__device__ void block_sum(T* sums) {
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    __syncthreads();
    if (threadIdx.x < half) sums[threadIdx.x] += sums[threadIdx.x + half];
  }
  __syncthreads();
}

// Pass 1: each of the kReduceBlocks blocks counts its grid-stride share into partials[block].
template <class E>
__global__ void count_non_finite_partials(const typename E::storage* data, std::int64_t count,
                                          unsigned long long* partials) {
  __shared__ unsigned long long sums[kReduceThreads];
  unsigned long long bad = 0;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) bad += non_finite<E>(data[i]) ? 1 : 0;
  sums[threadIdx.x] = bad;
  block_sum(sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// Pass 2: one block adds the partials.
__global__ void count_non_finite_total(const unsigned long long* partials, std::int64_t* count_out) {
  static_assert(kReduceBlocks == kReduceThreads, "one partial per thread of the final block");
  __shared__ unsigned long long sums[kReduceThreads];
  sums[threadIdx.x] = partials[threadIdx.x];
  block_sum(sums);
  if (threadIdx.x == 0) *count_out = static_cast<std::int64_t>(sums[0]);
}

// The same two passes for the sum of squares, in double: a fixed grid and tree, so the sum is the same from
// run to run.
__global__ void sum_of_squares_partials(const float* data, std::int64_t count, double* partials) {
  __shared__ double sums[kReduceThreads];
  double sum = 0;
  for (std::int64_t i = first_index(); i < count; i += grid_stride()) {
    const double v = data[i];
    sum += v * v;
  }
  sums[threadIdx.x] = sum;
  block_sum(sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

__global__ void sum_of_squares_total(const double* partials, double* sum_out) {
  __shared__ double sums[kReduceThreads];
  sums[threadIdx.x] = partials[threadIdx.x];
  block_sum(sums);
  if (threadIdx.x == 0) *sum_out = sums[0];
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

cudaError_t launch_sum_of_squares(const float* data, std::int64_t count, double* partials, double* sum_out,
                                  cudaStream_t stream) {
  sum_of_squares_partials<<<kReduceBlocks, kReduceThreads, 0, stream>>>(data, count, partials);
  sum_of_squares_total<<<1, kReduceThreads, 0, stream>>>(partials, sum_out);
  return cudaGetLastError();
}

cudaError_t launch_count_non_finite(const void* data, ElemType type, std::int64_t count,
                                    unsigned long long* partials, std::int64_t* count_out,
                                    cudaStream_t stream) {
  return with_codec(type, [&]<class E>(E) {
    count_non_finite_partials<E><<<kReduceBlocks, kReduceThreads, 0, stream>>>(
        static_cast<const typename E::storage*>(data), count, partials);
    count_non_finite_total<<<1, kReduceThreads, 0, stream>>>(partials, count_out);
  });
}

}  // namespace unet::cuda_kernels
