#include "gui/log_view.h"

#include "gui/prompter.h"
#include "gui/setting_labels.h"

#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QDateTime>
#include <QHelpEvent>
#include <QMenu>
#include <QScrollBar>
#include <QTextBlock>
#include <QTextBlockFormat>
#include <QTextBlockUserData>
#include <QTextCursor>
#include <QToolTip>

namespace unet::gui {

namespace {

// What a line holds beyond its text; the document owns it with the line.
class LineDetails : public QTextBlockUserData {
 public:
  explicit LineDetails(QString details) : text(std::move(details)) {}
  const QString text;
};

QString details_of(const QTextBlock& block) {
  const auto* d = block.isValid() ? static_cast<const LineDetails*>(block.userData()) : nullptr;
  return d ? d->text : QString();
}

}  // namespace

LogView::LogView(QWidget* parent) : QPlainTextEdit(parent) {
  setReadOnly(true);
  setMaximumBlockCount(20000);
  setLineWrapMode(QPlainTextEdit::WidgetWidth);
  QFont mono("monospace");
  mono.setStyleHint(QFont::TypeWriter);
  setFont(mono);
}

void LogView::add(LogLevel level, const QString& message) {
  add_raised(level, message, {});
}

void LogView::add_raised(LogLevel level, const QString& message, const QString& where) {
  QTextCharFormat format;
  if (level == LogLevel::error) {
    format.setForeground(QColor(0xc0, 0x2b, 0x2b));
    ++errors_;
  } else if (level == LogLevel::warning) {
    format.setForeground(QColor(0xb3, 0x6b, 0x00));
  }
  const LabelledMessage labelled = with_setting_labels(message);
  QStringList details;
  if (!labelled.keys.isEmpty()) details << message << setting_keys_text(labelled.keys);
  if (!where.isEmpty()) details << tr("raised at %1").arg(where);

  const bool at_end = verticalScrollBar()->value() == verticalScrollBar()->maximum();
  QTextCursor cursor(document());
  cursor.movePosition(QTextCursor::End);
  if (!document()->isEmpty()) cursor.insertBlock();
  const int first_line = cursor.blockNumber();
  cursor.insertText(QDateTime::currentDateTime().toString("HH:mm:ss  ") + labelled.text, format);
  // A message of several lines (a dataset's problems) is several blocks: each has the details.
  if (!details.isEmpty())
    for (QTextBlock b = document()->findBlockByNumber(first_line); b.isValid(); b = b.next())
      b.setUserData(new LineDetails(details.join('\n')));
  if (at_end) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  emit added(level, message);
}

int LogView::line_count() const {
  return document()->isEmpty() ? 0 : document()->blockCount();
}

QString LogView::details(int line) const {
  return details_of(document()->findBlockByNumber(line));
}

bool LogView::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QString text = details_of(cursorForPosition(help->pos()).block());
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(help->globalPos(), text, viewport());
    return true;
  }
  return QPlainTextEdit::viewportEvent(event);
}

void LogView::contextMenuEvent(QContextMenuEvent* event) {
  std::unique_ptr<QMenu> menu(createStandardContextMenu(event->pos()));
  const QTextBlock block = cursorForPosition(event->pos()).block();
  const QString details = details_of(block);
  QAction* copy = menu->addAction(tr("Copy the line with its details"));
  copy->setEnabled(block.isValid() && !block.text().isEmpty());
  connect(copy, &QAction::triggered, this, [text = block.text(), details] {
    QApplication::clipboard()->setText(details.isEmpty() ? text : text + '\n' + details);
  });
  menu->exec(event->globalPos());
}

void say_failure(Prompter& prompter, QWidget* parent, LogView* log, const QString& title,
                 const QString& log_text, const QString& why) {
  log->add(LogLevel::error, log_text);
  prompter.warn(parent, title, why);
}

}  // namespace unet::gui
