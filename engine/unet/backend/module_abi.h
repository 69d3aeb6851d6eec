// The one convention of every module the engine loads at run time (libunet_cuda.so, libunet_mpi.so), after
// ggml's ggml_backend_init: a module exports one C symbol, unet_module_entry, returning a table whose first
// field is the module's ABI number. The loader (module_loader.h) compares that number with the engine's
// before it touches anything else, and only then calls start() for the module's own interface.
//
// The one non-obvious rule: UnetModuleEntry's layout never changes, because it is the only thing read from a
// module of another build. What may change goes behind start(), guarded by the ABI number. Plain C types
// only: the MPI module includes this header too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

extern "C" {

struct UnetModuleEntry {
  std::uint32_t abi;  // the module's ABI number; the engine loads only its own
  const char* name;   // which module this is: "cuda", "mpi"
  // The module's interface (unet::CudaModule*, const UnetMpiApi*), or nullptr with why in `why` (cut to fit,
  // always terminated). Called once; must not throw.
  void* (*start)(char* why, std::size_t why_size);
};

using UnetModuleEntryFunction = const UnetModuleEntry* (*)();

}  // extern "C"

// The symbol each module exports, alone (its linker version script says so), and its declaration for the
// module that defines it; the engine never calls it by name, only through dlsym.
inline constexpr const char* kUnetModuleEntrySymbol = "unet_module_entry";
#define UNET_MODULE_EXPORT extern "C" __attribute__((visibility("default")))
UNET_MODULE_EXPORT const UnetModuleEntry* unet_module_entry();

namespace unet {

// Copies `text` into a caller's buffer, cut to fit and always terminated.
inline void write_reason(const std::string& text, char* out, std::size_t size) {
  if (!out || size == 0) return;
  const std::size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace unet
