#include "gui/dialogs/oom_dialog.h"

#include <QDialogButtonBox>
#include <QLabel>
#include <QVBoxLayout>

#include "gui/estimate_panel.h"
#include "gui/remedy_list.h"

namespace unet::gui {

OomDialog::OomDialog(const ErrorReport& e, QWidget* parent) : QDialog(parent) {
  setAttribute(Qt::WA_DeleteOnClose);
  setWindowTitle(tr("Out of memory on %1").arg(QString::fromStdString(e.device)));
  auto* layout = new QVBoxLayout(this);
  const OutOfMemoryReport& d = *e.out_of_memory;
  // A run the planner refused allocated nothing; a failed step changed nothing. Promise a checkpoint only
  // where the run saved one.
  QString report =
      d.planned
          ? tr("<p><b>This run's memory plan peaks at %1 on %2</b>, over the %3 there is; it was refused "
               "before anything was allocated.")
                .arg(bytes_text(d.requested_bytes), QString::fromStdString(e.device),
                     bytes_text(d.capacity_bytes))
          : tr("<p><b>Step %1 needed %2 more on %3</b>, with %4 in use of %5. The step changed nothing.")
                .arg(d.step)
                .arg(bytes_text(d.requested_bytes), QString::fromStdString(e.device),
                     bytes_text(d.in_use_bytes), bytes_text(d.capacity_bytes));
  report += d.resume_from.empty() ? tr(" No checkpoint of this run was saved: start again with a remedy.")
                                  : tr(" %1 can be resumed with a remedy.")
                                        .arg(QString::fromStdString(d.resume_from).toHtmlEscaped());
  report += d.planned ? tr("</p><p>At the planned peak:") : tr("</p><p>In use:");
  for (int k = 0; k < memory_category_count; ++k)
    if (const std::int64_t bytes = d.in_use_by[static_cast<std::size_t>(k)]; bytes > 0)
      report += QString(" %1 %2;").arg(QString::fromUtf8(to_string(static_cast<MemoryCategory>(k)).data()),
                                       bytes_text(bytes));
  report += "</p>";
  auto* text = new QLabel(report, this);
  text->setWordWrap(true);
  text->setObjectName("report");
  layout->addWidget(text);
  layout->addWidget(new QLabel(tr("A remedy is applied to the settings; then Start or Resume."), this));
  auto* remedies = new RemedyList(this);
  remedies->show_remedies(remedy_rows(d.remedies));
  connect(remedies, &RemedyList::apply_requested, this, [this](const QString& changes) {
    emit apply_requested(changes);
    close();
  });
  layout->addWidget(remedies);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
  layout->addWidget(buttons);
}

}  // namespace unet::gui
