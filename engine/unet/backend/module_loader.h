// Finds, loads and checks a module the engine loads at run time (libunet_cuda.so through cuda_loader.h,
// libunet_mpi.so through distributed/mpi_group.cpp), the one way for every module: search the module paths,
// dlopen, call the one entry point (module_abi.h), refuse another build's ABI, start it. Every way that can
// fail ends in one sentence that names the file and why. A loaded module is never unloaded (the CUDA runtime,
// cuDNN and MPI register exit handlers that must find their code).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace unet {

// What one module is and how to load it.
struct ModuleSpec {
  const char* name = "";           // the entry's name: "cuda"
  const char* title = "";          // in sentences: "CUDA" ("... is not a UNet CUDA module")
  const char* file = "";           // "libunet_cuda.so"
  const char* path_variable = "";  // the environment variable naming the file: "UNET_CUDA_MODULE"
  std::uint32_t abi = 0;           // the engine's ABI number for this module
  const char* missing = "";        // in "this build has no <missing> (<why>)": "CUDA backend"
  // Set by the build on the loader's file (unet_module_location, engine/CMakeLists.txt:
  // UNET_MODULE_BUILD_PATH, UNET_MODULE_INSTALL_DIR, UNET_MODULE_NOT_BUILT_BECAUSE), "" where it does not
  // apply: the build tree's module file, the install folder, and why this build has no such module (then
  // nothing is searched).
  const char* build_tree_module = "";
  const char* install_dir = "";
  const char* not_built_because = "";
  int dlopen_flags = 0;  // RTLD_NOW with RTLD_LOCAL or RTLD_GLOBAL: the module's rule
  // Run before dlopen; a non-empty answer is the reason and nothing is loaded (CUDA preloads its libraries).
  std::function<std::string()> before_load;
  // The sentence for a failed dlopen, from the file and dlerror()'s text, when the module knows better words
  // (what to install); empty for "<file> could not be loaded: <dlerror>".
  std::function<std::string(const std::string& path, const std::string& error)> explain_load_failure;
};

struct ModuleLoad {
  void* interface = nullptr;  // what the module's start() returned; lives as long as the process
  std::string path;           // the module file loaded or tried; empty when none was found
  std::string reason;         // why there is no interface; empty when there is
  bool not_built = false;     // the reason is that this build has no such module (spec.not_built_because)
};

// Where a module file is looked for, in order: $<path_variable> alone when set; otherwise beside the program
// (<prefix>/lib/unet-workbench/ and <prefix>/lib/, from the executable's <prefix>/bin/), the install folder,
// and the build tree. Reads the environment now and remembers nothing: callers keep the outcome (call_once).
ModuleLoad load_module(const ModuleSpec& spec);

}  // namespace unet
