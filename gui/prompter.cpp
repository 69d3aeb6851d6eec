#include "gui/prompter.h"

#include <QMessageBox>

#include <algorithm>

#include "gui/dialogs/does_not_fit_dialog.h"
#include "gui/setting_labels.h"

namespace unet::gui {

// The engine's words name settings by key; a box names them by the form's labels (setting_labels.h).
void MessageBoxPrompter::warn(QWidget* parent, const QString& title, const QString& text) {
  QMessageBox box(QMessageBox::Warning, title, {}, QMessageBox::Ok, parent);
  set_labelled_text(box, text);
  box.exec();
}

bool MessageBoxPrompter::confirm(QWidget* parent, const QString& title, const QString& question,
                                 bool yes_by_default) {
  QMessageBox box(QMessageBox::Question, title, {}, QMessageBox::Yes | QMessageBox::No, parent);
  set_labelled_text(box, question);
  box.setDefaultButton(yes_by_default ? QMessageBox::Yes : QMessageBox::No);
  return box.exec() == QMessageBox::Yes;
}

RunFolderDialog::Choice MessageBoxPrompter::choose_run_folder(QWidget* parent,
                                                              const RunFolderConflict& conflict,
                                                              bool can_continue) {
  return RunFolderDialog::ask(parent, conflict, can_continue);
}

const Remedy* MessageBoxPrompter::choose_remedy(QWidget* parent, const Estimate& estimate) {
  return DoesNotFitDialog::ask(parent, estimate);
}

bool MessageBoxPrompter::confirm_run_settings(QWidget* parent, const QString& run_folder,
                                              const std::vector<SettingDifference>& differences) {
  return RunSettingsDialog::ask(parent, run_folder, differences);
}

void PromptRecorder::warn(QWidget* /*parent*/, const QString& title, const QString& text) {
  asked.push_back({Kind::warning, title, text});
}

bool PromptRecorder::confirm(QWidget* /*parent*/, const QString& title, const QString& question,
                             bool /*yes_by_default*/) {
  asked.push_back({Kind::question, title, question});
  return confirm_answer;
}

RunFolderDialog::Choice PromptRecorder::choose_run_folder(QWidget* /*parent*/,
                                                          const RunFolderConflict& conflict,
                                                          bool /*can_continue*/) {
  asked.push_back({Kind::run_folder, {}, QString::fromStdString(conflict.message())});
  return run_folder_answer;
}

const Remedy* PromptRecorder::choose_remedy(QWidget* /*parent*/, const Estimate& estimate) {
  QStringList remedies;
  for (const Remedy& r : estimate.remedies) remedies << QString::fromStdString(r.changes.dump());
  asked.push_back({Kind::remedy, {}, remedies.join("; ")});
  return nullptr;
}

bool PromptRecorder::confirm_run_settings(QWidget* /*parent*/, const QString& run_folder,
                                          const std::vector<SettingDifference>& differences) {
  QStringList lines;
  for (const SettingDifference& d : differences)
    lines << QStringLiteral("%1 (%2): %3 -> %4").arg(d.label, d.key, d.form_value, d.run_value);
  asked.push_back({Kind::run_settings, run_folder, lines.join('\n')});
  return run_settings_answer;
}

int PromptRecorder::count(Kind kind) const {
  return static_cast<int>(
      std::count_if(asked.begin(), asked.end(), [kind](const Prompt& p) { return p.kind == kind; }));
}

}  // namespace unet::gui
