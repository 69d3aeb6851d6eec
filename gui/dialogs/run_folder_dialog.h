// The question a start or a resume asks when its run folder already holds a run (RunFolderConflict): a new
// folder beside it, that run continued, or replacing it. Only the question lives here, asking nothing of the
// file system; what each answer does (a free folder's name, found with the conflict by PrepareRunTask off the
// GUI thread, the resume, the replacing start) stays with the window's run lifecycle.
#pragma once

#include <QWidget>

#include "unet/config/config.h"
#include "unet/train/run_folder.h"

namespace unet::gui {

class RunFolderDialog {
 public:
  enum class Choice { cancel, new_folder, continue_run, replace };
  // Asks modally; `continue_run` is offered when `can_continue` (a previous run that left a
  // last.safetensors).
  static Choice ask(QWidget* parent, const RunFolderConflict& conflict, bool can_continue);
};

}  // namespace unet::gui
