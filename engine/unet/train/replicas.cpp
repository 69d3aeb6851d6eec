#include "unet/train/replicas.h"

#include <algorithm>

#include "unet/core/number_text.h"
#include "unet/distributed/process_communicator.h"
#include "unet/distributed/run_agreement.h"
#include "unet/step/step_options.h"
#include "unet/train/run_failures.h"

namespace unet {

DataParallelOptions replica_options(const Config& c, ProcessGroup* group, TrainerObserver& out) {
  // The step as the config sets it (the planner plans the same, step/step_options.h); this run adds its
  // seams: the communicator between processes, the backends of options.make_backend, the reservations.
  DataParallelOptions dpo = step_options(c, group ? local_devices(*group, c.devices) : c.devices);
  if (group) {
    // This process's replicas are the run's first.. first + local - 1, of every process's in rank order.
    const ReplicaRange range = replica_range(*group, static_cast<int>(dpo.devices.size()));
    // The processes on this host share its devices list, and with it its cores.
    dpo.cpu_replicas_on_host = static_cast<int>(std::count_if(
        c.devices.begin(), c.devices.end(), [](const DeviceId& d) { return d.kind == DeviceKind::cpu; }));
    dpo.make_communicator = [&c, &out, group, range](std::span<Backend* const> ranks) {
      std::string how;
      std::unique_ptr<Communicator> joined =
          join_replicas(*group, ranks, range.first, range.world, c.cuda, how);
      out.on_log(LogLevel::info, "gradients between the processes: " + how);
      return joined;
    };
    out.on_log(LogLevel::info, group->describe(group->rank()) + " of " + std::to_string(group->size()) +
                                   " processes: replicas " + std::to_string(range.first) + " to " +
                                   std::to_string(range.first + static_cast<int>(dpo.devices.size()) - 1) +
                                   " of the run's " + std::to_string(range.world));
  }
  return dpo;
}

std::unique_ptr<DataParallel> make_replicas(DataParallelOptions options, const Config& config,
                                            const MemoryPlan* plan, std::int64_t step,
                                            const std::string& resume_from, TrainerObserver& out,
                                            bool& reported) {
  if (!config.memory.growth) {
    // Preallocation: each device reserves what the planner says this run will hold at its peak.
    for (const DevicePlan& d : plan->devices) {
      options.reserve_bytes.push_back(d.peak_reserved);
      out.on_log(LogLevel::info, d.device + ": reserving " + format_bytes(d.peak_reserved) +
                                     " up front (memory.growth false: the planned peak)");
    }
  }
  try {
    return std::make_unique<DataParallel>(options);
  } catch (const OutOfMemoryError& e) {
    // A reservation (memory.growth false) or the parameters themselves do not fit: the same typed report
    // as for a failed step, with the remedies, not a bare message.
    std::string fitting;
    OutOfMemoryReport report = out_of_memory_report(e, step + 1);
    report.remedies = remedies_for(config, fitting, out);
    report.resume_from = resume_from;
    out.on_error({.type = to_string(ErrorKind::out_of_memory),
                  .device = e.device(),
                  .message = std::string(e.what()) + (fitting.empty() ? "" : "; what fits: " + fitting),
                  .fatal = true,
                  .where = e.location(),
                  .out_of_memory = report});
    reported = true;
    throw;
  }
}

}  // namespace unet
