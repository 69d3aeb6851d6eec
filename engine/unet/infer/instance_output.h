// A task-instances model's output as objects (issue 27): from one image's probabilities as the predictor
// produces them to its label image and the table of its objects, at the thresholds and minimum size of the
// checkpoint's config (instances.*: validation stores its tuned thresholds there), and the two files predict
// writes of them: a label image (16-bit gray PNG, or TIFF) and a CSV table. `unet-train predict` and the
// workbench's Predict window both use it, so that the two write the same objects.
//
// The maps extract_objects reads (objects/instance_extraction.h) come from the probabilities as for
// validation's object metrics (objects/threshold_search.h, object_maps): instances.target boundary (three
// softmax classes: background, interior, boundary): seed = p_interior, foreground = p_interior + p_boundary;
// weight_map (one sigmoid p): seed = foreground = p. An object's mean probability is that of the foreground
// over its pixels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/infer/predictor.h"
#include "unet/objects/instance_extraction.h"
#include "unet/objects/label_image.h"

namespace unet {

struct InstanceOutput {
  LabelImage labels;    // ids 1..n in the raster order of each object's first pixel; 0 background
  ObjectTable objects;  // one row per object, ascending id, mean_probability that of the foreground
};

// The thresholds and minimum size of the config's instances.*.
ExtractionThresholds extraction_thresholds(const InstancesConfig& instances);

// The probabilities' channels a model trained on `instances.target` gives: 3 (boundary) or 1 (weight_map).
std::int64_t instance_channels(const InstancesConfig& instances) noexcept;

// One image's objects from its probabilities ([height, width, channels], row-major, as Prediction holds
// them). Throws ErrorKind::usage when the channels are not those of instances.target (instance_channels) or
// the size does not match.
InstanceOutput instance_output(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
                               std::int64_t channels, const InstancesConfig& instances);
InstanceOutput instance_output(const Prediction& prediction, const InstancesConfig& instances);

// The same from the rows Predictor::predict_rows() hands on, for images too large to hold their
// probabilities whole: each row's seed and foreground are kept (2 floats a pixel, not the channels'), and
// after an image's last row its objects are extracted and the maps let go.
class InstanceRows {
 public:
  // What an image costs until its objects are out, per pixel, for PredictionSink::bytes_per_pixel: the two
  // maps (8) and extract_objects' working images at their peak (masks, 32-bit component and watershed
  // labels, the watershed's 3-byte relief, the label image: about 32).
  static constexpr std::int64_t bytes_per_pixel = 40;

  explicit InstanceRows(const InstancesConfig& instances);

  // Takes one row (rows come top to bottom, an image's row 0 starting it); returns the image's objects after
  // its last row, nothing before. Throws ErrorKind::usage for a row out of order or of other channels than
  // the target's.
  std::optional<InstanceOutput> add(const PredictionRow& row);

 private:
  InstancesConfig instances_;
  std::int64_t height_ = 0, width_ = 0, next_row_ = 0;
  std::vector<float> seed_, foreground_;  // [height, width]
};

// The largest id a 16-bit label image holds.
inline constexpr ObjectId kMaxLabelPngId = 65535;

// The file a label image is written as: a 16-bit gray PNG (predict's default; up to kMaxLabelPngId objects)
// or a TIFF (16-bit, 32-bit when the image has more objects), which Fiji, napari, Cellpose and StarDist read
// as label images too.
enum class LabelFormat { png, tiff };
const char* to_string(LabelFormat format) noexcept;  // "png", "tiff"
// Throws ConfigError(key) naming the choices for any other text.
LabelFormat label_format_from_string(const std::string& text, const std::string& key);
// The end of an image's label file name: "_labels.png" or "_labels.tif".
std::string label_file_suffix(LabelFormat format);

// Writes `labels` as a 16-bit gray PNG (0 background, each pixel its object's id), atomically. An id over
// kMaxLabelPngId is refused (ErrorKind::data) naming `image` (the input the labels are of) and the count.
void write_label_png(const std::filesystem::path& path, const LabelImage& labels, const std::string& image);
// Writes `labels` as a one-page gray TIFF (write_tiff_uint: 16-bit when every id fits, else 32-bit),
// atomically.
void write_label_tiff(const std::filesystem::path& path, const LabelImage& labels);
// write_label_png or write_label_tiff, as `format` says.
void write_label_image(const std::filesystem::path& path, const LabelImage& labels, const std::string& image,
                       LabelFormat format);

// The objects as CSV: the header `id,area,centroid_y,centroid_x,y0,x0,y1,x1,mean_probability` and one row
// per object, lines ending in \n; y1 and x1 exclusive; the centroid and the mean probability in the shortest
// decimal form that reads back as the same double (std::to_chars), the mean probability empty when the
// table has none.
std::string objects_csv(const ObjectTable& objects);
// objects_csv() into `path`, atomically.
void write_objects_csv(const std::filesystem::path& path, const ObjectTable& objects);

}  // namespace unet
