// The communicator of one process's replicas in a run over several processes: the replicas of this process
// meet in shared memory, and their leader (local rank 0) carries their part along the process ring
// (process_group.h). Sums are added in the run's rank order, as the shared-memory communicator adds them, so
// processes with R replicas in all compute bitwise what one process with those R replicas computes. Replicas
// on GPUs take part through host copies.
#pragma once

#include <vector>

#include "unet/backend/communicator.h"
#include "unet/backend/cuda_options.h"
#include "unet/distributed/process_group.h"

namespace unet {

class ProcessCommunicator final : public Communicator {
 public:
  // `local_ranks` replicas here, the run's replicas first_rank.. first_rank + local_ranks - 1 of
  // `world_ranks`. `device_sum`, when given, sums the gradients on the devices themselves with every other
  // process's (NCCL over all processes' GPUs); without it they go through host memory along the ring. Host
  // values always go along the ring.
  ProcessCommunicator(ProcessGroup& group, int local_ranks, int first_rank, int world_ranks,
                      std::unique_ptr<Communicator> device_sum = nullptr);

  int size() const override { return world_ranks_; }
  int first_rank() const override { return first_rank_; }
  void all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) override;
  void all_reduce_host(int rank, std::span<double> values) override;
  // Stops this process's replicas and closes its links, so that the other processes stop too.
  void abort(const std::string& why) override;

 private:
  // Runs the leader's part on local rank 0; a failure there aborts the local replicas and is rethrown.
  template <class Fn>
  void as_leader(int rank, Fn&& fn);

  ProcessGroup& group_;
  int local_ranks_, first_rank_, world_ranks_;
  std::unique_ptr<Communicator> device_sum_;
  RankBarrier barrier_;
  std::vector<float*> buffers_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::vector<float>> staging_;  // host copies of GPU replicas' tensors
  std::vector<std::byte> partial_;
  std::vector<float> sum_;  // the leader's f32 view of partial_ while it adds its replicas
  std::vector<std::span<const double>> host_values_;
  std::vector<double> host_result_;
};

// The communicator of this process's replicas (backends `ranks`, the run's replicas `first`.. of `world`):
// between GPUs, NCCL over every process's GPUs when every process can use it (cuda.communicator auto or
// nccl), else sums through host memory along the process ring. Every process must call it (it agrees with the
// others on the way). `how` gets the way, for the run's log. Throws Error(unsupported) when
// cuda.communicator is nccl, or cuda.comm_dtype bf16, and some process cannot use NCCL.
std::unique_ptr<Communicator> join_replicas(ProcessGroup& group, std::span<Backend* const> ranks, int first,
                                            int world, const CudaOptions& cuda, std::string& how);

}  // namespace unet
