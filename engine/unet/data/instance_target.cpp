#include "unet/data/instance_target.h"

#include <string>

#include "unet/core/error.h"
#include "unet/objects/instance_targets.h"

namespace unet {

void make_instance_target(Sample& sample, const InstancesConfig& instances) {
  UNET_CHECK(sample.instances.height == sample.height && sample.instances.width == sample.width &&
                 sample.instances.ids.size() == static_cast<std::size_t>(sample.height * sample.width),
             usage,
             "instance target of " + sample.source + ": no instance labels of the sample's size " +
                 std::to_string(sample.height) + "x" + std::to_string(sample.width));
  if (instances.target == InstanceTarget::boundary) {
    sample.mask = boundary_classes(sample.instances, static_cast<int>(instances.boundary_width));
    sample.weights.clear();
    return;
  }
  // Touching objects get a background ridge first, so that the binary mask keeps them apart and the border
  // weights have a gap to weigh (without it, two cells that meet have no background pixel between them).
  const LabelImage separated = separate_touching(sample.instances);
  sample.mask.assign(separated.ids.size(), 0);
  for (std::size_t i = 0; i < sample.mask.size(); ++i) sample.mask[i] = separated.ids[i] != 0 ? 1 : 0;
  sample.weights =
      border_weights(separated, instances.border_w0, instances.border_sigma, instances.balance_classes);
}

}  // namespace unet
