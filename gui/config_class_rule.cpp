// The form follows the class rule (engine/unet/config/class_rule.h): when the user picks a task, an instance
// target or a data source that fixes model.classes, the classes editor takes that value at once, instead of
// the form turning red with "model.classes: must be 3 ..." for the user to fix by hand; the status bar says
// what changed and why. The value the user had chosen is kept, and comes back when a later pick no longer
// fixes the classes (instances -> semantic on a folder of class masks), unless the user edited the classes
// in between.
#include <QSpinBox>

#include "gui/config_panel.h"
#include "unet/config/class_rule.h"

namespace unet::gui {

namespace {

// Why the settings of `c` fix the classes at `classes`, in the config's words.
QString class_rule_reason(const Config& c) {
  if (c.task == ModelTask::instances) {
    return c.instances.target == InstanceTarget::boundary
               ? ConfigPanel::tr(
                     "instances.target \"boundary\" trains three classes (background, interior, "
                     "boundary)")
               : ConfigPanel::tr("instances.target \"weight_map\" trains a binary mask");
  }
  return ConfigPanel::tr("data.source \"dsb2018\" has binary nucleus masks");
}

}  // namespace

void ConfigPanel::follow_class_rule() {
  if (loading_) return;
  Field* classes = find_field(QStringLiteral("model.classes"));
  if (!classes || !classes->spins[0]) return;
  QSpinBox* spin = classes->spins[0];
  const Config c = lenient_config();
  const std::optional<std::int64_t> fixed = required_classes(c.task, c.instances.target, c.data.source);
  const int shown = spin->value();
  QString message;
  if (fixed && *fixed != shown) {
    if (!classes_chosen_) classes_chosen_ = shown;
    message = tr("model.classes set to %1: %2.").arg(*fixed).arg(class_rule_reason(c));
    loading_ = true;  // not the user's edit: the choice kept above stays
    spin->setValue(static_cast<int>(*fixed));
    loading_ = false;
  } else if (!fixed && classes_chosen_) {
    const int chosen = *classes_chosen_;
    classes_chosen_.reset();
    if (chosen == shown) return;
    message = tr("model.classes back to %1, the value chosen before: nothing fixes it now.").arg(chosen);
    loading_ = true;
    spin->setValue(chosen);
    loading_ = false;
  } else {
    return;
  }
  // The caller's edited() revalidates the form with the new value.
  emit classes_adjusted(message);
}

void ConfigPanel::classes_edited() {
  if (!loading_) classes_chosen_.reset();
}

}  // namespace unet::gui
