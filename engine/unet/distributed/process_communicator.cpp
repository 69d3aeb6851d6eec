#include "unet/distributed/process_communicator.h"

#include <algorithm>
#include <cstring>

#include "unet/backend/cuda_loader.h"
#include "unet/backend/cuda_module.h"
#include "unet/core/error.h"

namespace unet {

ProcessCommunicator::ProcessCommunicator(ProcessGroup& group, int local_ranks, int first_rank,
                                         int world_ranks, std::unique_ptr<Communicator> device_sum)
    : group_(group),
      local_ranks_(local_ranks),
      first_rank_(first_rank),
      world_ranks_(world_ranks),
      device_sum_(std::move(device_sum)),
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
  if (device_sum_) device_sum_->abort(why);
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
  if (device_sum_) {
    device_sum_->all_reduce_sum(rank, backend, stream, data);
    return;
  }
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
    std::vector<float>& sum = sum_;  // kept between calls: the gradients are summed every step
    sum.resize(static_cast<std::size_t>(n));
    group_.chain(
        MessageTag::sum_f32, partial_,
        [&](std::vector<std::byte>& p) {
          UNET_CHECK(p.size() == bytes, usage,
                     "all_reduce_sum: processes passed gradients of different sizes (" +
                         std::to_string(p.size() / sizeof(float)) + " and " + std::to_string(n) + " values)");
          std::memcpy(sum.data(), p.data(), bytes);
          // The partial sum of the ranks before this process, then each local replica in rank order: the
          // shared-memory communicator's order.
          for (const float* b : buffers_)
            for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += b[i];
          std::memcpy(p.data(), sum.data(), bytes);
        },
        bytes);
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
    group_.chain(
        MessageTag::sum_f64, partial,
        [&](std::vector<std::byte>& p) {
          UNET_CHECK(p.size() == values.size_bytes(), usage,
                     "all_reduce_host: processes passed different counts");
          std::memcpy(host_result_.data(), p.data(), p.size());
          for (const auto& v : host_values_)
            for (std::size_t i = 0; i < v.size(); ++i) host_result_[i] += v[i];
          std::memcpy(p.data(), host_result_.data(), p.size());
        },
        values.size_bytes());
    std::memcpy(host_result_.data(), partial.data(), partial.size());
  });
  barrier_.arrive_and_wait();
  std::copy(host_result_.begin(), host_result_.end(), values.begin());
  barrier_.arrive_and_wait();
}

std::unique_ptr<Communicator> join_replicas(ProcessGroup& group, std::span<Backend* const> ranks, int first,
                                            int world, const CudaOptions& cuda, std::string& how) {
  const CommunicatorChoice choice = cuda.communicator;
  const int local = static_cast<int>(ranks.size());
  // Why this process cannot sum through NCCL over all processes' GPUs; empty when it can.
  std::string why_not;
  std::vector<int> gpus;
  for (const Backend* b : ranks) {
    if (b->info().kind != DeviceKind::cuda) {
      why_not = "its replicas are not on GPUs";
      gpus.clear();
      break;
    }
    if (std::find(gpus.begin(), gpus.end(), b->info().index) != gpus.end()) why_not = "it lists a GPU twice";
    gpus.push_back(b->info().index);
  }
  CudaModule* module = nullptr;
  if (why_not.empty() && choice == CommunicatorChoice::device) why_not = "cuda.communicator is \"device\"";
  if (why_not.empty()) {
    const CudaModuleLoad& load = cuda_module();
    module = load.module;
    why_not = module ? module->nccl_problem(ranks) : load.reason;
  }
  // NCCL's rendezvous waits for every rank of every process: all take the same way.
  if (group.any(!why_not.empty())) {
    if ((choice == CommunicatorChoice::nccl || cuda.bf16_sums) && !gpus.empty())
      throw Error(ErrorKind::unsupported,
                  std::string(choice == CommunicatorChoice::nccl ? "cuda.communicator is \"nccl\""
                                                                 : "cuda.comm_dtype is \"bf16\"") +
                      ", but " +
                      (why_not.empty() ? std::string("another process of the run cannot use NCCL")
                                       : "this process cannot use NCCL: " + why_not),
                  {}, "install NCCL 2 for CUDA 13 on every machine, or set cuda.communicator to \"auto\"");
    how = gpus.empty() ? "sums along the process ring"
                       : "sums through host memory along the process ring (not every process can use NCCL)";
    return std::make_unique<ProcessCommunicator>(group, local, first, world);
  }
  NcclUniqueId id{};
  if (group.rank() == 0) id = module->nccl_unique_id();
  const std::string rank0 = group.all_gather(std::string(id.begin(), id.end()), id.size()).at(0);
  UNET_CHECK(rank0.size() == id.size(), usage, "rank 0 sent an NCCL id of the wrong size");
  std::copy(rank0.begin(), rank0.end(), id.begin());
  how = "NCCL over the " + std::to_string(world) + " GPUs of every process";
  return std::make_unique<ProcessCommunicator>(group, local, first, world,
                                               module->create_nccl_world(ranks, world, first, id));
}

}  // namespace unet
