#include "gui/estimate_tasks.h"

#include "unet/train/training_set.h"

namespace unet::gui {

EstimateTask::EstimateTask(Config config, int request, QObject* parent)
    : Task(parent), config_(std::move(config)), request_(request) {
  qRegisterMetaType<Estimate>();
}

EstimateTask::~EstimateTask() {
  end_work();
}

void EstimateTask::execute() {
  result_.plan = plan_memory(config_);
  if (!result_.plan.fits) result_.remedies = rank_remedies(config_, &result_.plan);
  result_.summary = summarize_model(config_);
}

Estimate EstimateTask::result() const {
  Estimate e = state() == State::failed ? Estimate{} : result_;
  e.request = request_;
  e.error = failure();
  return e;
}

FitBatchTask::FitBatchTask(Config config, int request, QObject* parent)
    : Task(parent), config_(std::move(config)), request_(request) {
  qRegisterMetaType<BatchFitResult>();
}

FitBatchTask::~FitBatchTask() {
  end_work();
}

void FitBatchTask::execute() {
  fit_ = fit_batch(config_, fit_bounds_for_run(config_));
}

BatchFitResult FitBatchTask::result() const {
  return {.request = request_, .fit = state() == State::failed ? BatchFit{} : fit_, .error = failure()};
}

}  // namespace unet::gui
