#include "gui/natural_order.h"

#include <QCollator>
#include <QFileInfo>
#include <QLocale>

#include <algorithm>

namespace unet::gui {

void sort_naturally(QStringList& paths) {
  // Under the C locale (LANG=C, C.UTF-8: common on servers and in containers) Qt's collator compares code
  // points and has no numeric mode: English collation there.
  const QLocale locale = QLocale().language() == QLocale::C ? QLocale(QLocale::English) : QLocale();
  QCollator collator(locale);
  collator.setNumericMode(true);
  collator.setCaseSensitivity(Qt::CaseInsensitive);
  std::stable_sort(paths.begin(), paths.end(), [&collator](const QString& a, const QString& b) {
    const int by_name = collator.compare(QFileInfo(a).fileName(), QFileInfo(b).fileName());
    return by_name != 0 ? by_name < 0 : collator.compare(a, b) < 0;
  });
}

}  // namespace unet::gui
