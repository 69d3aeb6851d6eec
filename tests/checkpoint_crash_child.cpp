// Helper process for test_resume's crash test: saves checkpoints of the width-16 demo model over one path,
// alternating all-ones and all-twos parameters, forever, printing "saved" after each commit. The test kills
// it with SIGKILL at random moments and checks that the file is always a whole checkpoint.
#include <cstdio>

#include "unet/io/checkpoint.h"
#include "unet/model/unet.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  unet::Checkpoint c;
  c.config = unet::config_from_json(nlohmann::json::object());
  const auto n = unet::UNet::initial_slab(c.config.model, 0).size();
  for (int i = 0;; ++i) {
    c.parameters.assign(n, i % 2 ? 2.0f : 1.0f);
    c.adam_m.assign(n, 0.0f);
    c.adam_v.assign(n, 0.0f);
    c.position.step = i;
    unet::save_checkpoint(argv[1], c);
    std::printf("saved %d\n", i);
    std::fflush(stdout);
  }
}
