#include "unet/backend/cuda/device_communicator.h"

#include "unet/backend/cuda/cuda_allocator.h"
#include "unet/backend/cuda/cuda_backend.h"
#include "unet/backend/cuda/kernels.h"
#include "unet/core/error.h"

namespace unet::cuda {
namespace {

namespace ck = unet::cuda_kernels;

// Whether every rank's kernel can address every other rank's buffer. One device: always. Distinct devices
// need peer access, which cudaDeviceEnablePeerAccess grants to cudaMalloc memory only: memory the expandable
// arena maps (cuMemMap) would need cuMemSetAccess for each peer, which the arena does not give, so those
// ranks go through the host.
bool peers_can_address(const std::vector<CudaBackend*>& ranks) {
  if (ranks.size() > static_cast<std::size_t>(ck::kMaxShareRanks)) return false;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    for (std::size_t j = 0; j < ranks.size(); ++j) {
      const int a = ranks[i]->device(), b = ranks[j]->device();
      if (a == b) continue;
      const auto* allocator = dynamic_cast<const CudaAllocator*>(&ranks[i]->allocator());
      if (!allocator || allocator->page() != 0) return false;
      int can = 0;
      UNET_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b), a);
      if (!can) return false;
    }
  return true;
}

void enable_peer_access(const std::vector<CudaBackend*>& ranks) {
  for (CudaBackend* from : ranks)
    for (CudaBackend* to : ranks) {
      if (from->device() == to->device()) continue;
      const DeviceGuard guard(from->device());
      const cudaError_t status = cudaDeviceEnablePeerAccess(to->device(), 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // not an error here; clear it so that no later check reports it
      else
        UNET_CUDA_CHECK(status, from->device());
    }
}

}  // namespace

DeviceCommunicator::DeviceCommunicator(const std::vector<CudaBackend*>& ranks)
    : host_(static_cast<int>(ranks.size())), sum_sync_(static_cast<int>(ranks.size())) {
  UNET_CHECK(!ranks.empty(), usage, "a communicator needs at least one rank");
  ranks_.reserve(ranks.size());
  for (CudaBackend* b : ranks) ranks_.emplace_back().device = b->device();
  on_device_ = peers_can_address(ranks);
  if (on_device_) enable_peer_access(ranks);
}

DeviceCommunicator::~DeviceCommunicator() {
  // Each rank's objects are released with its device current.
  for (Rank& r : ranks_) {
    const QuietDeviceGuard guard(r.device);
    r.ready.reset();
    r.done.reset();
    r.staging.reset();
  }
}

void DeviceCommunicator::barrier(int rank) {
  sum_sync_.all_reduce_host(rank, {});  // a sum of nothing: only the wait, and the abort that ends it
}

void DeviceCommunicator::abort(const std::string& why) {
  sum_sync_.abort(why);
  host_.abort(why);
}

void DeviceCommunicator::all_reduce_host(int rank, std::span<double> values) {
  host_.all_reduce_host(rank, values);
}

std::int64_t DeviceCommunicator::agreed_count() const {
  const std::int64_t n = ranks_[0].count;
  for (const Rank& r : ranks_)
    UNET_CHECK(r.count == n, usage, "all_reduce_sum: ranks passed tensors of different sizes");
  return n;
}

void DeviceCommunicator::all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) {
  Rank& me = ranks_.at(static_cast<std::size_t>(rank));
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  UNET_CHECK(cuda && cuda->device() == me.device && data.dtype() == DType::f32, usage,
             "the device communicator sums f32 tensors of rank " + std::to_string(rank) +
                 " on cuda:" + std::to_string(me.device));
  const cudaStream_t native = cuda->native(stream);
  const DeviceGuard guard(me.device);
  if (on_device_)
    sum_on_device(rank, native, data.data_as<float>(), data.numel());
  else
    sum_on_host(rank, native, data.data_as<float>(), data.numel());
}

// ready[r] marks each rank's gradients; every rank's stream waits for all of them, sums its share into every
// buffer, and marks done[r]; then every stream waits for all done marks, so no rank reads its buffer before
// the last share is written. The barriers order the host side: a rank records its events for the next call
// only after every peer has queued its waits on this call's.
void DeviceCommunicator::sum_on_device(int rank, cudaStream_t stream, float* data, std::int64_t count) {
  Rank& me = ranks_[static_cast<std::size_t>(rank)];
  if (!me.ready.get()) me.ready = make_event(me.device);
  if (!me.done.get()) me.done = make_event(me.device);
  UNET_CUDA_CHECK(cudaEventRecord(me.ready.get(), stream), me.device);
  me.data = data;
  me.count = count;
  barrier(rank);
  const std::int64_t n = agreed_count();
  ck::ShareBuffers buffers{};
  for (std::size_t j = 0; j < ranks_.size(); ++j) {
    if (j != static_cast<std::size_t>(rank))
      UNET_CUDA_CHECK(cudaStreamWaitEvent(stream, ranks_[j].ready.get(), 0), me.device);
    buffers.data[j] = ranks_[j].data;
  }
  const kmath::ShareRange share = kmath::share_range(n, size(), rank);
  UNET_CUDA_CHECK(ck::launch_share_sum(buffers, size(), share.begin, share.end, stream), me.device);
  UNET_CUDA_CHECK(cudaEventRecord(me.done.get(), stream), me.device);
  barrier(rank);
  for (std::size_t j = 0; j < ranks_.size(); ++j)
    if (j != static_cast<std::size_t>(rank))
      UNET_CUDA_CHECK(cudaStreamWaitEvent(stream, ranks_[j].done.get(), 0), me.device);
}

// Each rank copies its buffer into its pinned staging and waits for it; the host sums as the kernel would;
// each rank copies its staging back. The copy back is queued, not waited for: the staging is written next
// only after the rank's next copy out, which follows it on the same stream and is waited for.
void DeviceCommunicator::sum_on_host(int rank, cudaStream_t stream, float* data, std::int64_t count) {
  Rank& me = ranks_[static_cast<std::size_t>(rank)];
  const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
  if (me.staging_bytes < bytes) {
    UNET_CUDA_CHECK(cudaStreamSynchronize(stream), me.device);  // the old staging may still be read
    me.staging = make_pinned_host(bytes, me.device);
    me.staging_bytes = bytes;
  }
  auto* staging = static_cast<float*>(me.staging.get());
  if (bytes > 0)
    UNET_CUDA_CHECK(cudaMemcpyAsync(staging, data, bytes, cudaMemcpyDeviceToHost, stream), me.device);
  UNET_CUDA_CHECK(cudaStreamSynchronize(stream), me.device);
  me.data = staging;
  me.count = count;
  barrier(rank);
  const std::int64_t n = agreed_count();
  std::vector<const float*> buffers;
  buffers.reserve(ranks_.size());
  for (const Rank& r : ranks_) buffers.push_back(r.data);
  const kmath::ShareRange share = kmath::share_range(n, size(), rank);
  for (std::int64_t i = share.begin; i < share.end; ++i) {
    const float sum = kmath::rank_order_sum(buffers.data(), size(), i);
    for (Rank& r : ranks_) r.data[i] = sum;
  }
  barrier(rank);
  if (bytes > 0)
    UNET_CUDA_CHECK(cudaMemcpyAsync(data, staging, bytes, cudaMemcpyHostToDevice, stream), me.device);
}

}  // namespace unet::cuda
