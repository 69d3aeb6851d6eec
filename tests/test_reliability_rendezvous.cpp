// What a rank of a multi-process run trusts (docs/DISTRIBUTED.md, "What a rank trusts";
// engine/unet/distributed/rendezvous_protocol.h): strangers at MASTER_PORT (garbage, a huge announced size, a
// connection that never speaks) neither make rank 0 allocate nor stop the real ranks from forming the group;
// the listeners bind only the address given; the world size and host names are bounded; ranks of another job
// are refused; and the ranks of one run agree on the checkpoint they resume and the bytes of the data they
// read before training.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "distributed_support.h"
#include "test_support.h"
#include "unet/core/unique_fd.h"
#include "unet/distributed/process_group.h"
#include "unet/distributed/rendezvous_protocol.h"
#include "unet/distributed/run_agreement.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

using namespace unet;
namespace fs = std::filesystem;

namespace {

using test::environment;
using test::free_port;

// A connection to ip:port, retried until something listens there (or about 20 s passed: an empty fd).
UniqueFd connect_when_listening(const char* ip, int port) {
  for (int attempt = 0; attempt < 400; ++attempt) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, ip, &addr.sin_addr);
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return UniqueFd();
}

// Whether a connect to ip:port is refused (nothing listens at that address).
bool connect_refused(const char* ip, int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, ip, &addr.sin_addr);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 &&
         errno == ECONNREFUSED;
}

// A field of /proc/self/status, in KiB ("VmHWM", "VmRSS").
std::int64_t status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(field + ":")) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

// Resets the peak resident size (VmHWM) to the current one, where the kernel allows it.
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

// Two ranks of one TCP group, each on its own thread; `meanwhile` runs after rank 0 started and before rank 1
// does, with the port. Each rank sums 1 + 2 once formed; the result (or the error) per rank.
std::vector<std::string> two_ranks(const std::function<void(int port)>& meanwhile, JoinOptions options) {
  const int port = free_port();
  std::vector<std::string> results(2);
  const auto rank_thread = [&](int rank) {
    return std::thread([&, rank] {
      try {
        std::unique_ptr<ProcessGroup> g = join_tcp_group(rank, 2, "127.0.0.1", port, options);
        double v = 1.0 + rank;
        g->sum(std::span(&v, 1));
        results[static_cast<std::size_t>(rank)] = "sum " + std::to_string(static_cast<int>(v));
      } catch (const std::exception& e) {
        results[static_cast<std::size_t>(rank)] = e.what();
      }
    });
  };
  std::thread rank0 = rank_thread(0);
  meanwhile(port);
  std::thread rank1 = rank_thread(1);
  rank0.join();
  rank1.join();
  return results;
}

// The shared small run, its checkpoints named by epoch alone.
QStringList run_args(const QString& dir, int epochs) {
  QStringList args = test::run_args(dir, epochs);
  args.insert(args.size() - 2, "--set");
  args.insert(args.size() - 2, "checkpoint.template=epoch{epoch}.safetensors");
  return args;
}

// unet-train processes started with torchrun's variables; `env(rank)` adds to each one's environment and
// `args(rank)` to its arguments. Waits for all; their exit codes (-1: did not finish) and stderr.
struct Outcome {
  std::vector<int> codes;
  std::vector<QString> errors;
};
Outcome run_ranks(int size, const QStringList& args, const std::function<QStringList(int)>& extra,
                  const std::function<std::map<QString, QString>(int)>& env = {},
                  const std::function<QString(int)>& cwd = {}) {
  const int port = free_port();
  std::vector<std::unique_ptr<QProcess>> ranks;
  for (int r = 0; r < size; ++r) {
    auto p = std::make_unique<QProcess>();
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("RANK", QString::number(r));
    e.insert("WORLD_SIZE", QString::number(size));
    e.insert("MASTER_ADDR", "127.0.0.1");
    e.insert("MASTER_PORT", QString::number(port));
    e.insert("UNET_RENDEZVOUS_TIMEOUT", "60");
    if (env)
      for (const auto& [name, value] : env(r)) e.insert(name, value);
    p->setProcessEnvironment(e);
    if (cwd) p->setWorkingDirectory(cwd(r));
    p->start(UNET_TRAIN_BINARY, args + (extra ? extra(r) : QStringList()));
    ranks.push_back(std::move(p));
  }
  Outcome o;
  for (auto& p : ranks) {
    p->waitForFinished(120000);
    if (p->state() != QProcess::NotRunning) {
      p->kill();
      p->waitForFinished(10000);
      o.codes.push_back(-1);
    } else {
      o.codes.push_back(p->exitStatus() == QProcess::NormalExit ? p->exitCode() : -1);
    }
    o.errors.push_back(QString::fromUtf8(p->readAllStandardError()));
  }
  return o;
}

// A folder dataset of `count` 32x32 RGB images with binary masks, each image distinct.
void write_folder_dataset(const fs::path& root, int count) {
  fs::create_directories(root / "images");
  fs::create_directories(root / "masks");
  for (int i = 0; i < count; ++i) {
    Image image{32, 32, 3, std::vector<std::uint8_t>(32 * 32 * 3)};
    Image mask{32, 32, 1, std::vector<std::uint8_t>(32 * 32)};
    for (std::size_t p = 0; p < image.pixels.size(); ++p)
      image.pixels[p] = static_cast<std::uint8_t>((p * 7 + static_cast<std::size_t>(i) * 31) % 251);
    for (std::size_t p = 0; p < mask.pixels.size(); ++p) mask.pixels[p] = (p / 32 + i) % 5 < 2 ? 255 : 0;
    const std::string name = "s" + std::to_string(i) + ".png";
    write_png(root / "images" / name, image);
    write_png(root / "masks" / name, mask);
  }
}

}  // namespace

class TestReliabilityRendezvous : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // A stranger at MASTER_PORT that announces a 3 GiB message, or sends garbage, is closed: rank 0 allocates
  // nothing for it (its peak resident size grows by a few MiB at most), and the real ranks form the group.
  void aStrangerAtTheMasterPortIsClosed_data() {
    QTest::addColumn<QByteArray>("bytes");
    // A frame of this protocol announcing 3 GiB, and one that mimics the old fixed-size hello with a huge
    // size field: both more than a hello may hold.
    QByteArray huge(16, '\0');
    const std::uint32_t fields[4] = {rendezvous::kMagic, rendezvous::kProtocol, 1, 3u << 30};
    std::memcpy(huge.data(), fields, sizeof fields);
    QTest::newRow("a 3 GiB hello") << huge;
    QTest::newRow("garbage") << QByteArray("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + QByteArray(512, '\x7f'));
    QByteArray old_magic(16, '\0');
    const std::uint32_t old_fields[4] = {kMessageMagic, 1, 1, 0xc0000000u};
    std::memcpy(old_magic.data(), old_fields, sizeof old_fields);
    QTest::newRow("the ring's magic, a huge size") << old_magic;
    // The start of a valid frame, then silence: closed at its hello deadline, while the real rank joins.
    QTest::newRow("half a frame, then nothing") << huge.left(10);
  }
  void aStrangerAtTheMasterPortIsClosed() {
    QFETCH(QByteArray, bytes);
    reset_peak_rss();
    const std::int64_t before = status_kib("VmHWM");
    JoinOptions options;
    options.rendezvous_timeout_s = 60;
    UniqueFd stranger;
    const std::vector<std::string> results = two_ranks(
        [&](int port) {
          stranger = connect_when_listening("127.0.0.1", port);
          QVERIFY(stranger);
          QCOMPARE(
              ::send(stranger.get(), bytes.constData(), static_cast<std::size_t>(bytes.size()), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
        },
        options);
    QCOMPARE(results, std::vector<std::string>({"sum 3", "sum 3"}));
    const std::int64_t grown_kib = status_kib("VmHWM") - before;
    QVERIFY2(grown_kib < 16 * 1024, qPrintable(QString::number(grown_kib) + " KiB"));
  }

  // A connection that never sends anything does not hold the rendezvous: the real rank joins while it waits
  // (the rendezvous timeout is far above the hello deadline, and the test asserts the group formed).
  void anIdleConnectionDoesNotHoldTheRendezvous() {
    JoinOptions options;
    options.rendezvous_timeout_s = 30;
    UniqueFd idle;
    const std::vector<std::string> results = two_ranks(
        [&](int port) {
          idle = connect_when_listening("127.0.0.1", port);
          QVERIFY(idle);
        },
        options);
    QCOMPARE(results, std::vector<std::string>({"sum 3", "sum 3"}));
  }

  // Rank 0 listens on MASTER_ADDR's address only: with 127.0.0.1, a connection to 127.0.0.2 (loopback too,
  // on Linux) at the same port is refused while the rendezvous waits.
  void theRendezvousListensOnlyAtMasterAddr() {
    JoinOptions options;
    options.rendezvous_timeout_s = 60;
    bool refused = false;
    const std::vector<std::string> results = two_ranks(
        [&](int port) {
          QVERIFY(connect_when_listening("127.0.0.1", port));  // it listens...
          refused = connect_refused("127.0.0.2", port);        // ...only there
        },
        options);
    QVERIFY(refused);
    QCOMPARE(results, std::vector<std::string>({"sum 3", "sum 3"}));
  }

  // A MASTER_ADDR that is not an address of rank 0's host is refused naming MASTER_ADDR.
  void aMasterAddrNotOfThisHostIsRefused() {
    JoinOptions options;
    options.rendezvous_timeout_s = 5;
    try {
      join_tcp_group(0, 2, "192.0.2.1", free_port(), options);  // TEST-NET-1: nobody's address
      QFAIL("accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(QString::fromStdString(e.key()), QString("MASTER_ADDR"));
      QVERIFY2(QString(e.what()).contains("192.0.2.1"), e.what());
    }
  }

  // A world size past the bound is refused naming its variable, under each launcher.
  void aHugeWorldSizeIsRefused_data() {
    QTest::addColumn<QString>("variable");
    QTest::newRow("torchrun") << "WORLD_SIZE";
    QTest::newRow("srun") << "SLURM_STEP_NUM_TASKS";
    QTest::newRow("mpirun") << "OMPI_COMM_WORLD_SIZE";
  }
  void aHugeWorldSizeIsRefused() {
    QFETCH(QString, variable);
    const std::map<std::string, std::map<std::string, std::string>> launches = {
        {"WORLD_SIZE",
         {{"RANK", "0"}, {"WORLD_SIZE", "10000000"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}},
        {"SLURM_STEP_NUM_TASKS",
         {{"SLURM_PROCID", "0"},
          {"SLURM_STEP_NUM_TASKS", "10000000"},
          {"SLURM_JOB_NODELIST", "n1"},
          {"SLURM_JOB_ID", "1"}}},
        {"OMPI_COMM_WORLD_SIZE", {{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "10000000"}}}};
    try {
      detect_launch(environment(launches.at(variable.toStdString())));
      QFAIL("accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(QString::fromStdString(e.key()), variable);
      QVERIFY2(QString(e.what()).contains("65536"), e.what());
    }
    // The bound itself is a valid size.
    const LaunchInfo at_bound = detect_launch(
        environment({{"RANK", "0"}, {"WORLD_SIZE", "65536"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}));
    QCOMPARE(at_bound.size, 65536);
  }

  // The "ranks ... to join" message of a large run that times out stays a line: ranges and a count, not
  // every rank.
  void theMissingRanksMessageIsBounded() {
    JoinOptions options;
    options.rendezvous_timeout_s = 0.5;
    try {
      join_tcp_group(0, 5000, "127.0.0.1", free_port(), options);
      QFAIL("formed");
    } catch (const Error& e) {
      const QString what = e.what();
      QVERIFY2(what.size() < 400, qPrintable(what.left(600)));
      QVERIFY2(what.contains("ranks 1 to 4999 to join"), qPrintable(what.left(600)));
    }
    QCOMPARE(rendezvous::rank_list_text({1, 2, 3, 5, 7, 8}), std::string("1 to 3, 5, 7 to 8"));
    std::vector<int> every_other;
    for (int r = 1; r < 100; r += 2) every_other.push_back(r);
    QCOMPARE(rendezvous::rank_list_text(every_other, 3), std::string("1, 3, 5, and 47 others"));
  }

  // MASTER_ADDR and host names as long as DNS allows (253 characters) round-trip through the messages; a
  // longer MASTER_ADDR is refused naming it.
  void longHostNamesRoundTrip() {
    const std::string name_120 = "unet-rendezvous-" + std::string(100, 'a') + ".ns.svc.local";
    const std::string name_253 = std::string(249, 'b') + ".org";
    QCOMPARE(name_253.size(), rendezvous::kMaxHostName);
    const rendezvous::Proof proof = rendezvous::job_proof("token t");
    for (const std::string& name : {name_120, name_253}) {
      const std::vector<std::byte> hello = rendezvous::encode_hello({proof, 3, 4, 4242, name});
      const std::vector<rendezvous::Expected> expected{{rendezvous::Kind::hello, rendezvous::kMaxHelloBody}};
      const rendezvous::Frame frame =
          rendezvous::decode_frame(std::span(hello).first(rendezvous::kFrameSize), expected);
      const rendezvous::Hello back =
          rendezvous::decode_hello(std::span(hello).subspan(rendezvous::kFrameSize));
      QCOMPARE(frame.body_size, hello.size() - rendezvous::kFrameSize);
      QCOMPARE(back.host, name);
      QVERIFY(back.proof == proof && back.rank == 3 && back.size == 4 && back.ring_port == 4242);
      const std::vector<rendezvous::Peer> peers{{name, 1000, name}, {"10.1.2.3", 1001, "node-2"}};
      const std::vector<std::byte> table = rendezvous::encode_peer_table(peers);
      const std::vector<rendezvous::Peer> read =
          rendezvous::decode_peer_table(std::span(table).subspan(rendezvous::kFrameSize), 2);
      QCOMPARE(read.size(), std::size_t{2});
      QCOMPARE(read[0].address, name);
      QCOMPARE(read[0].host, name);
      QCOMPARE(read[1].ring_port, 1001);
      const LaunchInfo launch = detect_launch(
          environment({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", name}, {"MASTER_PORT", "29500"}}));
      QCOMPARE(launch.master_addr, name);
    }
    try {
      detect_launch(environment(
          {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", name_253 + "x"}, {"MASTER_PORT", "29500"}}));
      QFAIL("a 254-character MASTER_ADDR was accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(QString::fromStdString(e.key()), QString("MASTER_ADDR"));
      QVERIFY2(QString(e.what()).contains("253"), e.what());
    }
    // A hello whose host name field says 254 bytes is refused by its decoder, naming the field.
    std::vector<std::byte> body(rendezvous::kProofSize + 12, std::byte{0});
    body[rendezvous::kProofSize + 4] = std::byte{2};  // size 2
    body[rendezvous::kProofSize + 8] = std::byte{1};  // ring port 1
    body.push_back(std::byte{254});
    body.push_back(std::byte{0});
    body.resize(body.size() + 254, std::byte{'h'});
    try {
      rendezvous::decode_hello(body);
      QFAIL("accepted");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("host name") && QString(e.what()).contains("253"), e.what());
    }
  }

  // A ring message announcing more than its receiver expects is refused naming the sender, before the
  // receiver makes room for it (a sum of one value expects exactly 8 bytes).
  void anOversizedRingMessageIsRefusedNamingTheRank() {
    JoinOptions options;
    options.rendezvous_timeout_s = 60;
    options.message_timeout_s = 60;
    const int port = free_port();
    std::string error;
    std::thread rank1([&] {
      try {
        auto g = join_tcp_group(1, 2, "127.0.0.1", port, options);
        std::vector<std::byte> big(65536);
        g->send_next(MessageTag::sum_f64, big);
        std::vector<std::byte> in;
        g->recv_prev(MessageTag::sum_f64, in, 8);  // rank 0 closes its links once it refused
      } catch (const Error&) {
      }
    });
    try {
      auto g = join_tcp_group(0, 2, "127.0.0.1", port, options);
      double v = 1;
      g->sum(std::span(&v, 1));
    } catch (const Error& e) {
      error = std::string(to_string(e.kind())) + ": " + e.what();
    }
    rank1.join();
    QVERIFY2(error.starts_with("usage: rank 1") && error.find("65536 bytes") != std::string::npos &&
                 error.find("at most 8") != std::string::npos,
             error.c_str());
    const std::array<std::byte, 16> header = rendezvous::encode_message_header(
        {kMessageMagic, static_cast<std::uint32_t>(MessageTag::gather), std::uint64_t{3} << 30});
    try {
      rendezvous::check_message_header(rendezvous::decode_message_header(header), MessageTag::gather, 1 << 20,
                                       "rank 5 (n5)");
      QFAIL("accepted");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("rank 5 (n5) announced a message of 3221225472 bytes"), e.what());
    }
  }

  // A rank of another job (another UNET_JOB_TOKEN) is refused, naming the variable, and rank 0 goes on
  // waiting: the right rank 1, started after, joins and the run trains.
  void aRankWithAnotherJobTokenIsRefused() {
    // What the ranks prove: the token when set, else srun's job and step, else (empty) the port alone.
    QCOMPARE(detect_launch(environment({{"RANK", "0"},
                                        {"WORLD_SIZE", "2"},
                                        {"MASTER_ADDR", "a"},
                                        {"MASTER_PORT", "1"},
                                        {"UNET_JOB_TOKEN", "s3cret"}}))
                 .job_identity,
             std::string("token s3cret"));
    QCOMPARE(detect_launch(environment({{"SLURM_PROCID", "0"},
                                        {"SLURM_STEP_NUM_TASKS", "2"},
                                        {"SLURM_JOB_NODELIST", "n1"},
                                        {"SLURM_JOB_ID", "77"},
                                        {"SLURM_STEP_ID", "3"}}))
                 .job_identity,
             std::string("slurm job 77 step 3"));
    QCOMPARE(
        detect_launch(
            environment({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}}))
            .job_identity,
        std::string());
    QTemporaryDir tmp;
    const int port = free_port();
    // Rank 0 alone first, then a rank 1 with another token (which must fail), then the right one.
    QProcess rank0;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("RANK", "0");
    e.insert("WORLD_SIZE", "2");
    e.insert("MASTER_ADDR", "127.0.0.1");
    e.insert("MASTER_PORT", QString::number(port));
    e.insert("UNET_RENDEZVOUS_TIMEOUT", "60");
    e.insert("UNET_JOB_TOKEN", "job-a");
    rank0.setProcessEnvironment(e);
    rank0.start(UNET_TRAIN_BINARY, run_args(tmp.filePath("run"), 1));
    QProcess stranger;
    e.insert("RANK", "1");
    e.insert("UNET_JOB_TOKEN", "job-b");
    stranger.setProcessEnvironment(e);
    stranger.start(UNET_TRAIN_BINARY, run_args(tmp.filePath("run"), 1));
    QVERIFY(stranger.waitForFinished(60000));
    const QString refusal = QString::fromUtf8(stranger.readAllStandardError());
    QCOMPARE(stranger.exitCode(), 2);
    QVERIFY2(refusal.contains("UNET_JOB_TOKEN"), qPrintable(refusal));
    QProcess rank1;
    e.insert("UNET_JOB_TOKEN", "job-a");
    rank1.setProcessEnvironment(e);
    rank1.start(UNET_TRAIN_BINARY, run_args(tmp.filePath("run"), 1));
    QVERIFY(rank1.waitForFinished(120000));
    QVERIFY(rank0.waitForFinished(120000));
    const QString err0 = QString::fromUtf8(rank0.readAllStandardError());
    QVERIFY2(rank0.exitCode() == 0 && rank1.exitCode() == 0,
             qPrintable(err0 + QString::fromUtf8(rank1.readAllStandardError())));
    QVERIFY2(err0.contains("closed the connection from 127.0.0.1:"), qPrintable(err0));
  }

  // A real rank (same token) with a different config still fails with the key named, on every rank.
  void aRankWithAnotherConfigNamesTheKey() {
    QTemporaryDir tmp;
    const Outcome o = run_ranks(
        2, run_args(tmp.filePath("run"), 1),
        [](int rank) {
          return QStringList{"--set", "train.batch_size=" + QString::number(rank == 0 ? 6 : 8)};
        },
        [](int) {
          return std::map<QString, QString>{{"UNET_JOB_TOKEN", "same"}};
        });
    QCOMPARE(o.codes, std::vector<int>({2, 2}));
    for (const QString& err : o.errors)
      QVERIFY2(err.contains("train.batch_size") && err.contains("rank 1"), qPrintable(err));
  }

  // Two processes resumed from different checkpoints of one run, or one from a weights-only export of the
  // other's checkpoint, refuse before training, naming both ranks' steps and files.
  void ranksResumedFromDifferentCheckpointsRefuse_data() {
    QTest::addColumn<QString>("other");  // what rank 1 resumes: "epoch1" or "export"
    QTest::newRow("another step") << "epoch1";
    QTest::newRow("a weights-only export") << "export";
  }
  void ranksResumedFromDifferentCheckpointsRefuse() {
    QFETCH(QString, other);
    QTemporaryDir tmp;
    const test::ProcessResult made = test::unet_train(run_args(tmp.filePath("made"), 2));
    QVERIFY2(made.code == 0, qPrintable(made.err));
    const QString epoch2 = tmp.filePath("made/epoch2.safetensors");
    QString theirs = tmp.filePath("made/epoch1.safetensors");
    QVERIFY(QFile::exists(epoch2) && QFile::exists(theirs));
    if (other == "export") {
      theirs = tmp.filePath("weights.safetensors");
      const test::ProcessResult exported =
          test::unet_train({"export", "--checkpoint", epoch2, "--out", theirs});
      QVERIFY2(exported.code == 0, qPrintable(exported.err));
    }
    const Outcome o = run_ranks(2, run_args(tmp.filePath("resumed"), 3), [&](int rank) {
      return QStringList{"--resume", rank == 0 ? epoch2 : theirs};
    });
    QVERIFY2(o.codes[0] != 0 && o.codes[1] != 0, qPrintable(o.errors[0] + o.errors[1]));
    for (const QString& err : o.errors) {
      QVERIFY2(err.contains("rank 0") && err.contains("rank 1") && err.contains("epoch2.safetensors") &&
                   err.contains(QFileInfo(theirs).fileName()),
               qPrintable(err));
      QVERIFY2(other == "export" ? err.contains("weights only") : err.contains("step 4"), qPrintable(err));
    }
    // Refused before training: rank 0 wrote no log of steps.
    QVERIFY(!fs::exists(tmp.filePath("resumed/metrics.jsonl").toStdString()));
  }

  // Two processes whose copies of the data differ in one file's bytes under the same path (data.path
  // "data", each process in its own working folder) refuse before training, naming that file.
  void ranksReadingDifferentBytesRefuse() {
    QTemporaryDir tmp;
    const fs::path a = tmp.filePath("a").toStdString(), b = tmp.filePath("b").toStdString();
    write_folder_dataset(a / "data", 12);
    write_folder_dataset(b / "data", 12);
    // The same picture size and channels, other pixels: only the bytes tell.
    Image changed = read_image(b / "data" / "images" / "s7.png");
    changed.pixels[100] ^= 0x55;
    write_png(b / "data" / "images" / "s7.png", changed);
    const QStringList data_args{"--set", "data.source=folder", "--set", "data.path=data",
                                "--set", "model.in_channels=3"};
    const Outcome o = run_ranks(2, run_args("run", 1) + data_args, {}, {}, [&](int rank) {
      return QString::fromStdString((rank == 0 ? a : b).string());
    });
    QVERIFY2(o.codes[0] != 0 && o.codes[1] != 0, qPrintable(o.errors[0] + o.errors[1]));
    for (const QString& err : o.errors)
      QVERIFY2(err.contains("images/s7.png") && err.contains("rank 1"), qPrintable(err));
  }
};

QTEST_GUILESS_MAIN(TestReliabilityRendezvous)
#include "test_reliability_rendezvous.moc"
