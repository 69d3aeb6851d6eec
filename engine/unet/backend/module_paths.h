// Where the engine looks for a module it loads at run time (libunet_cuda.so, libunet_mpi.so), in order:
// beside the program (<prefix>/lib/unet-workbench/ and <prefix>/lib/, from the executable's <prefix>/bin/),
// the install prefix the build was configured with, and the build tree.
#pragma once

#include <filesystem>
#include <vector>

namespace unet {

// `install_dir` and `build_tree_module` may be null (not configured).
inline std::vector<std::filesystem::path> module_candidates(const char* file, const char* install_dir,
                                                            const char* build_tree_module) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path lib = exe.parent_path().parent_path() / "lib";
    out.push_back(lib / "unet-workbench" / file);
    out.push_back(lib / file);
  }
  if (install_dir) out.push_back(fs::path(install_dir) / file);
  if (build_tree_module) out.emplace_back(build_tree_module);
  return out;
}

}  // namespace unet
