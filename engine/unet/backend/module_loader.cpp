#include "unet/backend/module_loader.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "unet/backend/module_abi.h"

namespace unet {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::vector<fs::path> candidate_paths(const ModuleSpec& spec) {
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path lib = exe.parent_path().parent_path() / "lib";
    out.push_back(lib / "unet-workbench" / spec.file);
    out.push_back(lib / spec.file);
  }
  if (*spec.install_dir) out.push_back(fs::path(spec.install_dir) / spec.file);
  if (*spec.build_tree_module) out.emplace_back(spec.build_tree_module);
  return out;
}

// The module file to load, or empty with the reason set.
std::string find_module(const ModuleSpec& spec, std::string& reason) {
  const char* chosen = std::getenv(spec.path_variable);
  if (chosen && *chosen) {
    if (!is_file(chosen)) reason = std::string(spec.path_variable) + "=" + chosen + ": no such file";
    return chosen;
  }
  if (*spec.not_built_because) {
    reason = std::string("this build has no ") + spec.missing + " (" + spec.not_built_because + ")";
    return {};
  }
  std::string looked;
  for (const fs::path& candidate : candidate_paths(spec)) {
    if (is_file(candidate)) return candidate.string();
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  reason = std::string(spec.file) + " not found (looked for " + looked + "); set " + spec.path_variable +
           " to its path";
  return {};
}

std::string last_dl_error() {
  const char* text = dlerror();
  return text ? text : "unknown dlopen error";
}

// The module's entry, checked: it is the module asked for, and its ABI is this engine's. Null with the reason
// set otherwise.
const UnetModuleEntry* checked_entry(void* handle, const ModuleSpec& spec, const std::string& path,
                                     std::string& reason) {
  const std::string not_ours = path + " is not a UNet " + spec.title + " module: ";
  const auto entry_function =
      reinterpret_cast<UnetModuleEntryFunction>(dlsym(handle, kUnetModuleEntrySymbol));
  if (!entry_function) {
    reason = not_ours + "it has no " + kUnetModuleEntrySymbol;
    return nullptr;
  }
  const UnetModuleEntry* entry = entry_function();
  if (!entry) {
    reason = not_ours + "its " + kUnetModuleEntrySymbol + " gave nothing";
    return nullptr;
  }
  if (!entry->name || std::string_view(entry->name) != spec.name) {
    reason = not_ours + "it is the " + (entry->name ? entry->name : "unnamed") + " module";
    return nullptr;
  }
  if (entry->abi != spec.abi) {
    reason = path + " is from another build (module " + std::to_string(entry->abi) + ", engine " +
             std::to_string(spec.abi) + "): use the " + spec.file + " built with this program";
    return nullptr;
  }
  return entry;
}

}  // namespace

ModuleLoad load_module(const ModuleSpec& spec) {
  ModuleLoad load;
  load.path = find_module(spec, load.reason);
  load.not_built = load.path.empty() && *spec.not_built_because;  // nothing searched: none was built
  if (!load.reason.empty()) return load;

  if (spec.before_load) {
    load.reason = spec.before_load();
    if (!load.reason.empty()) return load;
  }
  // Never closed: see the header.
  void* handle = dlopen(load.path.c_str(), spec.dlopen_flags);
  if (!handle) {
    const std::string error = last_dl_error();
    if (spec.explain_load_failure) load.reason = spec.explain_load_failure(load.path, error);
    if (load.reason.empty()) load.reason = load.path + " could not be loaded: " + error;
    return load;
  }
  const UnetModuleEntry* entry = checked_entry(handle, spec, load.path, load.reason);
  if (!entry) return load;

  std::array<char, 1024> why{};
  try {
    load.interface = entry->start(why.data(), why.size());
  } catch (const std::exception& e) {  // start() must not throw; if it does, say what it threw
    write_reason(e.what(), why.data(), why.size());
  }
  if (!load.interface) {
    const std::string_view text(why.data());
    load.reason = load.path + " did not start: " + std::string(text.empty() ? "no reason given" : text);
  }
  return load;
}

}  // namespace unet
