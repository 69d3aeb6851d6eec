// What the workbench asks or tells the user in a modal box, behind one interface, so that the window's API is
// about the window: the real Prompter shows QMessageBox and the window's dialogs; the tests inject a
// PromptRecorder that answers as told and records what was asked, instead of each public method taking a
// `quiet` flag. Non-modal windows (the run summary, the out-of-memory report, the guide) are not prompts: the
// tests find those as widgets.
#pragma once

#include <QString>
#include <QWidget>

#include <memory>
#include <vector>

#include "gui/dialogs/run_folder_dialog.h"
#include "gui/dialogs/run_settings_dialog.h"
#include "gui/estimate_tasks.h"

namespace unet::gui {

class Prompter {
 public:
  virtual ~Prompter() = default;
  // A failure the user asked about, or settings to fix: `text` in a box titled `title`, over `parent`.
  virtual void warn(QWidget* parent, const QString& title, const QString& text) = 0;
  // A yes-or-no question; true for yes. `yes_by_default`: what Enter answers.
  virtual bool confirm(QWidget* parent, const QString& title, const QString& question,
                       bool yes_by_default) = 0;
  // Start or resume into a folder that holds a run (RunFolderDialog); `can_continue`: whether continuing that
  // run is offered.
  virtual RunFolderDialog::Choice choose_run_folder(QWidget* parent, const RunFolderConflict& conflict,
                                                    bool can_continue) = 0;
  // Start on settings the planner says do not fit (DoesNotFitDialog): the remedy to apply and start with
  // (one of `estimate`'s), or nullptr to start nothing.
  virtual const Remedy* choose_remedy(QWidget* parent, const Estimate& estimate) = 0;
  // A resume whose run's settings differ from the form's (RunSettingsDialog): true to continue with the
  // run's settings, false to leave the form (and the run) alone.
  virtual bool confirm_run_settings(QWidget* parent, const QString& run_folder,
                                    const std::vector<SettingDifference>& differences) = 0;
};

// The real one: message boxes and the window's dialogs, modal.
class MessageBoxPrompter final : public Prompter {
 public:
  void warn(QWidget* parent, const QString& title, const QString& text) override;
  bool confirm(QWidget* parent, const QString& title, const QString& question, bool yes_by_default) override;
  RunFolderDialog::Choice choose_run_folder(QWidget* parent, const RunFolderConflict& conflict,
                                            bool can_continue) override;
  const Remedy* choose_remedy(QWidget* parent, const Estimate& estimate) override;
  bool confirm_run_settings(QWidget* parent, const QString& run_folder,
                            const std::vector<SettingDifference>& differences) override;
};

// The tests' one: shows nothing, answers as its members say (no, cancel, and no remedy unless told: what a
// user who declines would answer), and records each prompt in `asked`.
class PromptRecorder final : public Prompter {
 public:
  enum class Kind { warning, question, run_folder, remedy, run_settings };
  struct Prompt {
    Kind kind;
    QString title;  // empty for run_folder and remedy; the run folder for run_settings
    // The message, the question, the conflict's message, the settings' remedies, or the settings that
    // differ, a line each: "Batch size (train.batch_size): 4 -> 8", the form's value first.
    QString text;
  };
  std::vector<Prompt> asked;
  bool confirm_answer = false;
  RunFolderDialog::Choice run_folder_answer = RunFolderDialog::Choice::cancel;
  bool run_settings_answer = false;

  void warn(QWidget* parent, const QString& title, const QString& text) override;
  bool confirm(QWidget* parent, const QString& title, const QString& question, bool yes_by_default) override;
  RunFolderDialog::Choice choose_run_folder(QWidget* parent, const RunFolderConflict& conflict,
                                            bool can_continue) override;
  const Remedy* choose_remedy(QWidget* parent, const Estimate& estimate) override;
  bool confirm_run_settings(QWidget* parent, const QString& run_folder,
                            const std::vector<SettingDifference>& differences) override;
  // How many prompts of `kind` were made.
  int count(Kind kind) const;
};

}  // namespace unet::gui
