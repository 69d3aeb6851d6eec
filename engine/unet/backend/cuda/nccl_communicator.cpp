#include "unet/backend/cuda/nccl_communicator.h"

#include <dlfcn.h>

#include <chrono>
#include <thread>

#include "unet/backend/cuda/cuda_backend.h"
#include "unet/backend/cuda/cuda_check.h"
#include "unet/backend/cuda/cuda_raii.h"
#include "unet/backend/cuda/kernels.h"
#include "unet/core/error.h"

namespace unet::cuda {
namespace {

// Nonblocking communicators and ncclCommFinalize came with NCCL 2.14.
constexpr int kMinimumNcclVersion = 21400;

std::string device_name(int device) {
  return "cuda:" + std::to_string(device);
}

std::string nccl_version_text(int code) {  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

template <class Function>
bool find(void* library, const char* name, Function& out) {
  out = reinterpret_cast<Function>(dlsym(library, name));
  return out != nullptr;
}

NcclApi load_nccl() {
  NcclApi api;
  // Never closed: NCCL keeps threads and CUDA state for the life of the process.
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    api.problem = std::string("libnccl.so.2 could not be loaded (") + (why ? why : "no reason given") + ")";
    return api;
  }
  if (!find(lib, "ncclGetVersion", api.get_version) || api.get_version(&api.version) != ncclSuccess) {
    api.problem = "libnccl.so.2 does not say its version";
    api.version = 0;
    return api;
  }
  const bool complete =
      find(lib, "ncclGetUniqueId", api.get_unique_id) &&
      find(lib, "ncclCommInitRankConfig", api.init_rank_config) &&
      find(lib, "ncclCommGetAsyncError", api.async_error) && find(lib, "ncclAllReduce", api.all_reduce) &&
      find(lib, "ncclCommFinalize", api.finalize) && find(lib, "ncclCommDestroy", api.destroy) &&
      find(lib, "ncclCommAbort", api.abort) && find(lib, "ncclGetErrorString", api.error_string) &&
      find(lib, "ncclGetLastError", api.last_error);
  if (api.version < kMinimumNcclVersion)
    api.problem = "NCCL " + nccl_version_text(api.version) + " is older than 2.14, which this build needs";
  else if (!complete)
    api.problem =
        "libnccl.so.2 (NCCL " + nccl_version_text(api.version) + ") lacks functions this build calls";
  return api;
}

}  // namespace

std::string NcclApi::version_text() const {
  return version > 0 ? nccl_version_text(version) : "not found";
}

const NcclApi& nccl() {
  static const NcclApi api = load_nccl();
  return api;
}

NcclCommunicator::NcclCommunicator(const std::vector<CudaBackend*>& ranks) : NcclCommunicator(ranks, 0, 0) {
  // Rank 0's id, shared by every rank of this process (it only names the rendezvous; no GPU is touched).
  // Only here: each ncclGetUniqueId starts a bootstrap root (a listening socket and a thread) of its own.
  if (const ncclResult_t r = api_.get_unique_id(&id_); r != ncclSuccess) fail(0, r, "ncclGetUniqueId");
}

NcclCommunicator::NcclCommunicator(const std::vector<CudaBackend*>& ranks, int world, int first,
                                   const ncclUniqueId& id)
    : NcclCommunicator(ranks, world, first) {
  UNET_CHECK(world >= 1 && first >= 0 && first + static_cast<int>(ranks.size()) <= world, usage,
             "an NCCL communicator's ranks are out of range");
  id_ = id;  // every process uses rank 0's
}

NcclCommunicator::NcclCommunicator(const std::vector<CudaBackend*>& ranks, int world, int first)
    : api_(nccl()), world_(world), first_(first), host_(static_cast<int>(ranks.size())) {
  UNET_CHECK(!ranks.empty(), usage, "a communicator needs at least one rank");
  if (!api_.problem.empty())
    throw Error(ErrorKind::unsupported, "NCCL cannot be used: " + api_.problem, ranks[0]->info().id,
                "install NCCL 2 for CUDA 13, or set cuda.communicator to \"device\"");
  for (CudaBackend* b : ranks) {
    auto rank = std::make_unique<Rank>();
    rank->device = b->device();
    rank->backend = b;
    for (const auto& other : ranks_)
      UNET_CHECK(
          other->device != rank->device, usage,
          "NCCL cannot put two ranks on " + device_name(rank->device) + ": use the device communicator");
    ranks_.push_back(std::move(rank));
  }
  bf16_ = ranks[0]->options().bf16_sums;
}

NcclCommunicator::~NcclCommunicator() {
  // ncclCommFinalize waits for every rank's, so all are started before any is waited for; a communicator
  // that fails or does not finish within the deadline is aborted instead of destroyed. One whose init never
  // completed (a peer never joined) would only run out that deadline: it is aborted at once, and so are the
  // others, whose finalize would wait for it.
  std::vector<Rank*> live;
  bool all_ready = true;
  for (const auto& r : ranks_)
    if (r->comm) {
      live.push_back(r.get());
      all_ready = all_ready && r->ready;
    }
  if (live.empty()) return;
  bool finalized = all_ready;
  if (finalized)
    for (Rank* r : live) {
      const QuietDeviceGuard guard(r->device);
      const ncclResult_t result = api_.finalize(r->comm);
      if (result != ncclSuccess && result != ncclInProgress) finalized = false;
    }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (bool pending = finalized; pending && finalized;) {
    pending = false;
    for (Rank* r : live) {
      ncclResult_t state = ncclSuccess;
      if (api_.async_error(r->comm, &state) != ncclSuccess ||
          (state != ncclSuccess && state != ncclInProgress))
        finalized = false;
      pending = pending || state == ncclInProgress;
    }
    if (pending && std::chrono::steady_clock::now() > deadline) finalized = false;
    if (pending) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (Rank* r : live) {
    const QuietDeviceGuard guard(r->device);
    const ncclResult_t result = finalized ? api_.destroy(r->comm) : api_.abort(r->comm);
    if (result != ncclSuccess)
      log_noexcept(finalized ? "ncclCommDestroy" : "ncclCommAbort",
                   device_name(r->device) + ": " + api_.error_string(result));
    r->comm = nullptr;
  }
}

void NcclCommunicator::throw_cancelled() {
  std::lock_guard lock(reason_mutex_);
  throw Error(ErrorKind::cancelled, reason_);
}

void NcclCommunicator::fail(int rank, ncclResult_t result, const char* call) {
  const int device = ranks_.at(static_cast<std::size_t>(rank))->device;
  std::string message = std::string(call) + " failed: " + api_.error_string(result);
  const char* detail = api_.last_error ? api_.last_error(nullptr) : nullptr;
  if (detail && *detail) message += std::string(" (") + detail + ")";
  throw Error(ErrorKind::backend, message, device_name(device),
              "rerun with NCCL_DEBUG=WARN for NCCL's own account, or set cuda.communicator to \"device\"");
}

void NcclCommunicator::wait_until_done(int rank, const char* call) {
  Rank& r = *ranks_[static_cast<std::size_t>(rank)];
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess, result = ncclSuccess;
    {
      std::lock_guard lock(r.mutex);
      if (!r.comm) throw_cancelled();
      result = api_.async_error(r.comm, &state);
    }
    if (result != ncclSuccess) fail(rank, result, "ncclCommGetAsyncError");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(rank, state, call);
    // An enqueue finishes within a few polls; an init waits for the other ranks, possibly seconds.
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

ncclComm_t NcclCommunicator::communicator_of(int rank) {
  Rank& r = *ranks_[static_cast<std::size_t>(rank)];
  {
    std::lock_guard lock(r.mutex);
    if (aborted_) throw_cancelled();
    if (r.ready) return r.comm;
    if (!r.comm) {
      const DeviceGuard guard(r.device);  // NCCL binds the communicator to the current device
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      const ncclResult_t result = api_.init_rank_config(&r.comm, size(), id_, first_ + rank, &config);
      if (result != ncclSuccess && result != ncclInProgress) {
        if (r.comm) api_.abort(std::exchange(r.comm, nullptr));
        fail(rank, result, "ncclCommInitRankConfig");
      }
    }
  }
  wait_until_done(rank, "ncclCommInitRankConfig");
  std::lock_guard lock(r.mutex);
  if (!r.comm) throw_cancelled();
  r.ready = true;
  return r.comm;
}

void NcclCommunicator::all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) {
  Rank& r = *ranks_.at(static_cast<std::size_t>(rank));
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  UNET_CHECK(cuda && cuda->device() == r.device && data.dtype() == DType::f32, usage,
             "the NCCL communicator sums f32 tensors of rank " + std::to_string(rank) + " on " +
                 device_name(r.device));
  const cudaStream_t native = cuda->native(stream);
  communicator_of(rank);
  const std::int64_t n = data.numel();
  if (n == 0) return;
  // cuda.comm_dtype bf16: the sum runs on a bf16 copy (round to nearest even), cast back to f32 after.
  void* summed = data.data();
  if (bf16_) {
    const auto bytes = static_cast<std::size_t>(n) * 2;
    if (r.bf16.bytes() < bytes) {
      if (r.bf16.bytes() > 0) r.retired.push_back(std::move(r.bf16));
      r.bf16 = r.backend->allocator().allocate(bytes, MemoryCategory::gradients);
    }
    UNET_CUDA_CHECK(cuda_kernels::launch_cast(data.data(), cuda_kernels::ElemType::f32, r.bf16.data(),
                                              cuda_kernels::ElemType::bf16, n, native),
                    r.device);
    summed = r.bf16.data();
  }
  ncclResult_t result = ncclSuccess;
  {
    std::lock_guard lock(r.mutex);
    if (!r.comm) throw_cancelled();
    const DeviceGuard guard(r.device);
    result = api_.all_reduce(summed, summed, static_cast<std::size_t>(n), bf16_ ? ncclBfloat16 : ncclFloat32,
                             ncclSum, r.comm, native);
  }
  if (result == ncclInProgress)
    wait_until_done(rank, "ncclAllReduce");  // nothing may be queued on the stream before it is enqueued
  else if (result != ncclSuccess)
    fail(rank, result, "ncclAllReduce");
  if (bf16_)
    UNET_CUDA_CHECK(cuda_kernels::launch_cast(summed, cuda_kernels::ElemType::bf16, data.data(),
                                              cuda_kernels::ElemType::f32, n, native),
                    r.device);
}

void NcclCommunicator::all_reduce_host(int rank, std::span<double> values) {
  UNET_CHECK(world_ == 0, usage, "an NCCL communicator over several processes sums no host values");
  host_.all_reduce_host(rank, values);
}

void NcclCommunicator::abort(const std::string& why) {
  {
    std::lock_guard lock(reason_mutex_);
    if (!aborted_) reason_ = why;
    aborted_ = true;
  }
  host_.abort(why);
  for (const auto& r : ranks_) {
    std::lock_guard lock(r->mutex);
    if (!r->comm) continue;
    const QuietDeviceGuard guard(r->device);
    if (const ncclResult_t result = api_.abort(std::exchange(r->comm, nullptr)); result != ncclSuccess)
      log_noexcept("ncclCommAbort", device_name(r->device) + ": " + api_.error_string(result));
  }
}

}  // namespace unet::cuda
