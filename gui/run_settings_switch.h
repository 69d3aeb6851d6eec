// A resume continues a run with that run's own settings, not the form's ("Continue that run" in the run
// folder question, Resume from checkpoint…, the unfinished run offered at launch). The form is the user's
// work, so it is never replaced unasked: agree() lists what differs and asks before anything changes, and
// once the run begins, show_run() puts the run's settings in the form (which then shows what trains), keeping
// the form as it was; File → Restore the form's settings brings it back. File → Open run… shows a run's
// settings through show_run() too, so that opening one to look at it can be undone the same way. Asking
// before and undoing after, because each alone falls short: a question alone leaves a user who continued
// without reading the list no way back to a dataset set up over several minutes; an undo alone lets the old
// run start on settings the user never saw.
#pragma once

#include <QAction>
#include <QObject>
#include <QWidget>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "gui/dialogs/run_settings_dialog.h"
#include "unet/config/config.h"

namespace unet::gui {

class ConfigPanel;
class LogView;
class Prompter;

// The keys whose values differ between the form (its document() and base dir) and the run's `run`, in
// schema order; `devices` is left out, because a resume runs on the devices selected now. Paths that name
// the same place from different base folders are the same.
std::vector<SettingDifference> setting_differences(const nlohmann::json& form,
                                                   const std::filesystem::path& form_base_dir,
                                                   const Config& run);

class RunSettingsSwitch : public QObject {
  Q_OBJECT
 public:
  // `panel`, `log` and `prompter` must outlive the switch (the window's parts do).
  RunSettingsSwitch(QWidget* window, ConfigPanel* panel, LogView* log, Prompter* prompter);

  // Whether to go on with `run`, the settings the run in `run_folder` continues with: true when they are the
  // form's, else the prompter's answer to what differs; declined, the log says that the form stays.
  bool agree(const Config& run, const QString& run_folder);
  // The run has begun on `run`: when that is not what the form holds, the form shows it and keeps what it
  // held for restore().
  void show_run(const Config& run);
  // Puts back the form that show_run() replaced; nothing when there is none.
  void restore();
  // File → Restore the form's settings: restore(); enabled while a replaced form is kept and no run goes on.
  QAction* restore_action() const { return restore_; }
  void set_running(bool running);

 private:
  struct Form {
    nlohmann::json document;
    std::filesystem::path base_dir;
  };

  QWidget* window_;
  ConfigPanel* panel_;
  LogView* log_;
  Prompter* prompter_;
  QAction* restore_;
  std::optional<Form> replaced_;
  bool running_ = false;
};

}  // namespace unet::gui
