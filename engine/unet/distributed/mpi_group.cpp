#include "unet/distributed/mpi_group.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "unet/backend/module_loader.h"
#include "unet/core/error.h"
#include "unet/core/number_text.h"
#include "unet/distributed/mpi/mpi_module_api.h"
#include "unet/distributed/rendezvous_protocol.h"

namespace unet {
namespace {

constexpr int kHeaderTag = 1, kPayloadTag = 2;

// The module, loaded once per process and never unloaded (MPI registers exit handlers): its interface, or
// why there is none.
const MpiModuleLoad& loaded_module() {
  static std::once_flag once;
  static MpiModuleLoad loaded;
  std::call_once(once, [] { loaded = load_mpi_module(); });
  return loaded;
}

const UnetMpiApi& mpi_api() {
  const MpiModuleLoad& loaded = loaded_module();
  if (!loaded.api)
    throw Error(ErrorKind::unsupported, "launched by mpirun, but MPI cannot be used: " + loaded.problem, {},
                "or launch the processes with torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, "
                "MASTER_PORT), which need no MPI");
  return *loaded.api;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(const UnetMpiApi& api, int rank, int size, const JoinOptions& o)
      : ProcessGroup(rank, size, {}), api_(api), message_timeout_s_(o.message_timeout_s) {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    // The others' host names, by rank: the processes that share a host share its devices.
    set_hosts(all_gather(name, sizeof name));
  }

  ~MpiProcessGroup() override {
    // MPI_Finalize waits for the others; after an abort they may never come. Leaving without it, the process
    // exits with an error and mpirun ends the rest of the job.
    if (!aborted_) api_.finalize();
  }

  void send_next(MessageTag tag, std::span<const std::byte> bytes) override {
    const int next = (rank() + 1) % size();
    auto header =
        rendezvous::encode_message_header({kMessageMagic, static_cast<std::uint32_t>(tag), bytes.size()});
    move(true, next, kHeaderTag, header.data(), header.size());
    move(true, next, kPayloadTag, const_cast<std::byte*>(bytes.data()), bytes.size());
  }

  void recv_prev(MessageTag tag, std::vector<std::byte>& bytes, std::uint64_t max_bytes) override {
    const int prev = (rank() + size() - 1) % size();
    std::array<std::byte, rendezvous::kMessageHeaderSize> raw{};
    move(false, prev, kHeaderTag, raw.data(), raw.size());
    const MessageHeader header = rendezvous::decode_message_header(raw);
    check_header(prev, header, tag, max_bytes);  // before anything is allocated for it
    bytes.resize(static_cast<std::size_t>(header.size));
    move(false, prev, kPayloadTag, bytes.data(), bytes.size());
  }

  void abort(const std::string& why) noexcept override {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    why_ = why;
    aborted_ = true;
  }

 private:
  void move(bool send, int peer, int mpi_tag, void* data, std::uint64_t bytes) {
    throw_if_aborted();
    char why[512] = {};
    const auto stop = [](void* self) { return static_cast<MpiProcessGroup*>(self)->aborted_.load() ? 1 : 0; };
    const int rc = api_.transfer(send ? 1 : 0, peer, mpi_tag, data, bytes, stop, this, message_timeout_s_,
                                 why, sizeof why);
    if (rc == unet_mpi_ok) return;
    throw_if_aborted();
    if (rc == unet_mpi_timed_out)
      throw Error(ErrorKind::cancelled, describe(peer) + (send ? " took" : " sent") + " nothing for " +
                                            number_text(message_timeout_s_) +
                                            " s: it is stuck or its machine is gone");
    throw Error(ErrorKind::backend, std::string("MPI, ") + (send ? "sending to " : "receiving from ") +
                                        describe(peer) + ": " + why);
  }

  void throw_if_aborted() {
    if (!aborted_) return;
    std::lock_guard lock(mutex_);
    throw Error(ErrorKind::cancelled, why_);
  }

  const UnetMpiApi& api_;
  double message_timeout_s_;
  std::mutex mutex_;
  std::atomic<bool> aborted_{false};  // read by the module's wait loop while another thread sets it
  std::string why_;
};

}  // namespace

MpiModuleLoad load_mpi_module() {
  const ModuleSpec spec{
      .name = "mpi",
      .title = "MPI",
      .file = "libunet_mpi.so",
      .path_variable = "UNET_MPI_MODULE",
      .abi = kUnetMpiApiVersion,
      .missing = "MPI module",
      .build_tree_module = UNET_MODULE_BUILD_PATH,
      .install_dir = UNET_MODULE_INSTALL_DIR,
      .not_built_because = UNET_MODULE_NOT_BUILT_BECAUSE,
      // RTLD_GLOBAL: Open MPI's own plugins (mca_*.so) resolve libmpi's symbols from the global scope.
      .dlopen_flags = RTLD_NOW | RTLD_GLOBAL,
      .before_load = {},
      .explain_load_failure = [](const std::string& path, const std::string& error) {
        return path + " could not be loaded: " + error +
               " (install Open MPI's library: apt-get install libopenmpi3)";
      }};
  ModuleLoad loaded = load_module(spec);
  return {.api = static_cast<const UnetMpiApi*>(loaded.interface), .problem = std::move(loaded.reason)};
}

std::string mpi_problem() {
  return loaded_module().problem;
}

std::unique_ptr<ProcessGroup> join_mpi_group(const LaunchInfo& launch, const JoinOptions& options) {
  const UnetMpiApi& api = mpi_api();
  int rank = -1, size = 0;
  char why[512] = {};
  if (api.init(&rank, &size, why, sizeof why) != unet_mpi_ok)
    throw Error(ErrorKind::backend, std::string("MPI could not start: ") + why);
  if (rank != launch.rank || size != launch.size)
    throw Error(ErrorKind::config, "MPI says rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                       " but the environment says " + launch.source);
  return std::make_unique<MpiProcessGroup>(api, rank, size, options);
}

}  // namespace unet
