#include "gui/dialogs/guide.h"

#include <QDialogButtonBox>
#include <QFile>
#include <QScreen>
#include <QTextBrowser>
#include <QVBoxLayout>

namespace unet::gui {

GuideDialog::GuideDialog(QWidget* parent) : QDialog(parent) {
  setObjectName("guide");
  setWindowTitle(tr("UNet Workbench — user guide"));
  auto* layout = new QVBoxLayout(this);
  auto* text = new QTextBrowser(this);
  text->setObjectName("guide_text");
  text->setOpenExternalLinks(true);
  QFile page(":/guide.html");
  if (page.open(QIODevice::ReadOnly)) text->setHtml(QString::fromUtf8(page.readAll()));
  layout->addWidget(text);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::close);
  layout->addWidget(buttons);
  const QRect room = parent->screen()->availableGeometry();
  resize(std::min(720, room.width() * 8 / 10), std::min(640, room.height() * 8 / 10));
}

}  // namespace unet::gui
