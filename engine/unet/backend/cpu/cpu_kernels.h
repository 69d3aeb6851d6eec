// The CPU backend's own loops, for what oneDNN does not offer: losses, metrics, Adam, channel concat/split,
// input scaling and small vector operations. Plain functions over raw host pointers, parallel with OpenMP
// (the calling thread's OpenMP thread count applies).
#pragma once

#include <cstdint>

#include "unet/backend/backend.h"

namespace unet::cpu {

// Strides of a 4-D activation, in elements.
struct ActStrides {
  std::int64_t n, c, h, w;
};
ActStrides act_strides(const ActShape& s, Layout layout);

// float <-> bfloat16 (round to nearest even), as oneDNN stores it.
float bf16_to_float(std::uint16_t v);
std::uint16_t float_to_bf16(float v);

// pixels: u8 or f32 [n, h, w, c] (pixel_dtype).
void input_from_pixels(const void* pixels, DType pixel_dtype, const ActShape& shape, void* x, DType dtype,
                       Layout layout, float scale);
// s is the shape of the concatenation (out, dout): s.c == ca + cb.
void concat_channels(const void* a, std::int64_t ca, const void* b, std::int64_t cb, void* out,
                     const ActShape& s, DType dtype, Layout layout);
void split_channels(const void* dout, const ActShape& s, void* da, std::int64_t ca, void* db, std::int64_t cb,
                    bool accumulate_b, DType dtype, Layout layout);

// Backend::loss: adds to sums (LossSum); writes dlogits when non-null. pixel_weights: [n, h, w], or null
// (every pixel weighs 1). scratch: loss_scratch_bytes.
std::size_t loss_scratch_bytes(const LossDesc& d, const ActShape& shape);
void loss(const LossDesc& d, const void* logits, const ActShape& shape, DType dtype, Layout layout,
          const std::uint8_t* targets, const float* pixel_weights, void* dlogits, LossGradScales scales,
          double* sums, double* scratch);
void segmentation_counts(const void* logits, const ActShape& shape, DType dtype, Layout layout,
                         const std::uint8_t* targets, std::int64_t* counts, int ignore_index);
void probabilities(const void* logits, const ActShape& shape, DType dtype, Layout layout, float* probs);

void fill(void* data, std::int64_t count, DType dtype, double value);
void scale(float* data, std::int64_t count, float factor);
void add(const void* x, void* y, std::int64_t count, DType dtype);
void adam_step(const AdamStep& a, float* params, const float* grads, float* m, float* v, std::int64_t count);
void sgd_step(const SgdStep& a, float* params, const float* grads, float* momentum, std::int64_t count);
double sum_of_squares(const float* data, std::int64_t count);
std::int64_t count_non_finite(const void* data, std::int64_t count, DType dtype);

}  // namespace unet::cpu
