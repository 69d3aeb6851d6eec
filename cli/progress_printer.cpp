#include "cli/progress_printer.h"

#include <unistd.h>
#include <cmath>

#include <cstdio>
#include <string_view>

#include "cli/text.h"

namespace unet::cli {
namespace {

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

}  // namespace

ProgressPrinter::ProgressPrinter() : tty_(isatty(STDOUT_FILENO) != 0) {}

void ProgressPrinter::on_start(const RunInfo& i) {
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

void ProgressPrinter::on_step(const StepReport& r) {
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
  std::printf("%sepoch %lld/%lld  step %lld/%lld  loss %.4f  %.1f img/s%s  ETA %s%s", tty_ ? "\r\033[K" : "",
              static_cast<long long>(r.epoch) + 1, static_cast<long long>(epochs_),
              static_cast<long long>(r.step), static_cast<long long>(r.total_steps), r.loss, r.img_per_s_avg,
              scaling, duration(r.eta_seconds).c_str(), tty_ ? "" : "\n");
  std::fflush(stdout);
}

void ProgressPrinter::on_epoch(const EpochReport& r) {
  std::string metrics = "val_loss " + metric_cell(r.val_loss) + "  val_iou " + metric_cell(r.val_iou) +
                        "  val_dice " + metric_cell(r.val_dice) + "  val_acc " + metric_cell(r.val_acc);
  // task instances: the objects' scores, at the thresholds this validation chose.
  if (r.objects)
    metrics += "  val_dsb " + metric_cell(r.val_dsb) + "  val_f1 " + metric_cell(r.val_f1) + "  val_pq " +
               metric_cell(r.val_pq) + "  merges " + std::to_string(r.val_merges) + "  splits " +
               std::to_string(r.val_splits);
  if (r.within_epoch)
    std::printf("%sstep %lld, epoch %lld/%lld under way: loss %s  %s\n", tty_ ? "\r\033[K" : "",
                static_cast<long long>(r.step), static_cast<long long>(r.epoch),
                static_cast<long long>(epochs_), metric_cell(r.loss).c_str(), metrics.c_str());
  else
    std::printf("%sepoch %lld/%lld: loss %s  %s  (%s)\n", tty_ ? "\r\033[K" : "",
                static_cast<long long>(r.epoch), static_cast<long long>(epochs_), metric_cell(r.loss).c_str(),
                metrics.c_str(), duration(r.seconds).c_str());
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

void ProgressPrinter::on_checkpoint(const CheckpointReport& r) {
  std::printf("%ssaved %s (step %lld, %s)\n", tty_ ? "\r\033[K" : "", printable(r.path).c_str(),
              static_cast<long long>(r.step), r.reason.c_str());
  std::fflush(stdout);
}

void ProgressPrinter::on_log(LogLevel level, const std::string& message) {
  // A message of several lines (the data folder's report) is printed as lines, each with the prefix and
  // escaped on its own.
  std::string_view rest = message;
  bool first = true;
  do {
    const std::size_t end = rest.find('\n');
    std::fprintf(stderr, "%sunet-train: %s%s\n", first && tty_ ? "\r\033[K" : "",
                 first && level != LogLevel::info ? "warning: " : "", printable(rest.substr(0, end)).c_str());
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    first = false;
  } while (!rest.empty());
}

void ProgressPrinter::on_error(const ErrorReport& e) {
  // Fatal ones end the run and are printed by main(); the others come as on_log warnings too.
  if (!e.out_of_memory || !e.fatal) return;
  // Promise a checkpoint only where there is one: a fresh run that fails at once has none.
  const OutOfMemoryReport& oom = *e.out_of_memory;
  const std::string what =
      oom.planned
          ? "does not fit " + e.device + " (the memory plan, before step " + std::to_string(oom.step) + ")"
          : "out of memory on " + e.device + " at step " + std::to_string(oom.step);
  const std::string then = oom.resume_from.empty()
                               ? "no checkpoint of this run was saved; start it again with a remedy"
                               : "resume " + oom.resume_from + " with a remedy";
  std::printf("%s%s; %s.\n", tty_ ? "\r\033[K" : "", what.c_str(), then.c_str());
  // The ones that fit come first (the planner ranks them so); the others apart, with how far they miss.
  const std::vector<RemedyReport>& remedies = oom.remedies;
  const bool any_fits = !remedies.empty() && remedies.front().fits;
  std::printf(any_fits ? "what would fit, best first:\n" : "no remedy alone fits\n");
  bool missing = false;
  for (const RemedyReport& r : remedies) {
    if (!r.fits && !missing) std::printf("would not fit, closest first:\n");
    missing = missing || !r.fits;
    const std::string flags = set_flags(r.changes);
    const std::string miss = r.fits ? "" : " (misses by " + format_bytes(r.shortfall_bytes) + ")";
    std::printf("  %-28s%s%s%s\n", r.name.c_str(), flags.empty() ? "" : " ", flags.c_str(), miss.c_str());
  }
  std::fflush(stdout);
}

void ProgressPrinter::on_state(TrainerState s) {
  if (s == TrainerState::stopped) std::printf("%sstopped\n", tty_ ? "\r\033[K" : "");
}

}  // namespace unet::cli
