// `unet-train train`: a run from a config, or resumed from a checkpoint; joins the run's other processes when
// a launcher started several; Ctrl-C stops at a step boundary, saving what the run has.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/progress_printer.h"
#include "cli/rank_log.h"
#include "unet/backend/devices.h"
#include "unet/distributed/process_group.h"
#include "unet/io/checkpoint.h"
#include "unet/train/run_folder.h"
#include "unet/train/trainer.h"

namespace unet::cli {
namespace {

// Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal) ask the run to stop at the next step boundary,
// keeping what it has; a second one ends the process at once, saying first what that loses.
std::atomic<bool> interrupted{false};
extern "C" void on_interrupt(int) {
  if (!interrupted.exchange(true)) return;
  // Only async-signal-safe calls here: write() and _Exit().
  static constexpr char kQuit[] =
      "\nunet-train: second interrupt: quitting at once; the steps since the last checkpoint are lost\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kQuit, sizeof kQuit - 1);
  std::_Exit(130);
}

// The run's config when resuming: --config if given, else the checkpoint's own, with --set applied either
// way.
Config resume_config(const Invocation& inv, const Checkpoint& checkpoint) {
  if (inv.config_file) return load_config(inv);
  nlohmann::json doc = config_to_json(checkpoint.config);
  for (const std::string& assignment : inv.overrides) apply_override(doc, assignment);
  return config_from_json(doc, checkpoint.config.base_dir);
}

// What makes a resumed run differ from the uninterrupted one (the data order depends on these).
std::vector<std::string> changed_for_exactness(const Config& was, const Config& now) {
  std::vector<std::string> keys;
  if (was.train.batch_size != now.train.batch_size) keys.push_back("train.batch_size");
  if (was.train.accumulation != now.train.accumulation) keys.push_back("train.accumulation");
  if (was.train.lr != now.train.lr) keys.push_back("train.lr");
  if (was.train.weight_decay != now.train.weight_decay) keys.push_back("train.weight_decay");
  if (!(was.data == now.data)) keys.push_back("data");
  if (was.precision != now.precision) keys.push_back("precision");
  if (!(was.loss == now.loss)) keys.push_back("loss");
  if (!(was.optimizer == now.optimizer)) keys.push_back("optimizer");
  if (!(was.schedule == now.schedule)) keys.push_back("schedule");
  return keys;
}

// A checkpoint resumes on any devices, but its own config names the ones it was trained on: when this machine
// lacks one and the user chose none, say how to resume elsewhere instead of failing on the device.
void check_resume_devices(const Invocation& inv, const Config& config) {
  if (inv.config_file) return;
  for (const std::string& assignment : inv.overrides)
    if (assignment.starts_with("devices=")) return;
  const DeviceListing listing = list_devices();
  for (const DeviceId& d : config.devices) {
    const std::string id = d.str();
    if (listing.find(id)) continue;
    std::string why = d.kind == DeviceKind::cuda && !listing.cuda_unavailable_reason.empty()
                          ? " (" + listing.cuda_unavailable_reason + ")"
                          : "";
    throw ConfigError("devices", *inv.resume + " was trained on " + id +
                                     ", which this machine does not offer" + why +
                                     "; resume it on other devices with --set 'devices=[\"cpu\"]' (a "
                                     "checkpoint resumes on any number and kind of devices)");
  }
}

// The engine's refusal of a run folder, with this command line's ways on.
std::string run_folder_advice(const RunFolderConflict& c) {
  const std::string folder = c.folder.string();
  switch (c.kind) {
    case RunFolderConflict::Kind::previous_run: {
      const bool has_last = std::filesystem::exists(c.folder / kLastCheckpointName);
      return folder + " holds a previous run (" + c.file_names() +
             "), which a new run would replace; choose another checkpoint.dir, continue that run "
             "(unet-train train --resume " +
             (has_last ? (c.folder / kLastCheckpointName).string() : std::string("CKPT")) +
             "), or start over in that folder, removing its run's files (unet-train train --overwrite)";
    }
    case RunFolderConflict::Kind::other_run:
      return folder + " holds another run (" + c.file_names() +
             ") than the checkpoint resumed, whose run is in " + c.checkpoint_run.string() +
             "; resuming here would mix their histories and replace that run's checkpoints; resume into the "
             "checkpoint's own folder (--set checkpoint.dir=" +
             c.checkpoint_run.string() +
             "), choose another checkpoint.dir, or remove that run's files first (unet-train train --resume "
             "CKPT --overwrite)";
    case RunFolderConflict::Kind::later_state:
      return folder + " holds this run further along: its last.safetensors is at step " +
             std::to_string(c.later_step) + ", the checkpoint resumed (" + c.checkpoint.string() +
             ") at step " + std::to_string(c.resumed_step) +
             "; resuming here would replace the later checkpoints as the run writes its own; branch off into "
             "another folder (--set checkpoint.dir=" +
             folder + "-from-step-" + std::to_string(c.resumed_step) + "), resume " +
             (c.folder / kLastCheckpointName).string() + " to go on from step " +
             std::to_string(c.later_step) + ", or go on here anyway, replacing them (--overwrite)";
  }
  return c.message();
}

}  // namespace

int train(const Invocation& inv) {
  std::optional<Checkpoint> checkpoint;
  if (inv.resume) checkpoint = load_checkpoint(*inv.resume);
  const Config config = checkpoint ? resume_config(inv, *checkpoint) : load_config(inv);
  if (checkpoint) check_resume_devices(inv, config);
  ProgressPrinter printer;
  TrainerOptions options;
  options.replace_previous_run = inv.overwrite;
  // Started by mpirun, srun or with torchrun-style variables: join the run's other processes first.
  const LaunchInfo launch = detect_launch();
  std::unique_ptr<ProcessGroup> group;
  std::optional<RankLog> rank_log;
  TrainerObserver* observer = &printer;
  if (launch.distributed()) {
    group = join_process_group(launch, join_options_from_environment());
    options.process_group = group.get();
    if (group->rank() == 0) {
      printer.on_log(LogLevel::info, std::to_string(group->size()) + " processes joined (" +
                                         to_string(launch.launcher) + "); rank 0 writes the run's files");
    } else {
      options.write_metrics = false;
      options.write_checkpoints = false;
      rank_log.emplace(
          std::filesystem::path(config.checkpoint.dir) / ("rank-" + std::to_string(group->rank()) + ".log"),
          group->rank());
      observer = &*rank_log;
    }
  }
  // A process that fails tells the others (it closes its links; under MPI it leaves without finalising, and
  // mpirun ends the job), so that none of them waits for it.
  struct AbortOnFailure {
    ProcessGroup* group;
    int exceptions = std::uncaught_exceptions();
    ~AbortOnFailure() {
      if (group && std::uncaught_exceptions() > exceptions)
        group->abort(group->describe(group->rank()) + " failed: see its output");
    }
  } abort_on_failure{group.get()};
  Trainer trainer(config, observer, options);
  if (checkpoint) {
    trainer.resume_from(*checkpoint, *inv.resume);
    if (lacks_optimizer_state(*checkpoint))
      printer.on_log(
          LogLevel::warning,
          *inv.resume +
              " holds weights only (an export without optimizer state): the optimizer starts afresh at "
              "step " +
              std::to_string(checkpoint->position.step) +
              ", so the run will not continue as the one that saved it; resume from a full checkpoint "
              "(last.safetensors) to continue exactly");
    const auto changed = changed_for_exactness(checkpoint->config, config);
    if (!changed.empty()) {
      std::string keys;
      for (const auto& k : changed) keys += (keys.empty() ? "" : ", ") + k;
      printer.on_log(LogLevel::warning,
                     "resuming with a different " + keys +
                         " than the checkpoint's run: it will not continue exactly as that run");
    }
  }
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::signal(SIGHUP, on_interrupt);
  // A reader that goes away (`| head`, a closed ssh session) must not kill the run unsaved: writes to the
  // closed pipe fail instead, and training goes on.
  std::signal(SIGPIPE, SIG_IGN);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (interrupted) {
        printer.on_log(LogLevel::info,
                       trainer.state() == TrainerState::preparing
                           ? "stop requested: ending the preparation; nothing is trained or saved"
                           : "stop requested: finishing this step, then saving last.safetensors (interrupt "
                             "again to quit at once, losing the steps since the last checkpoint)");
        trainer.stop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& thread;
    ~Join() {
      done = true;
      thread.join();
    }
  } join{done, watcher};
  try {
    trainer.run();
  } catch (const RunFolderTaken& e) {
    throw ConfigError("checkpoint.dir", run_folder_advice(e.conflict()));
  }
  // Interrupted before the first step: no result, so not success either (128 + SIGINT, as a shell reports
  // it).
  return (rank_log ? rank_log->started() : printer.started()) ? 0 : 130;
}

}  // namespace unet::cli
