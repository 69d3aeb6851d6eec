// The log tab: everything the engine reports, time-stamped; warnings amber, errors red. A line reads as the
// form does: config keys are shown by the form's labels (setting_labels.h), and where the engine raised an
// error (file:line, for a bug report) stays out of the text. Both are the line's details: its tooltip, and
// what "Copy the line with its details" copies.
#pragma once

#include <QPlainTextEdit>

#include "unet/train/observer.h"

namespace unet::gui {

class LogView : public QPlainTextEdit {
  Q_OBJECT
 public:
  explicit LogView(QWidget* parent = nullptr);
  void add(LogLevel level, const QString& message);
  // An error the engine raised at `where` ("preflight.cpp:467"), which goes into the line's details.
  void add_raised(LogLevel level, const QString& message, const QString& where);
  int errors() const { return errors_; }
  // Lines shown (the oldest are dropped past 20000), and line `line`'s details: the message as the engine
  // worded it, the keys it named and where it was raised; empty for a line with nothing more to say.
  int line_count() const;
  QString details(int line) const;

 signals:
  // Each message as it is added, in the engine's words (keys, not labels): for whoever must act on warnings
  // and errors (the tests fail on unexpected ones).
  void added(unet::LogLevel level, const QString& message);

 protected:
  bool viewportEvent(QEvent* event) override;
  void contextMenuEvent(QContextMenuEvent* event) override;

 private:
  int errors_ = 0;
};

class Prompter;

// A failure the user asked about: `log_text` into `log` as an error, and `why` told through `prompter` (a
// message box titled `title` over `parent`).
void say_failure(Prompter& prompter, QWidget* parent, LogView* log, const QString& title,
                 const QString& log_text, const QString& why);

}  // namespace unet::gui
