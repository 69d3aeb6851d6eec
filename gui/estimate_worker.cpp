#include "gui/estimate_worker.h"

namespace unet::gui {

EstimateWorker::EstimateWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<Estimate>();
  qRegisterMetaType<BatchFitResult>();
}

void EstimateWorker::estimate(const Config& config, int request) {
  if (request < latest_) return;  // a newer config is on its way
  Estimate e;
  e.request = request;
  try {
    e.plan = plan_memory(config);
    if (!e.plan.fits) e.remedies = rank_remedies(config, &e.plan);
    e.summary = summarize_model(config);
  } catch (const std::exception& ex) {
    e.error = QString::fromUtf8(ex.what());
  }
  emit estimated(e);
}

void EstimateWorker::fit(const Config& config, int request) {
  BatchFitResult r;
  r.request = request;
  try {
    r.fit = fit_batch(config);
  } catch (const std::exception& ex) {
    r.error = QString::fromUtf8(ex.what());
  }
  emit fitted(r);
}

}  // namespace unet::gui
