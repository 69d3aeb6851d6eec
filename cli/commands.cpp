// The dispatcher: which options each command takes, and the command a name runs; with the config loading and
// the output-file rule that several commands share.
#include "cli/commands.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>

#include "unet/io/atomic_file.h"

namespace unet::cli {
namespace {

// The options each command takes (the usage text's); one given to a command that does not take it is refused,
// so that nothing the user asked for is silently ignored.
const std::map<std::string, std::vector<std::string>, std::less<>>& options_of_commands() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> table{
      {"train", {"--config", "--set", "--resume", "--overwrite"}},
      {"init", {"--config", "--set", "--out", "--overwrite"}},
      {"estimate", {"--config", "--set", "--json"}},
      {"fit", {"--config", "--set", "--json"}},
      {"summary", {"--config", "--set", "--json"}},
      {"predict",
       {"--checkpoint", "--input", "--output", "--set", "--overwrite", "--mode", "--tile", "--overlap",
        "--blend", "--padding", "--tta", "--output-kind", "--threshold", "--labels-format"}},
      {"export", {"--checkpoint", "--out", "--format", "--overwrite"}},
      {"devices", {"--json"}},
  };
  return table;
}

void refuse_options_the_command_does_not_take(const Invocation& inv) {
  const auto& table = options_of_commands();
  const auto own = table.find(inv.command);
  if (own == table.end()) return;  // run() names the unknown command
  for (const std::string& flag : inv.given) {
    if (std::find(own->second.begin(), own->second.end(), flag) != own->second.end()) continue;
    std::string takers;
    for (const auto& [command, flags] : table)
      if (std::find(flags.begin(), flags.end(), flag) != flags.end())
        takers += (takers.empty() ? "" : ", ") + command;
    throw ConfigError(
        flag, inv.command + " does not take " + flag +
                  (takers.empty()
                       ? std::string()
                       : " (" + takers + " do" + (takers.find(',') == std::string::npos ? "es" : "") + ")") +
                  "; see unet-train --help");
  }
}

}  // namespace

int run(const Invocation& inv) {
  refuse_options_the_command_does_not_take(inv);
  if (inv.command == "train") return train(inv);
  if (inv.command == "init") return init(inv);
  if (inv.command == "summary") return summary(inv);
  if (inv.command == "devices") return devices(inv);
  if (inv.command == "export") return export_model(inv);
  if (inv.command == "predict") return predict(inv);
  if (inv.command == "estimate") return estimate(inv);
  if (inv.command == "fit") return fit(inv);
  throw ConfigError("", "unknown command '" + inv.command + "' (see unet-train --help)");
}

Config load_config(const Invocation& inv) {
  nlohmann::json doc = nlohmann::json::object();
  std::filesystem::path base_dir;
  if (inv.config_file) {
    doc = read_config_document(*inv.config_file);
    base_dir = std::filesystem::absolute(*inv.config_file).parent_path();
  }
  for (const std::string& assignment : inv.overrides) apply_override(doc, assignment);
  try {
    return config_from_json(doc, base_dir);
  } catch (const ConfigError& e) {
    if (!inv.config_file) throw;
    throw ConfigError(e.key(), e.message().substr(e.key().empty() ? 0 : e.key().size() + 2) + " (in " +
                                   *inv.config_file + (inv.overrides.empty() ? "" : " with --set") + ")");
  }
}

void refuse_to_replace(const std::string& out, const Invocation& inv) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::symlink_status(out, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw ConfigError("--out", out + " is " +
                                   (std::filesystem::is_symlink(status)     ? "a symbolic link"
                                    : std::filesystem::is_directory(status) ? "a folder"
                                    : std::filesystem::is_fifo(status)      ? "a FIFO"
                                                                            : "a device or socket") +
                                   ", not a regular file; " + inv.command +
                                   " does not replace it, even with --overwrite: choose another --out");
  for (const auto& stale : remove_stale_temp_files_of(out))
    std::cerr << "unet-train: removed " << stale.string() << ", left by an interrupted write\n";
  if (inv.overwrite || !std::filesystem::exists(status)) return;
  throw ConfigError("--out",
                    out + " exists; " + inv.command +
                        " does not replace a file unasked: choose another --out, or add --overwrite");
}

}  // namespace unet::cli
