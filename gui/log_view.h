// The log tab: everything the engine reports, time-stamped; warnings amber, errors red.
#pragma once

#include <QPlainTextEdit>

#include "unet/train/observer.h"

namespace unet::gui {

class LogView : public QPlainTextEdit {
  Q_OBJECT
 public:
  explicit LogView(QWidget* parent = nullptr);
  void add(LogLevel level, const QString& message);
  int errors() const { return errors_; }

 signals:
  // Each message as it is added: for whoever must act on warnings and errors (the tests fail on unexpected
  // ones).
  void added(unet::LogLevel level, const QString& message);

 private:
  int errors_ = 0;
};

class Prompter;

// A failure the user asked about: `log_text` into `log` as an error, and `why` told through `prompter` (a
// message box titled `title` over `parent`).
void say_failure(Prompter& prompter, QWidget* parent, LogView* log, const QString& title,
                 const QString& log_text, const QString& why);

}  // namespace unet::gui
