// Finds and loads libunet_cuda.so, the CUDA backend module, once per process, and turns every way that can
// fail into a sentence the user can act on. The module is never unloaded.
#pragma once

#include <string>

#include "unet/backend/cuda_module.h"

namespace unet {

struct CudaModuleLoad {
  CudaModule* module = nullptr;  // owned by the module; lives as long as the process
  std::string path;              // the module file loaded or tried; empty when none was found
  std::string reason;  // why CUDA cannot be used; empty when the module loaded and its libraries fit
  // Why not, as what is missing: this build has no CUDA backend (built false); a library the module needs
  // would not load (libraries true; cuDNN, or one in UNET_CUDA_LIBRARY_PATH); else the module itself.
  bool built = true;
  bool libraries = false;
};

// The first call searches, preloads, loads and checks; later calls (from any thread) return that outcome.
// Where it looks: $UNET_CUDA_MODULE; <executable>/../lib/unet-workbench/ and <executable>/../lib/; the
// install folder; the build tree. Libraries named in $UNET_CUDA_LIBRARY_PATH (a colon list of folders) are
// loaded first: libcublasLt.so.13, libnvrtc.so.13, libcudnn.so.9, each from the first folder that has it.
const CudaModuleLoad& cuda_module();

// One attempt, reading the environment now, without remembering it: what cuda_module() does once. Tests call
// it to try one module after another in one process.
CudaModuleLoad load_cuda_module();

}  // namespace unet
