#include "unet/backend/cuda_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <vector>

#include "unet/backend/module_loader.h"

namespace unet {
namespace {

namespace fs = std::filesystem;

// Loads cuBLASLt, NVRTC, cuDNN and NCCL by absolute path from $UNET_CUDA_LIBRARY_PATH, globally, so that the
// module's libcudnn.so.9 and cuDNN's own dlopen of its helpers find these copies by soname. Missing ones are
// skipped; returns why one that is there would not load.
std::string preload_libraries() {
  const char* value = std::getenv("UNET_CUDA_LIBRARY_PATH");
  const std::string list = value ? value : "";
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
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) continue;
      // Never closed: what the module links must stay loaded as long as the module.
      if (!dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        const char* error = dlerror();
        return "UNET_CUDA_LIBRARY_PATH: " + file.string() +
               " could not be loaded: " + (error ? error : "unknown dlopen error");
      }
      break;
    }
  }
  return {};
}

// A missing cuDNN is the one missing library worth its own words; others get the loader's text.
std::string explain_load_failure(const std::string&, const std::string& error) {
  // dlerror() names the library that is missing first: "libcudnn.so.9: cannot open shared object file: ...".
  const std::string missing = error.substr(0, error.find(':'));
  if (missing.starts_with("libcudnn") && error.find("cannot open shared object file") != std::string::npos)
    return "cuDNN 9 for CUDA 13 not found (" + missing +
           "): install libcudnn9-cuda-13, or pip install nvidia-cudnn-cu13 and set UNET_CUDA_LIBRARY_PATH to "
           "its lib folder";
  return {};
}

}  // namespace

CudaModuleLoad load_cuda_module() {
  const ModuleSpec spec{
      .name = "cuda",
      .title = "CUDA",
      .file = "libunet_cuda.so",
      .path_variable = "UNET_CUDA_MODULE",
      .abi = UNET_CUDA_ABI,
      .missing = "CUDA backend",
      .build_tree_module = UNET_MODULE_BUILD_PATH,
      .install_dir = UNET_MODULE_INSTALL_DIR,
      .not_built_because = UNET_MODULE_NOT_BUILT_BECAUSE,
      // RTLD_LOCAL: the module's statically linked CUDA runtime stays its own.
      .dlopen_flags = RTLD_NOW | RTLD_LOCAL,
      .before_load = preload_libraries,
      .explain_load_failure = explain_load_failure,
  };
  ModuleLoad loaded = load_module(spec);
  CudaModuleLoad load{.module = static_cast<CudaModule*>(loaded.interface),
                      .path = std::move(loaded.path),
                      .reason = std::move(loaded.reason)};
  if (load.module) load.reason = load.module->library_problem();
  load.built = !loaded.not_built;
  // The two library failures this file words itself (preload_libraries, explain_load_failure).
  load.libraries = !load.module && (load.reason.starts_with("UNET_CUDA_LIBRARY_PATH: ") ||
                                    load.reason.starts_with("cuDNN 9 for CUDA 13 not found"));
  return load;
}

const CudaModuleLoad& cuda_module() {
  static std::once_flag once;
  static CudaModuleLoad load;
  std::call_once(once, [] { load = load_cuda_module(); });
  return load;
}

}  // namespace unet
