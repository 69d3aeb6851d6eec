#include "unet/step/step_options.h"

#include <utility>

namespace unet {

OptimizerOptions optimizer_options(const Config& config) {
  const OptimizerConfig& o = config.optimizer;
  return {.kind = o.kind,
          .lr = static_cast<float>(config.train.lr),
          .weight_decay = static_cast<float>(config.train.weight_decay),
          .beta1 = static_cast<float>(o.beta1),
          .beta2 = static_cast<float>(o.beta2),
          .eps = static_cast<float>(o.eps),
          .momentum = static_cast<float>(o.momentum),
          .nesterov = o.nesterov};
}

DataParallelOptions step_options(const Config& config, std::vector<DeviceId> devices) {
  DataParallelOptions o;
  o.spec = config.model;
  o.loss = config.loss;
  o.devices = std::move(devices);
  o.compute = compute_dtype(config.precision);
  o.optimizer = optimizer_options(config);
  o.cap_bytes = config.memory.cap_bytes();
  o.bucket_bytes = config.comm.bucket_bytes();
  o.cuda = config.cuda;
  o.checkpointing = config.memory.checkpointing;
  o.pixel_weights =
      config.task == ModelTask::instances && config.instances.target == InstanceTarget::weight_map;
  return o;
}

}  // namespace unet
