#include "gui/dialogs/does_not_fit_dialog.h"

#include <algorithm>

#include <QMessageBox>
#include <QPushButton>

#include "gui/estimate_panel.h"

namespace unet::gui {

const Remedy* DoesNotFitDialog::ask(QWidget* parent, const Estimate& e) {
  QStringList over;
  for (const DevicePlan& d : e.plan.devices)
    if (!d.fits)
      over << QObject::tr("%1: peak %2 of %3")
                  .arg(QString::fromStdString(d.device), bytes_text(d.peak), bytes_text(d.capacity));
  const auto best =
      std::find_if(e.remedies.begin(), e.remedies.end(), [](const Remedy& r) { return r.plan.fits; });
  QMessageBox box(
      QMessageBox::Warning, QObject::tr("This run does not fit"),
      QObject::tr("The memory planner predicts that this run does not fit:\n%1").arg(over.join("\n")),
      QMessageBox::Cancel, parent);
  QPushButton* apply = nullptr;
  if (best != e.remedies.end()) {
    box.setInformativeText(
        QObject::tr("What fits best: %1 (%2). Apply it and start, or cancel and choose another "
                    "remedy under Memory per device.")
            .arg(QString::fromStdString(best->name), QString::fromStdString(best->description)));
    apply = box.addButton(QObject::tr("Apply and Start"), QMessageBox::AcceptRole);
    box.setDefaultButton(apply);
  } else {
    box.setInformativeText(
        QObject::tr("No single remedy fits: see Memory per device for what comes closest."));
  }
  box.exec();
  if (!apply || box.clickedButton() != apply) return nullptr;
  return &*best;
}

}  // namespace unet::gui
