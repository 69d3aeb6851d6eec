// Where the test suites read their data files (tests/data/ in the source tree): $UNET_TEST_DATA_DIR when set
// and not empty, else the source tree this build was configured from (UNET_SOURCE_DIR, compiled in). A suite
// run away from that tree, as the GPU check runs the bundle made by scripts/make-gpu-bundle.sh, is given the
// folder the bundle carries them in.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace unet::test {

inline std::filesystem::path test_data_dir() {
  if (const char* dir = std::getenv("UNET_TEST_DATA_DIR"); dir != nullptr && *dir != '\0') return dir;
  return std::filesystem::path(UNET_SOURCE_DIR) / "tests" / "data";
}

// A file of the test data, e.g. test_data_file("loss_cases.json").
inline std::filesystem::path test_data_file(std::string_view name) {
  return test_data_dir() / name;
}

}  // namespace unet::test
