// The Dataset tab and the workbench's words, driven through the real window, offscreen. A folder with good
// pairs, a missing mask and a mask of the wrong size shows one row per pair with its status and the engine's
// problems, a summary with the classes found, and rescans when a data setting changes; selecting a pair
// previews its mask over the image in the class's colour. The log names settings by the form's labels (the
// key in the line's details) and keeps where the engine raised an error out of its text; the export dialogs'
// titles read as English.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileDialog>
#include <QLabel>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QTreeWidget>

#include <filesystem>

#include "gui/dataset_browser.h"
#include "gui/predictions_tab.h"
#include "gui/setting_labels.h"
#include "gui_window_support.h"
#include "test_support.h"
#include "unet/io/image.h"

using namespace unet;
using namespace unet::gui;
using namespace unet::gui::window_test;

namespace {

constexpr int kSide = 32;

// The test images' gray value at (x, y).
int gray_at(int x, int y) {
  return (x * 7 + y * 3) % 256;
}

bool in_square(int x, int y) {
  return x >= 8 && x < 16 && y >= 8 && y < 16;
}

void write_gray(const std::filesystem::path& path, int width, int height, bool mask) {
  Image image{height, width, 1, std::vector<std::uint8_t>(static_cast<std::size_t>(width * height))};
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      image.pixels[static_cast<std::size_t>(y * width + x)] =
          static_cast<std::uint8_t>(mask ? (in_square(x, y) ? 1 : 0) : gray_at(x, y));
  write_png(path, image);
}

// a and b good (b's mask named b_mask), c without a mask, d with a mask 8 rows short.
std::filesystem::path write_dataset(const QTemporaryDir& dir) {
  const std::filesystem::path root = std::filesystem::path(dir.path().toStdString()) / "cells";
  std::filesystem::create_directories(root / "images");
  std::filesystem::create_directories(root / "masks");
  for (const char* stem : {"a", "b", "c", "d"})
    write_gray(root / "images" / (std::string(stem) + ".png"), kSide, kSide, false);
  write_gray(root / "masks" / "a.png", kSide, kSide, true);
  write_gray(root / "masks" / "b_mask.png", kSide, kSide, true);
  write_gray(root / "masks" / "d.png", kSide, kSide - 8, true);
  return root;
}

Config folder_config(const std::filesystem::path& root, const QString& run_dir) {
  return config_from_json(
      {{"model", {{"width", 8}, {"depth", 2}, {"in_channels", 1}, {"classes", 1}}},
       {"data", {{"source", "folder"}, {"path", root.string()}, {"image_size", {kSide, kSide}}}},
       {"train", {{"epochs", 1}, {"batch_size", 2}}},
       {"checkpoint", {{"dir", run_dir.toStdString()}}}});
}

// The title of the next modal file dialog, which is then cancelled; empty when none opens within 30 s.
QString title_of_next_file_dialog(const std::function<void()>& open) {
  QString title;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, [&] {
    if (auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
        dialog && title.isEmpty()) {
      title = dialog->windowTitle();
      dialog->reject();
    }
  });
  poll.start(10);
  QTimer::singleShot(30000, [&] { poll.stop(); });
  open();  // returns once the dialog has been answered
  return title;
}

// The window over the test dataset, its log watched (`log` outlives the window), the Dataset tab not shown.
struct WindowOnDataset {
  QTemporaryDir dir;
  std::filesystem::path root = write_dataset(dir);
  test::LogWatch log;
  MainWindow window{{.demo = true, .prompter = std::make_shared<PromptRecorder>()}};

  WindowOnDataset() {
    watch_log(window, log);
    window.show();
    window.config_panel()->set_config(folder_config(root, dir.filePath("run")));
  }
  DatasetBrowser& browser() { return *window.dataset_browser(); }
  // Shows the Dataset tab; true once it has shown its scan (within 60 s).
  [[nodiscard]] bool show_tab() {
    QSignalSpy scanned(&browser(), &DatasetBrowser::scanned);
    window.findChild<QTabWidget*>()->setCurrentWidget(&browser());
    return QTest::qWaitFor([&] { return !scanned.isEmpty(); }, 60000);
  }
};

}  // namespace

class TestGuiDatasetBrowser : public QObject {
  Q_OBJECT
  QTemporaryDir home_;

 private slots:
  void initTestCase() { isolate_window_tests(home_, "test_gui_dataset_browser"); }

  void listsEachPairWithItsProblems() {
    WindowOnDataset on;
    DatasetBrowser& browser = on.browser();
    QVERIFY(on.show_tab());

    const QTreeWidget& rows = *browser.pairs();
    QCOMPARE(rows.topLevelItemCount(), 4);
    const auto cell = [&](int row, int column) { return rows.topLevelItem(row)->text(column); };
    const QStringList images{"images/a.png", "images/b.png", "images/c.png", "images/d.png"};
    const QStringList masks{"masks/a.png", "masks/b_mask.png", "none", "masks/d.png"};
    const QStringList statuses{"good", "good", "bad", "bad"};
    for (int r = 0; r < 4; ++r) {
      QCOMPARE(cell(r, DatasetBrowser::image_column), images[r]);
      QCOMPARE(cell(r, DatasetBrowser::mask_column), masks[r]);
      QCOMPARE(cell(r, DatasetBrowser::status_column), statuses[r]);
    }
    QCOMPARE(cell(0, DatasetBrowser::problems_column), QString());
    QCOMPARE(cell(1, DatasetBrowser::problems_column), QString());
    QCOMPARE(cell(2, DatasetBrowser::problems_column),
             QString("images/c.png: missing mask (looked for masks/c.* and masks/c_mask.*)"));
    QVERIFY2(cell(3, DatasetBrowser::problems_column)
                 .startsWith("masks/d.png: the mask is 32x24 (width x height) but its image"),
             qPrintable(cell(3, DatasetBrowser::problems_column)));
    // a and b: 64 foreground pixels of 1024 each, 6.25 %.
    QVERIFY2(browser.summary().contains("4 pairs, 2 good, 2 bad"), qPrintable(browser.summary()));
    QVERIFY2(browser.summary().contains("classes found: 0: 93.8 % of the pixels, 1: 6.25 % of the pixels"),
             qPrintable(browser.summary()));
    QVERIFY2(browser.summary().contains("Start refuses this dataset"), qPrintable(browser.summary()));

    // A data setting changed: the tab rescans and says what training now does with the bad pairs.
    QSignalSpy scanned(&browser, &DatasetBrowser::scanned);
    QVERIFY(set_field(*on.window.config_panel(), "data.skip_bad", true));
    QVERIFY(QTest::qWaitFor([&] { return !scanned.isEmpty(); }, 60000));
    QVERIFY2(
        browser.summary().contains("Training leaves the bad pairs out (\u201cSkip bad files\u201d is on)"),
        qPrintable(browser.summary()));
    // Another setting than the data's: no rescan (which would say "Scanning" at once).
    const QString summary = browser.summary();
    QVERIFY(set_field(*on.window.config_panel(), "train.epochs", 3));
    QCOMPARE(browser.summary(), summary);
  }

  void selectingAPairPreviewsIt() {
    WindowOnDataset on;
    DatasetBrowser& browser = on.browser();
    QVERIFY(on.show_tab());
    QCOMPARE(browser.pairs()->topLevelItemCount(), 4);

    QSignalSpy previewed(&browser, &DatasetBrowser::previewed);
    browser.pairs()->setCurrentItem(browser.pairs()->topLevelItem(0));
    QVERIFY(QTest::qWaitFor([&] { return !browser.preview().isNull(); }, 30000));
    QImage shown = browser.preview();
    QCOMPARE(shown.size(), QSize(kSide, kSide));
    const QColor foreground = class_colour(1);
    for (const auto& [x, y] : {std::pair{0, 0}, {9, 10}, {15, 15}, {20, 3}}) {
      const int g = gray_at(x, y);
      const QRgb expected = in_square(x, y) ? qRgb((g + foreground.red()) / 2, (g + foreground.green()) / 2,
                                                   (g + foreground.blue()) / 2)
                                            : qRgb(g, g, g);
      QCOMPARE(shown.pixel(x, y), expected);
    }
    QCOMPARE(browser.preview_note(), QString());

    // d's mask is not the image's size: the image alone, and why.
    previewed.clear();
    browser.pairs()->setCurrentItem(browser.pairs()->topLevelItem(3));
    QVERIFY(QTest::qWaitFor([&] { return !previewed.isEmpty() && !browser.preview().isNull(); }, 30000));
    shown = browser.preview();
    QCOMPARE(shown.pixel(9, 10), qRgb(gray_at(9, 10), gray_at(9, 10), gray_at(9, 10)));
    QCOMPARE(browser.preview_note(),
             QString("The mask is 32x24 and the image 32x32 (width x height): the mask is not drawn."));
  }

  // The engine's refusal of the bad dataset names data.skip_bad and is raised in preflight.cpp: the log line
  // shows the form's label and no source location; its details have both.
  void theLogSpeaksTheFormsWords() {
    WindowOnDataset on;
    on.log.expect_error("set data.skip_bad to true");
    MainWindow& window = on.window;
    QVERIFY(train_to_the_end(window, *window.config_panel()->config()));
    QCOMPARE(window.trainer_state(), TrainerState::failed);

    const LogView& view = *window.log_view();
    int line = -1;
    for (int i = 0; i < view.line_count(); ++i)
      if (view.document()->findBlockByNumber(i).text().contains("problems in 4 samples")) line = i;
    QVERIFY2(line >= 0, qPrintable(view.toPlainText()));
    const QString text = view.document()->findBlockByNumber(line).text();
    QVERIFY2(text.contains("set \u201cSkip bad files\u201d to true to train on the 2 good samples"),
             qPrintable(text));
    QVERIFY2(!text.contains("data.skip_bad"), qPrintable(text));
    const QRegularExpression location(R"(\w+\.cpp:\d+)");
    QVERIFY2(!view.toPlainText().contains(location), qPrintable(view.toPlainText()));
    const QString details = view.details(line);
    QVERIFY2(details.contains("\u201cSkip bad files\u201d: data.skip_bad"), qPrintable(details));
    QVERIFY2(details.contains(QRegularExpression(R"(raised at preflight\.cpp:\d+)")), qPrintable(details));

    // The box that says the run stopped speaks the same words, the key in its tooltip.
    QMessageBox* stopped = nullptr;
    for (QMessageBox* box : window.findChildren<QMessageBox*>())
      if (box->windowTitle() == "Training stopped") stopped = box;
    QVERIFY(stopped);
    QVERIFY2(
        stopped->text().contains("\u201cSkip bad files\u201d") && !stopped->text().contains("data.skip_bad"),
        qPrintable(stopped->text()));
    QCOMPARE(stopped->toolTip(), QString("\u201cSkip bad files\u201d: data.skip_bad"));
  }

  void exportDialogsHaveEnglishTitles_data() {
    QTest::addColumn<QString>("action");
    QTest::addColumn<QString>("title");
    QTest::newRow("onnx") << "Export ONNX…"
                          << "Export the model as ONNX";
    QTest::newRow("weights") << "Export weights…"
                             << "Export the weights of a checkpoint";
  }

  void exportDialogsHaveEnglishTitles() {
    QFETCH(QString, action);
    QFETCH(QString, title);
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    window.show();
    QAction* export_action = nullptr;
    for (QAction* a : window.findChildren<QAction*>())
      if (a->text() == action) export_action = a;
    QVERIFY(export_action);
    QCOMPARE(title_of_next_file_dialog([&] { export_action->trigger(); }), title);
  }

  // One mapping, the form's: a key's label is the text of the form's label for its editor.
  void labelsAreTheForms() {
    MainWindow window({.demo = true, .prompter = std::make_shared<PromptRecorder>()});
    QWidget* editor = window.config_panel()->field("data.skip_bad");
    QLabel* form_label = nullptr;
    for (QLabel* l : window.config_panel()->findChildren<QLabel*>())
      if (l->buddy() == editor) form_label = l;
    QVERIFY(form_label);
    QCOMPARE(setting_label("data.skip_bad"), form_label->text());
    QCOMPARE(setting_label("no.such_key"), QString());
    const LabelledMessage m =
        with_setting_labels("set data.skip_bad, not /x/data.skip_bad or data.skip_bad2; train.lr");
    QCOMPARE(m.text,
             QString("set \u201cSkip bad files\u201d, not /x/data.skip_bad or data.skip_bad2; \u201c%1\u201d")
                 .arg(setting_label("train.lr")));
    QCOMPARE(m.keys, QStringList({"data.skip_bad", "train.lr"}));
    // A key in JSON's quotes (a remedy applied) reads as the label, in its quotes alone.
    QCOMPARE(with_setting_labels(R"(applied {"train.batch_size": 4})").text,
             QString("applied {\u201c%1\u201d: 4}").arg(setting_label("train.batch_size")));
  }
};

QTEST_MAIN(TestGuiDatasetBrowser)
#include "test_gui_dataset_browser.moc"
