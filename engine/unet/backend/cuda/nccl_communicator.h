// Gradients summed by NCCL between replicas of this process on distinct GPUs (docs/CUDA_BACKEND.md §5).
//
// NCCL is optional: it is dlopened (libnccl.so.2) and never linked, so the module loads and trains without it
// (replicas then sum through the DeviceCommunicator). nccl.h is included for its types and constants only.
//
// The non-obvious rule: the communicators are NCCL's nonblocking kind (config.blocking = 0). Each rank
// creates its own on its own thread at its first sum (NCCL's init waits for every rank, so the ranks must be
// in it together), then polls until it is ready; a rank stuck waiting for a peer that died can thus be
// released by abort(), which a blocking init would not allow (its handle exists only once every rank has
// joined).
#pragma once

#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "unet/backend/communicator.h"
#include "unet/core/memory.h"

namespace unet::cuda {

class CudaBackend;

// The NCCL functions the module calls, from the library the process loaded.
struct NcclApi {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&::ncclCommGetAsyncError) async_error = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclCommFinalize) finalize = nullptr;
  decltype(&::ncclCommDestroy) destroy = nullptr;
  decltype(&::ncclCommAbort) abort = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclGetLastError) last_error = nullptr;
  int version = 0;      // ncclGetVersion's code (X*10000 + Y*100 + Z); 0 when NCCL did not load
  std::string problem;  // why NCCL cannot be used here, for the user; empty when it can

  // "2.28.9", or "not found" when no NCCL loaded.
  std::string version_text() const;
};

// NCCL as this process has it, loaded by the first call (thread-safe) and kept for the life of the process.
const NcclApi& nccl();

class NcclCommunicator final : public Communicator {
 public:
  // Rank r runs on ranks[r]; the devices must be distinct (NCCL refuses two ranks on one GPU). Throws
  // Error(unsupported) when NCCL cannot be used.
  explicit NcclCommunicator(const std::vector<CudaBackend*>& ranks);
  // Over several processes: these ranks are the ranks first.. of `world` GPUs of every process, which meet
  // through `id` (the run's rank 0's ncclGetUniqueId). Host values are not summed here (all_reduce_host
  // throws): the process communicator that holds this one carries them.
  NcclCommunicator(const std::vector<CudaBackend*>& ranks, int world, int first, const ncclUniqueId& id);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int size() const override { return world_ > 0 ? world_ : static_cast<int>(ranks_.size()); }
  int first_rank() const override { return first_; }
  // ncclAllReduce in place on the replica's own stream: queued, not waited for.
  void all_reduce_sum(int rank, Backend& backend, Stream& stream, Tensor& data) override;
  void all_reduce_host(int rank, std::span<double> values) override;
  // ncclCommAbort on every communicator made so far (this releases ranks inside a collective, on the host or
  // on the GPU); then every waiting or later call throws Error(cancelled, why).
  void abort(const std::string& why) override;

 private:
  // What both public constructors share: checks NCCL and the devices, makes the ranks; no unique id.
  NcclCommunicator(const std::vector<CudaBackend*>& ranks, int world, int first);

  struct Rank {
    int device = 0;
    CudaBackend* backend = nullptr;
    std::mutex mutex;  // held around every NCCL call on `comm`, so that abort() never frees it mid-call
    ncclComm_t comm = nullptr;  // null until the rank's first sum, and again once aborted
    bool ready = false;         // its init has completed
    // cuda.comm_dtype bf16: the gradients cast to bf16 for the sum. Grown to the largest tensor summed, never
    // shrunk; a smaller one it replaced is kept until the communicator goes, since sums queued on a stream
    // may still read it.
    Buffer bf16;
    std::vector<Buffer> retired;
  };

  ncclComm_t communicator_of(int rank);
  // Polls the rank's communicator until what `call` started is done; throws for an error or an abort.
  void wait_until_done(int rank, const char* call);
  [[noreturn]] void fail(int rank, ncclResult_t result, const char* call);
  [[noreturn]] void throw_cancelled();

  const NcclApi& api_;
  int world_ = 0, first_ = 0;  // over several processes; world_ 0: this process's ranks alone
  bool bf16_ = false;          // cuda.comm_dtype bf16
  ncclUniqueId id_{};
  SharedMemoryCommunicator host_;  // host values, summed in rank order
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::atomic<bool> aborted_{false};
  std::mutex reason_mutex_;
  std::string reason_;
};

}  // namespace unet::cuda
