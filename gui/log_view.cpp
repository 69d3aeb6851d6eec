#include "gui/log_view.h"

#include "gui/prompter.h"

#include <QDateTime>
#include <QScrollBar>
#include <QTextBlockFormat>
#include <QTextCursor>

namespace unet::gui {

LogView::LogView(QWidget* parent) : QPlainTextEdit(parent) {
  setReadOnly(true);
  setMaximumBlockCount(20000);
  setLineWrapMode(QPlainTextEdit::WidgetWidth);
  QFont mono("monospace");
  mono.setStyleHint(QFont::TypeWriter);
  setFont(mono);
}

void LogView::add(LogLevel level, const QString& message) {
  QTextCharFormat format;
  if (level == LogLevel::error) {
    format.setForeground(QColor(0xc0, 0x2b, 0x2b));
    ++errors_;
  } else if (level == LogLevel::warning) {
    format.setForeground(QColor(0xb3, 0x6b, 0x00));
  }
  const bool at_end = verticalScrollBar()->value() == verticalScrollBar()->maximum();
  QTextCursor cursor(document());
  cursor.movePosition(QTextCursor::End);
  if (!document()->isEmpty()) cursor.insertBlock();
  cursor.insertText(QDateTime::currentDateTime().toString("HH:mm:ss  ") + message, format);
  if (at_end) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  emit added(level, message);
}

void say_failure(Prompter& prompter, QWidget* parent, LogView* log, const QString& title,
                 const QString& log_text, const QString& why) {
  log->add(LogLevel::error, log_text);
  prompter.warn(parent, title, why);
}

}  // namespace unet::gui
