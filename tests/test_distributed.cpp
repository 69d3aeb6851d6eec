// Runs over several processes (engine/unet/distributed/): how a launch is read from the environment, the TCP
// ring's collectives and their rank order, the process communicator against the shared-memory one, and whole
// runs of unet-train launched as several processes (torchrun-style variables, mpirun) against one process
// with the same replicas, including resuming across process counts and a killed rank.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "distributed_support.h"
#include "test_support.h"
#include "unet/core/unique_fd.h"
#include "unet/distributed/process_communicator.h"
#include "unet/distributed/process_group.h"
#include "unet/distributed/run_agreement.h"
#include "unet/io/checkpoint.h"

using namespace unet;
namespace fs = std::filesystem;

namespace {

using test::environment;
using test::free_port;
using test::run_args;

// For the ranks' threads, where Qt Test's macros cannot be used: a failure is thrown, and on_ring rethrows it
// on the test's thread.
void ensure(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed: " + what);
}

BackendOptions one_thread() {
  BackendOptions o;
  o.cpu_threads = 1;
  return o;
}

// Replica `replica` of four (local rank `rank` of `comm`) sums its gradients (`data[replica]`) and three host
// values chosen so that only rank order gives the reference's answer; the results go to the replica's slots.
void replica_sums(Communicator& comm, int rank, int replica, const std::vector<std::vector<float>>& data,
                  std::vector<std::vector<float>>& sums, std::vector<std::vector<double>>& host_sums) {
  const auto at = static_cast<std::size_t>(replica);
  auto backend = create_backend({DeviceKind::cpu, replica}, one_thread());
  auto stream = backend->create_stream();
  Tensor t = test::to_device(*backend, *stream, data[at], Shape{static_cast<std::int64_t>(data[at].size())});
  comm.all_reduce_sum(rank, *backend, *stream, t);
  sums[at] = test::to_host(*backend, *stream, t);
  std::vector<double> host = {0.1 * replica, 1e16 * (replica == 0) - 1e16 * (replica == 3), 1.0};
  comm.all_reduce_host(rank, host);
  host_sums[at] = host;
}

// Runs fn(rank, group) for `size` ranks of one TCP ring, each on its own thread; rethrows the first failure.
void on_ring(int size, const std::function<void(int, ProcessGroup&)>& fn, JoinOptions options = {}) {
  const int port = free_port();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        std::unique_ptr<ProcessGroup> group = join_tcp_group(r, size, "127.0.0.1", port, options);
        fn(r, *group);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// The environment "NAME=value NAME=value ..." describes.
EnvironmentReader environment_of(const QString& vars) {
  std::map<std::string, std::string> env;
  for (const QString& v : vars.split(' ', Qt::SkipEmptyParts))
    env[v.section('=', 0, 0).toStdString()] = v.section('=', 1).toStdString();
  return environment(env);
}

struct Launched {
  std::vector<std::unique_ptr<QProcess>> ranks;
  Launched() = default;
  Launched(Launched&&) = default;
  // A test that failed half-way leaves no process behind.
  ~Launched() {
    for (auto& p : ranks)
      if (p && p->state() != QProcess::NotRunning) {
        p->kill();
        p->waitForFinished(10000);
      }
  }
  // Waits for all; each one's exit code (-1: crashed, killed or still running at the deadline).
  std::vector<int> wait(int timeout_ms) {
    std::vector<int> codes;
    for (auto& p : ranks) {
      p->waitForFinished(timeout_ms);
      codes.push_back(
          p->state() == QProcess::NotRunning && p->exitStatus() == QProcess::NormalExit ? p->exitCode() : -1);
    }
    return codes;
  }
  // Everything rank `rank` wrote to stderr so far (read once from the process, kept here).
  QString err(int rank) {
    errors.resize(ranks.size());
    QString& kept = errors.at(static_cast<std::size_t>(rank));
    kept += QString::fromUtf8(ranks.at(static_cast<std::size_t>(rank))->readAllStandardError());
    return kept;
  }
  std::vector<QString> errors;
};

// unet-train started `size` times with torchrun's variables on one host, or as srun starts a job step's tasks
// (srun: true; rank 0's host is the node list's first, this host's loopback address).
Launched launch_torchrun_style(int size, const QStringList& args,
                               const std::function<QStringList(int)>& extra = {}, bool srun = false) {
  Launched l;
  const int port = free_port();
  for (int r = 0; r < size; ++r) {
    auto p = std::make_unique<QProcess>();
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    if (srun) {
      env.insert("SLURM_PROCID", QString::number(r));
      env.insert("SLURM_STEP_NUM_TASKS", QString::number(size));
      // The first host by address: a minimal root (the fresh-root check) may have no /etc/hosts for
      // "localhost".
      env.insert("SLURM_JOB_NODELIST", "127.0.0.1,nowhere[1-4]");
      env.insert("SLURM_JOB_ID", "4242");
    } else {
      env.insert("RANK", QString::number(r));
      env.insert("WORLD_SIZE", QString::number(size));
      env.insert("MASTER_ADDR", "127.0.0.1");
    }
    env.insert("MASTER_PORT", QString::number(port));
    // A rank that cannot meet the others says so within the test's wait, rather than being cut off by it.
    env.insert("UNET_RENDEZVOUS_TIMEOUT", "60");
    p->setProcessEnvironment(env);
    p->start(UNET_TRAIN_BINARY, args + (extra ? extra(r) : QStringList()));
    l.ranks.push_back(std::move(p));
  }
  return l;
}

QString mpirun() {
  return QStandardPaths::findExecutable("mpirun");
}

std::vector<float> weights(const fs::path& checkpoint) {
  return load_checkpoint(checkpoint).parameters;
}

std::string text_of(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The losses metrics.jsonl logged, step by step.
std::vector<double> step_losses(const fs::path& metrics) {
  std::vector<double> losses;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("kind", "") == "step") losses.push_back(j.at("loss").get<double>());
  }
  return losses;
}

}  // namespace

class TestDistributed : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void launchIsReadFromTheEnvironment_data() {
    QTest::addColumn<QString>("vars");  // NAME=value, space-separated
    QTest::addColumn<QString>("launcher");
    QTest::addColumn<int>("rank");
    QTest::addColumn<int>("size");
    QTest::addColumn<QString>("master");  // addr:port, or "" for none
    QTest::newRow("nothing") << ""
                             << "none" << 0 << 1 << "";
    QTest::newRow("torchrun") << "RANK=1 WORLD_SIZE=4 MASTER_ADDR=node1 MASTER_PORT=29500 LOCAL_RANK=1"
                              << "torchrun-style variables" << 1 << 4 << "node1:29500";
    QTest::newRow("torchrun alone") << "RANK=0 WORLD_SIZE=1"
                                    << "none" << 0 << 1 << "";
    QTest::newRow("mpirun") << "OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=3"
                            << "mpirun" << 2 << 3 << "";
    QTest::newRow("mpirun over tcp")
        << "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=7"
        << "mpirun" << 0 << 2 << "a:7";
    QTest::newRow("srun")
        << "SLURM_PROCID=3 SLURM_STEP_NUM_TASKS=8 SLURM_JOB_NODELIST=gpu[07-08],x SLURM_JOB_ID=1234"
        << "srun" << 3 << 8 << "gpu07:29734";
    QTest::newRow("srun, master given")
        << "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2 MASTER_ADDR=h MASTER_PORT=5000"
        << "srun" << 0 << 2 << "h:5000";
    // A batch script's own shell has SLURM_NTASKS and SLURM_PROCID but was not started by srun.
    QTest::newRow("sbatch shell") << "SLURM_PROCID=0 SLURM_NTASKS=8 SLURM_JOB_ID=5"
                                  << "none" << 0 << 1 << "";
  }

  void launchIsReadFromTheEnvironment() {
    QFETCH(QString, vars);
    QFETCH(QString, launcher);
    const LaunchInfo info = detect_launch(environment_of(vars));
    QCOMPARE(QString(to_string(info.launcher)), launcher);
    QTEST(info.rank, "rank");
    QTEST(info.size, "size");
    QFETCH(QString, master);
    QCOMPARE(info.master_addr.empty()
                 ? QString()
                 : QString::fromStdString(info.master_addr) + ":" + QString::number(info.master_port),
             master);
  }

  void badLaunchVariablesAreNamed_data() {
    QTest::addColumn<QString>("vars");
    QTest::addColumn<QString>("key");
    QTest::newRow("rank not a number") << "RANK=one WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1"
                                       << "RANK";
    QTest::newRow("rank past the size") << "RANK=2 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=1"
                                        << "RANK";
    QTest::newRow("no master") << "RANK=0 WORLD_SIZE=2 MASTER_PORT=1"
                               << "MASTER_ADDR";
    QTest::newRow("port too big") << "RANK=0 WORLD_SIZE=2 MASTER_ADDR=a MASTER_PORT=70000"
                                  << "MASTER_PORT";
    QTest::newRow("world size 0") << "RANK=0 WORLD_SIZE=0"
                                  << "WORLD_SIZE";
    QTest::newRow("mpi rank missing") << "OMPI_COMM_WORLD_SIZE=2"
                                      << "OMPI_COMM_WORLD_RANK";
    QTest::newRow("no node list") << "SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=2"
                                  << "SLURM_JOB_NODELIST";
  }

  void badLaunchVariablesAreNamed() {
    QFETCH(QString, vars);
    QFETCH(QString, key);
    try {
      detect_launch(environment_of(vars));
      QFAIL("accepted");
    } catch (const ConfigError& e) {
      QCOMPARE(QString::fromStdString(e.key()), key);
    }
  }

  void timeoutsComeFromTheEnvironment() {
    const JoinOptions defaults = join_options_from_environment(environment({}));
    QCOMPARE(defaults.rendezvous_timeout_s, 300.0);
    QCOMPARE(defaults.message_timeout_s, 1800.0);
    const JoinOptions set = join_options_from_environment(
        environment({{"UNET_RENDEZVOUS_TIMEOUT", "20"}, {"UNET_COLLECTIVE_TIMEOUT", "2.5"}}));
    QCOMPARE(set.rendezvous_timeout_s, 20.0);
    QCOMPARE(set.message_timeout_s, 2.5);
    for (const char* bad : {"0", "-1", "ten", "", "nan"}) {
      try {
        join_options_from_environment(environment({{"UNET_COLLECTIVE_TIMEOUT", bad}}));
        QFAIL(bad);
      } catch (const ConfigError& e) {
        QCOMPARE(QString::fromStdString(e.key()), QString("UNET_COLLECTIVE_TIMEOUT"));
      }
    }
  }

  void firstHostOfASlurmNodeList_data() {
    QTest::addColumn<QString>("list");
    QTest::addColumn<QString>("host");
    QTest::newRow("one") << "node1"
                         << "node1";
    QTest::newRow("several") << "a,b,c"
                             << "a";
    QTest::newRow("range") << "gpu[03-05,07]"
                           << "gpu03";
    QTest::newRow("range then more") << "gpu[11,14],cpu[1-2]"
                                     << "gpu11";
    QTest::newRow("suffix") << "rack[2-3]-n1"
                            << "rack2-n1";
  }

  void firstHostOfASlurmNodeList() {
    QFETCH(QString, list);
    QFETCH(QString, host);
    QCOMPARE(QString::fromStdString(first_slurm_host(list.toStdString())), host);
  }

  // all_gather by rank, sums in rank order (the values are chosen so that any other order gives another
  // result), any().
  void theRingsCollectivesGoInRankOrder() {
    on_ring(3, [](int rank, ProcessGroup& g) {
      ensure(g.rank() == rank && g.size() == 3, "rank and size");
      ensure(g.local_size() == 3 && g.local_rank() == rank, "one host: every rank is local");
      const std::vector<std::string> all = g.all_gather(
          std::string(static_cast<std::size_t>(rank) * 1000, 'x') + "r" + std::to_string(rank), 4096);
      for (int r = 0; r < 3; ++r)
        ensure(all[static_cast<std::size_t>(r)].ends_with("r" + std::to_string(r)), "all_gather's order");
      ensure(all[2].size() == 2002, "all_gather's sizes");
      // ((0 + 1e16) + 1) - 1e16 is 0 in doubles; 1e16 - 1e16 + 1, another order, would be 1.
      const double parts[3] = {1e16, 1.0, -1e16};
      double value[2] = {parts[rank], static_cast<double>(rank)};
      g.sum(value);
      ensure(value[0] == 0.0, "the sum adds in rank order");
      ensure(value[1] == 3.0, "the sum");
      ensure(g.any(rank == 2), "any(true on one rank)");
      ensure(!g.any(false), "any(false everywhere)");
    });
  }

  // Two processes of two replicas each sum bitwise what one process of those four replicas sums, on the
  // gradients and on host values.
  void processCommunicatorSumsAsSharedMemory() {
    constexpr int kProcesses = 2, kLocal = 2, kWorld = 4;
    constexpr std::int64_t kValues = 10007;
    std::vector<std::vector<float>> data;
    for (int r = 0; r < kWorld; ++r) data.push_back(test::random_values(kValues, 100 + r, 1e3));
    // The reference: one process, four replicas.
    std::vector<std::vector<float>> expected(kWorld);
    std::vector<std::vector<double>> expected_host(kWorld);
    {
      SharedMemoryCommunicator shared(kWorld);
      std::vector<std::thread> threads;
      for (int r = 0; r < kWorld; ++r)
        threads.emplace_back([&, r] { replica_sums(shared, r, r, data, expected, expected_host); });
      for (auto& t : threads) t.join();
    }
    std::vector<std::vector<float>> got(kWorld);
    std::vector<std::vector<double>> got_host(kWorld);
    on_ring(kProcesses, [&](int process, ProcessGroup& group) {
      ProcessCommunicator comm(group, kLocal, process * kLocal, kWorld);
      ensure(comm.size() == kWorld && comm.first_rank() == process * kLocal, "the communicator's ranks");
      std::vector<std::thread> threads;
      for (int l = 0; l < kLocal; ++l)
        threads.emplace_back([&, l] { replica_sums(comm, l, process * kLocal + l, data, got, got_host); });
      for (auto& t : threads) t.join();
    });
    for (int r = 0; r < kWorld; ++r) {
      QVERIFY(got[static_cast<std::size_t>(r)] == expected[static_cast<std::size_t>(r)]);
      QVERIFY(got_host[static_cast<std::size_t>(r)] == expected_host[static_cast<std::size_t>(r)]);
    }
  }

  // A rank that dies (its links close, as when its process is killed) ends the others' collective with an
  // error that names it, at once, not after the message timeout.
  void aDeadRankEndsTheOthersCollectives() {
    std::vector<std::string> errors(3);
    const auto started = std::chrono::steady_clock::now();
    on_ring(3,
            [&](int rank, ProcessGroup& g) {
              if (rank == 1) return;  // leaves: its group is destroyed, its links closed
              try {
                double v = 1;
                g.sum(std::span(&v, 1));
                errors[static_cast<std::size_t>(rank)] = "no error";
              } catch (const Error& e) {
                errors[static_cast<std::size_t>(rank)] = std::string(to_string(e.kind())) + ": " + e.what();
              }
            },
            {.rendezvous_timeout_s = 60, .message_timeout_s = 600});
    QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
    // Rank 2 hears it from rank 1 itself; rank 0 from rank 2, which failed in turn.
    for (const int rank : {0, 2}) {
      const std::string& e = errors[static_cast<std::size_t>(rank)];
      QVERIFY2(e.starts_with("cancelled: ") && e.find("closed its connection") != std::string::npos,
               e.c_str());
    }
    QVERIFY2(errors[2].find("rank 1") != std::string::npos, errors[2].c_str());
  }

  // A rank that sends nothing for the message timeout is taken for dead.
  void aSilentRankTimesOut() {
    std::string error;
    on_ring(2,
            [&](int rank, ProcessGroup& g) {
              if (rank == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1500));
                return;
              }
              try {
                double v = 1;
                g.sum(std::span(&v, 1));
              } catch (const Error& e) {
                error = e.what();
              }
            },
            {.rendezvous_timeout_s = 60, .message_timeout_s = 0.5});
    QVERIFY2(error.find("rank 1") != std::string::npos && error.find("sent nothing") != std::string::npos,
             error.c_str());
  }

  void processesOnOneHostShareItsDevices() {
    on_ring(2, [](int rank, ProcessGroup& g) {
      const std::vector<DeviceId> four = {
          {DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}, {DeviceKind::cpu, 3}};
      const std::vector<DeviceId> mine = local_devices(g, four);
      ensure(mine == std::vector<DeviceId>{four[static_cast<std::size_t>(2 * rank)],
                                           four[static_cast<std::size_t>(2 * rank + 1)]},
             "rank " + std::to_string(rank) + "'s devices");
      const ReplicaRange range = replica_range(g, static_cast<int>(mine.size()));
      ensure(range.first == 2 * rank && range.world == 4, "the replica range");
      bool refused = false;
      try {
        local_devices(g, {{DeviceKind::cpu, 0}, {DeviceKind::cpu, 1}, {DeviceKind::cpu, 2}});
      } catch (const ConfigError& e) {
        refused = e.key() == "devices";
      }
      ensure(refused, "three devices split over two processes are refused, naming devices");
    });
  }

  void processesMustAgreeOnTheConfig() {
    std::vector<std::string> errors(2);
    on_ring(2, [&](int rank, ProcessGroup& g) {
      Config c;
      c.train.epochs = rank == 0 ? 2 : 3;
      try {
        agree_on_config(g, c);
      } catch (const ConfigError& e) {
        errors[static_cast<std::size_t>(rank)] = e.key() + " | " + e.what();
      }
      Config same;
      agree_on_config(g, same);  // the group still works, and equal configs pass
    });
    for (const std::string& e : errors)
      QVERIFY2(e.starts_with("train.epochs | ") && e.find("rank 0") != std::string::npos &&
                   e.find("rank 1") != std::string::npos && e.find(" 2") != std::string::npos &&
                   e.find(" 3") != std::string::npos,
               e.c_str());
  }

  // How the processes join their replicas: CPU replicas along the ring; GPUs (planning stand-ins here)
  // through NCCL only when every process can use it, which for stand-ins none can, so through host memory;
  // cuda.communicator "nccl" and cuda.comm_dtype "bf16" refused then, on every process.
  void processesAgreeHowToSum() {
    CudaOptions automatic, nccl_only, bf16;
    nccl_only.communicator = CommunicatorChoice::nccl;
    bf16.bf16_sums = true;
    std::vector<std::string> hows(2), refusals(2), bf16_refusals(2);
    on_ring(2, [&](int rank, ProcessGroup& g) {
      const auto at = static_cast<std::size_t>(rank);
      auto cpu = create_backend({DeviceKind::cpu, rank}, one_thread());
      std::vector<Backend*> cpus{cpu.get()};
      std::string how;
      ensure(join_replicas(g, cpus, rank, 2, automatic, how)->size() == 2, "two replicas");
      ensure(how == "sums along the process ring", how);
      auto stand_in = test::gpu_stand_in(rank);
      std::vector<Backend*> gpus{stand_in.get()};
      const auto joined = join_replicas(g, gpus, rank, 2, automatic, hows[at]);
      double v = 1.0 + rank;
      joined->all_reduce_host(0, std::span(&v, 1));
      ensure(v == 3.0, "host values summed over the processes");
      try {
        join_replicas(g, gpus, rank, 2, nccl_only, how);
      } catch (const Error& e) {
        refusals[at] = std::string(to_string(e.kind())) + ": " + e.what();
      }
      try {
        join_replicas(g, gpus, rank, 2, bf16, how);
      } catch (const Error& e) {
        bf16_refusals[at] = e.what();
      }
    });
    for (int r = 0; r < 2; ++r) {
      const auto at = static_cast<std::size_t>(r);
      QVERIFY2(hows[at].starts_with("sums through host memory"), hows[at].c_str());
      QVERIFY2(refusals[at].starts_with("unsupported: cuda.communicator is \"nccl\", but"),
               refusals[at].c_str());
      QVERIFY2(bf16_refusals[at].starts_with("cuda.comm_dtype is \"bf16\", but"), bf16_refusals[at].c_str());
    }
  }

  void processesMustReadTheSameData() {
    std::vector<std::string> errors(2);
    on_ring(2, [&](int rank, ProcessGroup& g) {
      agree_on_dataset(g, "24 samples");  // the same: passes
      try {
        agree_on_dataset(g, rank == 0 ? "24 samples" : "23 samples");
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(rank)] = std::string(to_string(e.kind())) + ": " + e.what();
      }
    });
    for (const std::string& e : errors)
      QVERIFY2(e.starts_with("data: rank 1") && e.find("23 samples") != std::string::npos &&
                   e.find("rank 0") != std::string::npos,
               e.c_str());
  }

  // The whole program: two processes launched with torchrun's variables train bitwise as one process with the
  // same two replicas, rank 0 alone writes the run's files, rank 1 its log.
  void torchrunStyleProcessesTrainAsOneProcess_data() {
    QTest::addColumn<bool>("srun");
    QTest::newRow("torchrun-style variables") << false;
    QTest::newRow("srun's variables") << true;
  }
  void torchrunStyleProcessesTrainAsOneProcess() {
    QFETCH(bool, srun);
    QTemporaryDir tmp;
    const fs::path one = tmp.filePath("one").toStdString(), two = tmp.filePath("two").toStdString();
    const test::ProcessResult single = test::unet_train(run_args(QString::fromStdString(one.string()), 2));
    QVERIFY2(single.code == 0, qPrintable(single.err));
    Launched l = launch_torchrun_style(2, run_args(QString::fromStdString(two.string()), 2), {}, srun);
    const std::vector<int> codes = l.wait(120000);
    QVERIFY2(codes == std::vector<int>({0, 0}), qPrintable(l.err(0) + l.err(1)));
    QVERIFY(weights(one / "last.safetensors") == weights(two / "last.safetensors"));
    const std::vector<double> losses = step_losses(one / "metrics.jsonl");
    QCOMPARE(losses.size(), std::size_t{8});  // 18 training samples, 6 a step: 4 steps an epoch
    QVERIFY(step_losses(two / "metrics.jsonl") == losses);
    QVERIFY2(l.err(0).contains(srun ? "(srun)" : "(torchrun-style variables)"), qPrintable(l.err(0)));
    const std::string log = text_of(two / "rank-1.log");
    QVERIFY2(log.find("replicas 1 to 1 of the run's 2") != std::string::npos, log.c_str());
    QVERIFY2(log.find("finished") != std::string::npos, log.c_str());
  }

  void mpirunProcessesTrainAsOneProcess() {
    if (mpirun().isEmpty()) QSKIP("no mpirun on PATH (Open MPI: apt-get install openmpi-bin)");
    QTemporaryDir tmp;
    const fs::path one = tmp.filePath("one").toStdString(), two = tmp.filePath("two").toStdString();
    const test::ProcessResult single = test::unet_train(run_args(QString::fromStdString(one.string()), 2));
    QVERIFY2(single.code == 0, qPrintable(single.err));
    QProcess p;
    p.start(mpirun(), QStringList{"--allow-run-as-root", "--oversubscribe", "-np", "2", UNET_TRAIN_BINARY} +
                          run_args(QString::fromStdString(two.string()), 2));
    QVERIFY(p.waitForFinished(120000));
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0,
             qPrintable(QString::fromUtf8(p.readAllStandardError())));
    QVERIFY(weights(one / "last.safetensors") == weights(two / "last.safetensors"));
    QVERIFY(step_losses(two / "metrics.jsonl") == step_losses(one / "metrics.jsonl"));
    const std::string log = text_of(two / "rank-1.log");
    QVERIFY2(log.find("finished") != std::string::npos, log.c_str());
  }

  // A checkpoint of two processes resumes in one, and one of one process in two; both end where an
  // uninterrupted run ends.
  void runsResumeAcrossProcessCounts() {
    QTemporaryDir tmp;
    const auto dir = [&](const char* name) { return tmp.filePath(name); };
    QVERIFY(test::unet_train(run_args(dir("whole"), 2)).code == 0);
    const std::vector<float> expected = weights(fs::path(dir("whole").toStdString()) / "last.safetensors");

    Launched first_two = launch_torchrun_style(2, run_args(dir("two-then-one"), 1));
    QVERIFY(first_two.wait(120000) == std::vector<int>({0, 0}));
    const QString two_ckpt = dir("two-then-one") + "/last.safetensors";
    const test::ProcessResult then_one =
        test::unet_train(run_args(dir("two-then-one"), 2) << "--resume" << two_ckpt);
    QVERIFY2(then_one.code == 0, qPrintable(then_one.err));
    QVERIFY(weights(two_ckpt.toStdString()) == expected);

    QVERIFY(test::unet_train(run_args(dir("one-then-two"), 1)).code == 0);
    const QString one_ckpt = dir("one-then-two") + "/last.safetensors";
    Launched then_two = launch_torchrun_style(2, run_args(dir("one-then-two"), 2) << "--resume" << one_ckpt);
    QVERIFY2(then_two.wait(120000) == std::vector<int>({0, 0}),
             qPrintable(then_two.err(0) + then_two.err(1)));
    QVERIFY(weights(one_ckpt.toStdString()) == expected);
  }

  // An out-of-memory on a replica of one process (the uneven split's larger share, under a cap) skips the
  // step in every process, and with memory.auto_recover_oom every process shrinks its micro-batch the same
  // way: the run ends bitwise where one process with the same replicas ends.
  void outOfMemoryInOneProcessRecoversInAll() {
    QTemporaryDir tmp;
    const QStringList capped{"--set", "data.image_size=[128,128]",
                             "--set", "train.batch_size=5",
                             "--set", "train.epochs=1",
                             "--set", "memory.cap_mib=8",
                             "--set", "memory.auto_recover_oom=true"};
    const test::ProcessResult single = test::unet_train(run_args(tmp.filePath("one"), 1) + capped);
    QVERIFY2(single.code == 0, qPrintable(single.err));
    QVERIFY2(single.err.contains("recovering: micro-batch 5 -> 3"), qPrintable(single.err));
    Launched l = launch_torchrun_style(2, run_args(tmp.filePath("two"), 1) + capped);
    QVERIFY2(l.wait(120000) == std::vector<int>({0, 0}), qPrintable(l.err(0) + l.err(1)));
    const fs::path one = tmp.filePath("one").toStdString(), two = tmp.filePath("two").toStdString();
    QVERIFY(weights(one / "last.safetensors") == weights(two / "last.safetensors"));
    const std::string log = text_of(two / "rank-1.log");
    QVERIFY2(log.find("ran out of memory in another process") != std::string::npos &&
                 log.find("recovering: micro-batch 5 -> 3") != std::string::npos,
             log.c_str());
  }

  // Processes told different configs refuse to train, every one naming the key.
  void processesWithDifferentConfigsRefuse() {
    QTemporaryDir tmp;
    Launched l = launch_torchrun_style(2, run_args(tmp.filePath("run"), 2), [](int rank) {
      return QStringList{"--set", "train.batch_size=" + QString::number(rank == 0 ? 6 : 8)};
    });
    QCOMPARE(l.wait(60000), std::vector<int>({2, 2}));
    for (int r = 0; r < 2; ++r) {
      const QString err = l.err(r);
      QVERIFY2(err.contains("train.batch_size") && err.contains("rank 1"), qPrintable(err));
    }
  }

  // A rank killed mid-run (SIGKILL: no chance to say goodbye) ends the other with an error naming it, within
  // seconds; nobody waits for the dead.
  void aKilledRankDoesNotHangTheRun_data() {
    QTest::addColumn<int>("killed");
    QTest::newRow("rank 1") << 1;
    QTest::newRow("rank 0") << 0;
  }

  void aKilledRankDoesNotHangTheRun() {
    QFETCH(int, killed);
    QTemporaryDir tmp;
    const fs::path run = tmp.filePath("run").toStdString();
    Launched l = launch_torchrun_style(2, run_args(tmp.filePath("run"), 100000));
    // Killed once it trains: rank 1's log says so once its first step is done.
    QVERIFY(QTest::qWaitFor(
        [&] { return text_of(run / "rank-1.log").find("training on") != std::string::npos; }, 60000));
    QTest::qWait(300);
    l.ranks.at(static_cast<std::size_t>(killed))->kill();
    QVERIFY(l.ranks.at(static_cast<std::size_t>(killed))->waitForFinished(10000));
    const auto started = std::chrono::steady_clock::now();
    const int survivor = 1 - killed;
    l.ranks.at(static_cast<std::size_t>(survivor))->waitForFinished(60000);
    QCOMPARE(l.ranks.at(static_cast<std::size_t>(survivor))->state(), QProcess::NotRunning);
    QVERIFY(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
    QVERIFY(l.ranks.at(static_cast<std::size_t>(survivor))->exitCode() != 0);
    const QString err = l.err(survivor);
    QVERIFY2(err.contains(QString("rank %1").arg(killed)) && err.contains("failed or was killed"),
             qPrintable(err));
  }

  // A stop request (SIGTERM) to one process stops every process at the same step, and rank 0 saves the run's
  // end: a clean stop, not a failure.
  void aStopRequestToOneProcessStopsAll() {
    QTemporaryDir tmp;
    const fs::path run = tmp.filePath("run").toStdString();
    Launched l = launch_torchrun_style(2, run_args(tmp.filePath("run"), 100000));
    QVERIFY(QTest::qWaitFor(
        [&] { return text_of(run / "rank-1.log").find("training on") != std::string::npos; }, 60000));
    QTest::qWait(300);
    l.ranks.at(1)->terminate();  // SIGTERM, as a scheduler sends it
    // Both end cleanly (a rank that went on alone would fail at its next sum, exit code 1).
    QCOMPARE(l.wait(60000), std::vector<int>({0, 0}));
    const QString out = QString::fromUtf8(l.ranks.at(0)->readAllStandardOutput());
    QVERIFY2(out.contains("stopped") && out.contains("last.safetensors"), qPrintable(out));
    const std::string log = text_of(run / "rank-1.log");
    QVERIFY2(log.find("stopped") != std::string::npos, log.c_str());
    QVERIFY(load_checkpoint(run / "last.safetensors").position.step > 0);
  }

  // Under mpirun a killed rank ends the job: mpirun stops the others.
  void aKilledRankEndsAnMpiJob() {
    if (mpirun().isEmpty()) QSKIP("no mpirun on PATH (Open MPI: apt-get install openmpi-bin)");
    QTemporaryDir tmp;
    const fs::path run = tmp.filePath("run").toStdString();
    QProcess p;
    p.start(mpirun(), QStringList{"--allow-run-as-root", "--oversubscribe", "-np", "2", UNET_TRAIN_BINARY} +
                          run_args(tmp.filePath("run"), 100000));
    // rank-1.log names its process id.
    pid_t pid = 0;
    QVERIFY(QTest::qWaitFor(
        [&] {
          const std::string log = text_of(run / "rank-1.log");
          const auto at = log.find("(pid ");
          if (at == std::string::npos || log.find("training on") == std::string::npos) return false;
          pid = static_cast<pid_t>(std::stol(log.substr(at + 5)));
          return true;
        },
        60000));
    QCOMPARE(::kill(pid, SIGKILL), 0);
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0);
  }
};

QTEST_GUILESS_MAIN(TestDistributed)
#include "test_distributed.moc"
