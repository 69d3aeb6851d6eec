#include "unet/step/step_options.h"

#include <utility>

namespace unet {

OptimizerOptions optimizer_options(const Config& config) {
  const OptimizerConfig& o = config.optimizer;
  const auto kind = parse_optimizer_kind(o.kind);
  if (!kind) throw ConfigError("optimizer.kind", "unknown optimizer \"" + o.kind + "\"");
  return {.kind = *kind,
          .lr = static_cast<float>(config.train.lr),
          .weight_decay = static_cast<float>(config.train.weight_decay),
          .beta1 = static_cast<float>(o.beta1),
          .beta2 = static_cast<float>(o.beta2),
          .eps = static_cast<float>(o.eps),
          .momentum = static_cast<float>(o.momentum),
          .nesterov = o.nesterov};
}

std::vector<DeviceId> device_ids(const std::vector<std::string>& devices) {
  std::vector<DeviceId> ids;
  ids.reserve(devices.size());
  for (const std::string& d : devices) ids.push_back(parse_device_id(d));
  return ids;
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
  return o;
}

}  // namespace unet
