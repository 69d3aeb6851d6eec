#include "gui/dialogs/run_settings_dialog.h"

#include <QMessageBox>
#include <QPushButton>

namespace unet::gui {

QString RunSettingsDialog::continue_text() {
  return QObject::tr("Continue with the run's settings");
}

bool RunSettingsDialog::ask(QWidget* parent, const QString& run_folder,
                            const std::vector<SettingDifference>& differences) {
  QMessageBox box(QMessageBox::Question, QObject::tr("The run continues with its own settings"), QString(),
                  QMessageBox::NoButton, parent);
  box.setTextFormat(Qt::RichText);
  QString rows;
  for (const SettingDifference& d : differences)
    rows += QStringLiteral("<tr><td>%1</td><td><code>%2</code></td><td>%3</td><td>%4</td></tr>")
                .arg(d.label.toHtmlEscaped(), d.key.toHtmlEscaped(), d.form_value.toHtmlEscaped(),
                     d.run_value.toHtmlEscaped());
  box.setText(
      QObject::tr("<p>The run in %1 continues with its own settings; %n of them differ from the form:</p>"
                  "<table cellspacing=\"6\"><tr><th align=\"left\">Setting</th><th align=\"left\">Key</th>"
                  "<th align=\"left\">Form</th><th align=\"left\">Run</th></tr>%2</table>",
                  nullptr, static_cast<int>(differences.size()))
          .arg(run_folder.toHtmlEscaped(), rows));
  box.setInformativeText(
      QObject::tr("The form keeps your settings unless you continue; then it shows the run's, and File → "
                  "Restore the form's settings brings yours back."));
  QPushButton* go_on = box.addButton(continue_text(), QMessageBox::AcceptRole);
  QPushButton* cancel = box.addButton(QMessageBox::Cancel);
  // Enter keeps the form: replacing it is what the user must choose.
  box.setDefaultButton(cancel);
  box.exec();
  return box.clickedButton() == go_on;
}

}  // namespace unet::gui
