// unet-train: the headless front end. It reads the same JSON config as the workbench, applies --set
// overrides, and runs the engine. Exit codes: 0 success, 1 runtime failure (message on stderr), 2 bad usage
// or config.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/backend/address_space.h"
#include "unet/core/error.h"
#include "unet/data/preflight.h"

namespace {

constexpr const char* usage_text = R"(usage: unet-train <command> [options]

commands:
  train    [--config F] [--set key=value]... [--resume CKPT] [--overwrite]
                                                               train; writes <checkpoint.dir>/metrics.jsonl
  init     [--config F] [--set key=value]... --out CKPT [--overwrite]
                                                               write the initialised model as a checkpoint
  estimate [--config F] [--set key=value]... [--json]          predicted peak memory per device and category; remedies
  fit      [--config F] [--set key=value]... [--json]          the largest batch that fits each selected device
  summary  [--config F] [--set key=value]... [--json]          per-layer table of the model
  predict  --checkpoint CKPT --input DIR --output DIR [--overwrite]
           [--mode auto|resize|tiled|whole] [--tile N|HxW] [--overlap F] [--blend gaussian|uniform]
           [--padding reflect|zero] [--tta none|flips] [--output-kind probability|mask|labels]
           [--threshold P] [--labels-format png|tiff]
                                                               a probability (0..255) or mask PNG per input image,
                                                               at its size; a task-instances model's objects
                                                               (label image and CSV table)
  export   --checkpoint CKPT --out FILE [--format F] [--overwrite]
                                                               the model alone: safetensors weights (no
                                                               optimizer state), or an ONNX graph
  devices  [--json]                                            the devices found, and why CUDA is unavailable

options:
  --config F         a JSON config (docs/CONFIG.md in the source, /usr/share/doc/unet-workbench/CONFIG.md
                     when installed); without it, the built-in demo ({})
  --set key=value    override one key by its dotted path; the value is JSON when it parses, else a string:
                     --set train.batch_size=16 --set precision=mixed-bf16 --set 'devices=["cpu:0","cpu:1"]'
  --json             machine-readable output
  --format F         export: safetensors (the default; weights only, loads like a checkpoint) or onnx (the
                     model for other runtimes: float32 pixels 0..255 [N, C, H, W] in, probabilities out)
  --overwrite        train: use a checkpoint.dir that holds another run, removing that run's files first
                     (each is named); init, export: replace an existing --out file; predict: replace
                     existing output files
  --mode M           predict: auto (default: resize when the image is no larger than data.image_size, else
                     tiled), resize (to data.image_size and back), tiled (overlapping tiles at the image's
                     own scale), whole (the whole image in one pass)
  --tile N|HxW       predict: the tiles' size (default data.image_size), multiples of 2^model.depth
  --overlap F        predict: the share of a tile its neighbour covers, 0..0.9 (default 0.5)
  --blend B          predict: gaussian (default: each tile weighted towards its centre) or uniform
  --padding P        predict: how images are padded to tiles: reflect (default) or zero
  --tta T            predict: none (default) or flips (the mean over the 4 flips of each input)
  --output-kind K    predict: probability (the default for task semantic), mask (class indices; a binary
                     foreground as 255) or labels (task instances, its default: <stem>_labels.png, 16-bit
                     object ids, and <stem>_objects.csv)
  --threshold P      predict: a binary model's mask: foreground where the probability is >= P (default 0.5)
  --labels-format F  predict, labels: png (default: <stem>_labels.png, 16-bit, up to 65535 objects) or tiff
                     (<stem>_labels.tif: 16-bit, or 32-bit when an image has more objects)
  -h, --help         this text
)";

// For a message about host memory: the address-space limit, when the process has one.
std::string address_space_note() {
  const unet::AddressSpace space = unet::read_address_space();
  return space.limited() ? "; under " + unet::describe(space) : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  unet::fit_malloc_to_address_space_limit();  // before any thread allocates
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(usage_text, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  unet::cli::Invocation inv;
  inv.command = args[0];
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "unet-train: %s needs a value\n", flag);
        return std::nullopt;
      }
      return args[++i];
    };
    // An option that takes one file, folder or choice, given twice, is refused: which one was meant is not
    // clear.
    auto once = [&](const char* flag, std::optional<std::string>& slot) {
      if (slot) {
        std::fprintf(stderr, "unet-train: %s given twice ('%s' and '%s'); give it once\n", flag,
                     slot->c_str(), i + 1 < args.size() ? args[i + 1].c_str() : "");
        return false;
      }
      slot = value(flag);
      return slot.has_value();
    };
    if (a.starts_with("--")) inv.given.push_back(a);
    if (a == "-h" || a == "--help") {
      std::fputs(usage_text, stdout);
      return 0;
    } else if (a == "--config") {
      if (!once("--config", inv.config_file)) return 2;
    } else if (a == "--set") {
      auto v = value("--set");
      if (!v) return 2;
      inv.overrides.push_back(*v);
    } else if (a == "--resume") {
      if (!once("--resume", inv.resume)) return 2;
    } else if (a == "--checkpoint") {
      if (!once("--checkpoint", inv.checkpoint)) return 2;
    } else if (a == "--input") {
      if (!once("--input", inv.input)) return 2;
    } else if (a == "--output") {
      if (!once("--output", inv.output)) return 2;
    } else if (a == "--out") {
      if (!once("--out", inv.out)) return 2;
    } else if (a == "--mode") {
      if (!once("--mode", inv.mode)) return 2;
    } else if (a == "--tile") {
      if (!once("--tile", inv.tile)) return 2;
    } else if (a == "--overlap") {
      if (!once("--overlap", inv.overlap)) return 2;
    } else if (a == "--tta") {
      if (!once("--tta", inv.tta)) return 2;
    } else if (a == "--padding") {
      if (!once("--padding", inv.padding)) return 2;
    } else if (a == "--blend") {
      if (!once("--blend", inv.blend)) return 2;
    } else if (a == "--output-kind") {
      if (!once("--output-kind", inv.output_kind)) return 2;
    } else if (a == "--threshold") {
      if (!once("--threshold", inv.threshold)) return 2;
    } else if (a == "--labels-format") {
      if (!once("--labels-format", inv.labels_format)) return 2;
    } else if (a == "--format") {
      if (!once("--format", inv.format)) return 2;
    } else if (a == "--json") {
      inv.json = true;
    } else if (a == "--overwrite") {
      inv.overwrite = true;
    } else {
      std::fprintf(stderr, "unet-train: unknown option '%s' (see unet-train --help)\n", a.c_str());
      return 2;
    }
  }
  try {
    return unet::cli::run(inv);
  } catch (const unet::ConfigError& e) {
    std::fprintf(stderr, "unet-train: %s\n", unet::cli::printable(e.what()).c_str());
    return 2;
  } catch (const unet::DatasetError& e) {
    // One line per problem, each escaped on its own: a file name cannot make or hide a line.
    std::fprintf(stderr, "unet-train: %s\n", unet::cli::printable(e.headline()).c_str());
    for (const std::string& line : e.problem_lines())
      std::fprintf(stderr, "unet-train:   %s\n", unet::cli::printable(line).c_str());
    return 1;
  } catch (const unet::Error& e) {
    std::fprintf(stderr, "unet-train: %s\n", unet::cli::printable(e.what()).c_str());
    // A failed backend call or a broken API precondition may be the engine's fault: say where it was raised.
    if (e.kind() == unet::ErrorKind::backend || e.kind() == unet::ErrorKind::usage)
      std::fprintf(stderr, "unet-train: (%s error raised at %s; please include this line in a bug report)\n",
                   unet::to_string(e.kind()), e.location().c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // Host memory, not a bug: say so rather than "internal error: std::bad_alloc".
    std::fprintf(stderr,
                 "unet-train: out of host memory (an allocation failed%s); free memory, or lower "
                 "train.batch_size, data.image_size or data.cache_mib\n",
                 address_space_note().c_str());
    return 1;
  } catch (const std::system_error& e) {
    // A thread that cannot start (EAGAIN: no address space left for its stack, or ulimit -u reached).
    if (e.code() != std::errc::resource_unavailable_try_again) {
      std::fprintf(stderr, "unet-train: internal error: %s\n", unet::cli::printable(e.what()).c_str());
      return 1;
    }
    std::fprintf(stderr,
                 "unet-train: could not start a thread (%s%s); raise the limit, or lower train.batch_size, "
                 "data.image_size or data.cache_mib\n",
                 unet::cli::printable(e.what()).c_str(), address_space_note().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unet-train: internal error: %s\n", unet::cli::printable(e.what()).c_str());
    return 1;
  }
}
