// Help → User guide: the compiled-in guide.html (what each panel does, the keys, where runs are kept) in a
// window of its own, not modal, so that it can stay open beside the workbench.
#pragma once

#include <QDialog>

namespace unet::gui {

class GuideDialog : public QDialog {
  Q_OBJECT
 public:
  explicit GuideDialog(QWidget* parent);
};

}  // namespace unet::gui
