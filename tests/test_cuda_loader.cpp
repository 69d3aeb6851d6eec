// The module loader: each way loading libunet_cuda.so can fail gives the reason a user can act on, checked
// word for word with stand-in modules (cuda_loader_stubs/); libunet_mpi.so goes through the same loader and
// convention (module_abi.h), so the same words come for it; the real CUDA module, where this build has one,
// loads without a driver, reports its versions, lists no GPU and refuses to train with the engine's own error
// type; and on a machine without a driver, unet-train devices --json says so.
#include <dlfcn.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string_view>

#include "test_support.h"
#include "unet/backend/cuda_loader.h"
#include "unet/backend/cuda_module.h"
#include "unet/core/error.h"
#include "unet/distributed/mpi_group.h"

using namespace unet;

namespace {

// load_cuda_module() with UNET_CUDA_MODULE (and UNET_CUDA_LIBRARY_PATH, when given) set for the call only.
CudaModuleLoad load_with(const std::string& module, const std::string& library_path = {}) {
  qputenv("UNET_CUDA_MODULE", QByteArray::fromStdString(module));
  if (!library_path.empty()) qputenv("UNET_CUDA_LIBRARY_PATH", QByteArray::fromStdString(library_path));
  CudaModuleLoad load = load_cuda_module();
  qunsetenv("UNET_CUDA_MODULE");
  qunsetenv("UNET_CUDA_LIBRARY_PATH");
  return load;
}

// load_mpi_module() with UNET_MPI_MODULE set for the call only.
MpiModuleLoad load_mpi_with(const std::string& module) {
  qputenv("UNET_MPI_MODULE", QByteArray::fromStdString(module));
  MpiModuleLoad load = load_mpi_module();
  qunsetenv("UNET_MPI_MODULE");
  return load;
}

// Both modules go through one loader (backend/module_loader.h): the rows of a test of its words.
struct ModuleRow {
  const char* name;             // the row's name: "cuda", "mpi"
  const char* variable;         // the environment variable naming the file
  const char* file;             // the module file's name
  std::uint32_t abi;            // the engine's ABI number for it
  const char* wrong_abi_stub;   // a module of this kind built for ABI abi + 1
  const char* other_kind_stub;  // a module of the other kind
  const char* other_kind;       // its kind's name
  const char* title;            // as the words say it
};
const ModuleRow kModuleRows[] = {
    {"cuda", "UNET_CUDA_MODULE", "libunet_cuda.so", UNET_CUDA_ABI, UNET_TEST_CUDA_STUB_wrong_abi,
     UNET_TEST_CUDA_STUB_mpi, "mpi", "CUDA"},
    {"mpi", "UNET_MPI_MODULE", "libunet_mpi.so", kUnetMpiApiVersion, UNET_TEST_CUDA_STUB_mpi_wrong_abi,
     UNET_TEST_CUDA_STUB_refuses, "cuda", "MPI"},
};

void module_rows() {
  QTest::addColumn<int>("row");
  for (std::size_t i = 0; i < std::size(kModuleRows); ++i)
    QTest::newRow(kModuleRows[i].name) << static_cast<int>(i);
}

// Loads the row's module from `file`: why it did not load, or "(it loaded)".
std::string refusal(const ModuleRow& row, const std::string& file) {
  if (std::string_view(row.name) == "cuda") {
    const CudaModuleLoad load = load_with(file);
    return load.module ? "(it loaded)" : load.reason;
  }
  const MpiModuleLoad load = load_mpi_with(file);
  return load.api ? "(it loaded)" : load.problem;
}

#ifdef UNET_TEST_FAKE_DRIVER_DIR
// `unet-train devices --json` on the fake driver of tests/cuda_loader_stubs/fake_libcuda.cpp.
nlohmann::json devices_on_fake_driver(const QString& driver_version) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("LD_LIBRARY_PATH", UNET_TEST_FAKE_DRIVER_DIR);
  env.insert("UNET_FAKE_CUDA_DRIVER_VERSION", driver_version);
  env.remove("UNET_CUDA_MODULE");
  p.setProcessEnvironment(env);
  p.start(UNET_TRAIN_BINARY, {"devices", "--json"});
  if (!p.waitForFinished(60000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
    qWarning("unet-train devices --json failed: %s", p.readAllStandardError().constData());
    return {};
  }
  return nlohmann::json::parse(p.readAllStandardOutput().toStdString());
}
#endif

bool driver_present() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) dlclose(driver);
  return driver != nullptr;
}

}  // namespace

class TestCudaLoader : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    test::fail_on_warnings();
    qunsetenv("UNET_CUDA_MODULE");
    qunsetenv("UNET_CUDA_LIBRARY_PATH");
    qunsetenv("UNET_MPI_MODULE");
  }

  // Without UNET_CUDA_MODULE: the build tree's module (nothing lies beside tests/../lib), or why there is
  // none.
  void searchFindsThisBuildsModule() {
    const CudaModuleLoad load = load_cuda_module();
#ifdef UNET_TEST_CUDA_MODULE
    QCOMPARE(load.path, std::string(UNET_TEST_CUDA_MODULE));
    QVERIFY2(load.module, load.reason.c_str());
#else
    QVERIFY(!load.module);
    QVERIFY2(load.reason.starts_with("this build has no CUDA backend ("), load.reason.c_str());
#endif
  }

  void missingFileIsNamed_data() {
    module_rows();
  }
  void missingFileIsNamed() {
    QFETCH(int, row);
    const ModuleRow& m = kModuleRows[row];
    const std::string file = std::string("/nonexistent/") + m.file;
    QCOMPARE(refusal(m, file), std::string(m.variable) + "=" + file + ": no such file");
  }

  void missingDependencyGivesTheLoadersText() {
    const std::string stub = UNET_TEST_CUDA_STUB_missing_dependency;
    const CudaModuleLoad load = load_with(stub);
    QVERIFY(!load.module);
    QCOMPARE(load.reason, stub +
                              " could not be loaded: libunet_test_absent.so.1: cannot open shared object "
                              "file: No such file or directory");
  }

  void missingCudnnSaysHowToInstallIt() {
    const CudaModuleLoad load = load_with(UNET_TEST_CUDA_STUB_missing_cudnn);
    QVERIFY(!load.module);
    QCOMPARE(load.reason,
             std::string(
                 "cuDNN 9 for CUDA 13 not found (libcudnn_unet_test_absent.so.9): install libcudnn9-cuda-13, "
                 "or pip install nvidia-cudnn-cu13 and set UNET_CUDA_LIBRARY_PATH to its lib folder"));
  }

  void moduleWithoutEntryPointIsRefused() {
    const std::string stub = UNET_TEST_CUDA_STUB_no_entry;
    const CudaModuleLoad load = load_with(stub);
    QVERIFY(!load.module);
    QCOMPARE(load.reason, stub + " is not a UNet CUDA module: it has no unet_module_entry");
  }

  // Every module exports the same entry symbol, so the entry says which module it is.
  void anotherModuleIsRefused_data() {
    module_rows();
  }
  void anotherModuleIsRefused() {
    QFETCH(int, row);
    const ModuleRow& m = kModuleRows[row];
    const std::string stub = m.other_kind_stub;
    QCOMPARE(refusal(m, stub),
             stub + " is not a UNet " + m.title + " module: it is the " + m.other_kind + " module");
  }

  void moduleOfAnotherBuildIsRefused_data() {
    module_rows();
  }
  void moduleOfAnotherBuildIsRefused() {
    QFETCH(int, row);
    const ModuleRow& m = kModuleRows[row];
    const std::string stub = m.wrong_abi_stub;
    QCOMPARE(refusal(m, stub), stub + " is from another build (module " + std::to_string(m.abi + 1) +
                                   ", engine " + std::to_string(m.abi) + "): use the " + m.file +
                                   " built with this program");
  }

  // Without UNET_MPI_MODULE: the build tree's MPI module, which loads (MPI itself starts only under mpirun),
  // or why this build has none.
  void searchFindsThisBuildsMpiModule() {
    const MpiModuleLoad load = load_mpi_module();
#ifdef UNET_TEST_MPI_MODULE
    QVERIFY2(load.api, load.problem.c_str());
    QVERIFY(load.api->init && load.api->transfer && load.api->finalize);
#else
    QVERIFY(!load.api);
    QVERIFY2(load.problem.starts_with("this build has no MPI module ("), load.problem.c_str());
#endif
  }

  void modulesOwnReasonIsPassedOn() {
    const std::string stub = UNET_TEST_CUDA_STUB_refuses;
    const CudaModuleLoad load = load_with(stub);
    QVERIFY(!load.module);
    QCOMPARE(load.path, stub);
    QCOMPARE(load.reason, stub + " did not start: the stub refuses to start");
  }

  // A module that loads but whose cuDNN does not fit: the loader keeps the module (for its versions) and
  // gives the module's reason.
  void unfitLibrariesAreTheReason() {
    const CudaModuleLoad load = load_with(UNET_TEST_CUDA_STUB_misfit);
    QVERIFY(load.module);
    QCOMPARE(load.reason, std::string("cuDNN 9.1.0 is built for CUDA 12; install its CUDA 13 build "
                                      "(libcudnn9-cuda-13, or pip nvidia-cudnn-cu13)"));
    QCOMPARE(load.module->versions().cudnn, std::string("9.1.0 (built for CUDA 12.8)"));
  }

  // Folders of UNET_CUDA_LIBRARY_PATH without the libraries are skipped; a library there that does not load
  // is named, before the module is tried.
  void libraryPathPreloads() {
    const std::string stub = UNET_TEST_CUDA_STUB_refuses;
    QCOMPARE(load_with(stub, "/nonexistent:").reason, stub + " did not start: the stub refuses to start");

    QTemporaryDir dir;
    const std::string broken = dir.filePath("libcudnn.so.9").toStdString();
    std::ofstream(broken) << "not a library";
    const CudaModuleLoad load = load_with(stub, "/nonexistent:" + dir.path().toStdString());
    QVERIFY(!load.module);
    const std::string start = "UNET_CUDA_LIBRARY_PATH: " + broken + " could not be loaded: " + broken + ": ";
    QVERIFY2(load.reason.starts_with(start), load.reason.c_str());
  }

  void cudnnVersionsThatFit_data() {
    QTest::addColumn<qulonglong>("version");
    QTest::addColumn<qulonglong>("cudart");
    QTest::addColumn<QString>("problem");
    QTest::newRow("9.19 for 13.1") << 91900ULL << 13010ULL << "";
    QTest::newRow("9.0 for 13.0") << 90000ULL << 13000ULL << "";
    QTest::newRow("9.19 for 12.8") << 91900ULL << 12080ULL
                                   << "cuDNN 9.19.0 is built for CUDA 12; install its CUDA 13 build "
                                      "(libcudnn9-cuda-13, or pip nvidia-cudnn-cu13)";
    QTest::newRow("8.9.7") << 8907ULL << 12020ULL
                           << "cuDNN 8.9.7 was loaded; this build needs cuDNN 9 for CUDA 13 (install "
                              "libcudnn9-cuda-13)";
    QTest::newRow("10.0") << 100000ULL << 13000ULL
                          << "cuDNN 10.0.0 was loaded; this build needs cuDNN 9 for CUDA 13 (install "
                             "libcudnn9-cuda-13)";
  }
  void cudnnVersionsThatFit() {
    QFETCH(qulonglong, version);
    QFETCH(qulonglong, cudart);
    QFETCH(QString, problem);
    QCOMPARE(QString::fromStdString(cudnn_problem(version, cudart)), problem);
  }

  void computeCapabilityFloor() {
    QCOMPARE(compute_capability_problem(6, 1),
             std::string("compute capability 6.1: CUDA 13 supports 7.5 and newer"));
    QCOMPARE(compute_capability_problem(7, 0),
             std::string("compute capability 7.0: CUDA 13 supports 7.5 and newer"));
    QCOMPARE(compute_capability_problem(7, 5), std::string());
    QCOMPARE(compute_capability_problem(9, 0), std::string());
  }

  // The real module loads here without a driver: it needs cuDNN alone. It must not claim GPUs it cannot see,
  // and its refusal to train must reach the engine as the engine's own unet::Error.
  void realModuleLoadsWithoutADriver() {
#ifndef UNET_TEST_CUDA_MODULE
    QSKIP("this build has no CUDA module");
#else
    if (driver_present()) QSKIP("a driver is present: the no-driver answers do not apply");
    const CudaModuleLoad load = load_with(UNET_TEST_CUDA_MODULE);
    QVERIFY2(load.module, load.reason.c_str());
    QCOMPARE(load.reason, std::string());  // the cuDNN found at configure time is 9.x for CUDA 13
    const CudaVersions v = load.module->versions();
    QCOMPARE(v.driver, std::string());
    QCOMPARE(v.runtime, std::string(UNET_TEST_CUDA_RUNTIME));
    QVERIFY2(v.cudnn.starts_with(std::string(UNET_TEST_CUDNN_VERSION) + " (built for CUDA 13."),
             v.cudnn.c_str());
#ifdef UNET_TEST_NCCL_VERSION
    QCOMPARE(v.nccl, std::string(UNET_TEST_NCCL_VERSION));
    QCOMPARE(gpu_communicator_text(v), "NCCL " + std::string(UNET_TEST_NCCL_VERSION));
#endif
    QVERIFY(load.module->list_gpus().empty());
    try {
      load.module->create_backend(0, BackendOptions{});
      QFAIL("the CUDA module created a backend without a driver");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QCOMPARE(e.device(), std::string("cuda:0"));
      QCOMPARE(e.message(), std::string("the NVIDIA driver reports no GPU cuda:0"));
    }
#endif
  }

  // A driver older than CUDA 13 is the reason, before the module is even looked for.
  void driverTooOldAsksForR580() {
#ifndef UNET_TEST_FAKE_DRIVER_DIR
    QSKIP("this build has no CUDA module, so no fake driver either");
#else
    const nlohmann::json j = devices_on_fake_driver("12080");
    QCOMPARE(j.at("cuda_unavailable_reason").get<std::string>(),
             std::string("the driver supports CUDA 12.8; this build needs CUDA 13 (driver R580 or newer)"));
    QCOMPARE(j.at("gpus_seen"), nlohmann::json({"Fake GPU A", "Fake GPU B"}));
    QCOMPARE(j.at("versions").at("driver").get<std::string>(), std::string("12.8"));
    QVERIFY(j.at("versions").at("cudnn").is_null());
    QVERIFY(j.at("gpus").empty());
#endif
  }

  // With a CUDA 13 driver the module lists the GPUs from the driver API (no NVML here: free memory unknown),
  // the one below compute capability 7.5 with why; the other is a device to train on.
  void moduleListsTheDriversGpus() {
#ifndef UNET_TEST_FAKE_DRIVER_DIR
    QSKIP("this build has no CUDA module");
#else
    const nlohmann::json j = devices_on_fake_driver("13000");
    QVERIFY(j.at("cuda_unavailable_reason").is_null());
    QCOMPARE(j.at("devices").size(), std::size_t{2});  // the CPU and the GPU of compute capability 9.0
    QCOMPARE(j.at("devices").at(1).at("id").get<std::string>(), std::string("cuda:0"));
    const nlohmann::json& gpus = j.at("gpus");
    QCOMPARE(gpus.size(), std::size_t{2});
    QCOMPARE(gpus[0].at("id").get<std::string>(), std::string("cuda:0"));
    QCOMPARE(gpus[0].at("name").get<std::string>(), std::string("Fake GPU A"));
    QCOMPARE(gpus[0].at("kind").get<std::string>(), std::string("cuda"));
    QCOMPARE(gpus[0].at("compute_capability").get<std::string>(), std::string("9.0"));
    QCOMPARE(gpus[0].at("pci_bus_id").get<std::string>(), std::string("0000:01:00.0"));
    QCOMPARE(gpus[0].at("total_bytes").get<std::int64_t>(), std::int64_t{80} << 30);
    QVERIFY(gpus[0].at("free_bytes").is_null());
    QVERIFY(gpus[0].at("used_by_others_bytes").is_null());
    QVERIFY(gpus[0].at("unusable_reason").is_null());
    QCOMPARE(gpus[1].at("compute_capability").get<std::string>(), std::string("6.1"));
    QCOMPARE(gpus[1].at("unusable_reason").get<std::string>(),
             std::string("compute capability 6.1: CUDA 13 supports 7.5 and newer"));
    QCOMPARE(j.at("versions").at("driver").get<std::string>(), std::string("13.0"));
    QCOMPARE(j.at("versions").at("runtime").get<std::string>(), std::string(UNET_TEST_CUDA_RUNTIME));
    QVERIFY(j.at("versions").at("cudnn").get<std::string>().starts_with(UNET_TEST_CUDNN_VERSION));
#endif
  }

  void noDriverThroughTheCli() {
    if (driver_present()) QSKIP("libcuda.so.1 loads on this machine");
    const test::ProcessResult r = test::unet_train({"devices", "--json"});
    QCOMPARE(r.code, 0);
    const auto j = nlohmann::json::parse(r.out.toStdString());
    QCOMPARE(j.at("cuda_unavailable_reason").get<std::string>(),
             std::string("no NVIDIA driver: libcuda.so.1 could not be loaded"));
    QVERIFY(j.at("gpus").empty());
    QVERIFY(j.at("gpus_seen").empty());
    for (const char* key : {"driver", "runtime", "cudnn", "nccl"})
      QVERIFY2(j.at("versions").at(key).is_null(), key);
    QCOMPARE(j.at("devices").size(), std::size_t{1});
    QVERIFY(j.at("devices").at(0).at("compute_capability").is_null());

    const test::ProcessResult text = test::unet_train({"devices"});
    QCOMPARE(text.code, 0);
    QVERIFY2(text.out.contains("CUDA: unavailable: no NVIDIA driver: libcuda.so.1 could not be loaded\n"),
             qPrintable(text.out));
    QVERIFY2(!text.out.contains("CUDA versions"), qPrintable(text.out));
  }
};

QTEST_GUILESS_MAIN(TestCudaLoader)
#include "test_cuda_loader.moc"
