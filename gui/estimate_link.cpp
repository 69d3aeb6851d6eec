#include "gui/estimate_link.h"

#include "gui/config_panel.h"
#include "gui/estimate_panel.h"
#include "gui/log_view.h"
#include "gui/model_tab.h"

namespace unet::gui {

EstimateLink::EstimateLink(ConfigPanel* config_panel, EstimatePanel* panel, ModelTab* model, LogView* log,
                           QObject* parent)
    : QObject(parent), config_(config_panel), panel_(panel), model_(model), log_(log) {
  worker_ = new EstimateWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
  connect(this, &EstimateLink::request_estimate, worker_, &EstimateWorker::estimate);
  connect(this, &EstimateLink::request_fit, worker_, &EstimateWorker::fit);

  timer_.setSingleShot(true);
  timer_.setInterval(200);
  connect(&timer_, &QTimer::timeout, this, [this] {
    const std::optional<Config> config = config_->config();
    if (!config) return;
    worker_->set_latest(++request_);
    panel_->show_pending();
    requested_for_ = *config;
    emit request_estimate(*config, request_);
  });
  connect(config_, &ConfigPanel::config_changed, this, [this] {
    panel_->show_pending();  // at once: nothing of the settings before stays shown while it waits
    schedule();
  });
  connect(config_, &ConfigPanel::validity_changed, this, [this](bool valid) {
    if (valid) return;
    timer_.stop();
    ++request_;  // an estimate still on its way is for settings that are gone
    panel_->show_unavailable(
        tr("No estimate until the settings are fixed: %1").arg(config_->problems().join("; ")));
  });
  connect(worker_, &EstimateWorker::estimated, this, [this](const Estimate& e) {
    if (e.request != request_) return;  // a newer config is being estimated
    panel_->show_estimate(e);
    shown_ = Shown{requested_for_, e};
    if (e.error.isEmpty()) {
      const std::optional<Config> c = config_->config();
      model_->show_summary(e.summary, c && c->memory.checkpointing);
    }
    ++shown_count_;
  });
  connect(panel_, &EstimatePanel::fit_requested, this, [this] {
    const std::optional<Config> config = config_->config();
    if (!config) return;
    fit_pending_ = true;
    emit request_fit(*config, ++request_);
  });
  connect(worker_, &EstimateWorker::fitted, this, [this](const BatchFitResult& r) {
    // The batch first: the edit clears what the panel showed of the settings before; the answer then stays
    // until the next edit.
    if (fit_pending_ && r.error.isEmpty() && r.fit.global_batch > 0) {
      config_->apply_changes({{"train.batch_size", r.fit.global_batch}});
      log_->add(LogLevel::info, tr("batch size set to %1, the largest that fits").arg(r.fit.global_batch));
    }
    panel_->show_fit(r);
    fit_pending_ = false;
  });
}

EstimateLink::~EstimateLink() {
  thread_.quit();
  thread_.wait();
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
