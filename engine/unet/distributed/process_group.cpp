#include "unet/distributed/process_group.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "unet/core/error.h"
#include "unet/distributed/mpi_group.h"
#include "unet/distributed/rendezvous_protocol.h"

namespace unet {

const char* to_string(Launcher launcher) noexcept {
  switch (launcher) {
    case Launcher::none:
      return "none";
    case Launcher::mpi:
      return "mpirun";
    case Launcher::slurm:
      return "srun";
    case Launcher::torchrun:
      return "torchrun-style variables";
  }
  return "?";
}

std::optional<std::string> read_process_environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

namespace {

int whole_number(const char* name, const std::string& text, int least) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < least)
    throw ConfigError(name, "is \"" + text.substr(0, 64) + (text.size() > 64 ? "...\"" : "\"") +
                                "; it must be a whole number >= " + std::to_string(least));
  return value;
}

// A process count: at most rendezvous::kMaxWorldSize, so that a typo is refused before anything of its size
// is made.
int world_size(const char* name, const std::string& text) {
  const int size = whole_number(name, text, 1);
  if (size > rendezvous::kMaxWorldSize)
    throw ConfigError(name, "is " + std::to_string(size) + "; a run has at most " +
                                std::to_string(rendezvous::kMaxWorldSize) + " processes");
  return size;
}

std::string required(const EnvironmentReader& env, const char* name, const std::string& launched_by) {
  const std::optional<std::string> value = env(name);
  if (!value || value->empty())
    throw ConfigError(name, "is not set; " + launched_by + " needs it to find rank 0");
  return *value;
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets; a bracket holds ranges, of which the first counts.
  std::string host;
  int depth = 0;
  for (std::size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == ',' && depth == 0) break;
    if (c == '[') {
      ++depth;
      const std::size_t close = nodelist.find(']', i);
      if (close == std::string::npos)
        throw ConfigError("SLURM_JOB_NODELIST", "has an unclosed '[': " + nodelist);
      const std::string ranges = nodelist.substr(i + 1, close - i - 1);
      const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
      host += first;
      i = close;
      --depth;
      continue;
    }
    host += c;
  }
  if (host.empty()) throw ConfigError("SLURM_JOB_NODELIST", "names no host: \"" + nodelist + "\"");
  return host;
}

LaunchInfo detect_launch(const EnvironmentReader& env) {
  LaunchInfo info;
  const auto master_from_env = [&](const std::string& by) {
    info.master_addr = required(env, "MASTER_ADDR", by);
    rendezvous::check_host_name(info.master_addr, "MASTER_ADDR");
    info.master_port = whole_number("MASTER_PORT", required(env, "MASTER_PORT", by), 1);
    if (info.master_port > 65535)
      throw ConfigError("MASTER_PORT",
                        "is " + std::to_string(info.master_port) + "; a TCP port is at most 65535");
  };
  if (const auto size = env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = Launcher::mpi;
    info.size = world_size("OMPI_COMM_WORLD_SIZE", *size);
    info.rank = whole_number("OMPI_COMM_WORLD_RANK", required(env, "OMPI_COMM_WORLD_RANK", "mpirun"), 0);
    info.source = "OMPI_COMM_WORLD_RANK=" + std::to_string(info.rank) +
                  " OMPI_COMM_WORLD_SIZE=" + std::to_string(info.size);
    // With MASTER_ADDR and MASTER_PORT too (mpirun -x), the processes can meet over TCP without MPI.
    if (env("MASTER_ADDR") && env("MASTER_PORT")) master_from_env("mpirun");
  } else if (env("WORLD_SIZE") || env("RANK")) {
    info.launcher = Launcher::torchrun;
    info.size = world_size("WORLD_SIZE", required(env, "WORLD_SIZE", "RANK"));
    info.rank = whole_number("RANK", required(env, "RANK", "WORLD_SIZE"), 0);
    info.source = "RANK=" + std::to_string(info.rank) + " WORLD_SIZE=" + std::to_string(info.size);
    if (info.size > 1) master_from_env("a run launched with RANK and WORLD_SIZE");
  } else if (const auto tasks = env("SLURM_STEP_NUM_TASKS")) {
    // srun sets the step's task count; a batch script's own shell (not launched by srun) has only
    // SLURM_NTASKS, and is one process.
    info.launcher = Launcher::slurm;
    info.size = world_size("SLURM_STEP_NUM_TASKS", *tasks);
    info.rank = whole_number("SLURM_PROCID", required(env, "SLURM_PROCID", "srun"), 0);
    info.source =
        "SLURM_PROCID=" + std::to_string(info.rank) + " SLURM_STEP_NUM_TASKS=" + std::to_string(info.size);
    if (info.size > 1) {
      if (env("MASTER_ADDR")) {
        master_from_env("srun");
      } else {
        info.master_addr = first_slurm_host(required(env, "SLURM_JOB_NODELIST", "srun"));
        rendezvous::check_host_name(info.master_addr, "SLURM_JOB_NODELIST");
        const auto port = env("MASTER_PORT");
        info.master_port =
            port ? whole_number("MASTER_PORT", *port, 1)
                 : 29500 + whole_number("SLURM_JOB_ID", required(env, "SLURM_JOB_ID", "srun"), 0) % 1000;
      }
    }
  }
  if (info.rank >= info.size)
    throw ConfigError(info.launcher == Launcher::mpi ? "OMPI_COMM_WORLD_RANK" : "RANK",
                      "is " + std::to_string(info.rank) + " but the run has " + std::to_string(info.size) +
                          " processes (ranks 0 to " + std::to_string(info.size - 1) + ")");
  if (info.size == 1) info.launcher = Launcher::none;
  if (const auto token = env("UNET_JOB_TOKEN"); token && !token->empty()) {
    info.job_identity = "token " + *token;
  } else if (info.launcher == Launcher::slurm) {
    const auto job = env("SLURM_JOB_ID"), step = env("SLURM_STEP_ID");
    if (job) info.job_identity = "slurm job " + *job + " step " + step.value_or("?");
  }
  return info;
}

ProcessGroup::ProcessGroup(int rank, int size, std::vector<std::string> hosts)
    : rank_(rank), size_(size), hosts_(std::move(hosts)) {}

void ProcessGroup::set_hosts(std::vector<std::string> hosts) {
  hosts_ = std::move(hosts);
}

void ProcessGroup::check_header(int from, const MessageHeader& header, MessageTag tag,
                                std::uint64_t max_bytes) const {
  rendezvous::check_message_header(header, tag, max_bytes, describe(from));
}

std::string ProcessGroup::describe(int rank) const {
  const auto at = static_cast<std::size_t>(rank);
  return "rank " + std::to_string(rank) + (at < hosts_.size() ? " (" + hosts_[at] + ")" : "");
}

int ProcessGroup::local_size() const {
  int n = 0;
  for (const std::string& h : hosts_) n += h == hosts_.at(static_cast<std::size_t>(rank_)) ? 1 : 0;
  return n;
}

int ProcessGroup::local_rank() const {
  int n = 0;
  for (int r = 0; r < rank_; ++r)
    n += hosts_[static_cast<std::size_t>(r)] == hosts_[static_cast<std::size_t>(rank_)];
  return n;
}

void ProcessGroup::chain(MessageTag tag, std::vector<std::byte>& partial,
                         const std::function<void(std::vector<std::byte>&)>& add_mine,
                         std::uint64_t max_bytes) {
  if (rank_ > 0) recv_prev(tag, partial, max_bytes);
  add_mine(partial);
  if (size_ == 1) return;
  if (rank_ < size_ - 1) {
    send_next(tag, partial);
    recv_prev(tag, partial, max_bytes);  // the result, from the last rank round the ring
    if (rank_ < size_ - 2) send_next(tag, partial);
  } else {
    send_next(tag, partial);  // to rank 0, which passes it on
  }
}

std::vector<std::string> ProcessGroup::all_gather(const std::string& mine, std::size_t max_per_rank) {
  UNET_CHECK(mine.size() <= max_per_rank, usage,
             "all_gather: " + std::to_string(mine.size()) + " bytes where at most " +
                 std::to_string(max_per_rank) + " are expected of a rank");
  // The partial result: each rank's bytes in turn, each after its 8-byte length.
  const std::size_t max_bytes = rendezvous::max_gathered_bytes(size_, max_per_rank);
  std::vector<std::byte> partial;
  chain(
      MessageTag::gather, partial,
      [&](std::vector<std::byte>& p) {
        // What the ranks before this one sent must parse before this rank adds to it.
        rendezvous::parse_gathered(p, rank_, max_per_rank);
        rendezvous::append_gathered(p, mine);
      },
      max_bytes);
  return rendezvous::parse_gathered(partial, size_, max_per_rank);
}

void ProcessGroup::sum(std::span<double> values) {
  std::vector<std::byte> partial(values.size_bytes());  // zeros: rank 0 adds to nothing
  chain(
      MessageTag::sum_f64, partial,
      [&](std::vector<std::byte>& p) {
        UNET_CHECK(p.size() == values.size_bytes(), usage,
                   "sum: ranks passed different counts (" + std::to_string(p.size() / sizeof(double)) +
                       " and " + std::to_string(values.size()) + ")");
        std::vector<double> acc(values.size());
        std::memcpy(acc.data(), p.data(), p.size());
        for (std::size_t i = 0; i < values.size(); ++i) acc[i] += values[i];
        std::memcpy(p.data(), acc.data(), p.size());
      },
      values.size_bytes());
  UNET_CHECK(partial.size() == values.size_bytes(), usage, "sum: a result of the wrong size");
  std::memcpy(values.data(), partial.data(), partial.size());
}

bool ProcessGroup::any(bool flag) {
  double value = flag ? 1.0 : 0.0;
  sum(std::span(&value, 1));
  return value > 0;
}

JoinOptions join_options_from_environment(const EnvironmentReader& env) {
  JoinOptions options;
  const auto seconds = [&](const char* name, double& value) {
    const std::optional<std::string> text = env(name);
    if (!text) return;
    char* end = nullptr;
    const double parsed = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || !(parsed > 0) || !std::isfinite(parsed))
      throw ConfigError(name, "is \"" + *text + "\"; it must be a number of seconds > 0");
    value = parsed;
  };
  seconds("UNET_RENDEZVOUS_TIMEOUT", options.rendezvous_timeout_s);
  seconds("UNET_COLLECTIVE_TIMEOUT", options.message_timeout_s);
  return options;
}

std::unique_ptr<ProcessGroup> join_process_group(const LaunchInfo& launch, const JoinOptions& options) {
  UNET_CHECK(launch.distributed(), usage, "join_process_group: a run of one process has no group");
  if (launch.launcher == Launcher::mpi && launch.master_addr.empty()) return join_mpi_group(launch, options);
  JoinOptions with_identity = options;
  if (with_identity.job_identity.empty()) with_identity.job_identity = launch.job_identity;
  return join_tcp_group(launch.rank, launch.size, launch.master_addr, launch.master_port, with_identity);
}

}  // namespace unet
