#include "unet/dist/process_communicator.h"

#include <cstring>

#include "unet/core/error.h"

namespace unet {

ProcessCommunicator::ProcessCommunicator(ProcessGroup& group, int local_ranks, int first_rank,
                                         int world_ranks)
    : group_(group),
      local_ranks_(local_ranks),
      first_rank_(first_rank),
      world_ranks_(world_ranks),
      barrier_(local_ranks),
      buffers_(static_cast<std::size_t>(local_ranks)),
      sizes_(static_cast<std::size_t>(local_ranks)),
      staging_(static_cast<std::size_t>(local_ranks)),
      host_values_(static_cast<std::size_t>(local_ranks)) {
  UNET_CHECK(local_ranks >= 1 && first_rank >= 0 && first_rank + local_ranks <= world_ranks, usage,
             "a process communicator's ranks are out of range");
}

void ProcessCommunicator::abort(const std::string& why) {
  barrier_.abort(why);
  group_.abort(why);
}

template <class Fn>
void ProcessCommunicator::as_leader(int rank, Fn&& fn) {
  if (rank != 0) return;
  try {
    fn();
  } catch (const std::exception& e) {
    barrier_.abort(e.what());  // the local replicas waiting for the result
    throw;
  }
}

void ProcessCommunicator::all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) {
  UNET_CHECK(data.dtype() == DType::f32, usage, "the process communicator sums f32 tensors");
  const auto r = static_cast<std::size_t>(rank);
  const bool on_host = backend.info().kind == DeviceKind::cpu;
  if (on_host) {
    stream.synchronize();
    buffers_[r] = data.data_as<float>();
  } else {
    staging_[r].resize(static_cast<std::size_t>(data.numel()));
    backend.copy_to_host(stream, data, staging_[r].data());
    stream.synchronize();
    buffers_[r] = staging_[r].data();
  }
  sizes_[r] = data.numel();
  barrier_.arrive_and_wait();  // every local rank has published its buffer
  as_leader(rank, [&] {
    const std::int64_t n = sizes_[0];
    for (std::int64_t s : sizes_)
      UNET_CHECK(s == n, usage, "all_reduce_sum: ranks passed tensors of different sizes");
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    partial_.assign(bytes, std::byte{0});
    std::vector<float> sum(static_cast<std::size_t>(n));
    group_.chain(MessageTag::sum_f32, partial_, [&](std::vector<std::byte>& p) {
      UNET_CHECK(p.size() == bytes, usage,
                 "all_reduce_sum: processes passed gradients of different sizes (" +
                     std::to_string(p.size() / sizeof(float)) + " and " + std::to_string(n) + " values)");
      std::memcpy(sum.data(), p.data(), bytes);
      // The partial sum of the ranks before this process, then each local replica in rank order: the
      // shared-memory communicator's order.
      for (const float* b : buffers_)
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += b[i];
      std::memcpy(p.data(), sum.data(), bytes);
    });
    UNET_CHECK(partial_.size() == bytes, usage, "all_reduce_sum: a result of the wrong size");
  });
  barrier_.arrive_and_wait();  // the leader holds the run's sum
  std::memcpy(buffers_[r], partial_.data(), partial_.size());
  if (!on_host) {
    backend.copy_from_host(stream, staging_[r].data(), data);
    stream.synchronize();
  }
  barrier_.arrive_and_wait();  // nobody reuses partial_ before all have read it
}

void ProcessCommunicator::all_reduce_host(int rank, std::span<double> values) {
  host_values_[static_cast<std::size_t>(rank)] = values;
  barrier_.arrive_and_wait();
  as_leader(rank, [&] {
    // The local replicas' values in rank order, then the processes' sums in rank order: the same additions
    // as the shared-memory communicator's over all the run's replicas.
    host_result_.assign(values.size(), 0.0);
    for (const auto& v : host_values_) {
      UNET_CHECK(v.size() == values.size(), usage, "all_reduce_host: ranks passed different counts");
    }
    std::vector<std::byte> partial(values.size_bytes());
    group_.chain(MessageTag::sum_f64, partial, [&](std::vector<std::byte>& p) {
      UNET_CHECK(p.size() == values.size_bytes(), usage,
                 "all_reduce_host: processes passed different counts");
      std::memcpy(host_result_.data(), p.data(), p.size());
      for (const auto& v : host_values_)
        for (std::size_t i = 0; i < v.size(); ++i) host_result_[i] += v[i];
      std::memcpy(p.data(), host_result_.data(), p.size());
    });
    std::memcpy(host_result_.data(), partial.data(), partial.size());
  });
  barrier_.arrive_and_wait();
  std::copy(host_result_.begin(), host_result_.end(), values.begin());
  barrier_.arrive_and_wait();
}

}  // namespace unet
