// Issue 11, "Nothing lost, nothing hung", for runs and their folders, through unet-train as a user runs it:
// - a run whose saves fail exits non-zero and says so; a full disk says how many bytes a save needed;
// - one run per folder at a time (a lock naming its holder), and a fresh run never destroys a previous one;
// - checkpoint.template cannot take the run's own names;
// - metrics.jsonl holds whole records, and marks each start and resume;
// - checkpoint.keep_last prunes what the log recorded, never what it only matches (issue 23);
// - predict never writes over its inputs.
// Every case uses the tiny demo (width 4, depth 2, 32x32 images) so that it runs in seconds.
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <string>

#include "test_support.h"
#include "unet/io/atomic_file.h"
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

  // --- 3: saves that fail ---------------------------------------------------------------------------------

  // last.safetensors is a folder: every save of it fails. The run trains to its end, then exits 1 saying
  // which file it could not write.
  void runWhoseSavesFailExitsNonZero() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("run/last.safetensors/occupied"));
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=run"} + tiny, dir.path());
    QCOMPARE(r.code, 1);
    const QString last_line = r.err.trimmed().split('\n').last();
    QVERIFY2(last_line.contains("last.safetensors") && last_line.contains("not saved"), qPrintable(r.err));
    QVERIFY(QFileInfo(dir.filePath("run/last.safetensors/occupied")).isDir());
  }

  // Something that is not a file where the run's log goes (a FIFO, which would block the open for ever, or a
  // folder) is refused by name at once.
  void aLogThatIsNotAFileIsRefused_data() {
    QTest::addColumn<bool>("fifo");
    QTest::newRow("FIFO") << true;
    QTest::newRow("folder") << false;
  }
  void aLogThatIsNotAFileIsRefused() {
    QFETCH(bool, fifo);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("run"));
    const QString log = dir.filePath("run/metrics.jsonl");
    QVERIFY(fifo ? ::mkfifo(log.toLocal8Bit().constData(), 0644) == 0 : QDir().mkdir(log));
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=run"} + tiny,
                         dir.path(), 60000);
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains(log) && r.err.contains("not a regular file"), qPrintable(r.err));
  }

  // A disk too small for a checkpoint: the run exits 1, the message says how many bytes the save needed and
  // how many were free, and no temporary file is left behind.
  void fullDiskSaysHowMuchWasNeeded() {
    if (::geteuid() != 0) QSKIP("mounting a tmpfs needs root");
    QTemporaryDir dir;
    TinyDisk disk(dir.filePath("disk"), "256k");
    if (!disk.mounted()) QSKIP("cannot mount a tmpfs here");
    // width 16: a checkpoint of about 1.3 MB, five times the disk.
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=disk"} +
                             tiny + QStringList{"--set", "model.width=16"},
                         dir.path());
    QCOMPARE(r.code, 1);
    static const QRegularExpression needed("needs [0-9]+ bytes, [0-9]+ bytes are free");
    QVERIFY2(r.err.contains("last.safetensors") && needed.match(r.err).hasMatch(), qPrintable(r.err));
    for (const QString& name : QDir(dir.filePath("disk")).entryList(QDir::Files | QDir::Hidden))
      QVERIFY2(!name.contains(".tmp-"), qPrintable(name));
  }

  // On a disk already full, replacing a file fails before touching it: the old bytes stay, no temporary file
  // is left, and the message says how many bytes the new file needed and how many were free.
  void atomicWriteOnAFullDiskSaysWhatItNeeded() {
    if (::geteuid() != 0) QSKIP("mounting a tmpfs needs root");
    QTemporaryDir dir;
    TinyDisk disk(dir.filePath("disk"), "64k");
    if (!disk.mounted()) QSKIP("cannot mount a tmpfs here");
    const std::string target = dir.filePath("disk/model.bin").toStdString();
    const std::string original = "the user's bytes";
    write_file_atomically(target, std::as_bytes(std::span(original)));
    {  // Fill the disk.
      std::ofstream filler(dir.filePath("disk/filler").toStdString(), std::ios::binary);
      const std::string block(4096, 'x');
      for (int i = 0; i < 64 && filler; ++i) filler << block;
    }
    const std::vector<std::byte> bytes(20000, std::byte{7});
    try {
      write_file_atomically(target, bytes);
      QFAIL("a write to a full disk succeeded");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::io);
      QVERIFY2(QString(e.what()).contains(QString::fromStdString(target)) &&
                   QString(e.what()).contains("needs 20000 bytes") && QString(e.what()).contains("free"),
               e.what());
    }
    QCOMPARE(read_text(QString::fromStdString(target)), original);
    for (const QString& name : QDir(dir.filePath("disk")).entryList(QDir::Files | QDir::Hidden))
      QVERIFY2(!name.contains(".tmp-"), qPrintable(name));
  }

  // --- 9: whole records -----------------------------------------------------------------------------------

  // A disk that fills while the log grows: the run fails, and every line of metrics.jsonl is a whole record.
  void diskFullLeavesWholeRecords() {
    if (::geteuid() != 0) QSKIP("mounting a tmpfs needs root");
    QTemporaryDir dir;
    TinyDisk disk(dir.filePath("disk"), "16k");
    if (!disk.mounted()) QSKIP("cannot mount a tmpfs here");
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=100000", "--set", "checkpoint.dir=disk"} + tiny,
        dir.path(), 300000);
    QCOMPARE(r.code, 1);
    bool whole = false;
    const auto records = records_of(dir.filePath("disk/metrics.jsonl"), &whole);
    QVERIFY(!records.empty());
    QVERIFY2(whole, "metrics.jsonl ends in a partial record");
  }

  // A log whose last record was cut short: the resumed run cuts the partial tail off, starts its records on
  // lines of their own, and marks where it resumed.
  void resumeRepairsAPartialTailAndMarksTheResume() {
    QTemporaryDir dir;
    QVERIFY(make_run(dir.path(), "run"));
    const QString metrics = dir.filePath("run/metrics.jsonl");
    const auto before = records_of(metrics);
    QVERIFY(!before.empty());
    QCOMPARE(before.front().value("kind", ""), std::string("start"));
    QCOMPARE(before.front().value("step", -1), 0);
    std::ofstream(metrics.toStdString(), std::ios::app) << "{\"kind\":\"step\",\"step\":3,\"lo";
    const test::ProcessResult r = test::unet_train(
        {"train", "--resume", "run/last.safetensors", "--set", "train.epochs=2"}, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    bool whole = false;
    const auto after = records_of(metrics, &whole);
    QVERIFY2(whole, read_text(metrics).c_str());
    // The first run's records are kept as they were, then the resume marker, then the new steps.
    QVERIFY(after.size() > before.size());
    for (std::size_t i = 0; i < before.size(); ++i) QCOMPARE(after[i], before[i]);
    QCOMPARE(after[before.size()].value("kind", ""), std::string("resume"));
    QCOMPARE(after[before.size()].value("step", -1), 2);
    std::int64_t expected_step = 3;
    for (std::size_t i = before.size(); i < after.size(); ++i)
      if (after[i].value("kind", "") == "step") QCOMPARE(after[i].value("step", -1), expected_step++);
    QCOMPARE(expected_step, 5);
  }

  // --- 7: one run per folder, and no silent replacement ---------------------------------------------------

  // A second run into a folder where one is training is refused with the holder's pid; the first run's
  // history is not touched and its in-flight temporary files are not removed.
  void secondRunIntoABusyFolderIsRefused() {
    QTemporaryDir dir;
    Background first(
        QStringList{"train", "--set", "train.steps=100000", "--set", "checkpoint.dir=run"} + tiny,
        dir.path());
    QVERIFY(first.process.waitForStarted());
    QVERIFY2(wait_for_steps(dir.filePath("run/metrics.jsonl"), first.process),
             first.process.readAllStandardError().constData());
    // As if the first run were writing a checkpoint now.
    const QString in_flight = dir.filePath("run/.last.safetensors.tmp-0123456789ab");
    std::ofstream(in_flight.toStdString()) << "half a checkpoint";

    for (const QStringList& extra : {QStringList{}, QStringList{"--overwrite"}}) {
      const test::ProcessResult second = test::unet_train(
          QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=run"} + tiny + extra,
          dir.path());
      QVERIFY2(second.code != 0, qPrintable(second.err));
      QVERIFY2(second.err.contains(QString::number(first.process.processId())) &&
                   second.err.contains(dir.filePath("run")),
               qPrintable(second.err));
      QVERIFY(QFile::exists(in_flight));
    }
    QVERIFY(QFile::remove(in_flight));
    ::kill(static_cast<pid_t>(first.process.processId()), SIGTERM);
    QVERIFY(first.process.waitForFinished(120000));
    QCOMPARE(first.process.exitCode(), 0);
    // One run's history: a start, then steps 1, 2, 3, ... without a gap or a repeat.
    bool whole = false;
    const auto records = records_of(dir.filePath("run/metrics.jsonl"), &whole);
    QVERIFY(whole);
    QCOMPARE(records.front().value("kind", ""), std::string("start"));
    std::int64_t expected_step = 1;
    for (const auto& j : records) {
      QVERIFY(j.value("kind", "") != "start" || &j == &records.front());
      if (j.value("kind", "") == "step") QCOMPARE(j.value("step", -1), expected_step++);
    }
  }

  // A run killed with SIGKILL leaves no lock behind: a new run can take its folder (asked to replace it).
  void lockOfAKilledRunIsReleased() {
    QTemporaryDir dir;
    {
      Background first(
          QStringList{"train", "--set", "train.steps=100000", "--set", "checkpoint.dir=run"} + tiny,
          dir.path());
      QVERIFY(first.process.waitForStarted());
      QVERIFY(wait_for_steps(dir.filePath("run/metrics.jsonl"), first.process));
      ::kill(static_cast<pid_t>(first.process.processId()), SIGKILL);
      QVERIFY(first.process.waitForFinished(10000));
    }
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--overwrite", "--set", "train.steps=2", "--set", "checkpoint.dir=run"} + tiny,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
  }

  // Resuming one run's checkpoint into the folder of another would append to its log and replace its
  // checkpoints: refused, naming both folders, and the other run's files stay byte for byte.
  void resumeIntoAnotherRunsFolderIsRefused() {
    QTemporaryDir dir;
    QVERIFY(make_run(dir.path(), "a"));
    QVERIFY(make_run(dir.path(), "b"));
    const auto before = contents_of(dir.filePath("b"));
    const test::ProcessResult r =
        test::unet_train({"train", "--resume", "a/last.safetensors", "--set",
                          "checkpoint.dir=" + dir.filePath("b"), "--set", "train.epochs=2"},
                         dir.path());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(dir.filePath("b")) && r.err.contains(dir.filePath("a")) &&
                 r.err.contains("--overwrite"),
             qPrintable(r.err));
    QVERIFY(contents_of(dir.filePath("b")) == before);
    // (A relative checkpoint.dir would resolve against the checkpoint's folder: see CONFIG.md.) Into an empty
    // folder it resumes.
    QCOMPARE(test::unet_train({"train", "--resume", "a/last.safetensors", "--set",
                               "checkpoint.dir=" + dir.filePath("c"), "--set", "train.epochs=2"},
                              dir.path())
                 .code,
             0);
  }

  // Resuming an earlier checkpoint of a run into its own folder, where last.safetensors is further along,
  // would replace the later state: refused, naming both steps and the ways on, with every file unchanged;
  // branching into another folder works, and --overwrite goes on there, saying so.
  void resumingAnEarlierCheckpointDoesNotReplaceTheLaterState() {
    QTemporaryDir dir;
    const QStringList periodic{"--set", "checkpoint.template=p-{epoch:02d}.safetensors"};
    const test::ProcessResult made = test::unet_train(
        QStringList{"train", "--set", "train.epochs=2", "--set", "checkpoint.dir=run"} + tiny + periodic,
        dir.path());
    QVERIFY2(made.code == 0, qPrintable(made.err));
    const QString earlier = dir.filePath("run/p-01.safetensors");
    QCOMPARE(load_checkpoint(earlier.toStdString()).position.step, 2);
    QCOMPARE(load_checkpoint(dir.filePath("run/last.safetensors").toStdString()).position.step, 4);
    const auto before = contents_of(dir.filePath("run"));

    const QStringList resume{"train", "--resume", earlier, "--set", "train.epochs=3"};
    const test::ProcessResult refused = test::unet_train(resume, dir.path());
    QCOMPARE(refused.code, 2);
    QVERIFY2(refused.err.contains("further along") && refused.err.contains("at step 4") &&
                 refused.err.contains("at step 2") && refused.err.contains("-from-step-2") &&
                 refused.err.contains("--overwrite"),
             qPrintable(refused.err));
    QVERIFY(contents_of(dir.filePath("run")) == before);

    const test::ProcessResult branched = test::unet_train(
        resume + QStringList{"--set", "checkpoint.dir=" + dir.filePath("run-from-step-2")}, dir.path());
    QVERIFY2(branched.code == 0, qPrintable(branched.err));
    QCOMPARE(load_checkpoint(dir.filePath("run-from-step-2/last.safetensors").toStdString()).position.step,
             6);
    QVERIFY(contents_of(dir.filePath("run")) == before);

    const test::ProcessResult replaced = test::unet_train(resume + QStringList{"--overwrite"}, dir.path());
    QVERIFY2(replaced.code == 0, qPrintable(replaced.err));
    QVERIFY2(replaced.err.contains("going on in") && replaced.err.contains("last.safetensors at step 4"),
             qPrintable(replaced.err));
    QCOMPARE(load_checkpoint(dir.filePath("run/last.safetensors").toStdString()).position.step, 6);
  }

  // A fresh run into a folder that holds any of a run's files is refused, naming the folder and the ways
  // on; the files stay byte for byte.
  void freshRunDoesNotReplaceAPreviousRun_data() {
    QTest::addColumn<QStringList>("files");
    QTest::newRow("the whole run") << QStringList{};
    QTest::newRow("metrics.jsonl") << QStringList{"metrics.jsonl"};
    QTest::newRow("last.safetensors") << QStringList{"last.safetensors"};
    QTest::newRow("best.safetensors") << QStringList{"best.safetensors"};
    QTest::newRow("a periodic checkpoint") << QStringList{"p-01.safetensors"};
    QTest::newRow("a requested checkpoint") << QStringList{"manual-step-000002.safetensors"};
  }
  void freshRunDoesNotReplaceAPreviousRun() {
    QFETCH(QStringList, files);
    QTemporaryDir dir;
    const QStringList template_set{"--set", "checkpoint.template=p-{epoch:02d}.safetensors"};
    QVERIFY(make_run(dir.path(), "made", template_set));
    QFile::copy(dir.filePath("made/last.safetensors"), dir.filePath("made/manual-step-000002.safetensors"));
    QString run = dir.filePath("made");
    if (!files.isEmpty()) {
      run = dir.filePath("run");
      QVERIFY(QDir().mkpath(run));
      for (const QString& f : files) QVERIFY(QFile::copy(dir.filePath("made/" + f), run + "/" + f));
    }
    const auto before = contents_of(run);
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--set", "train.steps=2", "--set", "checkpoint.dir=" + run} +
                             tiny + template_set,
                         dir.path());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(run) && r.err.contains("--resume") && r.err.contains("--overwrite") &&
                 r.err.contains("checkpoint.dir"),
             qPrintable(r.err));
    QVERIFY(contents_of(run) == before);
  }

  // --overwrite starts over in the folder and names each file of the previous run it removes; the user's
  // other files stay.
  void overwriteSaysWhatItRemoves() {
    QTemporaryDir dir;
    QVERIFY(make_run(dir.path(), "run"));
    std::ofstream(dir.filePath("run/notes.txt").toStdString()) << "mine";
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--overwrite", "--set", "train.steps=1", "--set", "checkpoint.dir=run"} + tiny,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("metrics.jsonl") && r.err.contains("best.safetensors"), qPrintable(r.err));
    QCOMPARE(read_text(dir.filePath("run/notes.txt")), std::string("mine"));
    const auto records = records_of(dir.filePath("run/metrics.jsonl"));
    QCOMPARE(records.front().value("kind", ""), std::string("start"));
    QCOMPARE(std::count_if(records.begin(), records.end(),
                           [](const nlohmann::json& j) { return j.value("kind", "") == "step"; }),
             1);
  }

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

  // --- 10: keep_last prunes what the run wrote ------------------------------------------------------------

  // keep_last prunes the periodic files the log records. One committed just before a kill -9 is on disk but
  // not in the log: the run cannot show it wrote it (issue 23: the template's pattern also fits the user's
  // files), so it stays, and so do files the run did not write (the user's) and best and last.
  void keepLastPrunesWhatTheRunWrote() {
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template=p-{epoch:02d}.safetensors", "--set",
                               "checkpoint.keep_last=2"};
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.epochs=2", "--set", "checkpoint.dir=run"} + tiny + settings,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    // The log lags the save: drop the record of epoch 2's periodic file, as a kill between the two would.
    const QString metrics = dir.filePath("run/metrics.jsonl");
    std::string kept;
    for (const auto& j : records_of(metrics))
      if (j.value("path", "").find("p-02") == std::string::npos) kept += j.dump() + "\n";
    std::ofstream(metrics.toStdString(), std::ios::trunc) << kept;
    std::ofstream(dir.filePath("run/notes.txt").toStdString()) << "mine";
    QVERIFY(QFile::copy(dir.filePath("run/p-01.safetensors"), dir.filePath("run/pretrained.safetensors")));

    r = test::unet_train({"train", "--resume", "run/last.safetensors", "--set", "train.epochs=4"},
                         dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(QDir(dir.filePath("run")).entryList({"p-*"}, QDir::Files, QDir::Name),
             QStringList({"p-02.safetensors", "p-03.safetensors", "p-04.safetensors"}));
    for (const char* f : {"notes.txt", "pretrained.safetensors", "best.safetensors", "last.safetensors"})
      QVERIFY2(QFile::exists(dir.filePath("run/") + f), f);
  }

  // --- 11: predict never replaces its inputs --------------------------------------------------------------

  void predictDoesNotWriteOverItsInputs_data() {
    QTest::addColumn<QString>("output");
    QTest::newRow("the input folder") << "in";
    QTest::newRow("the input folder, spelt otherwise") << "in/../in/.";
    QTest::newRow("a link to the input folder") << "link";
  }
  void predictDoesNotWriteOverItsInputs() {
    QFETCH(QString, output);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("in"));
    write_image(dir.filePath("in/a.png"), 10);
    write_image(dir.filePath("in/b.png"), 200);
    QVERIFY(QFile::link(dir.filePath("in"), dir.filePath("link")));
    test::ProcessResult r =
        test::unet_train(QStringList{"init", "--out", "model.safetensors"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto before = contents_of(dir.filePath("in"));
    r = test::unet_train(
        {"predict", "--checkpoint", "model.safetensors", "--input", "in", "--output", output}, dir.path());
    QVERIFY2(r.code != 0, qPrintable(r.out));
    QVERIFY2(r.err.contains("--output") && r.err.contains(output), qPrintable(r.err));
    QVERIFY(contents_of(dir.filePath("in")) == before);
  }

  // predict on a folder without images has nothing to do: exit 1, naming the folder.
  void predictOnAnEmptyFolderFails() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("in"));
    test::ProcessResult r =
        test::unet_train(QStringList{"init", "--out", "model.safetensors"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train({"predict", "--checkpoint", "model.safetensors", "--input", "in", "--output", "out"},
                         dir.path());
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("in: no image files"), qPrintable(r.err));
  }

  // A file name with a newline cannot add a line to the output: it is printed with \n escaped.
  void fileNamesCannotForgeOutputLines() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("in"));
    write_image(dir.filePath("in/a.png"), 10);
    std::ofstream(dir.filePath("in/b\nunet-train: wrote everything.txt").toStdString()) << "not an image";
    test::ProcessResult r =
        test::unet_train(QStringList{"init", "--out", "model.safetensors"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train({"predict", "--checkpoint", "model.safetensors", "--input", "in", "--output", "out"},
                         dir.path());
    QCOMPARE(r.code, 1);
    // Two lines: a's progress line and b's skip, its name escaped.
    const QStringList lines = r.err.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    QVERIFY2(lines[0].startsWith("unet-train: skipped ") &&
                 lines[0].contains("b\\nunet-train: wrote everything.txt"),
             qPrintable(r.err));
    QVERIFY2(lines[1].startsWith("[1/2] a.png "), qPrintable(r.err));
  }

  // An image the model cannot take (3 channels for a 2-channel model) is skipped and named; the others are
  // written, and the exit code is 1.
  void oneUnconvertibleImageDoesNotAbortPredict() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("in"));
    write_png(dir.filePath("in/a.png").toStdString(),
              Image{16, 16, 2, std::vector<std::uint8_t>(16 * 16 * 2, 9)});
    write_image(dir.filePath("in/b.png"), 10);
    write_png(dir.filePath("in/c.png").toStdString(),
              Image{16, 16, 2, std::vector<std::uint8_t>(16 * 16 * 2, 99)});
    test::ProcessResult r = test::unet_train(
        QStringList{"init", "--out", "model.safetensors", "--set", "model.in_channels=2"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = test::unet_train({"predict", "--checkpoint", "model.safetensors", "--input", "in", "--output", "out"},
                         dir.path());
    QCOMPARE(r.code, 1);
    // b is named as skipped; a and c are not (their lines are progress: "[1/3] a.png ...").
    QStringList skipped = r.err.split('\n').filter("unet-train: skipped");
    QVERIFY2(skipped.size() == 1 && skipped.front().contains("b.png"), qPrintable(r.err));
    QVERIFY2(r.err.contains("[1/3] a.png ") && r.err.contains("[3/3] c.png "), qPrintable(r.err));
    QCOMPARE(QDir(dir.filePath("out")).entryList(QDir::Files), QStringList({"a.png", "c.png"}));
  }

  // --- neighbours: init and export never replace a file unasked ------------------------------------------

  void initAndExportDoNotReplaceFilesUnasked_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("kept");
    QTest::newRow("init over a trained checkpoint")
        << QStringList{"init", "--out", "run/last.safetensors"} << "run/last.safetensors";
    QTest::newRow("export onto its own checkpoint")
        << QStringList{"export", "--checkpoint", "run/last.safetensors", "--out", "run/last.safetensors"}
        << "run/last.safetensors";
    QTest::newRow("export onto its own checkpoint, by --overwrite")
        << QStringList{"export",       "--overwrite",
                       "--checkpoint", "run/last.safetensors",
                       "--out",        "run/../run/last.safetensors"}
        << "run/last.safetensors";
    QTest::newRow("export over another file")
        << QStringList{"export", "--checkpoint", "run/last.safetensors", "--out", "run/best.safetensors"}
        << "run/best.safetensors";
  }
  void initAndExportDoNotReplaceFilesUnasked() {
    QFETCH(QStringList, args);
    QFETCH(QString, kept);
    QTemporaryDir dir;
    QVERIFY(make_run(dir.path(), "run"));
    const std::string before = read_text(dir.filePath(kept));
    const test::ProcessResult r = test::unet_train(args, dir.path());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--out") && r.err.contains(args[args.indexOf("--out") + 1]), qPrintable(r.err));
    QCOMPARE(read_text(dir.filePath(kept)), before);
    // Asked for, init does replace it.
    if (args.first() == "init") {
      QCOMPARE(test::unet_train(args + QStringList{"--overwrite"} + tiny, dir.path()).code, 0);
      QVERIFY(read_text(dir.filePath(kept)) != before);
    }
  }

  // --- neighbours: signals that used to kill a run unsaved ----------------------------------------------

  // SIGHUP (the terminal closed) stops the run as SIGINT does: it says so at once, saves and exits 0.
  void hangupSavesAndStops() {
    QTemporaryDir dir;
    Background run(QStringList{"train", "--set", "train.steps=100000", "--set", "checkpoint.dir=run"} + tiny,
                   dir.path());
    QVERIFY(run.process.waitForStarted());
    QVERIFY(wait_for_steps(dir.filePath("run/metrics.jsonl"), run.process));
    ::kill(static_cast<pid_t>(run.process.processId()), SIGHUP);
    QVERIFY(run.process.waitForFinished(120000));
    QCOMPARE(run.process.exitStatus(), QProcess::NormalExit);
    QCOMPARE(run.process.exitCode(), 0);
    const QString err = QString::fromUtf8(run.process.readAllStandardError());
    QVERIFY2(err.contains("stop requested"), qPrintable(err));
    const Checkpoint last = load_checkpoint(dir.filePath("run/last.safetensors").toStdString());
    QVERIFY(last.position.step >= 1);
  }

  // Ctrl-C during the scan of a large dataset ends the run at once, not after the scan: nothing trained or
  // saved (the run folder it made is removed again), and exit code 130 (it has no result to show). 2000 hard
  // links to two 768x768 files make a scan of many seconds without the disk space; the signal comes as soon
  // as the run holds its folder, which it takes before the scan.
  void interruptDuringTheDataScanEndsIt() {
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("data/images") && QDir(dir.path()).mkpath("data/masks"));
    std::vector<std::uint8_t> noise(768 * 768 * 3);
    std::uint32_t state = 12345;
    for (auto& v : noise) v = static_cast<std::uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    write_png(dir.filePath("image.png").toStdString(), Image{768, 768, 3, noise});
    write_png(dir.filePath("mask.png").toStdString(),
              Image{768, 768, 1, std::vector<std::uint8_t>(noise.begin(), noise.begin() + 768 * 768)});
    for (int i = 0; i < 1000; ++i) {
      const QString name = QString("%1.png").arg(i, 4, 10, QChar('0'));
      QCOMPARE(::link(qPrintable(dir.filePath("image.png")), qPrintable(dir.filePath("data/images/" + name))),
               0);
      QCOMPARE(::link(qPrintable(dir.filePath("mask.png")), qPrintable(dir.filePath("data/masks/" + name))),
               0);
    }
    Background run({"train", "--set", "data.source=folder", "--set", "data.path=data", "--set",
                    "data.image_size=[32,32]", "--set", "model.width=4", "--set", "model.depth=2", "--set",
                    "train.steps=2", "--set", "checkpoint.dir=run"},
                   dir.path());
    QVERIFY(run.process.waitForStarted());
    QVERIFY(test::wait_on_thread_until(
        [&] {
          return QFile::exists(dir.filePath("run/run.lock")) || run.process.state() == QProcess::NotRunning;
        },
        60000));
    ::kill(static_cast<pid_t>(run.process.processId()), SIGINT);
    QVERIFY(run.process.waitForFinished(120000));
    const QString err = QString::fromUtf8(run.process.readAllStandardError());
    QCOMPARE(run.process.exitStatus(), QProcess::NormalExit);
    QCOMPARE(run.process.exitCode(), 130);
    QVERIFY2(err.contains("stop requested: ending the preparation") &&
                 err.contains("before training began: nothing was trained or saved"),
             qPrintable(err));
    // The folder the run made holds nothing of a run: it is taken back, lock and all (issue 25, item 4).
    QVERIFY2(err.contains("removed the run folder " + dir.filePath("run")), qPrintable(err));
    QVERIFY(!QFileInfo::exists(dir.filePath("run")));
  }

  // A second interrupt ends the process at once (exit code 130), but says first what that loses.
  void secondInterruptSaysWhatItLoses() {
    QTemporaryDir dir;
    // Steps of a wider model on larger images, so that the run is still in its step when the second comes
    // (two signals sent at once would merge into one).
    Background run(QStringList{"train", "--set", "train.steps=100000", "--set", "checkpoint.dir=run"} + tiny +
                       QStringList{"--set", "model.width=16", "--set", "data.image_size=[128,128]"},
                   dir.path());
    QVERIFY(run.process.waitForStarted());
    QVERIFY(wait_for_steps(dir.filePath("run/metrics.jsonl"), run.process));
    ::kill(static_cast<pid_t>(run.process.processId()), SIGINT);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ::kill(static_cast<pid_t>(run.process.processId()), SIGINT);
    QVERIFY(run.process.waitForFinished(120000));
    const QString err = QString::fromUtf8(run.process.readAllStandardError());
    QCOMPARE(run.process.exitCode(), 130);
    QVERIFY2(err.contains("quitting at once") && err.contains("lost"), qPrintable(err));
  }

  // A reader of the output that goes away (`| head -c 1`) does not kill the run (SIGPIPE): it trains on, and
  // stops, saving, when asked.
  void closedOutputPipeDoesNotKillTheRun() {
    QTemporaryDir dir;
    // pipefail: the pipeline's status is unet-train's (141 if SIGPIPE killed it).
    Background pipeline(
        QStringList{"-c", "set -o pipefail; \"$0\" \"$@\" | head -c 1 >/dev/null", UNET_TRAIN_BINARY, "train",
                    "--set", "train.steps=100000", "--set", "checkpoint.dir=run"} +
            tiny,
        dir.path(), "bash");
    QProcess& shell = pipeline.process;
    QVERIFY(shell.waitForStarted());
    QVERIFY(wait_for_steps(dir.filePath("run/metrics.jsonl"), shell));
    const auto records = records_of(dir.filePath("run/metrics.jsonl"));
    const auto pid = static_cast<pid_t>(records.front().value("pid", 0));
    QVERIFY(pid > 0);
    // unet-train is bash's child: if the test fails before it stops the run, this does.
    struct Stop {
      pid_t pid;
      ~Stop() { ::kill(pid, SIGKILL); }
    } stop_anyway{pid};
    // Each epoch (2 steps) prints a line: several go to the closed pipe meanwhile.
    const auto epochs = [&] {
      int n = 0;
      for (const auto& j : records_of(dir.filePath("run/metrics.jsonl"))) n += j.value("kind", "") == "epoch";
      return n;
    };
    QVERIFY(test::wait_on_thread_until([&] { return epochs() >= 3 || shell.state() == QProcess::NotRunning; },
                                       120000));
    QCOMPARE(shell.state(), QProcess::Running);
    QCOMPARE(::kill(pid, SIGTERM), 0);
    QVERIFY(shell.waitForFinished(120000));
    QCOMPARE(shell.exitCode(), 0);
    QVERIFY(QFile::exists(dir.filePath("run/last.safetensors")));
  }

  // --- Issue 23, section 1: a run deletes, truncates or follows only what it made -------------------------

  // A metrics.jsonl record naming a file elsewhere (absolute or relative) never makes keep_last delete it;
  // the run warns, naming it.
  void keepLastDeletesOnlyFilesOfItsFolder_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<bool>("absolute");
    QTest::newRow("an absolute path") << "path" << true;
    QTest::newRow("a relative path") << "path" << false;  // resolved against the working folder before
    QTest::newRow("a name out of the folder") << "file" << false;
  }
  void keepLastDeletesOnlyFilesOfItsFolder() {
    QFETCH(QString, field);
    QFETCH(bool, absolute);
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template=p-{epoch:02d}.safetensors", "--set",
                               "checkpoint.keep_last=1"};
    QVERIFY(make_run(dir.path(), "run", settings));
    std::ofstream(dir.filePath("thesis.tex").toStdString()) << "chapter one";
    const std::string named = absolute          ? dir.filePath("thesis.tex").toStdString()
                              : field == "path" ? "thesis.tex"
                                                : "../thesis.tex";
    // The forged record comes first: the oldest periodic file, the first keep_last would prune.
    const QString metrics = dir.filePath("run/metrics.jsonl");
    const std::string forged = nlohmann::json{{"kind", "checkpoint"},
                                              {field.toStdString(), named},
                                              {"step", 0},
                                              {"epoch", 0},
                                              {"reason", "periodic"}}
                                   .dump() +
                               "\n";
    const std::string log = read_text(metrics);
    std::ofstream(metrics.toStdString(), std::ios::trunc) << forged << log;
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--resume", "run/last.safetensors", "--set", "train.epochs=3"} + settings,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(read_text(dir.filePath("thesis.tex")), std::string("chapter one"));
    QVERIFY2(r.err.contains("warning") && r.err.contains(QString::fromStdString(named)), qPrintable(r.err));
    QCOMPARE(QDir(dir.filePath("run")).entryList({"p-*"}, QDir::Files, QDir::Name),
             QStringList({"p-03.safetensors"}));
  }

  // A run folder copied with `cp -a` and resumed in the copy prunes the copy's checkpoints, never the
  // original's. "old records": the copy's log as runs wrote it before records named files (absolute paths
  // only): those name the original folder, so nothing they name is removed, and the run says so.
  void resumingACopiedRunLeavesTheOriginalAlone_data() {
    QTest::addColumn<bool>("old_records");
    QTest::newRow("records with names") << false;
    QTest::newRow("old records") << true;
  }
  void resumingACopiedRunLeavesTheOriginalAlone() {
    QFETCH(bool, old_records);
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template=p-{epoch:02d}.safetensors", "--set",
                               "checkpoint.keep_last=2"};
    QVERIFY(make_run(dir.path(), "orig", settings + QStringList{"--set", "train.epochs=2"}));
    const auto original = contents_of(dir.filePath("orig"));
    QCOMPARE(QProcess::execute("cp", {"-a", dir.filePath("orig"), dir.filePath("copy")}), 0);
    if (old_records) {
      const QString metrics = dir.filePath("copy/metrics.jsonl");
      std::string log;
      for (auto j : records_of(metrics)) {
        j.erase("file");
        log += j.dump() + "\n";
      }
      std::ofstream(metrics.toStdString(), std::ios::trunc) << log;
    }
    const test::ProcessResult r =
        test::unet_train(QStringList{"train", "--resume", "copy/last.safetensors", "--set", "train.epochs=4",
                                     "--set", "checkpoint.dir=" + dir.filePath("copy")} +
                             settings,
                         dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(contents_of(dir.filePath("orig")) == original);
    const QStringList copy_periodic = QDir(dir.filePath("copy")).entryList({"p-*"}, QDir::Files, QDir::Name);
    if (old_records) {
      QVERIFY2(r.err.contains(dir.filePath("orig/p-01.safetensors")), qPrintable(r.err));
      QVERIFY(copy_periodic.contains("p-04.safetensors") && copy_periodic.contains("p-01.safetensors"));
    } else {
      QCOMPARE(copy_periodic, QStringList({"p-03.safetensors", "p-04.safetensors"}));
    }
  }

  // A log written before records named files holds absolute paths: those inside the run folder still count
  // for keep_last when the run is resumed there.
  void keepLastCountsOldAbsoluteRecords() {
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template=p-{epoch:02d}.safetensors", "--set",
                               "checkpoint.keep_last=2"};
    QVERIFY(make_run(dir.path(), "run", settings + QStringList{"--set", "train.epochs=2"}));
    const QString metrics = dir.filePath("run/metrics.jsonl");
    std::string log;
    for (auto j : records_of(metrics)) {
      j.erase("file");
      log += j.dump() + "\n";
    }
    std::ofstream(metrics.toStdString(), std::ios::trunc) << log;
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--resume", "run/last.safetensors", "--set", "train.epochs=3"} + settings,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(!r.err.contains("warning"), qPrintable(r.err));
    QCOMPARE(QDir(dir.filePath("run")).entryList({"p-*"}, QDir::Files, QDir::Name),
             QStringList({"p-02.safetensors", "p-03.safetensors"}));
  }

  // Files of the user's that checkpoint.template's pattern happens to match (hexadecimal digits, inf, nan)
  // are not the run's: keep_last and --overwrite leave them alone.
  void filesTheTemplateMerelyMatchesAreNotTheRuns() {
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template={epoch}.txt", "--set", "checkpoint.keep_last=1"};
    QVERIFY(make_run(dir.path(), "run", settings));
    const QStringList mine{"info.txt", "face.txt", "nan.txt", "inf.txt"};
    for (const QString& f : mine)
      std::ofstream(dir.filePath("run/" + f).toStdString()) << "mine: " << f.toStdString();
    test::ProcessResult r = test::unet_train(
        QStringList{"train", "--resume", "run/last.safetensors", "--set", "train.epochs=3"} + settings,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    for (const QString& f : mine) QCOMPARE(read_text(dir.filePath("run/" + f)), "mine: " + f.toStdString());
    QVERIFY(!QFile::exists(dir.filePath("run/1.txt")) && QFile::exists(dir.filePath("run/3.txt")));

    r = test::unet_train(
        QStringList{"train", "--overwrite", "--set", "train.steps=1", "--set", "checkpoint.dir=run"} + tiny +
            settings,
        dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains(dir.filePath("run/3.txt")), qPrintable(r.err));
    QVERIFY(!QFile::exists(dir.filePath("run/3.txt")));
    for (const QString& f : mine) QCOMPARE(read_text(dir.filePath("run/" + f)), "mine: " + f.toStdString());
  }

  // A periodic checkpoint never replaces a file of the same name that the run did not write: that save
  // fails, naming the file, and the file keeps its bytes.
  void aPeriodicSaveDoesNotReplaceAUsersFile() {
    QTemporaryDir dir;
    const QStringList settings{"--set", "checkpoint.template={epoch}.txt"};
    QVERIFY(make_run(dir.path(), "run", settings));
    std::ofstream(dir.filePath("run/2.txt").toStdString()) << "mine";
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--resume", "run/last.safetensors", "--set", "train.epochs=2"} + settings,
        dir.path());
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains(dir.filePath("run/2.txt")), qPrintable(r.err));
    QCOMPARE(read_text(dir.filePath("run/2.txt")), std::string("mine"));
  }

  // run.lock or metrics.jsonl as a symbolic link: the run refuses, naming it, and the link's target keeps
  // its bytes.
  void aLinkInTheRunFolderIsNotFollowed_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("run.lock") << "run.lock";
    QTest::newRow("metrics.jsonl") << "metrics.jsonl";
  }
  void aLinkInTheRunFolderIsNotFollowed() {
    QFETCH(QString, name);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("run"));
    std::ofstream(dir.filePath("precious.txt").toStdString()) << "keep me";
    QVERIFY(QFile::link(dir.filePath("precious.txt"), dir.filePath("run/" + name)));
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--set", "train.steps=1", "--set", "checkpoint.dir=run"} + tiny, dir.path());
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains(dir.filePath("run/" + name)) && r.err.contains("not a regular file"),
             qPrintable(r.err));
    QCOMPARE(read_text(dir.filePath("precious.txt")), std::string("keep me"));
  }

  // init and export --out onto a FIFO, a device node or a symbolic link are refused even with --overwrite,
  // naming the path; the thing stays as it was.
  void outThatIsNotAFileIsNotReplaced_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QString>("kind");
    for (const char* command : {"init", "export"})
      for (const char* kind : {"FIFO", "device", "symbolic link"})
        QTest::newRow((std::string(command) + ", " + kind).c_str()) << command << kind;
  }
  void outThatIsNotAFileIsNotReplaced() {
    QFETCH(QString, command);
    QFETCH(QString, kind);
    if (kind == "device" && ::geteuid() != 0) QSKIP("making a device node needs root");
    QTemporaryDir dir;
    test::ProcessResult r =
        test::unet_train(QStringList{"init", "--out", "model.safetensors"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString out = dir.filePath("out.safetensors");
    const QByteArray out_name = out.toLocal8Bit();
    std::ofstream(dir.filePath("target.txt").toStdString()) << "keep me";
    if (kind == "FIFO") QCOMPARE(::mkfifo(out_name.constData(), 0644), 0);
    if (kind == "device") QCOMPARE(::mknod(out_name.constData(), S_IFCHR | 0644, makedev(1, 3)), 0);
    if (kind == "symbolic link") QVERIFY(QFile::link(dir.filePath("target.txt"), out));
    const QStringList args =
        command == "init"
            ? QStringList{"init", "--overwrite", "--out", out} + tiny
            : QStringList{"export", "--overwrite", "--checkpoint", "model.safetensors", "--out", out};
    r = test::unet_train(args, dir.path(), 60000);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(out) && r.err.contains("not a regular file"), qPrintable(r.err));
    struct stat st {};
    QCOMPARE(::lstat(out_name.constData(), &st), 0);
    if (kind == "FIFO") QVERIFY(S_ISFIFO(st.st_mode));
    if (kind == "device") QVERIFY(S_ISCHR(st.st_mode));
    if (kind == "symbolic link") QVERIFY(S_ISLNK(st.st_mode));
    QCOMPARE(read_text(dir.filePath("target.txt")), std::string("keep me"));
  }

  // checkpoint.dir of the file system's root or the home folder is refused before anything is written or
  // removed, naming it, even with --overwrite.
  void aFolderThatIsNoRunFolderIsRefused_data() {
    QTest::addColumn<QString>("where");
    QTest::newRow("home") << "home";
    QTest::newRow("root") << "/";
  }
  void aFolderThatIsNoRunFolderIsRefused() {
    QFETCH(QString, where);
    QTemporaryDir dir;
    QVERIFY(QDir(dir.path()).mkpath("home"));
    const QString home = dir.filePath("home");
    // The user's files under the run's own names: --overwrite would remove them by name.
    for (const char* f : {"metrics.jsonl", "best.safetensors", "notes.txt"})
      std::ofstream((home + "/" + f).toStdString()) << "mine";
    const auto before = contents_of(home);
    const QByteArray saved_home = qgetenv("HOME");
    qputenv("HOME", home.toLocal8Bit());
    const QString folder = where == "home" ? home : where;
    const test::ProcessResult r = test::unet_train(
        QStringList{"train", "--overwrite", "--set", "train.steps=1", "--set", "checkpoint.dir=" + folder} +
            tiny,
        dir.path());
    qputenv("HOME", saved_home);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("checkpoint.dir") && r.err.contains(folder), qPrintable(r.err));
    QVERIFY(contents_of(home) == before);
    QVERIFY(!QFile::exists(home + "/run.lock"));
  }

  // An export interrupted (killed) leaves its temporary file beside --out; the next write of that file
  // removes it, and says so.
  void anInterruptedExportsTemporaryFileIsCleared() {
    QTemporaryDir dir;
    test::ProcessResult r =
        test::unet_train(QStringList{"init", "--out", "model.safetensors"} + tiny, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QString leftover = dir.filePath(".weights.safetensors.tmp-0123456789ab");
    std::ofstream(leftover.toStdString()) << "half a file";
    std::ofstream(dir.filePath(".notes.txt.tmp-0123456789ab").toStdString()) << "another file's";
    r = test::unet_train({"export", "--checkpoint", "model.safetensors", "--out", "weights.safetensors"},
                         dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(!QFile::exists(leftover), qPrintable(r.err));
    QVERIFY2(r.err.contains("removed .weights.safetensors.tmp-0123456789ab"), qPrintable(r.err));
    QVERIFY(QFile::exists(dir.filePath(".notes.txt.tmp-0123456789ab")));
    QVERIFY(QFile::exists(dir.filePath("weights.safetensors")));
  }
};

QTEST_GUILESS_MAIN(TestReliabilityRuns)
#include "test_reliability_runs.moc"
