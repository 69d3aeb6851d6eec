// Gradients summed between GPU replicas without NCCL (docs/CUDA_BACKEND.md §5, "Same GPU twice"): for
// replicas that share a GPU, which NCCL refuses, and wherever NCCL is not installed.
//
// The sum is SharedMemoryCommunicator's, element by element (kmath::rank_order_sum): each rank adds its share
// of the elements over all ranks in rank order and writes the sum to every rank, so the replicas hold the
// same bits, and the same bits as CPU replicas would. Each rank's kernel reads and writes its peers' buffers
// directly where every device can address every other's memory (one device, or peers with access to
// cudaMalloc memory); otherwise the buffers go through pinned host memory and the host sums.
#pragma once

#include <cstdint>
#include <vector>

#include "unet/backend/communicator.h"
#include "unet/backend/cuda/cuda_raii.h"

namespace unet::cuda {

class CudaBackend;

class DeviceCommunicator final : public Communicator {
 public:
  // Rank r runs on ranks[r]; devices may repeat. Enables peer access between distinct devices when it is
  // used.
  explicit DeviceCommunicator(const std::vector<CudaBackend*>& ranks);
  ~DeviceCommunicator() override;
  DeviceCommunicator(const DeviceCommunicator&) = delete;
  DeviceCommunicator& operator=(const DeviceCommunicator&) = delete;

  int size() const override { return static_cast<int>(ranks_.size()); }
  // Device path: queued on the replica's stream behind events, no host wait. Host path: waits for the copy.
  void all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) override;
  void all_reduce_host(int rank, std::span<double> values) override;
  void abort(const std::string& why) override;

  // True when the ranks' kernels address each other's buffers; false: the sum goes through the host.
  bool on_device() const noexcept { return on_device_; }

 private:
  struct Rank {
    int device = 0;
    EventHandle ready, done;  // made by the rank's own thread at its first sum
    // What the rank publishes for its peers between the barriers: its buffer (device or staging) and length.
    float* data = nullptr;
    std::int64_t count = 0;
    PinnedHostBuffer staging;  // host path only
    std::size_t staging_bytes = 0;
  };

  // Every rank has reached this point (and what each published before it is visible to all); throws
  // Error(cancelled) once aborted.
  void barrier(int rank);
  std::int64_t agreed_count() const;
  void sum_on_device(int rank, cudaStream_t stream, float* data, std::int64_t count);
  void sum_on_host(int rank, cudaStream_t stream, float* data, std::int64_t count);

  SharedMemoryCommunicator host_;
  // The sums' own barriers: a bucket's sum runs on a replica's communication thread while the replica's
  // thread may sum host values, and the two must not meet at one barrier.
  SharedMemoryCommunicator sum_sync_;
  std::vector<Rank> ranks_;
  bool on_device_ = true;
};

}  // namespace unet::cuda
