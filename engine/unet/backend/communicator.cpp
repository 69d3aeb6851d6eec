#include "unet/backend/communicator.h"

#include <algorithm>

#include "unet/backend/task_stream.h"

namespace unet {

SharedMemoryCommunicator::SharedMemoryCommunicator(int ranks, bool sum_data)
    : ranks_(ranks),
      sum_data_(sum_data),
      sum_barrier_(ranks),
      barrier_(ranks),
      buffers_(static_cast<std::size_t>(ranks)),
      sizes_(static_cast<std::size_t>(ranks)),
      host_values_(static_cast<std::size_t>(ranks)) {
  UNET_CHECK(ranks >= 1, usage, "a communicator needs at least one rank");
}

void RankBarrier::arrive_and_wait() {
  std::unique_lock lock(mutex_);
  if (aborted_) throw Error(ErrorKind::cancelled, abort_reason_);
  const std::uint64_t generation = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  changed_.wait(lock, [&] { return generation_ != generation || aborted_; });
  if (generation_ == generation) throw Error(ErrorKind::cancelled, abort_reason_);
}

void RankBarrier::abort(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
  changed_.notify_all();
}

void SharedMemoryCommunicator::abort(const std::string& why) {
  sum_barrier_.abort(why);
  barrier_.abort(why);
}

void SharedMemoryCommunicator::all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) {
  if (!sum_data_) {
    sum_barrier_.arrive_and_wait();
    return;
  }
  UNET_CHECK(backend.info().kind == DeviceKind::cpu && data.dtype() == DType::f32, usage,
             "the shared-memory communicator sums f32 tensors of CPU replicas");
  // On an asynchronous stream the sum is queued behind the work that writes `data`, as NCCL queues its sum
  // on a GPU stream: the caller must order what reads the result after it (events, or a synchronisation).
  if (TaskStream* queued = as_task_stream(stream)) {
    queued->enqueue([this, rank, data = data.unowned()] { sum_now(rank, data); });
    return;
  }
  stream.synchronize();
  sum_now(rank, data);
}

void SharedMemoryCommunicator::sum_now(int rank, const Tensor& data) {
  const auto r = static_cast<std::size_t>(rank);
  {
    std::lock_guard lock(mutex_);
    buffers_[r] = data.data_as<float>();
    sizes_[r] = data.numel();
  }
  sum_barrier_.arrive_and_wait();  // every rank has published its buffer
  const std::int64_t n = sizes_[0];
  for (std::int64_t s : sizes_)
    UNET_CHECK(s == n, usage, "all_reduce_sum: ranks passed tensors of different sizes");
  const std::int64_t share = (n + ranks_ - 1) / ranks_;
  const std::int64_t begin = std::min(n, share * rank), end = std::min(n, begin + share);
  for (std::int64_t i = begin; i < end; ++i) {
    float sum = 0.0f;
    for (float* b : buffers_) sum += b[i];
    for (float* b : buffers_) b[i] = sum;
  }
  sum_barrier_.arrive_and_wait();  // every share is summed everywhere
}

void SharedMemoryCommunicator::all_reduce_host(int rank, std::span<double> values) {
  {
    std::lock_guard lock(mutex_);
    host_values_[static_cast<std::size_t>(rank)].assign(values.begin(), values.end());
  }
  barrier_.arrive_and_wait();
  for (std::size_t i = 0; i < values.size(); ++i) {
    double sum = 0.0;
    for (const auto& v : host_values_) {
      UNET_CHECK(v.size() == values.size(), usage, "all_reduce_host: ranks passed different counts");
      sum += v[i];
    }
    values[i] = sum;
  }
  barrier_.arrive_and_wait();  // nobody overwrites host_values_ before all have read them
}

}  // namespace unet
