#include "cli/rank_log.h"

#include <unistd.h>
#include <cmath>

#include <ctime>
#include <system_error>

#include "unet/core/error.h"
#include "unet/core/number_text.h"

namespace unet::cli {

RankLog::RankLog(const std::filesystem::path& file, int rank) : rank_(rank) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  out_.open(file, std::ios::app);
  if (!out_)
    throw Error(ErrorKind::io, file.string() + ": cannot write rank " + std::to_string(rank) + "'s log");
  line("rank " + std::to_string(rank) + " joined (pid " + std::to_string(::getpid()) + ")");
}

void RankLog::on_start(const RunInfo& i) {
  std::string devices;
  for (std::size_t r = 0; r < i.devices.size(); ++r)
    devices += (r ? ", " : "") + i.devices[r].id + " (" + std::to_string(i.device_batch.at(r)) + " per step)";
  line("training on " + devices + "; " + std::to_string(i.total_steps) + " steps");
  started_ = true;
}

void RankLog::on_step(const StepReport& r) {
  if (r.step % 100 == 0 || r.step == r.total_steps)
    line("step " + std::to_string(r.step) + "/" + std::to_string(r.total_steps) + " loss " +
         number_text(r.loss));
}

void RankLog::on_epoch(const EpochReport& r) {
  // Absent metrics (NaN) as "—", as the progress lines show them.
  const auto shown = [](double v) { return std::isfinite(v) ? number_text(v) : std::string("\u2014"); };
  line("epoch " + std::to_string(r.epoch) + " val_loss " + shown(r.val_loss) + " val_iou " +
       shown(r.val_iou));
}

void RankLog::on_log(LogLevel level, const std::string& message) {
  line((level == LogLevel::info ? "" : "warning: ") + message);
}

void RankLog::on_state(TrainerState s) {
  if (s == TrainerState::stopped || s == TrainerState::finished) line(to_string(s));
}

void RankLog::line(const std::string& text) {
  const std::time_t now = std::time(nullptr);
  char stamp[32] = "";
  std::strftime(stamp, sizeof stamp, "%FT%TZ", std::gmtime(&now));
  out_ << stamp << " rank " << rank_ << ": " << text << '\n' << std::flush;
}

}  // namespace unet::cli
