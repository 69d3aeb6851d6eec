// task "instances": a sample's training target made from its instance labels, where every source makes it
// (the preflight scan's load_pair, so the target is cached with the decoded sample, and the synthetic
// source), so that the target is computed once and then follows every crop and augmentation like any mask.
#pragma once

#include <cstddef>
#include <cstdint>

#include "unet/config/config.h"
#include "unet/data/dataset.h"

namespace unet {

// The object id of a non-zero mask pixel of value `value` in mask file `file` (from 0) of a sample's `files`:
// one object per file when there are several (DSB 2018's layout: file + 1), or the label image's own id when
// there is one. Where objects of several files overlap, the later file's object has the pixel.
inline ObjectId instance_id(std::uint16_t value, std::size_t file, std::size_t files) {
  return files > 1 ? static_cast<ObjectId>(file + 1) : static_cast<ObjectId>(value);
}

// From sample.instances (same height and width as the sample): instances.target "boundary" writes the three
// classes into sample.mask (objects/instance_targets.h, boundary_classes); "weight_map" separates touching
// objects by a background ridge (separate_touching), then writes the binary mask (1 on every object left)
// into sample.mask and the U-Net paper's border weights of the separated objects into sample.weights.
// sample.instances is kept (validation scores objects against it). Throws Error(usage) when the sample has
// no instance labels of its size.
void make_instance_target(Sample& sample, const InstancesConfig& instances);

}  // namespace unet
