// The memory estimate following the settings: each change of the configuration panel is planned (debounced)
// by an EstimateWorker on a thread of its own; the newest answer goes to the estimate panel and the model
// tab, an answer for settings that are gone is dropped, and Fit batch sets the largest batch that fits. No
// estimates while a run goes on (the settings are read-only then). Out of the window so that it keeps its
// layout and wiring only.
#pragma once

#include <QObject>
#include <QThread>
#include <QTimer>

#include <optional>

#include "gui/estimate_worker.h"

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
  // Ends the worker's thread, after the estimate it is making.
  ~EstimateLink() override;

  // Plans the settings shortly (a burst of edits makes one request), unless a run goes on.
  void schedule();
  // While a run goes on: no estimates, and the panel's actions (remedies, Fit batch) disabled.
  void set_running(bool running);
  // The estimate on show, when it is for exactly `config`; nullptr otherwise.
  const Estimate* shown_for(const Config& config) const;
  // How many estimates have been shown: the tests wait on it.
  int shown_count() const { return shown_count_; }

 signals:
  void request_estimate(const unet::Config& config, int request);
  void request_fit(const unet::Config& config, int request);

 private:
  ConfigPanel* config_;
  EstimatePanel* panel_;
  ModelTab* model_;
  LogView* log_;
  QThread thread_;
  EstimateWorker* worker_ = nullptr;  // lives on thread_
  QTimer timer_;
  int request_ = 0;
  int shown_count_ = 0;
  bool running_ = false;
  bool fit_pending_ = false;
  // The estimate on show and the settings it is for: Start asks before a run the planner says does not fit.
  struct Shown {
    Config config;
    Estimate estimate;
  };
  Config requested_for_;
  std::optional<Shown> shown_;
};

}  // namespace unet::gui
