#include "unet/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "unet/core/error.h"
#include "unet/core/json_limits.h"
#include "unet/train/run_folder.h"

namespace unet {

namespace {

// Paths and messages are shown text: a byte of a path that is not UTF-8 (a config file's folder, a file the
// error names) is written as U+FFFD rather than failing the record. What must read back exactly, the
// checkpoint's "file", comes from checkpoint.template, which the config keeps UTF-8.
constexpr auto kShownText = nlohmann::json::error_handler_t::replace;
// JSON has no NaN or infinity: a diverged loss is written as null rather than as an invalid line.
nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// Device readings a device cannot give are -1 in the report, null in the file.
nlohmann::json known(double v) {
  return v >= 0 ? number(v) : nlohmann::json(nullptr);
}

nlohmann::json bytes_by_category(const CategoryBytes& bytes) {
  nlohmann::json by_category = nlohmann::json::object();
  for (int i = 0; i < memory_category_count; ++i)
    by_category[std::string(to_string(static_cast<MemoryCategory>(i)))] = bytes[static_cast<std::size_t>(i)];
  return by_category;
}
}  // namespace

MetricsLog::MetricsLog(const std::filesystem::path& file, bool append)
    // open_run_file: never through a link, never in place of a FIFO, a device or a folder (run_folder.h).
    : path_(file),
      fd_(open_run_file(file.parent_path(), file.filename().string(),
                        O_WRONLY | O_CREAT | O_APPEND | (append ? 0 : O_TRUNC), "log")) {
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0)
    throw Error(ErrorKind::io, "cannot read " + file.string() + ": " + std::strerror(errno));
  size_ = st.st_size;
  if (size_ == 0) return;
  // The end of the last whole line: after the last '\n', looked for from the end in blocks.
  UniqueFd reader(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!reader) throw Error(ErrorKind::io, "cannot read " + file.string() + ": " + std::strerror(errno));
  std::int64_t whole = 0;
  char block[4096];
  for (std::int64_t end = size_; end > 0 && whole == 0;) {
    const std::int64_t begin = std::max<std::int64_t>(0, end - static_cast<std::int64_t>(sizeof block));
    const ssize_t n = ::pread(reader.get(), block, static_cast<std::size_t>(end - begin), begin);
    if (n != end - begin)
      throw Error(ErrorKind::io, "cannot read " + file.string() + ": " + std::strerror(n < 0 ? errno : EIO));
    for (ssize_t i = n - 1; i >= 0; --i)
      if (block[i] == '\n') {
        whole = begin + i + 1;
        break;
      }
    end = begin;
  }
  if (whole == size_) return;
  if (::ftruncate(fd_.get(), whole) != 0)
    throw Error(ErrorKind::io,
                "cannot cut the partial last line off " + file.string() + ": " + std::strerror(errno));
  cut_bytes_ = size_ - whole;
  size_ = whole;
}

void MetricsLog::write(const std::string& line) {
  if (failed_) return;
  const std::string record = line + "\n";
  ssize_t n;
  do {
    n = ::write(fd_.get(), record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(record.size())) {
    size_ += n;
    return;
  }
  const int err = n < 0 ? errno : ENOSPC;  // a short write to a regular file: the disk is full
  failed_ = true;
  // Half a record would be glued to the next run's first one: cut it back off.
  if (n > 0 && ::ftruncate(fd_.get(), size_) != 0)
    log_noexcept("cannot cut a partial record off", path_.string() + ": " + std::strerror(errno));
  throw Error(ErrorKind::io, "cannot write " + path_.string() + ": " + std::strerror(err) + " (a record of " +
                                 std::to_string(record.size()) + " bytes)");
}

void MetricsLog::write_start(bool resumed, std::int64_t step, std::int64_t epoch) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char when[32] = "";
  if (::gmtime_r(&now, &utc)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  write(nlohmann::json{{"kind", resumed ? "resume" : "start"},
                       {"step", step},
                       {"epoch", epoch},
                       {"pid", static_cast<std::int64_t>(::getpid())},
                       {"time", when}}
            .dump());
}

void MetricsLog::on_step(const StepReport& r) {
  write(nlohmann::json{{"kind", "step"},
                       {"step", r.step},
                       {"epoch", r.epoch},
                       {"loss", number(r.loss)},
                       {"lr", r.lr},
                       {"grad_norm", number(r.grad_norm)},
                       {"clipped", r.clipped},
                       {"img_per_s", number(r.img_per_s)},
                       {"loss_scale", r.loss_scale},
                       {"skipped", r.skipped},
                       {"skipped_steps", r.skipped_steps},
                       {"data_wait_s", r.data_wait_seconds}}
            .dump());
}

void MetricsLog::on_epoch(const EpochReport& r) {
  nlohmann::json j{{"kind", "epoch"},
                   {"epoch", r.epoch},
                   {"step", r.step},
                   {"loss", number(r.loss)},
                   {"val_loss", number(r.val_loss)},
                   {"val_iou", number(r.val_iou)},
                   {"val_dice", number(r.val_dice)},
                   {"val_acc", number(r.val_acc)},
                   {"seconds", r.seconds}};
  if (!r.val_class_iou.empty()) {
    nlohmann::json iou = nlohmann::json::array(), dice = nlohmann::json::array();
    for (const double v : r.val_class_iou) iou.push_back(number(v));
    for (const double v : r.val_class_dice) dice.push_back(number(v));
    j["val_iou_per_class"] = std::move(iou);
    j["val_dice_per_class"] = std::move(dice);
  }
  if (r.objects) {
    j["val_dsb"] = number(r.val_dsb);
    j["val_f1"] = number(r.val_f1);
    j["val_precision"] = number(r.val_precision);
    j["val_recall"] = number(r.val_recall);
    j["val_pq"] = number(r.val_pq);
    j["val_merges"] = r.val_merges;
    j["val_splits"] = r.val_splits;
    j["val_seed_threshold"] = r.val_seed_threshold;
    j["val_foreground_threshold"] = r.val_foreground_threshold;
  }
  if (!r.early_stop.empty()) j["early_stop"] = r.early_stop;
  if (r.within_epoch) j["within_epoch"] = true;
  write(j.dump());
}

void MetricsLog::on_memory(const MemoryReport& r) {
  write(nlohmann::json{{"kind", "memory"},
                       {"t", r.t},
                       {"device", r.device},
                       {"in_use", r.stats.in_use},
                       {"reserved", r.stats.reserved},
                       {"peak", r.stats.peak_in_use},
                       {"device_used", r.device_used},
                       {"device_total", r.device_total},
                       {"used_by_others", r.used_by_others >= 0 ? nlohmann::json(r.used_by_others) : nullptr},
                       {"others_not_attributable", r.others_not_attributable},
                       {"utilisation_percent", known(r.utilisation_percent)},
                       {"temperature_c", known(r.temperature_celsius)},
                       {"power_w", known(r.power_watts)},
                       {"by_category", bytes_by_category(r.stats.in_use_by)}}
            .dump());
}

void MetricsLog::on_checkpoint(const CheckpointReport& r) {
  write(nlohmann::json{
      // "file": the name in the run folder, what proves the file the run's (run_folder.h); "path" to show.
      {"kind", "checkpoint"},
      {"path", r.path},
      {"file", std::filesystem::path(r.path).filename().string()},
      {"step", r.step},
      {"epoch", r.epoch},
      {"reason", r.reason}}
            .dump(-1, ' ', false, kShownText));
}

void MetricsLog::on_error(const ErrorReport& r) {
  nlohmann::json line{{"kind", "error"},      {"type", r.type},   {"device", r.device},
                      {"message", r.message}, {"fatal", r.fatal}, {"where", r.where}};
  if (const auto& oom = r.out_of_memory) {
    nlohmann::json remedies = nlohmann::json::array();
    for (const RemedyReport& m : oom->remedies)
      remedies.push_back({{"name", m.name},
                          {"description", m.description},
                          {"changes", m.changes},
                          {"changes_model", m.changes_model},
                          {"peak_bytes", m.peak_bytes},
                          {"fits", m.fits},
                          {"shortfall_bytes", m.shortfall_bytes}});
    line["requested_bytes"] = oom->requested_bytes;
    line["category"] = std::string(to_string(oom->category));
    line["capacity_bytes"] = oom->capacity_bytes;
    line["in_use_bytes"] = oom->in_use_bytes;
    line["in_use_by_category"] = bytes_by_category(oom->in_use_by);
    line["step"] = oom->step;
    line["remedies"] = std::move(remedies);
    line["recovered"] = oom->recovered;
    if (oom->recovered) {
      line["batch_size"] = oom->batch_size;
      line["accumulation"] = oom->accumulation;
    }
  }
  write(line.dump(-1, ' ', false, kShownText));
}

RunHistory read_run_history(const std::filesystem::path& file, std::int64_t up_to_step) {
  RunHistory history;
  const auto value = [](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : std::nan("");
  };
  const auto integer = [](const nlohmann::json& j, const char* key) -> std::int64_t {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
  };
  constexpr std::size_t kThroughputWindow = 20;
  const auto record = [&](std::string_view line) {
    // Memory samples are most of the file: skip them before parsing.
    if (line.find(R"("kind":"memory")") != std::string::npos) return;
    nlohmann::json j;
    try {
      j = parse_json_bounded(line, /*allow_exceptions=*/false);
    } catch (const JsonTooDeep&) {
      return;  // no record the trainer writes is more than 3 levels deep
    }
    if (!j.is_object()) return;
    const auto kind = j.find("kind");
    if (kind == j.end() || !kind->is_string()) return;
    const std::int64_t step = integer(j, "step");
    if (step < 0) return;
    if (*kind == "start" || *kind == "resume") {
      // What was logged past this point was lost (a crash, or a resume from an earlier checkpoint).
      const std::int64_t from = *kind == "start" ? 0 : step;
      std::erase_if(history.steps, [&](const StepReport& r) { return r.step > from; });
      std::erase_if(history.epochs, [&](const EpochReport& r) { return r.step > from; });
    } else if (step > up_to_step) {
      return;
    } else if (*kind == "step") {
      StepReport r;
      r.step = step;
      r.epoch = std::max<std::int64_t>(0, integer(j, "epoch"));
      r.loss = value(j, "loss");
      r.lr = value(j, "lr");
      r.grad_norm = value(j, "grad_norm");
      const auto clipped = j.find("clipped");
      r.clipped = clipped != j.end() && clipped->is_boolean() && clipped->get<bool>();
      r.img_per_s = value(j, "img_per_s");
      r.loss_scale = value(j, "loss_scale");
      const auto skipped = j.find("skipped");
      r.skipped = skipped != j.end() && skipped->is_boolean() && skipped->get<bool>();
      r.skipped_steps = std::max<std::int64_t>(0, integer(j, "skipped_steps"));
      r.data_wait_seconds = value(j, "data_wait_s");
      history.steps.push_back(r);
    } else if (*kind == "epoch") {
      EpochReport r;
      r.epoch = std::max<std::int64_t>(0, integer(j, "epoch"));
      r.step = step;
      r.loss = value(j, "loss");
      r.val_loss = value(j, "val_loss");
      r.val_iou = value(j, "val_iou");
      r.val_dice = value(j, "val_dice");
      r.val_acc = value(j, "val_acc");
      r.seconds = value(j, "seconds");
      if (const auto why = j.find("early_stop"); why != j.end() && why->is_string()) r.early_stop = *why;
      const auto within = j.find("within_epoch");
      r.within_epoch = within != j.end() && within->is_boolean() && within->get<bool>();
      const auto per_class = [&](const char* key, std::vector<double>& out) {
        const auto it = j.find(key);
        if (it == j.end() || !it->is_array()) return;
        for (const auto& v : *it) out.push_back(v.is_number() ? v.get<double>() : NAN);
      };
      per_class("val_iou_per_class", r.val_class_iou);
      per_class("val_dice_per_class", r.val_class_dice);
      r.objects = j.contains("val_dsb");
      if (r.objects) {
        r.val_dsb = value(j, "val_dsb");
        r.val_f1 = value(j, "val_f1");
        r.val_precision = value(j, "val_precision");
        r.val_recall = value(j, "val_recall");
        r.val_pq = value(j, "val_pq");
        r.val_merges = std::max<std::int64_t>(0, integer(j, "val_merges"));
        r.val_splits = std::max<std::int64_t>(0, integer(j, "val_splits"));
        r.val_seed_threshold = value(j, "val_seed_threshold");
        r.val_foreground_threshold = value(j, "val_foreground_threshold");
      }
      history.epochs.push_back(r);
    }
  };
  // Lines are read in blocks and one longer than kMaxMetricsRecordBytes is never held whole: a 2 GB line
  // costs what a 1 MiB one does.
  const auto too_long = [&](std::int64_t number, std::int64_t bytes) {
    history.warnings.push_back(file.string() + " line " + std::to_string(number) + ": a record of " +
                               std::to_string(bytes) + " bytes, longer than the " +
                               std::to_string(kMaxMetricsRecordBytes >> 20) +
                               " MiB a metrics record may have, was skipped");
  };
  if (!for_each_capped_line(file, kMaxMetricsRecordBytes, record, too_long)) return {};
  double window_sum = 0;
  std::size_t window = 0;
  for (std::size_t i = 0; i < history.steps.size(); ++i) {
    const double v = history.steps[i].img_per_s;
    if (std::isfinite(v)) {
      window_sum += v;
      ++window;
    }
    if (i >= kThroughputWindow && std::isfinite(history.steps[i - kThroughputWindow].img_per_s)) {
      window_sum -= history.steps[i - kThroughputWindow].img_per_s;
      --window;
    }
    history.steps[i].img_per_s_avg = window ? window_sum / static_cast<double>(window) : 0.0;
  }
  return history;
}

}  // namespace unet
