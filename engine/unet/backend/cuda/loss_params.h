// The CUDA loss kernels' parameters (kmath::LossParams, passed by value) from the engine's LossDesc. Host
// only; shared by cuda_backend.cpp and tests/test_kernel_math.cpp, which runs the kernels' math on the host.
#pragma once

#include "unet/backend/backend.h"
#include "unet/backend/cuda/kernel_math.h"

namespace unet::cuda {

inline kmath::LossParams loss_params(const LossDesc& d) {
  kmath::LossParams p;
  if (d.kind == LossKind::dice)
    p.term = kmath::LossTerm::none;
  else
    p.term = d.focal() ? kmath::LossTerm::focal : kmath::LossTerm::cross_entropy;
  p.dice = d.has_dice();
  p.dice_include_background = d.dice_include_background;
  p.weighted = !d.class_weights.empty();
  p.ignore_index = d.ignore_index;
  p.focal_gamma = d.focal_gamma;
  p.focal_alpha = d.focal_alpha;
  p.dice_smooth = d.dice_smooth;
  // check_loss_desc has bounded the count by the classes (<= 255)
  for (std::size_t c = 0; c < d.class_weights.size() && c < std::size(p.class_weight); ++c)
    p.class_weight[c] = d.class_weights[c];
  return p;
}

}  // namespace unet::cuda
