// The memory planner off the GUI thread. The window sends the current config each time it changes
// (debounced); the worker plans the newest one it has, drops older requests that piled up, and answers with
// the plan, the remedies when it does not fit, and the per-layer summary for the model tab.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <optional>

#include "gui/qt_types.h"
#include "unet/model/unet.h"

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

class EstimateWorker : public QObject {
  Q_OBJECT
 public:
  explicit EstimateWorker(QObject* parent = nullptr);
  // Thread-safe: the number of the newest request; older ones still queued are skipped.
  void set_latest(int request) { latest_ = request; }

 public slots:
  void estimate(const unet::Config& config, int request);
  void fit(const unet::Config& config, int request);

 signals:
  void estimated(const unet::gui::Estimate& result);
  void fitted(const unet::gui::BatchFitResult& result);

 private:
  std::atomic<int> latest_{0};
};

}  // namespace unet::gui

Q_DECLARE_METATYPE(unet::gui::Estimate)
Q_DECLARE_METATYPE(unet::gui::BatchFitResult)
