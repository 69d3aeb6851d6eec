// Summing across replicas. Data-parallel training calls the communicator from every replica's own thread;
// each call returns on every rank with the same result. Implementations: shared memory between CPU replicas
// (here), NCCL between GPUs (the CUDA backend). Which one a run gets is the device registry's choice
// (create_communicator in devices.h); generic code only sees this interface.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "unet/backend/backend.h"

namespace unet {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // The replicas of the whole run, in every process; this process's ranks 0.. are the run's replicas
  // first_rank().. (a run of one process: all of them, from 0).
  virtual int size() const = 0;
  virtual int first_rank() const { return 0; }
  // In place: every rank's `data` (f32, same size everywhere) becomes the sum over ranks.
  virtual void all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) = 0;
  // Small host values (flags, loss sums): every rank gets the sums, added in rank order.
  virtual void all_reduce_host(int rank, std::span<double> values) = 0;
  // Wakes every rank waiting in a call with Error(cancelled); later calls fail at once. For a rank that died
  // outside the protocol, so that the others do not wait for it forever.
  virtual void abort(const std::string& why) = 0;
};

// Replica threads meeting: arrive_and_wait() returns when all `ranks` have arrived; abort() makes every
// waiting and later call throw Error(cancelled) with its reason.
class RankBarrier {
 public:
  explicit RankBarrier(int ranks) : ranks_(ranks) {}
  void arrive_and_wait();
  void abort(const std::string& why);

 private:
  int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
};

// Makes the communicator for replicas whose backends are `ranks` (rank r runs on ranks[r]).
using CommunicatorFactory = std::function<std::unique_ptr<Communicator>(std::span<Backend* const> ranks)>;

// Between CPU replicas of one process. Each rank sums its own share of the elements over all ranks, always in
// rank order, and writes the sum back to every rank: the result is bitwise the same on every rank and in
// every run. On streams that run work at once the sum is done when all_reduce_sum returns; on asynchronous
// streams (TaskStream) it is queued on the stream, as a GPU communicator's.
class SharedMemoryCommunicator final : public Communicator {
 public:
  // sum_data false: all_reduce_sum only synchronises the ranks, as a real sum would (for planning devices,
  // which hold no memory).
  explicit SharedMemoryCommunicator(int ranks, bool sum_data = true);

  int size() const override { return ranks_; }
  void all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) override;
  void all_reduce_host(int rank, std::span<double> values) override;
  void abort(const std::string& why) override;

 private:
  // The sum itself, on the calling thread: the rank's stream's thread when it runs work asynchronously.
  void sum_now(int rank, const Tensor& data);

  int ranks_;
  bool sum_data_;
  // Sums and host values meet at barriers of their own: a sum queued on an asynchronous stream runs on the
  // stream's thread while the replica's own thread may already be summing host values.
  RankBarrier sum_barrier_;
  RankBarrier barrier_;
  std::mutex mutex_;
  std::vector<float*> buffers_;
  std::vector<std::int64_t> sizes_;
  std::vector<std::vector<double>> host_values_;
};

}  // namespace unet
