// The memory estimate following the settings: each change of the configuration panel is planned (debounced)
// by an EstimateTask (gui/estimate_tasks.h) off the GUI thread; the newest answer goes to the estimate panel
// and the model tab, an answer for settings that are gone is dropped by its request's number, Fit batch
// sets the largest batch that fits, and Fit patch (patch mode) the largest patch with a batch that fits. The
// planner's tasks run one at a time: requests made meanwhile wait, a newer estimate replaces one still
// waiting and stops one under way (between two of its plans), and the panel hears what the estimate under way
// is planning. No estimates while a run goes on (the settings are read-only then). Out of the window so that
// it keeps its layout and wiring only.
#pragma once

#include <QObject>
#include <QPointer>
#include <QTimer>

#include <optional>

#include "gui/estimate_tasks.h"

namespace unet::gui {

class ConfigPanel;
class EstimatePanel;
class LogView;
class ModelTab;

class EstimateLink : public QObject {
  Q_OBJECT
 public:
  // The parts must outlive the link (the window's children made before it do).
  EstimateLink(ConfigPanel* config_panel, EstimatePanel* panel, ModelTab* model, LogView* log,
               QObject* parent);
  // Ends after the estimate being made (its task, a child, waits for it).
  ~EstimateLink() override = default;

  // Plans the settings shortly (a burst of edits makes one request), unless a run goes on.
  void schedule();
  // While a run goes on: no estimates, and the panel's actions (remedies, Fit batch) disabled.
  void set_running(bool running);
  // The estimate on show, when it is for exactly `config`; nullptr otherwise.
  const Estimate* shown_for(const Config& config) const;
  // How many estimates have been shown: the tests wait on it.
  int shown_count() const { return shown_count_; }

 private:
  // Starts the waiting task that comes first (a fit, else the estimate) unless one runs.
  void run_next();
  // Aborts the estimate under way when a newer request has made it stale.
  void supersede_estimate();
  void show(const Estimate& e);
  void show(const BatchFitResult& r);
  void show(const PatchFitResult& r);
  // Tells the panel whether the settings train on patches, where Fit patch applies.
  void show_patch_mode();

  ConfigPanel* config_;
  EstimatePanel* panel_;
  ModelTab* model_;
  LogView* log_;
  QPointer<Task> planning_;  // the planner's task under way
  struct Request {
    Config config;
    int number = 0;
  };
  std::optional<Request> waiting_estimate_, waiting_fit_, waiting_patch_fit_;
  QTimer timer_;
  int request_ = 0;
  int shown_count_ = 0;
  bool running_ = false;
  bool fit_pending_ = false, patch_fit_pending_ = false;
  // The estimate on show and the settings it is for: Start asks before a run the planner says does not fit.
  struct Shown {
    Config config;
    Estimate estimate;
  };
  Config requested_for_;
  std::optional<Shown> shown_;
};

}  // namespace unet::gui
