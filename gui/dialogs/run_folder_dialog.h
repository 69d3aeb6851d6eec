// The question a start or a resume asks when its run folder already holds a run (RunFolderConflict): a new
// folder beside it, that run continued, or replacing it. Only the question lives here; what each answer does
// (a free folder's name, the resume, the replacing start) stays with the window's run lifecycle.
#pragma once

#include <QWidget>

#include "unet/config/config.h"
#include "unet/train/run_folder.h"

namespace unet::gui {

class RunFolderDialog {
 public:
  enum class Choice { cancel, new_folder, continue_run, replace };
  // Asks modally; `continue_run` is offered only for a previous run that left a last.safetensors.
  static Choice ask(QWidget* parent, const RunFolderConflict& conflict);
  // The answer "new folder" (or "branch off"): a folder beside the conflict's that does not exist yet,
  // <folder>-2, -3, ...; branching off a later state, <folder>-from-step-N first.
  static std::filesystem::path new_folder_for(const RunFolderConflict& conflict);
};

}  // namespace unet::gui
