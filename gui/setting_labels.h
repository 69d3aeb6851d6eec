// The form's words for config keys in the workbench's messages. The engine's messages name settings by key
// ("set data.skip_bad to true"), which is right for the CLI and the config file; the workbench shows the same
// setting as the form's label ("Skip bad files"). One source for both: the schema's label for each key,
// which the configuration form shows (config_form.cpp). The key itself stays at hand, for a tooltip.
#pragma once

#include <QString>
#include <QStringList>

class QMessageBox;

namespace unet::gui {

// The form's label of a config key ("Skip bad files" for "data.skip_bad"); empty for a name that is not one.
QString setting_label(const QString& key);

struct LabelledMessage {
  QString text;      // the message, each key it names replaced by its label in quotes: “Skip bad files”
  QStringList keys;  // the keys it named, in the order they first appear
};

// `message` with the dotted config keys it names ("data.skip_bad", not a bare word such as "precision",
// which reads as English) replaced by their labels. A key inside a longer name (a path, "data.skip_bad2")
// is left as it is.
LabelledMessage with_setting_labels(const QString& message);

// One line per key: "“Skip bad files”: data.skip_bad", for a tooltip; empty for no keys.
QString setting_keys_text(const QStringList& keys);

// `message` as the box's text, in labels, with the keys it named in the box's tooltip.
void set_labelled_text(QMessageBox& box, const QString& message);

}  // namespace unet::gui
