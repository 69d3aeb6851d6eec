#include "cli/commands.h"

#include <sys/stat.h>
#include <unistd.h>
#include <cmath>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <tuple>

#include "unet/backend/devices.h"
#include "unet/core/number_text.h"
#include "unet/core/utf8.h"
#include "unet/dist/mpi_group.h"
#include "unet/dist/process_group.h"
#include "unet/infer/predictor.h"
#include "unet/io/atomic_file.h"
#include "unet/io/checkpoint.h"
#include "unet/io/onnx_export.h"
#include "unet/model/unet.h"
#include "unet/plan/memory_planner.h"
#include "unet/step/data_plan.h"
#include "unet/train/run_folder.h"
#include "unet/train/trainer.h"

namespace unet::cli {
namespace {

std::string with_commas(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const long long s = std::llround(seconds);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  else
    std::snprintf(text, sizeof text, "%llds", s);
  return text;
}

// A validation metric as the progress lines show it: 4 decimals, or "—" where it is absent (NaN: no labelled
// pixel, no class present; docs/METRICS.md), never "nan" or a number that is not there.
std::string metric_cell(double v) {
  if (!std::isfinite(v)) return "\u2014";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", v);
  return text;
}

// Prints the run's progress: a line that updates in place on a terminal, a line every few seconds otherwise.
class ProgressPrinter final : public TrainerObserver {
 public:
  ProgressPrinter() : tty_(isatty(STDOUT_FILENO) != 0) {}

  void on_start(const RunInfo& i) override {
    std::string devices;
    for (std::size_t r = 0; r < i.devices.size(); ++r) {
      if (r) devices += ", ";
      devices += i.devices[r].id + " (" + i.devices[r].name + ")";
    }
    std::string split;
    for (std::size_t r = 0; r < i.device_batch.size(); ++r)
      split += (r ? " + " : "") + std::to_string(i.device_batch[r]);
    std::printf("unet-train: %s parameters on %s\n", with_commas(i.parameter_count).c_str(), devices.c_str());
    std::printf("  data: %s; %lld train / %lld validation\n", i.dataset.c_str(),
                static_cast<long long>(i.train_samples), static_cast<long long>(i.val_samples));
    // A batch beyond the training set is not what a step takes: say what is.
    const std::string used =
        i.global_batch * i.accumulation > i.train_samples
            ? " (each step takes all " + std::to_string(i.train_samples) + " training samples)"
            : std::string();
    std::printf(
        "  batch %lld%s = %s per device, accumulation %lld; %lld steps per epoch, %lld steps in all; %s\n",
        static_cast<long long>(i.global_batch), used.c_str(), split.c_str(),
        static_cast<long long>(i.accumulation), static_cast<long long>(i.steps_per_epoch),
        static_cast<long long>(i.total_steps), i.precision.c_str());
    if (i.start_step > 0) std::printf("  resuming at step %lld\n", static_cast<long long>(i.start_step));
    std::printf("  run folder: %s\n", printable(i.run_dir).c_str());
    epochs_ = i.epochs;
    started_ = true;
    std::fflush(stdout);
    last_print_ = std::chrono::steady_clock::now();
  }

  void on_step(const StepReport& r) override {
    const auto now = std::chrono::steady_clock::now();
    const bool due =
        tty_ || r.step == r.total_steps || std::chrono::duration<double>(now - last_print_).count() >= 10.0;
    if (!due) return;
    last_print_ = now;
    // Dynamic loss scaling (mixed-fp16) shows its scale and the steps it skipped.
    char scaling[64] = "";
    if (r.loss_scale != 1.0 || r.skipped_steps > 0)
      std::snprintf(scaling, sizeof scaling, "  scale %g (%lld skipped)", r.loss_scale,
                    static_cast<long long>(r.skipped_steps));
    std::printf("%sepoch %lld/%lld  step %lld/%lld  loss %.4f  %.1f img/s%s  ETA %s%s",
                tty_ ? "\r\033[K" : "", static_cast<long long>(r.epoch) + 1, static_cast<long long>(epochs_),
                static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss,
                r.img_per_s_avg, scaling, duration(r.eta_seconds).c_str(), tty_ ? "" : "\n");
    std::fflush(stdout);
  }

  void on_epoch(const EpochReport& r) override {
    const std::string metrics = "val_loss " + metric_cell(r.val_loss) + "  val_iou " +
                                metric_cell(r.val_iou) + "  val_dice " + metric_cell(r.val_dice) +
                                "  val_acc " + metric_cell(r.val_acc);
    if (r.within_epoch)
      std::printf("%sstep %lld, epoch %lld/%lld under way: loss %s  %s\n", tty_ ? "\r\033[K" : "",
                  static_cast<long long>(r.step), static_cast<long long>(r.epoch),
                  static_cast<long long>(epochs_), metric_cell(r.loss).c_str(), metrics.c_str());
    else
      std::printf("%sepoch %lld/%lld: loss %s  %s  (%s)\n", tty_ ? "\r\033[K" : "",
                  static_cast<long long>(r.epoch), static_cast<long long>(epochs_),
                  metric_cell(r.loss).c_str(), metrics.c_str(), duration(r.seconds).c_str());
    // A model of several classes: each class's scores, which the means hide (background first).
    if (r.val_class_iou.size() > 2) {
      std::string line = "  per class (IoU/Dice):";
      for (std::size_t c = 0; c < r.val_class_iou.size(); ++c)
        line += " " + std::to_string(c) + ": " + metric_cell(r.val_class_iou[c]) + "/" +
                metric_cell(c < r.val_class_dice.size() ? r.val_class_dice[c] : NAN);
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
  }

  void on_checkpoint(const CheckpointReport& r) override {
    std::printf("%ssaved %s (step %lld, %s)\n", tty_ ? "\r\033[K" : "", printable(r.path).c_str(),
                static_cast<long long>(r.step), r.reason.c_str());
    std::fflush(stdout);
  }

  void on_log(LogLevel level, const std::string& message) override {
    // A message of several lines (the data folder's report) is printed as lines, each with the prefix and
    // escaped on its own.
    std::string_view rest = message;
    bool first = true;
    do {
      const std::size_t end = rest.find('\n');
      std::fprintf(stderr, "%sunet-train: %s%s\n", first && tty_ ? "\r\033[K" : "",
                   first && level != LogLevel::info ? "warning: " : "",
                   printable(rest.substr(0, end)).c_str());
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
      first = false;
    } while (!rest.empty());
  }

  void on_error(const ErrorReport& e) override {
    // Fatal ones end the run and are printed by main(); the others come as on_log warnings too.
    if (!e.out_of_memory || !e.fatal) return;
    // Promise a checkpoint only where there is one: a fresh run that fails at once has none.
    const OutOfMemoryReport& oom = *e.out_of_memory;
    const std::string what =
        oom.planned
            ? "does not fit " + e.device + " (the memory plan, before step " + std::to_string(oom.step) + ")"
            : "out of memory on " + e.device + " at step " + std::to_string(oom.step);
    const std::string then = oom.resume_from.empty()
                                 ? "no checkpoint of this run was saved; start it again with one of these"
                                 : "resume " + oom.resume_from + " with one of these";
    std::printf("%s%s; %s (best first):\n", tty_ ? "\r\033[K" : "", what.c_str(), then.c_str());
    for (const RemedyReport& r : e.out_of_memory->remedies) {
      std::string flags;
      for (const auto& [key, value] : r.changes.items())
        flags += " --set " + std::string(value.is_array() ? "'" : "") + key + "=" +
                 (value.is_string() ? value.get<std::string>() : value.dump()) +
                 (value.is_array() ? "'" : "");
      std::printf("  %-3s %-28s%s\n", r.fits ? "ok" : "no", r.name.c_str(), flags.c_str());
    }
    std::fflush(stdout);
  }

  void on_state(TrainerState s) override {
    if (s == TrainerState::stopped) std::printf("%sstopped\n", tty_ ? "\r\033[K" : "");
  }

  // Whether training began (on_start): a run stopped before has nothing to show for it.
  bool started() const { return started_; }

 private:
  bool tty_;
  std::int64_t epochs_ = 0;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_print_;
};

// A process of a run over several processes other than rank 0 keeps the terminal for errors: its progress,
// warnings and errors go to <checkpoint.dir>/rank-N.log (rank 0 prints and writes metrics.jsonl).
class RankLog final : public TrainerObserver {
 public:
  RankLog(const std::filesystem::path& file, int rank) : rank_(rank) {
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    out_.open(file, std::ios::app);
    if (!out_)
      throw Error(ErrorKind::io, file.string() + ": cannot write rank " + std::to_string(rank) + "'s log");
    line("rank " + std::to_string(rank) + " joined (pid " + std::to_string(::getpid()) + ")");
  }

  void on_start(const RunInfo& i) override {
    std::string devices;
    for (std::size_t r = 0; r < i.devices.size(); ++r)
      devices +=
          (r ? ", " : "") + i.devices[r].id + " (" + std::to_string(i.device_batch.at(r)) + " per step)";
    line("training on " + devices + "; " + std::to_string(i.total_steps) + " steps");
    started_ = true;
  }
  void on_step(const StepReport& r) override {
    if (r.step % 100 == 0 || r.step == r.total_steps)
      line("step " + std::to_string(r.step) + "/" + std::to_string(r.total_steps) + " loss " +
           number_text(r.loss));
  }
  void on_epoch(const EpochReport& r) override {
    // Absent metrics (NaN) as "—", as the progress lines show them.
    const auto shown = [](double v) { return std::isfinite(v) ? number_text(v) : std::string("\u2014"); };
    line("epoch " + std::to_string(r.epoch) + " val_loss " + shown(r.val_loss) + " val_iou " +
         shown(r.val_iou));
  }
  void on_log(LogLevel level, const std::string& message) override {
    line((level == LogLevel::info ? "" : "warning: ") + message);
  }
  void on_error(const ErrorReport& e) override { line("error: " + e.message); }
  void on_state(TrainerState s) override {
    if (s == TrainerState::stopped || s == TrainerState::finished) line(to_string(s));
  }
  bool started() const { return started_; }

 private:
  void line(const std::string& text) {
    const std::time_t now = std::time(nullptr);
    char stamp[32] = "";
    std::strftime(stamp, sizeof stamp, "%FT%TZ", std::gmtime(&now));
    out_ << stamp << " rank " << rank_ << ": " << text << '\n' << std::flush;
  }

  int rank_;
  std::ofstream out_;
  bool started_ = false;
};

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

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  const auto escape = [&](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  };
  std::size_t next_bad = invalid_utf8_at(text);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (i == next_bad) {
      // A byte that is not UTF-8 (a Latin-1 file name) shows as its value, not as whatever the terminal
      // makes of it.
      escape(byte);
      next_bad = invalid_utf8_at(text.substr(i + 1));
      if (next_bad != std::string_view::npos) next_bad += i + 1;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      escape(byte);
    } else if (byte == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      // U+0080..U+009F, the C1 controls (U+009B is a terminal's CSI): escaped as the code point's bytes.
      escape(byte);
      escape(static_cast<unsigned char>(text[++i]));
    } else {
      out += c;
    }
  }
  return out;
}

Config load_config(const Invocation& inv) {
  nlohmann::json doc = nlohmann::json::object();
  std::filesystem::path base_dir;
  if (inv.config_file) {
    doc = read_config_document(*inv.config_file);
    base_dir = std::filesystem::absolute(*inv.config_file).parent_path();
  }
  for (const std::string& assignment : inv.overrides) apply_override(doc, assignment);
  try {
    return config_from_json(doc, base_dir);
  } catch (const ConfigError& e) {
    if (!inv.config_file) throw;
    throw ConfigError(e.key(), e.message().substr(e.key().empty() ? 0 : e.key().size() + 2) + " (in " +
                                   *inv.config_file + (inv.overrides.empty() ? "" : " with --set") + ")");
  }
}

namespace {

// The options each command takes (the usage text's); one given to a command that does not take it is refused,
// so that nothing the user asked for is silently ignored.
const std::map<std::string, std::vector<std::string>, std::less<>>& options_of_commands() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> table{
      {"train", {"--config", "--set", "--resume", "--overwrite"}},
      {"init", {"--config", "--set", "--out", "--overwrite"}},
      {"estimate", {"--config", "--set", "--json"}},
      {"fit", {"--config", "--set", "--json"}},
      {"summary", {"--config", "--set", "--json"}},
      {"predict",
       {"--checkpoint", "--input", "--output", "--set", "--overwrite", "--mode", "--tile", "--overlap",
        "--blend", "--padding", "--tta", "--output-kind", "--threshold"}},
      {"export", {"--checkpoint", "--out", "--format", "--overwrite"}},
      {"devices", {"--json"}},
  };
  return table;
}

void refuse_options_the_command_does_not_take(const Invocation& inv) {
  const auto& table = options_of_commands();
  const auto own = table.find(inv.command);
  if (own == table.end()) return;  // run() names the unknown command
  for (const std::string& flag : inv.given) {
    if (std::find(own->second.begin(), own->second.end(), flag) != own->second.end()) continue;
    std::string takers;
    for (const auto& [command, flags] : table)
      if (std::find(flags.begin(), flags.end(), flag) != flags.end())
        takers += (takers.empty() ? "" : ", ") + command;
    throw ConfigError(
        flag, inv.command + " does not take " + flag +
                  (takers.empty()
                       ? std::string()
                       : " (" + takers + " do" + (takers.find(',') == std::string::npos ? "es" : "") + ")") +
                  "; see unet-train --help");
  }
}

}  // namespace

int run(const Invocation& inv) {
  refuse_options_the_command_does_not_take(inv);
  if (inv.command == "train") return train(inv);
  if (inv.command == "init") return init(inv);
  if (inv.command == "summary") return summary(inv);
  if (inv.command == "devices") return devices(inv);
  if (inv.command == "export") return export_model(inv);
  if (inv.command == "predict") return predict(inv);
  if (inv.command == "estimate") return estimate(inv);
  if (inv.command == "fit") return fit(inv);
  throw ConfigError("", "unknown command '" + inv.command + "' (see unet-train --help)");
}

namespace {

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

}  // namespace

namespace {

// A checkpoint resumes on any devices, but its own config names the ones it was trained on: when this machine
// lacks one and the user chose none, say how to resume elsewhere instead of failing on the device.
void check_resume_devices(const Invocation& inv, const Config& config) {
  if (inv.config_file) return;
  for (const std::string& assignment : inv.overrides)
    if (assignment.starts_with("devices=")) return;
  const DeviceListing listing = list_devices();
  for (const std::string& d : config.devices) {
    const std::string id = parse_device_id(d).str();
    if (listing.find(id)) continue;
    std::string why = id.starts_with("cuda") && !listing.cuda_unavailable_reason.empty()
                          ? " (" + listing.cuda_unavailable_reason + ")"
                          : "";
    throw ConfigError("devices", *inv.resume + " was trained on " + id +
                                     ", which this machine does not offer" + why +
                                     "; resume it on other devices with --set 'devices=[\"cpu\"]' (a "
                                     "checkpoint resumes on any number and kind of devices)");
  }
}

}  // namespace

namespace {

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
    if (checkpoint->adam_m.empty() && checkpoint->sgd_momentum.empty() &&
        !(checkpoint->config.optimizer.kind == "sgd" && checkpoint->config.optimizer.momentum == 0))
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

int summary(const Invocation& inv) {
  const Config config = load_config(inv);
  const ModelSummary summary = summarize_model(config);
  const auto& rows = summary.layers;
  const std::int64_t per_device = summary.batch_per_device;
  if (inv.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& r : rows)
      layers.push_back({{"name", r.name},
                        {"kind", r.kind},
                        {"output_shape", {r.output.n, r.output.c, r.output.h, r.output.w}},
                        {"parameters", r.parameters},
                        {"activation_bytes", r.saved_bytes}});
    std::cout << nlohmann::json{{"layers", layers},
                                {"parameters", summary.parameters},
                                {"activation_bytes", summary.kept_bytes},
                                {"activation_peak_bytes", summary.peak_bytes},
                                {"batch_per_device", per_device}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%-14s %-18s %-22s %12s %12s\n", "layer", "kind", "output (n,c,h,w)", "parameters",
              "activations");
  for (const auto& r : rows) {
    const std::string shape = std::to_string(r.output.n) + "x" + std::to_string(r.output.c) + "x" +
                              std::to_string(r.output.h) + "x" + std::to_string(r.output.w);
    std::printf("%-14s %-18s %-22s %12s %12s\n", r.name.c_str(), r.kind.c_str(), shape.c_str(),
                with_commas(r.parameters).c_str(), format_bytes(r.saved_bytes).c_str());
  }
  std::printf(
      "total: %s parameters (%s as f32); at %lld images per device the forward pass keeps %s of activations "
      "for backward, and they peak at %s%s\n",
      with_commas(summary.parameters).c_str(), format_bytes(summary.parameters * 4).c_str(),
      static_cast<long long>(per_device), format_bytes(summary.kept_bytes).c_str(),
      format_bytes(summary.peak_bytes).c_str(), config.memory.checkpointing ? " (with checkpointing)" : "");
  return 0;
}

namespace {

// Bytes for the devices listing; "unknown" where the listing could not find out (-1).
std::string bytes_or_unknown(std::int64_t bytes) {
  return bytes < 0 ? "unknown" : format_bytes(bytes);
}

// Other processes' memory, or why it is not known: NVML may see it without telling ours apart.
std::string others_text(const DeviceInfo& d) {
  return d.others_not_attributable ? "not attributable" : bytes_or_unknown(d.used_by_others_bytes);
}

// JSON null where the listing has no value: an empty text, -1 bytes.
nlohmann::json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
}
nlohmann::json bytes_or_null(std::int64_t bytes) {
  return bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(bytes);
}

nlohmann::json device_json(const DeviceInfo& d) {
  return {{"id", d.id},
          {"name", d.name},
          {"kind", to_string(d.kind)},
          {"total_bytes", d.total_bytes},
          {"free_bytes", bytes_or_null(d.free_bytes)},
          {"used_by_others_bytes", bytes_or_null(d.used_by_others_bytes)},
          {"used_by_others_not_attributable", d.others_not_attributable},
          {"compute_capability", text_or_null(d.compute_capability)},
          {"pci_bus_id", text_or_null(d.pci_bus_id)}};
}

}  // namespace

int devices(const Invocation& inv) {
  const DeviceListing listing = list_devices();
  const CudaVersions& v = listing.versions;
  if (inv.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const DeviceInfo& d : listing.devices) list.push_back(device_json(d));
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuInfo& g : listing.gpus) {
      nlohmann::json gpu = device_json(g.device);
      gpu["unusable_reason"] = text_or_null(g.unusable_reason);
      // NVML's reading (the workbench's Devices tab shows the same); null where NVML cannot say.
      const auto reading = [](double value) {
        return value < 0 ? nlohmann::json(nullptr) : nlohmann::json(value);
      };
      gpu["utilisation_percent"] = reading(g.reading.utilisation_percent);
      gpu["temperature_celsius"] = reading(g.reading.temperature_celsius);
      gpu["power_watts"] = reading(g.reading.power_watts);
      gpus.push_back(std::move(gpu));
    }
    std::cout << nlohmann::json{{"devices", list},
                                {"cuda_unavailable_reason", text_or_null(listing.cuda_unavailable_reason)},
                                {"gpus_seen", listing.gpus_seen},
                                {"gpus", gpus},
                                {"versions",
                                 {{"driver", text_or_null(v.driver)},
                                  {"runtime", text_or_null(v.runtime)},
                                  {"cudnn", text_or_null(v.cudnn)},
                                  {"nccl", text_or_null(v.nccl)}}},
                                {"gpu_communicator", text_or_null(gpu_communicator_text(v))},
                                {"launchers",
                                 {{"mpirun", mpi_problem().empty()},
                                  {"mpirun_problem", text_or_null(mpi_problem())},
                                  {"srun", true},
                                  {"torchrun_style", true}}}}
                     .dump(2)
              << "\n";
    return 0;
  }
  for (const DeviceInfo& d : listing.devices)
    std::printf("%-8s %-40s %s total, %s free\n", d.id.c_str(), d.name.c_str(),
                format_bytes(d.total_bytes).c_str(), bytes_or_unknown(d.free_bytes).c_str());
  if (!listing.cuda_unavailable_reason.empty())
    std::printf("CUDA: unavailable: %s\n", listing.cuda_unavailable_reason.c_str());
  // The module's detailed view of the GPUs when it could list them, the driver's names otherwise.
  for (const GpuInfo& g : listing.gpus) {
    const DeviceInfo& d = g.device;
    std::printf(
        "  GPU %s: %s, compute capability %s, %s total, %s free, %s used by other processes, PCI %s%s%s\n",
        d.id.c_str(), d.name.c_str(), d.compute_capability.c_str(), format_bytes(d.total_bytes).c_str(),
        bytes_or_unknown(d.free_bytes).c_str(), others_text(d).c_str(), d.pci_bus_id.c_str(),
        g.unusable_reason.empty() ? "" : "; unusable: ", g.unusable_reason.c_str());
  }
  if (listing.gpus.empty())
    for (const std::string& g : listing.gpus_seen) std::printf("  GPU seen by the driver: %s\n", g.c_str());
  if (v.any()) {
    const auto known = [](const std::string& t) { return t.empty() ? std::string("unknown") : t; };
    std::printf("CUDA versions: driver %s, runtime %s, cuDNN %s, NCCL %s\n", known(v.driver).c_str(),
                known(v.runtime).c_str(), known(v.cudnn).c_str(), known(v.nccl).c_str());
  }
  if (const std::string comm = gpu_communicator_text(v); !comm.empty())
    std::printf("Several GPUs sum gradients through %s\n", comm.c_str());
  // Runs over several processes (docs/DISTRIBUTED.md): srun and torchrun's variables need nothing more.
  const std::string mpi = mpi_problem();
  std::printf("Several processes: launched by srun or with torchrun-style variables%s%s\n",
              mpi.empty() ? ", or by mpirun (Open MPI)" : "; not by mpirun: ", mpi.c_str());
  return 0;
}

namespace {

// `init` and `export` write a new file: one that exists (a trained checkpoint, the user's weights) is
// replaced only with --overwrite, and only a regular file ever is: a link, a FIFO, a device or a folder is
// refused even then. A temporary file that an interrupted write of `out` left beside it is removed first.
void refuse_to_replace(const std::string& out, const Invocation& inv) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::symlink_status(out, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw ConfigError("--out", out + " is " +
                                   (std::filesystem::is_symlink(status)     ? "a symbolic link"
                                    : std::filesystem::is_directory(status) ? "a folder"
                                    : std::filesystem::is_fifo(status)      ? "a FIFO"
                                                                            : "a device or socket") +
                                   ", not a regular file; " + inv.command +
                                   " does not replace it, even with --overwrite: choose another --out");
  for (const auto& stale : remove_stale_temp_files_of(out))
    std::cerr << "unet-train: removed " << stale.string() << ", left by an interrupted write\n";
  if (inv.overwrite || !std::filesystem::exists(status)) return;
  throw ConfigError("--out",
                    out + " exists; " + inv.command +
                        " does not replace a file unasked: choose another --out, or add --overwrite");
}

}  // namespace

int init(const Invocation& inv) {
  if (!inv.out) throw ConfigError("--out", "init needs --out CKPT, the checkpoint file to write");
  refuse_to_replace(*inv.out, inv);
  const Config config = load_config(inv);
  Checkpoint c;
  c.config = config;
  c.parameters = UNet::initial_slab(config.model, config.train.seed);
  // A full checkpoint at step 0: resuming from it is the same as starting afresh with this seed.
  if (config.optimizer.kind == "sgd") {
    if (config.optimizer.momentum != 0) c.sgd_momentum.assign(c.parameters.size(), 0.0f);
  } else {
    c.adam_m.assign(c.parameters.size(), 0.0f);
    c.adam_v.assign(c.parameters.size(), 0.0f);
  }
  save_checkpoint(*inv.out, c, CheckpointKind::full);
  CountingAllocator shapes_only("init", 0);
  std::printf("wrote %s: %s parameters, initialised from train.seed %llu\n", printable(*inv.out).c_str(),
              with_commas(UNet(config.model, shapes_only).parameter_count()).c_str(),
              static_cast<unsigned long long>(config.train.seed));
  return 0;
}

}  // namespace unet::cli

namespace unet::cli {

int export_model(const Invocation& inv) {
  const std::string format = inv.format.value_or("safetensors");
  if (format != "safetensors" && format != "onnx")
    throw ConfigError("--format", "export writes safetensors or onnx, got '" + format + "'");
  if (!inv.checkpoint)
    throw ConfigError("--checkpoint", "export needs --checkpoint CKPT, the checkpoint to read");
  if (!inv.out)
    throw ConfigError("--out", "export needs --out FILE, the " +
                                   std::string(format == "onnx" ? "ONNX model" : "weights file") +
                                   " to write");
  std::error_code ec;
  if (std::filesystem::equivalent(*inv.checkpoint, *inv.out, ec))
    throw ConfigError(
        "--out",
        *inv.out + " is the checkpoint being exported (--checkpoint " + *inv.checkpoint + "): " +
            (format == "onnx" ? "the ONNX model would replace it" : "its optimizer state would be lost") +
            "; choose another file");
  refuse_to_replace(*inv.out, inv);
  const Checkpoint c = load_checkpoint(*inv.checkpoint);
  if (format == "onnx") {
    export_onnx(c, *inv.out, {.source = std::filesystem::path(*inv.checkpoint).filename().string()});
    const UNetSpec& m = c.config.model;
    std::printf(
        "wrote %s: the model of %s at step %lld as ONNX (opset %lld): input %s float32 [N, %d, H, W] "
        "of values 0..255, output %s [N, %d, H, W]; H and W divisible by %lld\n",
        printable(*inv.out).c_str(), printable(*inv.checkpoint).c_str(),
        static_cast<long long>(c.position.step), static_cast<long long>(kOnnxOpset),
        std::string(kOnnxInputName).c_str(), m.in_channels, std::string(kOnnxOutputName).c_str(), m.classes,
        static_cast<long long>(m.size_multiple()));
    return 0;
  }
  save_checkpoint(*inv.out, c, CheckpointKind::weights_only);
  std::printf("wrote %s: the weights of %s at step %lld, without optimizer state\n",
              printable(*inv.out).c_str(), printable(*inv.checkpoint).c_str(),
              static_cast<long long>(c.position.step));
  return 0;
}

}  // namespace unet::cli

namespace unet::cli {

namespace {

enum class OutputKind { probability, mask };

// A number from a flag's text: all of it, finite; ConfigError naming the flag and the text otherwise.
double number_flag(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v) ||
      std::isspace(static_cast<unsigned char>(text.front())))
    throw ConfigError(flag, "must be a number, got '" + text + "'");
  return v;
}

// --tile N or --tile HxW: whole numbers of pixels.
std::pair<std::int64_t, std::int64_t> tile_flag(const std::string& text) {
  const auto bad = [&] {
    return ConfigError("--tile", "must be N or HxW pixels, such as 256 or 256x512, got '" + text + "'");
  };
  const auto parse_side = [&](std::string_view digits) {
    if (digits.empty() || digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      throw bad();
    return static_cast<std::int64_t>(std::stoll(std::string(digits)));
  };
  const std::size_t x = text.find('x');
  if (x == std::string::npos) {
    const std::int64_t side = parse_side(text);
    return {side, side};
  }
  return {parse_side(std::string_view(text).substr(0, x)), parse_side(std::string_view(text).substr(x + 1))};
}

// predict's options from its flags, checked against the model; errors name the flag and its value.
PredictOptions predict_options(const Invocation& inv, const Config& config) {
  PredictOptions o;
  if (inv.mode) o.mode = predict_mode_from_string(*inv.mode, "--mode");
  if (inv.tile) std::tie(o.tile_height, o.tile_width) = tile_flag(*inv.tile);
  if (inv.overlap) o.overlap = number_flag("--overlap", *inv.overlap);
  if (inv.blend) {
    if (*inv.blend != "gaussian" && *inv.blend != "uniform")
      throw ConfigError("--blend", "must be one of gaussian, uniform, got '" + *inv.blend + "'");
    o.gaussian = *inv.blend == "gaussian";
  }
  if (inv.padding) o.padding = predict_padding_from_string(*inv.padding, "--padding");
  if (inv.tta) o.augmentation = predict_augmentation_from_string(*inv.tta, "--tta");
  o.batch = std::clamp<std::int64_t>(config.train.batch_size, 1, 4096);
  // Tiling flags mean nothing to a resize: refused rather than ignored.
  if (o.mode == PredictMode::resize || o.mode == PredictMode::whole)
    for (const auto& [flag, given] :
         {std::pair{"--tile", inv.tile.has_value()}, std::pair{"--overlap", inv.overlap.has_value()},
          std::pair{"--blend", inv.blend.has_value()}})
      if (given)
        throw ConfigError(flag, std::string("applies to tiles; --mode ") + to_string(o.mode) + " makes none");
  if (o.mode == PredictMode::resize && inv.padding)
    throw ConfigError("--padding", "--mode resize pads nothing (it resizes the image to data.image_size)");
  try {
    validate(o, config.model);
  } catch (const ConfigError& e) {
    throw ConfigError("--" + e.key(), e.message().substr(e.key().size() + 2));
  }
  return o;
}

std::string size_text(std::int64_t height, std::int64_t width) {
  return std::to_string(width) + "x" + std::to_string(height);
}

}  // namespace

namespace {

// The config keys predict reads: the device, the model inputs per forward pass, the size images are resized
// to (and tiles default to), the device's cap (what its memory plan is checked against), and the GPU's
// numerics. Any other --set would change nothing (predict computes in fp32 whatever precision says) or
// describe weights the checkpoint does not hold (model.*): refused, naming the key, rather than accepted and
// ignored.
void refuse_unread_by_predict(std::string_view assignment) {
  static constexpr std::string_view kRead[] = {
      "devices",   "train.batch_size",   "data.image_size",      "memory.cap_mib",
      "cuda.tf32", "cuda.deterministic", "cuda.expandable_arena"};
  const std::string key = override_key(assignment);
  if (std::find(std::begin(kRead), std::end(kRead), key) != std::end(kRead)) return;
  const std::string why =
      key.starts_with("model.")
          ? "predict runs the checkpoint's model, whose weights it holds, and cannot change it"
          : "does not affect predict (it computes in fp32 on the first device)";
  throw ConfigError(key, why +
                             "; predict takes --set devices, train.batch_size, data.image_size, "
                             "memory.cap_mib and cuda.tf32/deterministic/expandable_arena");
}

}  // namespace

int predict(const Invocation& inv) {
  if (!inv.checkpoint) throw ConfigError("--checkpoint", "predict needs --checkpoint CKPT, the model to use");
  if (!inv.input) throw ConfigError("--input", "predict needs --input DIR, a folder of images");
  if (!inv.output) throw ConfigError("--output", "predict needs --output DIR, where the images go");
  OutputKind kind = OutputKind::probability;
  if (inv.output_kind) {
    if (*inv.output_kind != "probability" && *inv.output_kind != "mask")
      throw ConfigError("--output-kind", "must be one of probability, mask, got '" + *inv.output_kind + "'");
    kind = *inv.output_kind == "mask" ? OutputKind::mask : OutputKind::probability;
  }
  double threshold = 0.5;
  if (inv.threshold) {
    threshold = number_flag("--threshold", *inv.threshold);
    if (kind != OutputKind::mask)
      throw ConfigError("--threshold",
                        "applies to --output-kind mask; probability images are not thresholded");
    if (!(threshold >= 0 && threshold <= 1))
      throw ConfigError("--threshold", "must be in 0..1, got " + *inv.threshold);
  }
  const std::filesystem::path input = *inv.input, output = *inv.output;
  std::error_code ec;
  if (!std::filesystem::is_directory(input, ec))
    throw ConfigError("--input", input.string() + " is not a folder");
  // The inputs' folder (by any path that leads to it) never takes the outputs: they would replace or mingle
  // with the user's images.
  if (std::filesystem::equivalent(input, output, ec))
    throw ConfigError("--output", output.string() + " is the input folder " + input.string() +
                                      ": the outputs would replace the images; choose another folder");
  Checkpoint checkpoint = load_checkpoint(*inv.checkpoint);
  // The device: cpu:0 unless --set devices=[...] names one (its first is used).
  DeviceId device;
  if (!inv.overrides.empty()) {
    nlohmann::json doc = config_to_json(checkpoint.config);
    for (const std::string& assignment : inv.overrides) {
      apply_override(doc, assignment);  // an unknown key or a bad value is refused as in training
      refuse_unread_by_predict(assignment);
    }
    checkpoint.config = config_from_json(doc, checkpoint.config.base_dir);
    device = parse_device_id(checkpoint.config.devices.front());
  }
  const PredictOptions options = predict_options(inv, checkpoint.config);
  const std::int64_t channels = checkpoint.config.model.classes;
  if (inv.threshold && channels > 1)
    throw ConfigError("--threshold", "the model has " + std::to_string(channels) +
                                         " classes: its mask is the most probable class, with no threshold");

  std::vector<std::filesystem::path> files;
  // Folders are not inputs; anything else is, so that a FIFO, a device or a broken link is named and skipped
  // below (read_image refuses it without reading or waiting on it) instead of vanishing silently.
  for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
    std::error_code file_kind;
    if (entry.path().filename().string().front() != '.' && !entry.is_directory(file_kind))
      files.push_back(entry.path());
  }
  if (ec) throw Error(ErrorKind::io, "cannot list " + input.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw Error(ErrorKind::data, input.string() + ": no image files in the folder, nothing to predict");

  // Output names: the input's stem, or its whole name when two inputs share a stem (a.png and a.jpg); then
  // _class<k> (a probability image of a multi-class model) or _mask.
  std::map<std::string, int> stems;
  for (const auto& f : files) ++stems[f.stem().string()];
  auto output_name = [&](const std::filesystem::path& f, std::int64_t channel) {
    std::string base = stems[f.stem().string()] > 1 ? f.filename().string() : f.stem().string();
    if (kind == OutputKind::mask)
      base += "_mask";
    else if (channels > 1)
      base += "_class" + std::to_string(channel);
    return output / (base + ".png");
  };
  // The channels written: binary models give the foreground's probability; multi-class ones a map per class
  // but the background; a mask is one image.
  const std::int64_t first_channel = kind == OutputKind::mask || channels == 1 ? 0 : 1;
  const std::int64_t end_channel = kind == OutputKind::mask ? 1 : channels;
  // No output may replace an input (whatever path, link or hard link leads to it: inputs are known by device
  // and inode, one stat each, so that thousands of inputs cost thousands of checks, not millions), nor
  // another output (x.png and x.jpg are written as x.png.png and x.jpg.png, which an input x.png.png would
  // also be), nor an existing file without --overwrite.
  std::map<std::pair<dev_t, ino_t>, std::size_t> input_at;
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat st {};
    if (::stat(files[i].c_str(), &st) == 0) input_at.emplace(std::pair{st.st_dev, st.st_ino}, i);
  }
  std::map<std::filesystem::path, std::size_t> written_by;
  std::vector<std::string> existing;
  for (std::size_t i = 0; i < files.size(); ++i)
    for (std::int64_t k = first_channel; k < end_channel; ++k) {
      const std::filesystem::path target = output_name(files[i], k);
      if (const auto [at, fresh] = written_by.emplace(target, i); !fresh)
        throw Error(ErrorKind::data,
                    input.string() + ": " + files[at->second].filename().string() + " and " +
                        files[i].filename().string() + " would both be written as " +
                        target.filename().string(),
                    {}, "rename one of them, or predict them into separate --output folders");
      struct stat st {};
      if (::stat(target.c_str(), &st) == 0)
        if (const auto in = input_at.find({st.st_dev, st.st_ino}); in != input_at.end())
          throw ConfigError("--output", output.string() + ": " + target.filename().string() +
                                            " would replace the input " + files[in->second].string() +
                                            "; choose an --output folder that holds no input");
      std::error_code exists_error;
      if (std::filesystem::exists(std::filesystem::symlink_status(target, exists_error)))
        existing.push_back(target.string());
    }
  if (!existing.empty() && !inv.overwrite)
    throw ConfigError("--output", existing.front() + " exists" +
                                      (existing.size() > 1 ? " (and " + std::to_string(existing.size() - 1) +
                                                                 " more of the outputs)"
                                                           : "") +
                                      "; give --overwrite to replace, or choose another --output folder");
  std::filesystem::create_directories(output, ec);
  if (ec) throw Error(ErrorKind::io, "cannot create " + output.string() + ": " + ec.message());

  Predictor predictor(checkpoint, device);
  const DataConfig& data = checkpoint.config.data;
  // What is kept of an image until its last row: its 8-bit outputs (a byte per image written per pixel).
  // The float probabilities are never held whole: they come a row at a time (Predictor::predict_rows).
  const std::int64_t output_bytes_per_pixel = end_channel - first_channel;
  // An image that does not fit: the message names it and the figures; the flags that would make it fit
  // follow, each tried against the plan (a tile halved until it fits, a smaller batch, masks).
  auto refusal = [&](const std::string& name, const Image& image, const PredictMemory& memory) {
    std::vector<std::string> fixes;
    auto fits = [&](const PredictOptions& o, std::int64_t bytes_per_pixel) {
      return predictor.memory_for(image.height, image.width, o, bytes_per_pixel).fits();
    };
    const std::int64_t multiple = checkpoint.config.model.size_multiple();
    if (memory.mode == PredictMode::tiled || memory.mode == PredictMode::whole) {
      PredictOptions smaller = options;
      smaller.mode = PredictMode::tiled;
      std::int64_t th = memory.input_height, tw = memory.input_width;
      while (th > multiple || tw > multiple) {
        th = std::max(multiple, th / 2 / multiple * multiple);
        tw = std::max(multiple, tw / 2 / multiple * multiple);
        smaller.tile_height = th;
        smaller.tile_width = tw;
        if (fits(smaller, output_bytes_per_pixel)) {
          fixes.push_back((memory.mode == PredictMode::whole ? "--mode tiled --tile " : "--tile ") +
                          (th == tw ? std::to_string(th) : std::to_string(th) + "x" + std::to_string(tw)));
          break;
        }
      }
    }
    for (std::int64_t batch = memory.batch / 2; batch >= 1; batch /= 2) {
      PredictOptions fewer = options;
      fewer.batch = batch;
      if (fits(fewer, output_bytes_per_pixel)) {
        fixes.push_back("--set train.batch_size=" + std::to_string(batch));
        break;
      }
    }
    if (kind == OutputKind::probability && output_bytes_per_pixel > 1 && fits(options, 1))
      fixes.push_back("--output-kind mask");
    std::string text = memory.shortfall(name);
    if (fixes.empty()) {
      text +=
          "; a smaller --tile, a smaller --set train.batch_size or --output-kind mask alone would not "
          "make it fit: free memory, or predict it on a larger device";
    } else {
      text += "; it fits with ";
      for (std::size_t f = 0; f < fixes.size(); ++f)
        text += (f == 0 ? "" : f + 1 == fixes.size() ? " or " : ", ") + fixes[f];
    }
    return text;
  };

  const auto chunk = static_cast<std::size_t>(options.batch);
  int written = 0, failed = 0, unwritten = 0;
  for (std::size_t first = 0; first < files.size(); first += chunk) {
    std::vector<Image> images;
    std::vector<std::string> names;
    std::vector<std::size_t> sources;  // indices into files
    for (std::size_t i = first; i < std::min(files.size(), first + chunk); ++i) {
      try {
        Image image = read_image(files[i]);
        // One the model cannot take (its channels) is skipped here, not left to fail the whole batch.
        convert_channels(image, checkpoint.config.model.in_channels, files[i].string());
        // Nor one that would not fit in memory: planned before it runs, refused with what would fit.
        if (const PredictMemory memory =
                predictor.memory_for(image.height, image.width, options, output_bytes_per_pixel);
            !memory.fits())
          throw Error(ErrorKind::out_of_memory, refusal(files[i].string(), image, memory));
        images.push_back(std::move(image));
        names.push_back(files[i].string());
        sources.push_back(i);
      } catch (const Error& e) {
        std::fprintf(stderr, "unet-train: skipped %s\n", printable(e.what()).c_str());
        ++failed;
      }
    }
    if (images.empty()) continue;
    PredictControl control;
    std::size_t finished = 0;  // of `images`, the first ones
    control.on_image = [&](const PredictProgress& progress) {
      finished = progress.image + 1;
      const Image& image = images[progress.image];
      std::string how;
      if (progress.mode == PredictMode::resize)
        how = "resized to " + size_text(data.image_height, data.image_width);
      else if (progress.mode == PredictMode::whole)
        how = "whole";
      else
        how = "in " + std::to_string(progress.tiles) + (progress.tiles == 1 ? " tile" : " tiles");
      if (options.augmentation == PredictAugmentation::flips) how += ", 4 flips each";
      const std::size_t index = sources[progress.image];
      std::fprintf(stderr, "[%zu/%zu] %s %s %s\n", index + 1, files.size(),
                   printable(files[index].filename().string()).c_str(),
                   size_text(image.height, image.width).c_str(), how.c_str());
    };
    // Each image's 8-bit outputs, filled a row at a time and written after its last row.
    std::vector<Image> outputs;
    PredictionSink sink;
    sink.bytes_per_pixel = output_bytes_per_pixel;
    sink.row = [&](const PredictionRow& row) {
      if (row.row == 0)
        outputs.assign(static_cast<std::size_t>(end_channel - first_channel),
                       Image{row.height, row.width, 1,
                             std::vector<std::uint8_t>(static_cast<std::size_t>(row.height * row.width))});
      for (std::int64_t k = first_channel; k < end_channel; ++k) {
        Image& out = outputs[static_cast<std::size_t>(k - first_channel)];
        const std::span<std::uint8_t> line(out.pixels.data() + row.row * row.width,
                                           static_cast<std::size_t>(row.width));
        if (kind == OutputKind::mask)
          mask_row(row, threshold, line);
        else
          probability_row(row, k, line);
      }
      if (row.row + 1 < row.height) return;
      for (std::int64_t k = first_channel; k < end_channel; ++k) {
        try {
          write_png(output_name(files[sources[row.image]], k),
                    outputs[static_cast<std::size_t>(k - first_channel)]);
          ++written;
        } catch (const Error& e) {
          std::fprintf(stderr, "unet-train: not written: %s\n", printable(e.what()).c_str());
          ++unwritten;
        }
      }
      outputs.clear();
    };
    try {
      predictor.predict_rows(images, names, options, sink, control);
    } catch (const Error& e) {
      // Each image was planned as it was read; the host's memory can still shrink before or while they run
      // (another process), and an allocation then fails: the images not yet written are named as skipped.
      if (e.kind() != ErrorKind::out_of_memory) throw;
      const std::size_t left = images.size() - finished;
      std::fprintf(stderr, "unet-train: skipped %zu image%s from %s on: %s\n", left, left == 1 ? "" : "s",
                   printable(files[sources[finished]].filename().string()).c_str(),
                   printable(e.what()).c_str());
      failed += static_cast<int>(left);
    }
  }
  const char* what = kind == OutputKind::mask ? "mask" : "probability";
  std::printf("wrote %d %s image%s to %s", written, what, written == 1 ? "" : "s",
              printable(output.string()).c_str());
  if (failed) std::printf("; %d file%s skipped", failed, failed == 1 ? "" : "s");
  if (unwritten) std::printf("; %d image%s not written", unwritten, unwritten == 1 ? "" : "s");
  std::printf("\n");
  return failed || unwritten ? 1 : 0;
}

}  // namespace unet::cli

namespace unet::cli {
namespace {

nlohmann::json by_category_json(const CategoryBytes& bytes) {
  nlohmann::json j = nlohmann::json::object();
  for (int k = 0; k < memory_category_count; ++k)
    j[std::string(to_string(static_cast<MemoryCategory>(k)))] = bytes[static_cast<std::size_t>(k)];
  return j;
}

std::string set_flags(const nlohmann::json& changes) {
  std::string flags;
  for (const auto& [key, value] : changes.items()) {
    const std::string v = value.is_string() ? value.get<std::string>() : value.dump();
    flags += (flags.empty() ? "" : " ") + std::string("--set ") + (value.is_array() ? "'" : "") + key + "=" +
             v + (value.is_array() ? "'" : "");
  }
  return flags;
}

}  // namespace

int estimate(const Invocation& inv) {
  const Config config = load_config(inv);
  const MemoryPlan plan = plan_memory(config);
  const std::vector<Remedy> remedies = plan.fits ? std::vector<Remedy>{} : rank_remedies(config, &plan);
  if (inv.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DevicePlan& d : plan.devices)
      devices.push_back(
          {{"device", d.device},
           {"name", d.name},
           {"batch", d.batch},
           {"capacity_bytes", d.capacity},
           {"peak_bytes", d.peak},
           {"peak_reserved_bytes", d.peak_reserved},
           // null until a run on this GPU (model, versions, precision) measured it
           {"overhead_bytes", d.overhead >= 0 ? nlohmann::json(d.overhead) : nlohmann::json()},
           {"device_peak_bytes", d.device_peak >= 0 ? nlohmann::json(d.device_peak) : nlohmann::json()},
           {"by_category", by_category_json(d.at_peak)},
           {"fits", d.fits}});
    nlohmann::json list = nlohmann::json::array();
    for (const Remedy& r : remedies) {
      nlohmann::json peaks = nlohmann::json::array();
      for (const DevicePlan& d : r.plan.devices)
        peaks.push_back({{"device", d.device}, {"peak_bytes", d.peak}, {"fits", d.fits}});
      list.push_back({{"name", r.name},
                      {"description", r.description},
                      {"changes", r.changes},
                      {"changes_model", r.changes_model},
                      {"fits", r.plan.fits},
                      {"devices", peaks}});
    }
    std::cout << nlohmann::json{{"devices", devices},
                                {"fits", plan.fits},
                                {"remedies", list},
                                {"seconds", plan.seconds}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::printf("%-8s %-28s %6s %12s %12s %12s  %s\n", "device", "name", "batch", "capacity", "peak",
              "reserved", "fits");
  for (const DevicePlan& d : plan.devices) {
    std::printf("%-8s %-28.28s %6lld %12s %12s %12s  %s\n", d.device.c_str(), d.name.c_str(),
                static_cast<long long>(d.batch), format_bytes(d.capacity).c_str(),
                format_bytes(d.peak).c_str(), format_bytes(d.peak_reserved).c_str(), d.fits ? "yes" : "NO");
    std::string parts;
    for (int k = 0; k < memory_category_count; ++k) {
      const std::int64_t b = d.at_peak[static_cast<std::size_t>(k)];
      if (b == 0) continue;
      parts += (parts.empty() ? "" : ", ") + std::string(to_string(static_cast<MemoryCategory>(k))) + " " +
               format_bytes(b);
    }
    std::printf("         at the peak: %s\n", parts.c_str());
    if (d.overhead > 0)
      std::printf("         on the device: %s (reserved + runtime overhead %s, measured %s)\n",
                  format_bytes(d.device_peak).c_str(), format_bytes(d.overhead).c_str(),
                  d.overhead_measured.c_str());
    else if (d.overhead < 0)
      std::printf(
          "         runtime overhead: not measured yet (CUDA context, cuDNN: the first run on this GPU "
          "measures it; the device will show more than reserved)\n");
  }
  std::printf("planned in %.0f ms\n", plan.seconds * 1e3);
  if (!plan.fits) {
    std::printf("\ndoes not fit; what would, best first:\n");
    for (const Remedy& r : remedies) {
      std::int64_t worst = 0;
      for (const DevicePlan& d : r.plan.devices) worst = std::max(worst, d.peak);
      std::printf("  %-3s %-26s peak %-11s %s\n      %s\n", r.plan.fits ? "ok" : "no", r.name.c_str(),
                  format_bytes(worst).c_str(), r.description.c_str(), set_flags(r.changes).c_str());
    }
  }
  return 0;
}

int fit(const Invocation& inv) {
  const Config config = load_config(inv);
  const BatchFit result = fit_batch(config);
  if (inv.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : result.devices)
      devices.push_back({{"device", d.device}, {"max_batch", d.max_batch}});
    std::cout << nlohmann::json{{"global_batch", result.global_batch}, {"devices", devices}}.dump(2) << "\n";
  } else {
    std::printf("largest global batch that fits: %lld (train.batch_size, without accumulation)\n",
                static_cast<long long>(result.global_batch));
    for (const auto& d : result.devices)
      std::printf("  %-8s alone: %lld\n", d.device.c_str(), static_cast<long long>(d.max_batch));
  }
  // Nothing fits: a failure a script must not take for an answer.
  if (result.global_batch == 0) {
    std::fprintf(
        stderr,
        "unet-train: not even a batch of 1 fits; `unet-train estimate --set train.batch_size=1` shows "
        "what would (a smaller model, mixed precision, activation checkpointing, more memory)\n");
    return 1;
  }
  return 0;
}

}  // namespace unet::cli
