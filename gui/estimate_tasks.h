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

struct BatchFitResult {
  int request = 0;
  BatchFit fit;
  QString error;
};

struct PatchFitResult {
  int request = 0;
  PatchFit fit;
  QString error;
};

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

class FitBatchTask : public Task {
  Q_OBJECT
 public:
  FitBatchTask(Config config, int request, QObject* parent = nullptr);
  ~FitBatchTask() override;
  // Once the task has ended (its error from failure() when it failed).
  BatchFitResult result() const;

 protected:
  void execute() override;

 private:
  const Config config_;
  const int request_;
  BatchFit fit_;
};

class FitPatchTask : public Task {
  Q_OBJECT
 public:
  FitPatchTask(Config config, int request, QObject* parent = nullptr);
  ~FitPatchTask() override;
  // Once the task has ended (its error from failure() when it failed).
  PatchFitResult result() const;

 protected:
  void execute() override;

 private:
  const Config config_;
  const int request_;
  PatchFit fit_;
};

}  // namespace unet::gui

Q_DECLARE_METATYPE(unet::gui::Estimate)
Q_DECLARE_METATYPE(unet::gui::BatchFitResult)
Q_DECLARE_METATYPE(unet::gui::PatchFitResult)
