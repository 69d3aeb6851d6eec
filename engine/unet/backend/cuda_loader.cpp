#include "unet/backend/cuda_loader.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <system_error>
#include <vector>

#include "unet/backend/module_paths.h"

namespace unet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModuleFile = "libunet_cuda.so";

// Set by CMake on this file: where the build tree's module is (only when it is built), or why it is not
// built.
#ifdef UNET_CUDA_MODULE_BUILD_PATH
constexpr const char* kBuildTreeModule = UNET_CUDA_MODULE_BUILD_PATH;
#else
constexpr const char* kBuildTreeModule = nullptr;
#endif
#ifdef UNET_CUDA_NOT_BUILT_BECAUSE
constexpr const char* kNotBuiltBecause = UNET_CUDA_NOT_BUILT_BECAUSE;
#else
constexpr const char* kNotBuiltBecause = nullptr;
#endif
#ifdef UNET_CUDA_MODULE_INSTALL_DIR
constexpr const char* kInstallDir = UNET_CUDA_MODULE_INSTALL_DIR;
#else
constexpr const char* kInstallDir = nullptr;
#endif

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string last_dl_error() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::vector<fs::path> candidate_paths() {
  return module_candidates(kModuleFile, kInstallDir, kBuildTreeModule);
}

// Loads cuBLASLt, NVRTC, cuDNN and NCCL by absolute path from $UNET_CUDA_LIBRARY_PATH, globally, so that the
// module's libcudnn.so.9 and cuDNN's own dlopen of its helpers find these copies by soname. Missing ones are
// skipped; returns why one that is there would not load.
std::string preload_libraries() {
  const std::string list = env("UNET_CUDA_LIBRARY_PATH");
  if (list.empty()) return {};
  std::vector<fs::path> folders;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find(':', start), list.size());
    if (end > start) folders.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  for (const char* name : {"libcublasLt.so.13", "libnvrtc.so.13", "libcudnn.so.9", "libnccl.so.2"}) {
    for (const fs::path& folder : folders) {
      const fs::path file = folder / name;
      if (!is_file(file)) continue;
      // Never closed: what the module links must stay loaded as long as the module.
      if (!dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL))
        return "UNET_CUDA_LIBRARY_PATH: " + file.string() + " could not be loaded: " + last_dl_error();
      break;
    }
  }
  return {};
}

std::string dlopen_failure(const std::string& path, const std::string& error) {
  // dlerror() names the library that is missing first: "libcudnn.so.9: cannot open shared object file: ...".
  const std::string missing = error.substr(0, error.find(':'));
  if (missing.starts_with("libcudnn") && error.find("cannot open shared object file") != std::string::npos)
    return "cuDNN 9 for CUDA 13 not found (" + missing +
           "): install libcudnn9-cuda-13, or pip install nvidia-cudnn-cu13 and set UNET_CUDA_LIBRARY_PATH to "
           "its "
           "lib folder";
  return path + " could not be loaded: " + error;
}

}  // namespace

CudaModuleLoad load_cuda_module() {
  CudaModuleLoad load;
  const std::string from_env = env("UNET_CUDA_MODULE");
  if (!from_env.empty()) {
    load.path = from_env;
    if (!is_file(from_env)) {
      load.reason = "UNET_CUDA_MODULE=" + from_env + ": no such file";
      return load;
    }
  } else {
    if (kNotBuiltBecause) {
      load.reason = std::string("this build has no CUDA backend (") + kNotBuiltBecause + ")";
      return load;
    }
    std::string looked;
    for (const fs::path& candidate : candidate_paths()) {
      if (is_file(candidate)) {
        load.path = candidate.string();
        break;
      }
      looked += (looked.empty() ? "" : ", ") + candidate.string();
    }
    if (load.path.empty()) {
      load.reason = std::string(kModuleFile) + " not found (looked for " + looked +
                    "); set UNET_CUDA_MODULE to its path";
      return load;
    }
  }

  if (std::string problem = preload_libraries(); !problem.empty()) {
    load.reason = std::move(problem);
    return load;
  }
  // RTLD_LOCAL: the module's statically linked CUDA runtime stays its own. Never closed (cudart and cuDNN
  // register exit handlers that must find their code there).
  void* handle = dlopen(load.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    load.reason = dlopen_failure(load.path, last_dl_error());
    return load;
  }
  const auto create = reinterpret_cast<UnetCudaModuleCreate>(dlsym(handle, "unet_cuda_module_create"));
  if (!create) {
    load.reason = load.path + " is not a UNet CUDA module: it has no unet_cuda_module_create";
    return load;
  }
  std::array<char, 1024> why{};
  CudaModule* module = nullptr;
  try {
    module = create(UNET_CUDA_ABI, why.data(), why.size());
  } catch (const std::exception& e) {
    write_reason(e.what(), why.data(), why.size());
  }
  if (!module) {
    const std::string_view text(why.data());
    if (text.starts_with(kCudaAbiMismatch))
      load.reason = load.path + " is from another build (" +
                    std::string(text.substr(std::strlen(kCudaAbiMismatch))) +
                    "): use the libunet_cuda.so built with this program";
    else
      load.reason = load.path + " did not start: " + std::string(text.empty() ? "no reason given" : text);
    return load;
  }
  load.module = module;
  load.reason = module->library_problem();
  return load;
}

const CudaModuleLoad& cuda_module() {
  static std::once_flag once;
  static CudaModuleLoad load;
  std::call_once(once, [] { load = load_cuda_module(); });
  return load;
}

}  // namespace unet
