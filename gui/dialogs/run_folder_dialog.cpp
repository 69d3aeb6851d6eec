#include "gui/dialogs/run_folder_dialog.h"

#include <filesystem>

#include <QMessageBox>
#include <QPushButton>

namespace unet::gui {
namespace {

// A folder beside `dir` that does not exist yet: <dir><suffix>, else <dir><suffix>-2, -3, ...; with no
// suffix, <dir>-2 first.
std::filesystem::path free_folder_beside(const std::filesystem::path& dir, const std::string& suffix) {
  std::error_code ec;
  const std::string base = dir.string() + suffix;
  if (!suffix.empty() && !std::filesystem::exists(base, ec)) return base;
  for (int n = 2;; ++n) {
    std::filesystem::path candidate = base + "-" + std::to_string(n);
    if (!std::filesystem::exists(candidate, ec)) return candidate;
  }
}

}  // namespace

RunFolderDialog::Choice RunFolderDialog::ask(QWidget* parent, const RunFolderConflict& conflict) {
  const QString folder = QString::fromStdString(conflict.folder.string());
  QMessageBox box(QMessageBox::Question, QObject::tr("The run folder holds a run"), QString(),
                  QMessageBox::NoButton, parent);
  QPushButton* new_folder = nullptr;
  QPushButton* replace = nullptr;
  QPushButton* continue_run = nullptr;
  switch (conflict.kind) {
    case RunFolderConflict::Kind::previous_run: {
      box.setText(QObject::tr("%1 holds a previous run (%2).")
                      .arg(folder, QString::fromStdString(conflict.file_names())));
      box.setInformativeText(
          QObject::tr("Start this run in a new folder beside it, continue that run from its last "
                      "checkpoint, or replace it (its files are removed)."));
      new_folder = box.addButton(QObject::tr("New folder"), QMessageBox::AcceptRole);
      if (std::filesystem::exists(conflict.folder / kLastCheckpointName))
        continue_run = box.addButton(QObject::tr("Continue that run"), QMessageBox::ActionRole);
      replace = box.addButton(QObject::tr("Replace it"), QMessageBox::DestructiveRole);
      break;
    }
    case RunFolderConflict::Kind::other_run:
      box.setText(QObject::tr("%1 holds another run (%2) than the checkpoint's.")
                      .arg(folder, QString::fromStdString(conflict.file_names())));
      box.setInformativeText(
          QObject::tr("Resume in a new folder beside it, or replace that run (its files are "
                      "removed)."));
      new_folder = box.addButton(QObject::tr("New folder"), QMessageBox::AcceptRole);
      replace = box.addButton(QObject::tr("Replace it"), QMessageBox::DestructiveRole);
      break;
    case RunFolderConflict::Kind::later_state:
      box.setText(QObject::tr("%1 holds this run further along: its last checkpoint is at step %2, the one "
                              "resumed at step %3.")
                      .arg(folder)
                      .arg(conflict.later_step)
                      .arg(conflict.resumed_step));
      box.setInformativeText(
          QObject::tr("Branch off into a new folder, keeping the later state, or go on here, "
                      "replacing the later checkpoints as the run writes its own."));
      new_folder = box.addButton(QObject::tr("Branch off"), QMessageBox::AcceptRole);
      replace = box.addButton(QObject::tr("Go on here"), QMessageBox::DestructiveRole);
      break;
  }
  box.addButton(QMessageBox::Cancel);
  box.setDefaultButton(new_folder);
  box.exec();
  const QAbstractButton* clicked = box.clickedButton();
  if (clicked == new_folder) return Choice::new_folder;
  if (clicked && clicked == continue_run) return Choice::continue_run;
  if (clicked && clicked == replace) return Choice::replace;
  return Choice::cancel;
}

std::filesystem::path RunFolderDialog::new_folder_for(const RunFolderConflict& conflict) {
  const std::string suffix = conflict.kind == RunFolderConflict::Kind::later_state
                                 ? "-from-step-" + std::to_string(conflict.resumed_step)
                                 : std::string();
  return free_folder_beside(conflict.folder, suffix);
}

}  // namespace unet::gui
