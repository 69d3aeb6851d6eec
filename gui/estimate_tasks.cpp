#include "gui/estimate_tasks.h"

#include "unet/plan/remedy_search.h"
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
  // Each plan is said as it begins (a large image's remedies take many), and an abort (newer settings) is
  // seen between plans.
  const PlanningProgress progress{
      .report = [this](const std::string& what) { report_progress(0, 0, QString::fromStdString(what)); },
      .stop = stop_token()};
  try {
    progress.next("the settings");
    result_.plan = plan_memory(config_);
    if (!result_.plan.fits) result_.remedies = rank_remedies(config_, &result_.plan, &progress);
    progress.next("the per-layer summary");
    result_.summary = summarize_model(config_);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::cancelled) throw;
    ended_aborted();
  }
}

Estimate EstimateTask::result() const {
  Estimate e = state() == State::failed ? Estimate{} : result_;
  e.request = request_;
  e.error = failure();
  return e;
}

BatchFit fit_batch_for_run(const Config& config) {
  return fit_batch(config, fit_bounds_for_run(config));
}

PatchFit fit_patch_for_run(const Config& config) {
  return fit_patch(config, patch_bounds_for_run(config));
}

}  // namespace unet::gui
