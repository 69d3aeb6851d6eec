// The run folder of a start the trainer refuses before training (issue 25, item 4): a folder the start made
// is taken back with what the start wrote in it (its lock, its validation.json, the planner's report), so
// that no empty folder holding only a lock is left behind; a folder that was there before keeps every file it
// held.
#include <QTemporaryDir>

#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "unet/train/trainer.h"

using namespace unet;

namespace {

// A small run of 40 synthetic images into `dir`, one epoch.
Config small_config(const std::filesystem::path& dir) {
  return config_from_json({{"model", {{"width", 4}, {"depth", 2}}},
                           {"data", {{"image_size", {32, 32}}, {"synthetic_samples", 40}}},
                           {"train", {{"epochs", 1}, {"batch_size", 8}}},
                           {"checkpoint", {{"dir", dir.string()}}}});
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// How each refusal is made: the preflight (an image without its mask), a rule that needs the run's length
// (a warm-up as long as the run), and the memory plan (a cap the parameters alone exceed). Each is refused
// after the folder is claimed, the point where a start first writes into it.
enum class Refusal { preflight, rule, does_not_fit };

Config refused_config(Refusal refusal, const std::filesystem::path& run_dir,
                      const std::filesystem::path& data) {
  Config c = small_config(run_dir);
  switch (refusal) {
    case Refusal::preflight:
      std::filesystem::create_directories(data / "images");
      std::filesystem::create_directories(data / "masks");
      write_text(data / "images" / "a.png", "not an image, and no mask");
      c.data.source = DataSource::folder;
      c.data.path = data.string();
      break;
    case Refusal::rule:
      c.schedule.warmup_steps = 1000;  // the run has 4 steps
      break;
    case Refusal::does_not_fit:
      c.memory.cap_mib = 1;
      break;
  }
  return c;
}

struct RefusalObserver : test::WatchedObserver {
  std::vector<ErrorReport> errors;
  void on_error(const ErrorReport& e) override { errors.push_back(e); }
};

// Runs `c`, which the trainer must refuse before training; false (recorded) when it does not.
[[nodiscard]] bool refused(const Config& c) {
  RefusalObserver observer;
  Trainer trainer(c, &observer);
  try {
    trainer.run();
  } catch (const Error& e) {
    HELPER_COMPARE(trainer.state(), TrainerState::failed);
    HELPER_VERIFY2(e.kind() != ErrorKind::io, e.what());  // refused for what the row sets up, not the folder
    return observer.log.check();
  }
  HELPER_VERIFY2(false, "the start was not refused");
  return false;
}

}  // namespace

Q_DECLARE_METATYPE(Refusal)

namespace {
void refusal_rows() {
  QTest::addColumn<Refusal>("refusal");
  QTest::newRow("preflight") << Refusal::preflight;
  QTest::newRow("rule") << Refusal::rule;
  QTest::newRow("does not fit") << Refusal::does_not_fit;
}
}  // namespace

class TestRunFolder : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // A start refused in a folder it made (and the folder above it, which it made too) leaves neither.
  void aRefusedStartTakesBackTheFolderItMade_data() { refusal_rows(); }
  void aRefusedStartTakesBackTheFolderItMade() {
    QFETCH(Refusal, refusal);
    QTemporaryDir tmp;
    const std::filesystem::path root = tmp.path().toStdString();
    const std::filesystem::path made = root / "runs", run_dir = made / "first";
    QVERIFY(refused(refused_config(refusal, run_dir, root / "data")));
    QVERIFY2(!std::filesystem::exists(run_dir), run_dir.c_str());
    QVERIFY2(!std::filesystem::exists(made), made.c_str());
    QVERIFY(std::filesystem::exists(root));
  }

  // In a folder that was there, holding the user's files, a refused start leaves every one of them as it was,
  // and the folder.
  void aRefusedStartLeavesAnExistingFolder_data() { refusal_rows(); }
  void aRefusedStartLeavesAnExistingFolder() {
    QFETCH(Refusal, refusal);
    QTemporaryDir tmp;
    const std::filesystem::path root = tmp.path().toStdString(), run_dir = root / "mine";
    std::filesystem::create_directories(run_dir / "notes");
    write_text(run_dir / "notes.txt", "the user's notes");
    write_text(run_dir / "notes" / "more.txt", "more");
    QVERIFY(refused(refused_config(refusal, run_dir, root / "data")));
    QCOMPARE(read_text(run_dir / "notes.txt"), std::string("the user's notes"));
    QCOMPARE(read_text(run_dir / "notes" / "more.txt"), std::string("more"));
  }

  // An empty folder that was there is the user's too: it stays.
  void aRefusedStartLeavesAnEmptyFolderThatWasThere() {
    QTemporaryDir tmp;
    const std::filesystem::path run_dir = std::filesystem::path(tmp.path().toStdString()) / "empty";
    std::filesystem::create_directories(run_dir);
    QVERIFY(refused(refused_config(Refusal::rule, run_dir, {})));
    QVERIFY(std::filesystem::is_directory(run_dir));
  }

  // A start that trains keeps the folder it made, with its files.
  void aRunThatTrainsKeepsItsFolder() {
    QTemporaryDir tmp;
    const std::filesystem::path run_dir = std::filesystem::path(tmp.path().toStdString()) / "runs" / "kept";
    Config c = small_config(run_dir);
    c.train.steps = 1;
    test::WatchedObserver observer;
    Trainer trainer(c, &observer);
    trainer.run();
    QCOMPARE(trainer.state(), TrainerState::finished);
    QVERIFY(std::filesystem::exists(run_dir / "metrics.jsonl"));
    QVERIFY(std::filesystem::exists(run_dir / "last.safetensors"));
  }
};

QTEST_GUILESS_MAIN(TestRunFolder)
#include "test_run_folder.moc"
