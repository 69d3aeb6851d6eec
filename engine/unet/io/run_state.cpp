#include "unet/io/run_state.h"

#include "unet/core/error.h"
#include "unet/model/unet.h"

namespace unet {

OptimizerSlabs optimizer_slabs(const OptimizerConfig& optimizer) {
  if (optimizer.kind != OptimizerKind::sgd) return OptimizerSlabs::adam_moments;
  return optimizer.momentum != 0 ? OptimizerSlabs::sgd_momentum : OptimizerSlabs::none;
}

RunState initial_run_state(const Config& config) {
  RunState s;
  s.parameters = UNet::initial_slab(config.model, config.train.seed);
  const std::vector<float> zero(s.parameters.size(), 0.0f);
  switch (optimizer_slabs(config.optimizer)) {
    case OptimizerSlabs::adam_moments:
      s.adam_m = s.adam_v = zero;
      break;
    case OptimizerSlabs::sgd_momentum:
      s.sgd_momentum = zero;
      break;
    case OptimizerSlabs::none:
      break;
  }
  return s;
}

bool RunState::holds_optimizer_state(OptimizerSlabs slabs) const {
  switch (slabs) {
    case OptimizerSlabs::none:
      return true;
    case OptimizerSlabs::sgd_momentum:
      return !sgd_momentum.empty();
    case OptimizerSlabs::adam_moments:
      return !adam_m.empty() && !adam_v.empty();
  }
  return false;
}

std::vector<std::vector<float>> RunState::optimizer_state(OptimizerSlabs slabs) const {
  if (slabs == OptimizerSlabs::none || !holds_optimizer_state(slabs)) return {};
  if (slabs == OptimizerSlabs::sgd_momentum) return {sgd_momentum};
  return {adam_m, adam_v};
}

void RunState::set_optimizer_state(OptimizerSlabs slabs, std::vector<std::vector<float>> state) {
  if (slabs == OptimizerSlabs::none || state.empty()) return;
  if (slabs == OptimizerSlabs::sgd_momentum) {
    sgd_momentum = std::move(state.front());
    return;
  }
  UNET_CHECK(state.size() == 2, usage,
             "RunState::set_optimizer_state: Adam keeps 2 slabs, got " + std::to_string(state.size()));
  adam_m = std::move(state[0]);
  adam_v = std::move(state[1]);
}

}  // namespace unet
