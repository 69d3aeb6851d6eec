// libFuzzer target: the safetensors reader's front door, on any bytes. Every refusal must be a unet::Error
// (what the program turns into a message naming the file); anything else escaping, a crash, a leak or
// undefined behaviour is a finding. An accepted file must hand out only ranges inside itself.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "unet/core/error.h"
#include "unet/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* first = reinterpret_cast<const std::byte*>(data);
  try {
    const unet::SafetensorsFile file =
        unet::SafetensorsFile::parse(std::vector<std::byte>(first, first + size), "fuzz.safetensors");
    std::size_t touched = 0;
    for (const unet::StTensorInfo& t : file.tensors()) {
      const auto bytes = file.data(t);
      if (!bytes.empty())
        touched += static_cast<std::size_t>(bytes.front()) + static_cast<std::size_t>(bytes.back());
      if (file.find(t.name) == nullptr) __builtin_trap();  // a listed tensor that cannot be found by name
    }
    (void)touched;
  } catch (const unet::Error&) {
  }
  return 0;
}
