// The question a resume asks before the form changes: the run continues with its own settings, and these
// differ from the form's (label, key, the form's value, the run's). Continuing replaces the form with the
// run's settings once the run begins (File → Restore the form's settings brings them back); Cancel leaves
// the form and the run folder alone. Only the question lives here; what differs is found by
// setting_differences() (gui/run_settings_switch.h).
#pragma once

#include <QString>
#include <QWidget>

#include <vector>

namespace unet::gui {

// One key whose value the run and the form disagree on, as the form shows it.
struct SettingDifference {
  QString key;    // "train.batch_size"
  QString label;  // "Batch size", the form's label
  QString form_value, run_value;
};

class RunSettingsDialog {
 public:
  // The text of the button that continues with the run's settings.
  static QString continue_text();
  // Asks modally; true to continue with the run's settings.
  static bool ask(QWidget* parent, const QString& run_folder,
                  const std::vector<SettingDifference>& differences);
};

}  // namespace unet::gui
