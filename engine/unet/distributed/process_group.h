// Training across processes and machines. A launcher starts the same `unet-train train` several times: Open
// MPI's mpirun, SLURM's srun, or anything that sets torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT). The processes join one ProcessGroup; each drives its local devices as replica threads, and
// the run's replicas are every process's, in rank order (docs/DISTRIBUTED.md).
//
// The processes form a ring: rank r sends only to r + 1 and receives only from r - 1 (mod size). Every
// collective is a chain along the ring (rank 0 starts, each rank adds its part in turn) followed by a
// broadcast of the last rank's result around it, so sums are added in rank order exactly as the shared-memory
// communicator adds its replicas: a run over processes computes bitwise what one process with the same
// replicas computes. A rank that fails or is killed closes its connections; its neighbours see that, fail in
// turn, and the failure goes round the ring: no rank waits for a dead one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace unet {

enum class Launcher { none, mpi, slurm, torchrun };
const char* to_string(Launcher launcher) noexcept;

// How this process was started, from its environment.
struct LaunchInfo {
  Launcher launcher = Launcher::none;
  int rank = 0, size = 1;
  // The TCP rendezvous (srun, torchrun-style): rank 0 listens on master_port, the others connect to it.
  std::string master_addr;
  int master_port = 0;
  // The variables it was read from, for messages: "RANK=1 WORLD_SIZE=2".
  std::string source;
  // What the ranks prove to each other that they share (rendezvous_protocol.h): "token " + UNET_JOB_TOKEN
  // when set, else under srun "slurm job J step S", else empty (the TCP ring then proves only its port).
  std::string job_identity = {};
  bool distributed() const { return size > 1; }
};

using EnvironmentReader = std::function<std::optional<std::string>(const char* name)>;
std::optional<std::string> read_process_environment(const char* name);

// Open MPI's OMPI_COMM_WORLD_RANK/SIZE (mpirun) → mpi; torchrun's RANK and WORLD_SIZE (with MASTER_ADDR,
// MASTER_PORT) → torchrun; SLURM_PROCID and SLURM_NTASKS (srun) → slurm, its master MASTER_ADDR or the first
// host of SLURM_JOB_NODELIST and its port MASTER_PORT or 29500 + SLURM_JOB_ID % 1000. A size of 1 is a
// single process (launcher none). Throws ConfigError naming the variable when one is malformed or missing,
// when the world size exceeds rendezvous::kMaxWorldSize (65536), or when MASTER_ADDR is longer than a DNS
// name may be (253 characters) or holds a space or control character.
LaunchInfo detect_launch(const EnvironmentReader& env = read_process_environment);

// The first host of a SLURM node list: "gpu[03-05,07],login1" → "gpu03".
std::string first_slurm_host(const std::string& nodelist);

// What a collective message is, checked on receipt: processes out of step (a different config, a different
// build) fail with a clear error instead of misreading each other's bytes.
enum class MessageTag : std::uint32_t { gather = 1, sum_f32 = 2, sum_f64 = 3, flag = 4 };

// What precedes every message on a link, whatever carries it (TCP, MPI).
inline constexpr std::uint32_t kMessageMagic = 0x554e4554;  // "UNET"
struct MessageHeader {
  std::uint32_t magic = kMessageMagic;
  std::uint32_t tag = 0;
  std::uint64_t size = 0;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // Every rank's host name, by rank (learnt when the group formed).
  const std::vector<std::string>& hosts() const noexcept { return hosts_; }
  // "rank 1 (node07)"
  std::string describe(int rank) const;

  // Rank r's ranks on its own host, and its place among them (by rank): the processes that share a host
  // share its devices.
  int local_size() const;
  int local_rank() const;

  // The ring's two links. A message carries its tag; recv_prev throws Error(cancelled) naming the peer when
  // the previous rank closed its link (it failed or was killed) or sent nothing for the group's timeout, and
  // Error(usage) when the tag is not the expected one or the size announced exceeds `max_bytes` (checked
  // before anything is allocated for it).
  virtual void send_next(MessageTag tag, std::span<const std::byte> bytes) = 0;
  virtual void recv_prev(MessageTag tag, std::vector<std::byte>& bytes, std::uint64_t max_bytes) = 0;
  // Closes this rank's links (or ends the job under MPI) so that the others stop instead of waiting for it;
  // later calls throw Error(cancelled) with `why`. Safe from any thread, and more than once.
  virtual void abort(const std::string& why) noexcept = 0;

  // Collectives: every rank calls them in the same order. The chain's step: `add_mine(partial)` adds this
  // rank's part to the partial result of the ranks before it (rank 0 starts from `partial` as it is); the
  // last rank's result reaches every rank in `partial`. A partial result of more than `max_bytes` is refused.
  void chain(MessageTag tag, std::vector<std::byte>& partial,
             const std::function<void(std::vector<std::byte>&)>& add_mine, std::uint64_t max_bytes);
  // Every rank's bytes, by rank; each rank's at most `max_per_rank` bytes (Error(usage) on the rank that
  // passes more, and on any rank that receives more).
  std::vector<std::string> all_gather(const std::string& mine, std::size_t max_per_rank);
  // In place: the sum over ranks, added in rank order from 0.
  void sum(std::span<double> values);
  // Whether any rank passed true.
  bool any(bool flag);

 protected:
  ProcessGroup(int rank, int size, std::vector<std::string> hosts);
  void set_hosts(std::vector<std::string> hosts);
  // Throws Error(usage) naming rank `from` when `header`, received from it, is not a message `tag` of at
  // most `max_bytes`.
  void check_header(int from, const MessageHeader& header, MessageTag tag, std::uint64_t max_bytes) const;

 private:
  int rank_, size_;
  std::vector<std::string> hosts_;
};

struct JoinOptions {
  double rendezvous_timeout_s = 300;  // for every rank to reach the rendezvous
  // For a message the ring waits on: a rank that sends nothing for this long is taken for dead. A
  // collective waits on the slowest rank's step, so it is long.
  double message_timeout_s = 1800;
  // For a connection to rank 0's rendezvous (or to a ring listener) to send its hello: one that sends
  // nothing, or too little, for this long (or what is left of the rendezvous, when less) is closed and the
  // rendezvous goes on without it.
  double hello_timeout_s = 10;
  // What the ranks prove they share (LaunchInfo::job_identity); join_process_group fills it from the launch
  // when empty. Empty here: only the master port is proven.
  std::string job_identity = {};
  // Where a refused connection is reported (its peer address and why); nullptr: a line on stderr.
  std::function<void(const std::string&)> on_refused = nullptr;
};

// UNET_RENDEZVOUS_TIMEOUT and UNET_COLLECTIVE_TIMEOUT (seconds) over the defaults; throws ConfigError naming
// a variable that is not a positive number.
JoinOptions join_options_from_environment(const EnvironmentReader& env = read_process_environment);

// Joins the processes the launcher started; throws Error naming the launcher's variables, the master's
// address or the rank that did not come when the group cannot form. Under MPI it initialises MPI (through
// libunet_mpi.so, loaded at run time) and finalises it when the group goes.
std::unique_ptr<ProcessGroup> join_process_group(const LaunchInfo& launch, const JoinOptions& options = {});

// The TCP ring on its own, for tests: `size` ranks, rank 0 listening on master_addr:port (which must be an
// address of this host: ConfigError("MASTER_ADDR") otherwise).
std::unique_ptr<ProcessGroup> join_tcp_group(int rank, int size, const std::string& master_addr,
                                             int master_port, const JoinOptions& options = {});

}  // namespace unet
