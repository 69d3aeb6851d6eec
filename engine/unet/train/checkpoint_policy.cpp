#include "unet/train/checkpoint_policy.h"

#include <cmath>
#include <cstdio>

#include "unet/core/error.h"
#include "unet/train/lr_schedule.h"
#include "unet/train/run_folder.h"

namespace unet {

namespace {
// Whether `value` of checkpoint.monitor beats `best`: losses fall, the others rise.
bool improves(const Monitor& monitor, double value, const std::optional<double>& best) {
  if (!std::isfinite(value)) return false;
  if (!best) return true;
  return monitor.lower_is_better() ? value < *best : value > *best;
}
}  // namespace

Config config_for_checkpoints(const Config& c, const std::filesystem::path& run_dir) {
  Config saved = c;
  if (!c.data.path.empty())
    saved.data.path = std::filesystem::absolute(c.resolve(c.data.path)).lexically_normal().string();
  if (!c.data.validation_split.empty())
    saved.data.validation_split =
        std::filesystem::absolute(c.resolve(c.data.validation_split)).lexically_normal().string();
  saved.checkpoint.dir = run_dir.string();
  saved.base_dir.clear();
  return saved;
}

CheckpointPolicy::CheckpointPolicy(const CheckpointConfig& config, std::filesystem::path run_dir,
                                   bool resumed, std::int64_t step, TrainerObserver& out)
    : config_(config),
      monitor_(config.monitor, config.monitor_class),
      run_dir_(std::move(run_dir)),
      out_(out) {
  std::vector<std::filesystem::path> periodic;
  if (resumed) periodic = find_earlier_checkpoints();
  if (const auto last = run_dir_ / kLastCheckpointName; step > 0 && std::filesystem::exists(last)) {
    try {
      const TrainingPosition at = inspect_checkpoint(last).position;
      last_saved_ = {last, at.step};
      found_at_start_.push_back(report_of(last, "last", at.step, at.epoch, at.metrics));
    } catch (const Error&) {
      // A damaged file is no place to resume from; a divergence then says that none was saved.
    }
  }
  writer_ = std::make_unique<CheckpointWriter>(config_.keep_last, std::move(periodic));
}

CheckpointPolicy::~CheckpointPolicy() = default;

std::vector<std::filesystem::path> CheckpointPolicy::find_earlier_checkpoints() {
  // The periodic files this run wrote before, from its metrics.jsonl, so that keep_last counts them too: only
  // those it records by name in this folder (run_folder.h). A file the log does not record (a run killed
  // between the save and its record) is never pruned, and a record naming a file elsewhere (a run folder
  // copied from another place, a line edited by hand) is never acted on.
  std::vector<std::filesystem::path> periodic;
  const RecordedRunFiles recorded = recorded_run_files(run_dir_);
  for (const std::string& name : recorded.periodic) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(std::filesystem::symlink_status(run_dir_ / name, ec)))
      periodic.push_back(run_dir_ / name);
  }
  for (const std::string& name : recorded.foreign)
    out_.on_log(LogLevel::warning, (run_dir_ / kMetricsFileName).string() + " records the checkpoint " +
                                       name +
                                       ", which is not a file of this run folder: checkpoint.keep_last never "
                                       "removes it");
  // The best value so far, from best.safetensors.
  const std::filesystem::path best_file = run_dir_ / kBestCheckpointName;
  if (std::filesystem::exists(best_file)) {
    try {
      const TrainingPosition at = inspect_checkpoint(best_file).position;
      const nlohmann::json& m = at.metrics;
      if (m.contains(monitor_.key()) && m[monitor_.key()].is_number())
        best_ = m[monitor_.key()].get<double>();
      found_at_start_.push_back(report_of(best_file, "best", at.step, at.epoch, m));
    } catch (const Error& e) {
      out_.on_log(LogLevel::warning, std::string("ignoring ") + best_file.string() + ": " + e.what());
    }
  }
  return periodic;
}

CheckpointReport CheckpointPolicy::report_of(const std::filesystem::path& path, const std::string& reason,
                                             std::int64_t step, std::int64_t epoch,
                                             const nlohmann::json& metrics) const {
  CheckpointReport report{.path = path.string(), .step = step, .epoch = epoch, .reason = reason};
  if (reason == "best") {
    report.monitor = monitor_.describe();
    // A file saved by a run that watched another monitor does not hold this one's value: NaN.
    if (const auto v = metrics.find(monitor_.key()); v != metrics.end() && v->is_number())
      report.monitor_value = v->get<double>();
  }
  return report;
}

CheckpointWriter::Target CheckpointPolicy::requested_at(std::int64_t step) const {
  char name[64];
  std::snprintf(name, sizeof name, "manual-step-%06lld.safetensors", static_cast<long long>(step));
  return {run_dir_ / name, "requested", false};
}

std::vector<CheckpointWriter::Target> CheckpointPolicy::targets_after(const EpochReport& r, bool epoch_end) {
  std::map<std::string, double> known = monitored_metrics(r);
  const double value = monitor_.value(r);
  // An absent metric (NaN) is never an improvement.
  const bool improved = improves(monitor_, value, best_);
  // A name is never made of an absent metric ("unet-01-nan"): without it the name fails below.
  std::erase_if(known, [](const auto& m) { return !std::isfinite(m.second); });
  std::vector<CheckpointWriter::Target> targets;
  if (epoch_end && config_.every_epochs > 0 && r.epoch % config_.every_epochs == 0 &&
      (!config_.save_best_only || improved)) {
    // Metrics a template names but validation could not give (absent: no labelled pixel, no class present)
    // make the name fail: then the periodic file is skipped with a warning, and last/best still go.
    try {
      targets.push_back({run_dir_ / format_checkpoint_name(config_.filename_template, r.epoch, r.step, known),
                         "periodic", true});
    } catch (const Error& e) {
      out_.on_log(LogLevel::warning, std::string("periodic checkpoint skipped: ") + e.what());
    }
  }
  if (improved) {
    best_ = value;
    targets.push_back({run_dir_ / kBestCheckpointName, "best", false});
  }
  if (epoch_end) {
    targets.push_back({run_dir_ / kLastCheckpointName, "last", false});
    mark_last_written(r.step);
  }
  return targets;
}

void CheckpointPolicy::submit(Checkpoint checkpoint, std::vector<CheckpointWriter::Target> targets) {
  writer_->submit(std::move(checkpoint), std::move(targets));
}

void CheckpointPolicy::finish_saves() {
  writer_->wait_idle();
  report_saves();
}

void CheckpointPolicy::report_saves() {
  for (const CheckpointWriter::Result& r : writer_->collect()) {
    if (!r.error && r.reason == "last") last_saved_ = {r.path, r.step};
    if (!r.error) {
      unsaved_.erase(r.path);
      out_.on_checkpoint(report_of(r.path, r.reason, r.step, r.epoch, r.metrics));
      for (const auto& p : r.pruned)
        out_.on_log(LogLevel::info, "removed " + p.string() + " (checkpoint.keep_last)");
      continue;
    }
    std::string message, where;
    try {
      std::rethrow_exception(r.error);
    } catch (const Error& e) {
      message = e.what();
      where = e.location();
    } catch (const std::exception& e) {
      message = e.what();
    }
    unsaved_[r.path] = message;
    out_.on_error({.type = to_string(ErrorKind::io),
                   .device = {},
                   .message = "checkpoint not saved: " + message,
                   .fatal = false,
                   .where = where,
                   .out_of_memory = {}});
    out_.on_log(LogLevel::warning, "checkpoint not saved (training goes on): " + message);
  }
}

std::optional<RunState> CheckpointPolicy::saved_best_at(std::int64_t step) {
  const std::filesystem::path file = run_dir_ / kBestCheckpointName;
  try {
    if (std::filesystem::exists(file)) {
      finish_saves();
      Checkpoint cp = load_checkpoint(file);
      if (cp.position.step == step) return std::move(static_cast<RunState&>(cp));
    }
  } catch (const Error& e) {
    out_.on_log(LogLevel::warning, "cannot read " + file.string() + ": " + e.what());
  }
  return std::nullopt;
}

void CheckpointPolicy::throw_unsaved(std::int64_t step) const {
  std::string list;
  for (const auto& [path, reason] : unsaved_) {
    // The reason names the file already when it comes from the file system.
    list += (list.empty() ? "" : "; ") +
            (reason.find(path.string()) == std::string::npos ? path.string() + ": " + reason : reason);
  }
  const std::filesystem::path last = run_dir_ / kLastCheckpointName;
  throw Error(
      ErrorKind::io,
      "training reached step " + std::to_string(step) + ", but " + std::to_string(unsaved_.size()) +
          " checkpoint" + (unsaved_.size() == 1 ? " was" : "s were") + " not saved: " + list,
      {},
      unsaved_.contains(last)
          ? "the run's last state is lost; fix the cause and train again, or resume from a checkpoint "
            "that was saved"
          : "fix the cause; " + last.string() + " holds the run's end");
}

}  // namespace unet
