#include "gui/setting_labels.h"

#include <QMessageBox>
#include <QRegularExpression>

#include <algorithm>

#include "gui/config_panel_text.h"
#include "unet/config/config.h"

namespace unet::gui {

namespace {

QString quoted(const QString& label) {
  return QStringLiteral("\u201c%1\u201d").arg(label);
}

// Every dotted key of the schema as one alternation, longest first (so that a key that begins another is
// not matched inside it), between characters that cannot be part of a key or a path. A key in JSON's quotes
// ({"train.batch_size": 4}, a remedy applied) is matched with its quotes, which the label's replace.
const QRegularExpression& dotted_keys() {
  static const QRegularExpression pattern = [] {
    QStringList keys;
    for (const ConfigKey& k : config_schema())
      if (k.path.find('.') != std::string::npos) keys << QRegularExpression::escape(qstr(k.path));
    std::sort(keys.begin(), keys.end(),
              [](const QString& a, const QString& b) { return a.size() > b.size(); });
    return QRegularExpression(
        QStringLiteral("(?<![\\w./\\\\-])(\"?)(%1)\\1(?![\\w/\\\\-]|\\.\\w)").arg(keys.join('|')));
  }();
  return pattern;
}

}  // namespace

QString setting_label(const QString& key) {
  const ConfigKey* k = find_config_key(key.toStdString());
  return k ? qstr(k->label) : QString();
}

LabelledMessage with_setting_labels(const QString& message) {
  LabelledMessage out;
  qsizetype copied = 0;
  QRegularExpressionMatchIterator matches = dotted_keys().globalMatch(message);
  while (matches.hasNext()) {
    const QRegularExpressionMatch m = matches.next();
    const QString key = m.captured(2);
    out.text += message.mid(copied, m.capturedStart() - copied) + quoted(setting_label(key));
    copied = m.capturedEnd();
    if (!out.keys.contains(key)) out.keys << key;
  }
  out.text += message.mid(copied);
  return out;
}

QString setting_keys_text(const QStringList& keys) {
  QStringList lines;
  for (const QString& key : keys) lines << QStringLiteral("%1: %2").arg(quoted(setting_label(key)), key);
  return lines.join('\n');
}

void set_labelled_text(QMessageBox& box, const QString& message) {
  const LabelledMessage labelled = with_setting_labels(message);
  box.setText(labelled.text);
  box.setToolTip(setting_keys_text(labelled.keys));
}

}  // namespace unet::gui
