// The memory planner as Tasks (gui/task.h), off the GUI thread: an estimate of a config (the plan, the
// remedies when it does not fit, and the per-layer summary for the model tab), Fit batch (the largest
// batch that fits the devices' free memory and the training set, which it counts, and which limit applied)
// and, in patch mode, Fit patch (the largest patch and a batch that fit, bounded by the images it measures).
// Each result carries the number of the request it answers, so that whoever asked can drop an answer for
// settings that are gone (gui/estimate_link.h runs them one at a time and keeps only the newest request
// waiting). A planner that cannot plan the config (e.g. CUDA unavailable) fails the task; result() then holds
// the reason in `error`. An estimate says each plan as it begins (progress(), `what` in words) and ends
// Aborted between two plans once abort() is called.
#pragma once

#include <QString>

#include "gui/qt_types.h"
#include "gui/task.h"
#include "unet/model/unet.h"
#include "unet/plan/batch_fit.h"
#include "unet/plan/patch_fit.h"

namespace unet::gui {

struct Estimate {
  int request = 0;
  MemoryPlan plan;
  std::vector<Remedy> remedies;  // when the plan does not fit
  ModelSummary summary;          // the model tab's table, activation bytes from the planner
  QString error;                 // the planner could not plan this config (e.g. CUDA unavailable)
};

// What a fit answers its request with: the fit, or (the task failed) the reason.
template <typename Fit>
struct FitResult {
  int request = 0;
  Fit fit;
  QString error;
};
using BatchFitResult = FitResult<BatchFit>;
using PatchFitResult = FitResult<PatchFit>;

class EstimateTask : public Task {
  Q_OBJECT
 public:
  EstimateTask(Config config, int request, QObject* parent = nullptr);
  ~EstimateTask() override;
  int request() const { return request_; }
  // Once the task has ended (its error from failure() when it failed).
  Estimate result() const;

 protected:
  void execute() override;

 private:
  const Config config_;
  const int request_;
  Estimate result_;
};

// Fit batch and Fit patch within the bounds of a run of `config` (its training set counted, its images
// measured, the devices' memory read now).
BatchFit fit_batch_for_run(const Config& config);
PatchFit fit_patch_for_run(const Config& config);

// A fit of a config as a Task: `fit_config` off the GUI thread.
template <typename Fit, Fit (*fit_config)(const Config&)>
class FitTask final : public Task {
 public:
  FitTask(Config config, int request, QObject* parent = nullptr)
      : Task(parent), config_(std::move(config)), request_(request) {
    qRegisterMetaType<FitResult<Fit>>();
  }
  ~FitTask() override { end_work(); }
  // Once the task has ended (its error from failure() when it failed).
  FitResult<Fit> result() const {
    return {.request = request_, .fit = state() == State::failed ? Fit{} : fit_, .error = failure()};
  }

 protected:
  void execute() override { fit_ = fit_config(config_); }

 private:
  const Config config_;
  const int request_;
  Fit fit_;
};

using FitBatchTask = FitTask<BatchFit, fit_batch_for_run>;
using FitPatchTask = FitTask<PatchFit, fit_patch_for_run>;

}  // namespace unet::gui

Q_DECLARE_METATYPE(unet::gui::Estimate)
Q_DECLARE_METATYPE(unet::gui::BatchFitResult)
Q_DECLARE_METATYPE(unet::gui::PatchFitResult)
