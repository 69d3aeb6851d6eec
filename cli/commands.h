// The commands of unet-train, one function each (cli/commands/<command>.cpp), called by main() through run()
// with the parsed command line; and the few pieces several commands share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "unet/config/config.h"

namespace unet::cli {

struct Invocation {
  std::string command;
  std::optional<std::string> config_file;
  std::vector<std::string> overrides;
  std::optional<std::string> resume, out, checkpoint, input, output;
  // predict's choices, as given; predict checks them (docs/CLI.md#predict).
  std::optional<std::string> mode, tile, overlap, tta, padding, blend, output_kind, threshold, labels_format;
  // --format: what `export` writes, "safetensors" (when not given) or "onnx".
  std::optional<std::string> format;
  bool json = false;
  // Every option as given ("--config", "--json", ...), for the check that the command takes it.
  std::vector<std::string> given;
  // --overwrite: `train` may start over in a folder that holds a previous run; `init`, `export` and
  // `predict` may replace existing files.
  bool overwrite = false;
};

// The config from --config (or the built-in demo) with --set applied; a problem names the file and the key.
Config load_config(const Invocation& inv);

// `init` and `export` write a new file: one that exists (a trained checkpoint, the user's weights) is
// replaced only with --overwrite, and only a regular file ever is: a link, a FIFO, a device or a folder is
// refused even then. A temporary file that an interrupted write of `out` left beside it is removed first.
void refuse_to_replace(const std::string& out, const Invocation& inv);

// Dispatches to the command; returns the exit code. Throws unet::ConfigError (exit 2) or unet::Error (exit
// 1).
int run(const Invocation& inv);

int train(const Invocation& inv);
int init(const Invocation& inv);
int summary(const Invocation& inv);
int devices(const Invocation& inv);
int export_model(const Invocation& inv);
int predict(const Invocation& inv);
int estimate(const Invocation& inv);
int fit(const Invocation& inv);

}  // namespace unet::cli
