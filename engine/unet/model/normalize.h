// How an image's stored values become the model's input: part of the model (docs/MODEL.md, "Normalisation"),
// saved in the checkpoint with the config (data.normalize and its keys) and applied the same way by training,
// validation, prediction and the ONNX export. The one rule: the statistics of a per-image mode (percentile,
// zscore per image) are taken over the whole image as stored, before any resize, crop or tile, so that a tile
// of an image is normalised exactly as the whole image is.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace unet {

// scale_255: value / 255 (8-bit data, as the demo; 16-bit data / 65535, as its 8-bit conversion was);
// percentile: (value - p_low) / (p_high - p_low), per image and channel (CSBDeep, StarDist);
// zscore: (value - mean) / std, per image and channel, or over the dataset (measured in the data scan);
// range: (value - min) / (max - min), fixed bounds (16-bit data of a known range).
enum class NormalizeMode { scale_255, percentile, zscore, range };
enum class NormalizeScope { image, dataset };

struct NormalizeDesc {
  NormalizeMode mode = NormalizeMode::scale_255;
  double low_percentile = 1, high_percentile = 99.8;  // percentile: in [0, 100], low < high
  bool clip = false;                                  // percentile and range: results clipped to [0, 1]
  NormalizeScope scope = NormalizeScope::image;       // zscore
  double range_min = 0, range_max = 65535;            // range: min < max
  // zscore over the dataset: per channel, measured by the data scan when empty and then saved with the run's
  // config (so that prediction uses the training data's values).
  std::vector<double> mean, std;

  // The statistics come from each image itself.
  bool per_image() const noexcept {
    return mode == NormalizeMode::percentile ||
           (mode == NormalizeMode::zscore && scope == NormalizeScope::image);
  }
  // zscore over the dataset without its values yet: the data scan measures them.
  bool needs_dataset_statistics() const noexcept {
    return mode == NormalizeMode::zscore && scope == NormalizeScope::dataset && mean.empty();
  }
  bool operator==(const NormalizeDesc&) const = default;
};

// y = (x - offset[c]) * scale[c] per channel c, then clipped to [0, 1] when `clip`.
struct ChannelAffine {
  std::vector<float> offset, scale;
  bool clip = false;
  bool operator==(const ChannelAffine&) const = default;
};

// The affine that normalises `values` ([pixels, channels], HWC, stored values; only read, and only needed, by
// a per-image mode) under `desc`. `bit_depth` is
// the stored depth (8, 16, 32) and `floating` whether the samples are floats: scale_255 divides 16-bit data
// by 65535 and refuses deeper or float data. A constant channel (p_high == p_low, std 0) gets scale 1 after
// the offset, never a division by zero. Throws Error(data) naming `name` for data the mode cannot take, and
// Error(config) for a dataset zscore whose mean/std do not have one value per channel.
ChannelAffine image_normalization(const NormalizeDesc& desc, std::span<const float> values,
                                  std::int64_t channels, int bit_depth, bool floating,
                                  const std::string& name);

// Applies the affine in place over [pixels, channels] values.
void normalize_in_place(const ChannelAffine& affine, std::span<float> values, std::int64_t channels);

// The affine when it does not depend on the image (scale_255, range, zscore over the dataset with its
// values): what an exported graph can hold as constants. Nothing for a per-image mode or missing dataset
// values. `channels` sizes the vectors.
bool fixed_normalization(const NormalizeDesc& desc, std::int64_t channels, ChannelAffine& out);

// The p-th percentile (0..100) of `values`, linearly interpolated between order statistics (numpy's default):
// values are copied, the input is not reordered.
double percentile(std::vector<float> values, double p);

// Per-channel mean and standard deviation accumulated over many images (a dataset zscore), in double.
class ChannelMoments {
 public:
  explicit ChannelMoments(std::int64_t channels);
  void add(std::span<const float> values);  // [pixels, channels]
  void merge(const ChannelMoments& other);
  std::int64_t channels() const noexcept { return static_cast<std::int64_t>(sum_.size()); }
  std::int64_t pixels() const noexcept { return pixels_; }
  std::vector<double> mean() const;
  std::vector<double> std() const;  // population standard deviation

 private:
  std::vector<double> sum_, sum_squares_;
  std::int64_t pixels_ = 0;
};

// Normalised values as 8-bit pixels to show (the workbench's predictions): modes that map to [0, 1] scaled by
// 255, zscore's [-2.5, 2.5] stretched over 0..255; clamped, rounded.
std::vector<std::uint8_t> display_pixels(std::span<const float> values, const NormalizeDesc& desc);

// "percentile 1-99.8 per image", "scale_255", "zscore over the dataset", for logs and the export's contract.
std::string describe(const NormalizeDesc& desc);

}  // namespace unet
