// A task-instances model's probabilities to objects, and the label image and CSV predict writes of them. The
// one rule here that is easy to break: seed and foreground are made from the channels exactly as validation
// makes them (threshold_search.cpp, object_maps), so that the thresholds validation tuned mean the same here.
#include "unet/infer/instance_output.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <string>
#include <type_traits>

#include "unet/core/error.h"
#include "unet/infer/choice_names.h"
#include "unet/io/atomic_file.h"
#include "unet/io/image.h"

namespace unet {

namespace {

std::string dims(std::int64_t height, std::int64_t width) {
  return std::to_string(height) + "x" + std::to_string(width);
}

void check_channels(std::int64_t channels, const InstancesConfig& instances, const char* what) {
  const std::int64_t wanted = instance_channels(instances);
  UNET_CHECK(channels == wanted, usage,
             std::string(what) + ": instances.target " + to_string(instances.target) + " gives " +
                 std::to_string(wanted) + (wanted == 1 ? " channel" : " channels") +
                 ", got probabilities of " + std::to_string(channels));
}

// `pixels` pixels of probabilities [pixels, channels] into the two maps extract_objects reads.
void seed_and_foreground(const float* probabilities, std::int64_t channels, std::size_t pixels, float* seed,
                         float* foreground) {
  const auto c = static_cast<std::size_t>(channels);
  for (std::size_t i = 0; i < pixels; ++i) {
    if (channels == 1) {
      seed[i] = foreground[i] = probabilities[i];
    } else {  // background, interior, boundary
      seed[i] = probabilities[i * c + 1];
      foreground[i] = probabilities[i * c + 1] + probabilities[i * c + 2];
    }
  }
}

InstanceOutput objects_of(const std::vector<float>& seed, const std::vector<float>& foreground,
                          std::int64_t height, std::int64_t width, const InstancesConfig& instances) {
  InstanceOutput out;
  out.labels =
      extract_objects(seed.data(), foreground.data(), height, width, extraction_thresholds(instances));
  out.objects = describe_objects(out.labels, foreground.data());
  return out;
}

// A double in the shortest form that reads back as the same value.
void append_number(std::string& text, double value) {
  std::array<char, 32> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  UNET_CHECK(error == std::errc{}, usage, "objects_csv: cannot print a number");
  text.append(buffer.data(), end);
}

}  // namespace

ExtractionThresholds extraction_thresholds(const InstancesConfig& instances) {
  return {.seed = instances.seed_threshold,
          .foreground = instances.foreground_threshold,
          .min_size = instances.min_size};
}

std::int64_t instance_channels(const InstancesConfig& instances) noexcept {
  return instances.target == InstanceTarget::boundary ? 3 : 1;
}

InstanceOutput instance_output(std::span<const float> probabilities, std::int64_t height, std::int64_t width,
                               std::int64_t channels, const InstancesConfig& instances) {
  check_channels(channels, instances, "instance_output");
  UNET_CHECK(height >= 0 && width >= 0 &&
                 probabilities.size() == static_cast<std::size_t>(height * width * channels),
             usage,
             "instance_output: " + std::to_string(probabilities.size()) + " probabilities for " +
                 dims(height, width) + "x" + std::to_string(channels));
  const auto pixels = static_cast<std::size_t>(height * width);
  std::vector<float> seed(pixels), foreground(pixels);
  seed_and_foreground(probabilities.data(), channels, pixels, seed.data(), foreground.data());
  return objects_of(seed, foreground, height, width, instances);
}

InstanceOutput instance_output(const Prediction& prediction, const InstancesConfig& instances) {
  return instance_output(prediction.probabilities, prediction.height, prediction.width, prediction.channels,
                         instances);
}

InstanceRows::InstanceRows(const InstancesConfig& instances) : instances_(instances) {}

std::optional<InstanceOutput> InstanceRows::add(const PredictionRow& row) {
  check_channels(row.channels, instances_, "InstanceRows");
  if (row.row == 0) {
    height_ = row.height;
    width_ = row.width;
    next_row_ = 0;
    const auto pixels = static_cast<std::size_t>(row.height * row.width);
    seed_.assign(pixels, 0.0F);
    foreground_.assign(pixels, 0.0F);
  }
  UNET_CHECK(row.row == next_row_ && row.height == height_ && row.width == width_ &&
                 std::ssize(row.probabilities) == row.width * row.channels,
             usage,
             "InstanceRows: row " + std::to_string(row.row) + " of a " + dims(row.height, row.width) +
                 " image where row " + std::to_string(next_row_) + " of a " + dims(height_, width_) +
                 " image was due");
  const auto offset = static_cast<std::size_t>(row.row * row.width);
  seed_and_foreground(row.probabilities.data(), row.channels, static_cast<std::size_t>(row.width),
                      seed_.data() + offset, foreground_.data() + offset);
  if (++next_row_ < height_) return std::nullopt;
  InstanceOutput out = objects_of(seed_, foreground_, height_, width_, instances_);
  seed_ = {};
  foreground_ = {};
  height_ = width_ = next_row_ = 0;
  return out;
}

const char* to_string(LabelFormat format) noexcept {
  return format == LabelFormat::tiff ? "tiff" : "png";
}

LabelFormat label_format_from_string(const std::string& text, const std::string& key) {
  static constexpr LabelFormat kFormats[] = {LabelFormat::png, LabelFormat::tiff};
  return choice_from_name(text, key, kFormats);
}

std::string label_file_suffix(LabelFormat format) {
  return format == LabelFormat::tiff ? "_labels.tif" : "_labels.png";
}

namespace {

void check_shape(const LabelImage& labels, const char* what) {
  UNET_CHECK(labels.height >= 0 && labels.width >= 0 &&
                 labels.ids.size() == static_cast<std::size_t>(labels.height * labels.width),
             usage,
             std::string(what) + ": a label image of " + dims(labels.height, labels.width) + " holds " +
                 std::to_string(labels.ids.size()) + " ids");
}

}  // namespace

void write_label_png(const std::filesystem::path& path, const LabelImage& labels, const std::string& image) {
  check_shape(labels, "write_label_png");
  const ObjectId largest = labels.ids.empty() ? 0 : *std::max_element(labels.ids.begin(), labels.ids.end());
  if (largest > kMaxLabelPngId) {
    std::vector<ObjectId> ids = labels.ids;
    std::sort(ids.begin(), ids.end());
    const auto objects = std::unique(ids.begin(), ids.end()) - ids.begin() - (ids.front() == 0 ? 1 : 0);
    throw Error(ErrorKind::data,
                image + ": " + std::to_string(objects) + " objects (ids up to " + std::to_string(largest) +
                    "), more than the " + std::to_string(kMaxLabelPngId) +
                    " a 16-bit PNG label image holds; not written as " + path.filename().string(),
                {},
                "write TIFF labels (--labels-format tiff; the Predict window's TIFF), which hold 32-bit ids");
  }
  std::vector<std::uint16_t> values(labels.ids.size());
  std::transform(labels.ids.begin(), labels.ids.end(), values.begin(),
                 [](ObjectId id) { return static_cast<std::uint16_t>(id); });
  write_png16(path, labels.height, labels.width, values);
}

void write_label_tiff(const std::filesystem::path& path, const LabelImage& labels) {
  check_shape(labels, "write_label_tiff");
  static_assert(std::is_same_v<ObjectId, std::uint32_t>, "write_tiff_uint takes the ids as they are");
  write_tiff_uint(path, labels.height, labels.width, labels.ids);
}

void write_label_image(const std::filesystem::path& path, const LabelImage& labels, const std::string& image,
                       LabelFormat format) {
  if (format == LabelFormat::tiff)
    write_label_tiff(path, labels);
  else
    write_label_png(path, labels, image);
}

std::string objects_csv(const ObjectTable& objects) {
  std::string text = "id,area,centroid_y,centroid_x,y0,x0,y1,x1,mean_probability\n";
  for (const ObjectDescription& o : objects) {
    text += std::to_string(o.id) + ',' + std::to_string(o.area) + ',';
    append_number(text, o.centroid_y);
    text += ',';
    append_number(text, o.centroid_x);
    text += ',' + std::to_string(o.y0) + ',' + std::to_string(o.x0) + ',' + std::to_string(o.y1) + ',' +
            std::to_string(o.x1) + ',';
    if (o.mean_probability) append_number(text, *o.mean_probability);
    text += '\n';
  }
  return text;
}

void write_objects_csv(const std::filesystem::path& path, const ObjectTable& objects) {
  const std::string text = objects_csv(objects);
  write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace unet
