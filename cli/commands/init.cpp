// `unet-train init`: the initialised model as a full checkpoint at step 0.
#include <cstdio>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/core/memory.h"
#include "unet/io/checkpoint.h"
#include "unet/model/unet.h"

namespace unet::cli {

int init(const Invocation& inv) {
  if (!inv.out) throw ConfigError("--out", "init needs --out CKPT, the checkpoint file to write");
  refuse_to_replace(*inv.out, inv);
  const Config config = load_config(inv);
  // A full checkpoint at step 0: resuming from it is the same as starting afresh with this seed.
  Checkpoint c;
  static_cast<RunState&>(c) = initial_run_state(config);
  c.config = config;
  save_checkpoint(*inv.out, c, CheckpointKind::full);
  CountingAllocator shapes_only("init", 0);
  std::printf("wrote %s: %s parameters, initialised from train.seed %llu\n", printable(*inv.out).c_str(),
              with_commas(UNet(config.model, shapes_only).parameter_count()).c_str(),
              static_cast<unsigned long long>(config.train.seed));
  return 0;
}

}  // namespace unet::cli
