// The report of a run that ran out of memory (or that the planner refused): what was asked for where, what
// was in use by category, whether a checkpoint can be resumed, and the remedies (gui/remedy_list.h): those
// that would fit, best first, each with an Apply button, then those that would not, by how much they miss.
// Not modal: the window stays usable. Applying is the window's business: the dialog says which changes were
// chosen (apply_requested) and closes.
#pragma once

#include <QDialog>

#include "unet/train/observer.h"

namespace unet::gui {

class OomDialog : public QDialog {
  Q_OBJECT
 public:
  // `e` must carry an out_of_memory report.
  OomDialog(const ErrorReport& e, QWidget* parent);

 signals:
  // A remedy's Apply: its config changes as JSON text (`{"key": value, ...}`).
  void apply_requested(const QString& changes);
};

}  // namespace unet::gui
