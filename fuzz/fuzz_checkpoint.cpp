// libFuzzer target: checkpoint loading (load_checkpoint, and inspect_checkpoint that reads the header alone)
// on any bytes, from a file as the program reads them. Refusals must be unet::Error; anything else escaping,
// a crash, a leak or undefined behaviour is a finding. The file lives in a per-process temporary folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "unet/core/error.h"
#include "unet/io/checkpoint.h"

namespace {

std::filesystem::path input_file() {
  static const std::filesystem::path file = [] {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("unet-fuzz-checkpoint-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / "input.safetensors";
  }();
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path file = input_file();
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    (void)unet::inspect_checkpoint(file);
  } catch (const unet::Error&) {
  }
  try {
    const unet::Checkpoint c = unet::load_checkpoint(file);
    if (c.parameters.empty()) __builtin_trap();  // an accepted checkpoint always holds a model
  } catch (const unet::Error&) {
  }
  return 0;
}
