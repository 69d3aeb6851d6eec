#include "gui/dialogs/run_folder_dialog.h"

#include <QMessageBox>
#include <QPushButton>

namespace unet::gui {

RunFolderDialog::Choice RunFolderDialog::ask(QWidget* parent, const RunFolderConflict& conflict,
                                             bool can_continue) {
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
      if (can_continue)
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

}  // namespace unet::gui
