// Issue 11, "Nothing lost, nothing hung", for runs and their folders, through unet-train as a user runs it:
// - a run whose saves fail exits non-zero and says so; a full disk says how many bytes a save needed;
// - one run per folder at a time (a lock naming its holder), and a fresh run never destroys a previous one;
// - checkpoint.template cannot take the run's own names;
// - metrics.jsonl holds whole records, and marks each start and resume;
// - checkpoint.keep_last prunes what is on disk, not only what the log recorded;
// - predict never writes over its inputs.
// Every case uses the tiny demo (width 4, depth 2, 32x32 images) so that it runs in seconds.
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <sys/mount.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <string>

#include "test_support.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

using namespace unet;

namespace {

// 16 training and 4 validation images of 32x32, batch 8: 2 steps per epoch.
const QStringList tiny = {"--set", "model.width=4",           "--set", "model.depth=2",
                          "--set", "data.image_size=[32,32]", "--set", "data.synthetic_samples=20",
                          "--set", "data.val_fraction=0.2"};

std::string read_text(const QString& path) {
  std::ifstream in(path.toStdString(), std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<nlohmann::json> records_of(const QString& metrics, bool* all_whole = nullptr) {
  std::vector<nlohmann::json> out;
  const std::string text = read_text(metrics);
  if (all_whole) *all_whole = text.empty() || text.back() == '\n';
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const nlohmann::json j = nlohmann::json::parse(text.substr(at, end - at), nullptr, false);
    if (j.is_discarded() && all_whole) *all_whole = false;
    if (!j.is_discarded()) out.push_back(j);
    at = end + 1;
  }
  return out;
}

// The bytes of every file of a folder (not its sub-folders), by name; run.lock, the lock a run takes (and
// leaves, see run_folder.h), aside.
std::map<QString, std::string> contents_of(const QString& folder) {
  std::map<QString, std::string> files;
  for (const QString& name : QDir(folder).entryList(QDir::Files | QDir::Hidden))
    if (name != "run.lock") files[name] = read_text(folder + "/" + name);
  return files;
}

// A unet-train started in the background (a run another one meets).
struct Background {
  QProcess process;
  Background(const QStringList& args, const QString& cwd, const QString& program = UNET_TRAIN_BINARY) {
    process.setWorkingDirectory(cwd);
    process.start(program, args);
  }
  ~Background() {
    if (process.state() != QProcess::NotRunning) {
      process.kill();
      process.waitForFinished(10000);
    }
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
};

// Waits until the run's metrics.jsonl has a step record: then it holds its folder.
bool wait_for_steps(const QString& metrics, QProcess& run) {
  return test::wait_on_thread_until(
             [&] {
               if (run.state() == QProcess::NotRunning) return true;
               for (const auto& j : records_of(metrics))
                 if (j.value("kind", "") == "step") return true;
               return false;
             },
             120000) &&
         run.state() == QProcess::Running;
}

// A tmpfs of `size` mounted at `path` for the life of the object (root only).
class TinyDisk {
 public:
  TinyDisk(const QString& path, const QString& size) : path_(path) {
    QDir().mkpath(path);
    mounted_ = ::mount("tmpfs", path.toLocal8Bit().constData(), "tmpfs", 0,
                       ("size=" + size).toLocal8Bit().constData()) == 0;
  }
  ~TinyDisk() {
    if (mounted_) ::umount2(path_.toLocal8Bit().constData(), MNT_DETACH);
  }
  TinyDisk(const TinyDisk&) = delete;
  TinyDisk& operator=(const TinyDisk&) = delete;
  bool mounted() const { return mounted_; }

 private:
  QString path_;
  bool mounted_ = false;
};

// A complete short run in `folder` of `dir` (2 steps, an epoch), to copy files from.
bool make_run(const QString& dir, const QString& folder, const QStringList& more = {}) {
  const test::ProcessResult r = test::unet_train(
      QStringList{"train", "--set", "train.epochs=1", "--set", "checkpoint.dir=" + folder} + tiny + more,
      dir);
  HELPER_VERIFY2(r.code == 0, qPrintable(r.err));
  return true;
}

void write_image(const QString& path, std::uint8_t shade) {
  Image image{16, 16, 3, std::vector<std::uint8_t>(16 * 16 * 3, shade)};
  write_png(path.toStdString(), image);
}

}  // namespace

class TestReliabilityRuns : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- 8: the run's own names -----------------------------------------------------------------------------

  void templateCannotTakeTheRunsOwnNames_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("metrics.jsonl") << "metrics.jsonl";
    QTest::newRow("last") << "last.safetensors";
    QTest::newRow("best") << "best.safetensors";
    QTest::newRow("the lock") << "run.lock";
    QTest::newRow("a temporary file") << ".last.safetensors.tmp-0123456789ab";
    QTest::newRow("shaped like a temporary file") << ".unet.tmp-{step:012x}";
    QTest::newRow("a requested checkpoint") << "manual-step-{step:06d}.safetensors";
    QTest::newRow("dot dot") << "..";
    QTest::newRow("dot") << ".";
    QTest::newRow("out of the folder") << "../unet-{epoch}.safetensors";
  }
  void templateCannotTakeTheRunsOwnNames() {
    QFETCH(QString, name);
    const test::ProcessResult r = test::unet_train({"summary", "--set", "checkpoint.template=" + name});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("checkpoint.template") && r.err.contains(name), qPrintable(r.err));
  }

};

QTEST_GUILESS_MAIN(TestReliabilityRuns)
#include "test_reliability_runs.moc"
