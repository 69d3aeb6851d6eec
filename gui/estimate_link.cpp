#include "gui/estimate_link.h"

#include <utility>

#include "gui/config_panel.h"
#include "gui/estimate_panel.h"
#include "gui/log_view.h"
#include "gui/model_tab.h"
#include "unet/config/key_applies.h"

namespace unet::gui {

EstimateLink::EstimateLink(ConfigPanel* config_panel, EstimatePanel* panel, ModelTab* model, LogView* log,
                           QObject* parent)
    : QObject(parent), config_(config_panel), panel_(panel), model_(model), log_(log) {
  timer_.setSingleShot(true);
  timer_.setInterval(200);
  connect(&timer_, &QTimer::timeout, this, [this] {
    const std::optional<Config> config = config_->config();
    if (!config) return;
    panel_->show_pending();
    requested_for_ = *config;
    waiting_estimate_ = Request{*config, ++request_};  // an older one still waiting is dropped
    supersede_estimate();
    run_next();
  });
  connect(config_, &ConfigPanel::config_changed, this, [this] {
    panel_->show_pending();  // at once: nothing of the settings before stays shown while it waits
    show_patch_mode();
    schedule();
  });
  show_patch_mode();
  connect(config_, &ConfigPanel::validity_changed, this, [this](bool valid) {
    if (valid) return;
    timer_.stop();
    ++request_;  // an estimate still on its way is for settings that are gone
    waiting_estimate_.reset();
    supersede_estimate();
    panel_->show_unavailable(
        tr("No estimate until the settings are fixed: %1").arg(config_->problems().join("; ")));
  });
  // A fit asked for: it waits for the planner's task under way, if any, and sets the settings when done.
  const auto request_fit = [this](std::optional<Request>& waiting, bool& pending) {
    const std::optional<Config> config = config_->config();
    if (!config) return;
    pending = true;
    waiting = Request{*config, ++request_};
    run_next();
  };
  connect(panel_, &EstimatePanel::fit_requested, this,
          [this, request_fit] { request_fit(waiting_fit_, fit_pending_); });
  connect(panel_, &EstimatePanel::fit_patch_requested, this,
          [this, request_fit] { request_fit(waiting_patch_fit_, patch_fit_pending_); });
}

void EstimateLink::show_patch_mode() {
  const std::optional<Config> config = config_->config();
  if (!config) return;
  std::string why;
  const bool patches = key_applies(*config, "data.patch_size", &why);
  panel_->set_patch_mode(patches, QString::fromStdString("data.patch_size: " + why));
}

void EstimateLink::run_next() {
  if (planning_) return;  // its end runs the next
  auto start = [this](auto* task) {
    planning_ = start_owned(task, this, [this, task] {
      show(task->result());
      planning_ = nullptr;
      run_next();
    });
  };
  if (const std::optional<Request> fit = std::exchange(waiting_fit_, std::nullopt))
    start(new FitBatchTask(fit->config, fit->number));
  else if (const std::optional<Request> patch = std::exchange(waiting_patch_fit_, std::nullopt))
    start(new FitPatchTask(patch->config, patch->number));
  else if (const std::optional<Request> estimate = std::exchange(waiting_estimate_, std::nullopt)) {
    auto* task = new EstimateTask(estimate->config, estimate->number);
    connect(task, &Task::progress, this, [this, task](qint64, qint64, const QString& what) {
      if (task->request() == request_) panel_->show_progress(what);
    });
    start(task);
  }
}

void EstimateLink::supersede_estimate() {
  // An estimate under way is for settings that are gone: it stops between two plans (a fit is the user's
  // request, and runs to its end).
  if (auto* estimate = qobject_cast<EstimateTask*>(planning_.data());
      estimate && estimate->request() != request_)
    estimate->abort();
}

void EstimateLink::show(const Estimate& e) {
  if (e.request != request_) return;  // a newer config is being estimated
  panel_->show_estimate(e);
  shown_ = Shown{requested_for_, e};
  if (e.error.isEmpty()) {
    const std::optional<Config> c = config_->config();
    model_->show_summary(e.summary, c && c->memory.checkpointing);
  }
  ++shown_count_;
}

void EstimateLink::show(const BatchFitResult& r) {
  // The batch first: the edit clears what the panel showed of the settings before; the answer then stays
  // until the next edit.
  if (fit_pending_ && r.error.isEmpty() && r.fit.global_batch > 0) {
    config_->apply_changes({{"train.batch_size", r.fit.global_batch}});
    log_->add(LogLevel::info, tr("batch size set to %1, the largest that fits: %2")
                                  .arg(r.fit.global_batch)
                                  .arg(QString::fromStdString(r.fit.reason)));
  }
  panel_->show_fit(r);
  fit_pending_ = false;
}

void EstimateLink::show(const PatchFitResult& r) {
  // As Fit batch's: the settings first, then the answer, which stays until the next edit.
  if (patch_fit_pending_ && r.error.isEmpty() && r.fit.batch > 0) {
    config_->apply_changes(
        {{"data.patch_size", {r.fit.patch_height, r.fit.patch_width}}, {"train.batch_size", r.fit.batch}});
    log_->add(LogLevel::info, tr("patch size set to %1x%2 and batch size to %3: %4")
                                  .arg(r.fit.patch_height)
                                  .arg(r.fit.patch_width)
                                  .arg(r.fit.batch)
                                  .arg(QString::fromStdString(r.fit.reason)));
  }
  panel_->show_fit(r);
  patch_fit_pending_ = false;
}

void EstimateLink::schedule() {
  if (!running_) timer_.start();
}

void EstimateLink::set_running(bool running) {
  running_ = running;
  panel_->set_enabled_actions(!running);
}

const Estimate* EstimateLink::shown_for(const Config& config) const {
  return shown_ && shown_->config == config ? &shown_->estimate : nullptr;
}

}  // namespace unet::gui
