// The DeviceCommunicator's sum: each rank's kernel sums its share of the elements over every rank's buffer,
// in rank order, and writes the sum back to all of them.
#include "unet/backend/cuda/kernel_launch.cuh"

namespace unet::cuda_kernels {
namespace {

namespace km = unet::kmath;
using namespace detail;

__global__ void share_sum_kernel(ShareBuffers buffers, int ranks, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin + first_index(); i < end; i += grid_stride()) {
    const float sum = km::rank_order_sum(buffers.data, ranks, i);
    for (int r = 0; r < ranks; ++r) buffers.data[r][i] = sum;
  }
}

}  // namespace

cudaError_t launch_share_sum(const ShareBuffers& buffers, int ranks, std::int64_t begin, std::int64_t end,
                             cudaStream_t stream) {
  if (ranks < 1 || ranks > kMaxShareRanks || begin < 0 || end < begin) return cudaErrorInvalidValue;
  if (end == begin) return cudaSuccess;
  share_sum_kernel<<<blocks_for(end - begin), kThreads, 0, stream>>>(buffers, ranks, begin, end);
  return cudaGetLastError();
}

}  // namespace unet::cuda_kernels
