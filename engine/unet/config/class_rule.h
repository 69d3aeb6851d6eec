// The number of output classes that other settings fix: one rule, so that the config's checks
// (config_problems() refuses any other model.classes) and the workbench's form (which sets model.classes when
// the user picks a task, target or source that fixes it) cannot disagree.
#pragma once

#include <cstdint>
#include <optional>

#include "unet/config/config_enums.h"

namespace unet {

// model.classes as `task`, `target` (read under task instances only) and `source` fix it: 3 for task
// instances with target boundary (background, interior, boundary), 1 with target weight_map (a binary mask),
// 1 for a semantic task on data.source dsb2018 (its nucleus masks are binary); nullopt where the user chooses
// (the folder and synthetic sources' semantic masks, class indices).
inline std::optional<std::int64_t> required_classes(ModelTask task, InstanceTarget target,
                                                    DataSource source) {
  if (task == ModelTask::instances) return target == InstanceTarget::boundary ? 3 : 1;
  if (source == DataSource::dsb2018) return 1;
  return std::nullopt;
}

}  // namespace unet
