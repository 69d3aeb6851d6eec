// Files to samples. Headers are read before any pixels, so that a file declaring more than max_side pixels
// is refused before a buffer for it exists and a mask of the wrong size is found without decoding it; then
// every file is decoded in full, because a damaged file is only found by decoding it.
#include "unet/data/file_dataset.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

#include "unet/core/error.h"
#include "unet/data/decode_budget.h"
#include "unet/data/instance_target.h"
#include "unet/data/model_input.h"

namespace unet {

namespace {

// The image module's messages start with the file's path; the problem is the rest.
std::string problem_of(const Error& e, const std::filesystem::path& path) {
  const std::string prefix = path.string() + ": ";
  const std::string& message = e.message();
  return message.starts_with(prefix) ? message.substr(prefix.size()) : message;
}

std::string size_text(const ImageInfo& info) {
  return std::to_string(info.width) + "x" + std::to_string(info.height);
}

bool keeps_file_size(const FileDatasetOptions& options) {
  return options.height == 0 && options.width == 0;
}

// The image as the model takes it (model_input.h), resized in resize mode.
std::vector<float> model_input(const std::filesystem::path& path, std::int64_t page,
                               const FileDatasetOptions& options, const ImageLimits& limits) {
  InputRecipe recipe;
  recipe.channels = options.channels;
  recipe.channel_indices = options.channel_indices;
  recipe.normalize = options.normalize;
  recipe.normalise = !options.normalize.needs_dataset_statistics();
  ModelImage image = read_model_image(path, recipe, page, limits);
  if (!keeps_file_size(options)) image = resized(image, options.height, options.width);
  return std::move(image.values);
}

}  // namespace

void validate(const FileDatasetOptions& options) {
  const auto fail = [](const std::string& what) { throw Error(ErrorKind::config, "file dataset: " + what); };
  if ((options.height < 1 || options.width < 1) && !keeps_file_size(options))
    fail("the size must be at least 1x1 (or 0x0: the files' own), got " + std::to_string(options.height) +
         "x" + std::to_string(options.width));
  if (options.channels < 1 || options.channels > 4)
    fail("images convert to 1 to 4 channels, not " + std::to_string(options.channels));
  if (options.classes < 1 || options.classes > 255)
    fail("classes must be 1..255, got " + std::to_string(options.classes));
  if (options.ignore_index < -1 || options.ignore_index > 255)
    fail("ignore_index must be -1..255, got " + std::to_string(options.ignore_index));
  if (options.max_side < 1) fail("max_side must be at least 1, got " + std::to_string(options.max_side));
  if (options.cache_mib < 0) fail("cache_mib must be >= 0, got " + std::to_string(options.cache_mib));
  if (options.threads < 0) fail("threads must be >= 0, got " + std::to_string(options.threads));
}

std::optional<Sample> load_pair(const FilePair& pair, const FileDatasetOptions& options,
                                std::vector<DataProblem>& problems, ImageInfo* stored, DecodeBudget* budget) {
  const std::size_t problems_before = problems.size();
  const auto report = [&problems](const std::filesystem::path& path, std::string problem) {
    problems.push_back({path, std::move(problem)});
  };
  const ImageLimits limits{options.max_side, options.max_side};

  std::optional<ImageInfo> image_info;
  try {
    image_info = probe_image(pair.image, limits, pair.page);
    if (stored) *stored = *image_info;
  } catch (const Error& e) {
    report(pair.image, problem_of(e, pair.image));
  }
  if (pair.masks.empty()) report(pair.image, "no mask");
  if (pair.masks.size() > 1 && options.classes != 1 && !options.instances)
    report(pair.image, "has " + std::to_string(pair.masks.size()) +
                           " instance masks, which merge into a binary mask, but model.classes is " +
                           std::to_string(options.classes));

  std::vector<std::filesystem::path> masks_to_decode;
  std::int64_t most_pixels = image_info ? image_info->width * image_info->height : 0;
  for (const auto& mask_path : pair.masks) {
    try {
      const ImageInfo info = probe_image(mask_path, limits, pair.page);
      most_pixels = std::max(most_pixels, info.width * info.height);
      if (image_info && (info.width != image_info->width || info.height != image_info->height)) {
        report(mask_path, "the mask is " + size_text(info) + " (width x height) but its image " +
                              pair.image.string() + " is " + size_text(*image_info));
        continue;
      }
      masks_to_decode.push_back(mask_path);
    } catch (const Error& e) {
      report(mask_path, problem_of(e, mask_path));
    }
  }

  // The image, then each mask, one at a time: a pair holds at most its largest file's pixels in decoding.
  const DecodeBudget::Lease lease =
      budget ? budget->acquire(most_pixels * kDecodeBytesPerPixel) : DecodeBudget::Lease{};
  std::vector<float> image;
  if (image_info) {
    try {
      image = model_input(pair.image, pair.page, options, limits);
    } catch (const Error& e) {
      report(pair.image, problem_of(e, pair.image));
    }
  }

  // Masks are decoded even when the image is bad, so that their own damage is reported in the same scan.
  std::vector<std::uint8_t> mask(
      image_info ? static_cast<std::size_t>(image_info->height * image_info->width) : 0, 0);
  LabelImage labels;  // task instances
  if (options.instances && image_info) labels = LabelImage(image_info->height, image_info->width);
  for (std::size_t file = 0; file < masks_to_decode.size(); ++file) {
    const std::filesystem::path& mask_path = masks_to_decode[file];
    try {
      const MaskImage m = read_mask(mask_path, limits, pair.page);
      if (!m.all_channels_equal) {
        report(mask_path, options.instances
                              ? "RGB mask whose channels differ: save instance labels as one channel"
                              : "RGB mask whose channels differ: save masks as single-channel class indices");
        continue;
      }
      if (!image_info) continue;  // nothing to merge into
      if (options.instances) {
        for (std::size_t i = 0; i < labels.ids.size(); ++i)
          if (m.values[i] != 0) labels.ids[i] = instance_id(m.values[i], file, masks_to_decode.size());
        continue;
      }
      const auto ignored = [&](std::uint16_t v) { return static_cast<int>(v) == options.ignore_index; };
      if (options.classes == 1) {
        // Unlabelled pixels keep the ignore label, unless another (instance) mask marks them foreground.
        for (std::size_t i = 0; i < mask.size(); ++i) {
          if (m.values[i] == 0) continue;
          if (!ignored(m.values[i]))
            mask[i] = 1;
          else if (mask[i] == 0)
            mask[i] = static_cast<std::uint8_t>(options.ignore_index);
        }
        continue;
      }
      std::uint16_t largest = 0;
      for (const std::uint16_t v : m.values)
        if (!ignored(v)) largest = std::max(largest, v);
      if (largest >= options.classes) {
        std::string problem = "holds the value " + std::to_string(largest) + ", but model.classes is " +
                              std::to_string(options.classes) + " (class indices 0.." +
                              std::to_string(options.classes - 1) + ")";
        if (largest == 255) problem += "; a black-and-white mask is binary: use model.classes 1";
        report(mask_path, std::move(problem));
        continue;
      }
      for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<std::uint8_t>(m.values[i]);
    } catch (const Error& e) {
      report(mask_path, problem_of(e, mask_path));
    }
  }

  if (problems.size() != problems_before) return std::nullopt;
  Sample sample;
  const bool native = keeps_file_size(options);
  sample.height = native ? image_info->height : options.height;
  sample.width = native ? image_info->width : options.width;
  sample.channels = options.channels;
  sample.image = std::move(image);
  sample.source = pair.image.string();
  if (options.instances) {
    sample.instances.height = sample.height;
    sample.instances.width = sample.width;
    sample.instances.ids = native ? std::move(labels.ids)
                                  : resize_labels(labels.ids, image_info->height, image_info->width,
                                                  options.height, options.width);
    make_instance_target(sample, *options.instances);
    return sample;
  }
  sample.mask = native
                    ? std::move(mask)
                    : resize_mask(mask, image_info->height, image_info->width, options.height, options.width);
  return sample;
}

bool check_file(const std::filesystem::path& path, std::int64_t max_side, std::vector<DataProblem>& problems,
                ImageInfo* stored, DecodeBudget* budget) {
  const ImageLimits limits{max_side, max_side};
  std::optional<ImageInfo> info;
  try {
    info = probe_image(path, limits);
    if (stored) *stored = *info;
  } catch (const Error& e) {
    problems.push_back({path, problem_of(e, path)});
    return false;
  }
  const DecodeBudget::Lease lease =
      budget ? budget->acquire(info->width * info->height * kDecodeBytesPerPixel) : DecodeBudget::Lease{};
  try {
    read_image_values(path, 0, limits);
    return true;
  } catch (const Error& e) {
    problems.push_back({path, problem_of(e, path)});
    return false;
  }
}

FileDataset::FileDataset(std::vector<FilePair> pairs, FileDatasetOptions options, std::string origin,
                         std::size_t skipped, std::vector<Sample> cached)
    : pairs_(std::move(pairs)),
      options_(std::move(options)),
      origin_(std::move(origin)),
      skipped_(skipped),
      cache_(std::move(cached)) {
  validate(options_);
  UNET_CHECK(cache_.empty() || cache_.size() == pairs_.size(), usage,
             "file dataset: " + std::to_string(cache_.size()) + " cache entries for " +
                 std::to_string(pairs_.size()) + " pairs");
  for (const Sample& s : cache_) {
    if (s.image.empty()) continue;
    const bool shape_fits =
        keeps_file_size(options_) || (s.height == options_.height && s.width == options_.width);
    UNET_CHECK(shape_fits && s.channels == options_.channels &&
                   s.image.size() == static_cast<std::size_t>(s.height * s.width * s.channels) &&
                   s.mask.size() == static_cast<std::size_t>(s.height * s.width),
               usage, "file dataset: a cached sample of " + s.source + " does not have the dataset's shape");
    ++cached_count_;
  }
}

Sample FileDataset::get(std::size_t index) const {
  UNET_CHECK(index < pairs_.size(), usage,
             "sample " + std::to_string(index) + " of " + std::to_string(pairs_.size()));
  if (!cache_.empty() && !cache_[index].image.empty()) return cache_[index];
  std::vector<DataProblem> problems;
  if (auto sample = load_pair(pairs_[index], options_, problems)) return std::move(*sample);
  std::string message;
  for (const DataProblem& p : problems) message += (message.empty() ? "" : "; ") + p.text();
  throw Error(ErrorKind::data, message, {}, "the files changed after the preflight scan accepted them");
}

std::int64_t FileDataset::sample_area(std::size_t index) const {
  if (!keeps_file_size(options_)) return options_.height * options_.width;
  if (!cache_.empty() && !cache_.at(index).image.empty()) return cache_[index].height * cache_[index].width;
  const ImageInfo info =
      probe_image(pairs_.at(index).image, {options_.max_side, options_.max_side}, pairs_.at(index).page);
  return info.height * info.width;
}

std::optional<NormalizeDesc> FileDataset::measured_normalization() const {
  if (options_.normalize.mode == NormalizeMode::zscore && options_.normalize.scope == NormalizeScope::dataset)
    return options_.normalize;
  return std::nullopt;
}

std::string FileDataset::describe() const {
  std::string text = origin_ + ": " + std::to_string(pairs_.size()) + " images -> ";
  text += keeps_file_size(options_) ? "their own size x " + std::to_string(options_.channels) + " channel(s)"
                                    : std::to_string(options_.height) + "x" + std::to_string(options_.width) +
                                          "x" + std::to_string(options_.channels);
  if (skipped_ > 0) text += " (" + std::to_string(skipped_) + " skipped)";
  return text;
}

std::int64_t FileDataset::sample_bytes(const FileDatasetOptions& options, std::int64_t height,
                                       std::int64_t width) {
  const std::int64_t h = height > 0 ? height : options.height, w = width > 0 ? width : options.width;
  std::int64_t per_pixel = options.channels * static_cast<std::int64_t>(sizeof(float)) + 1;
  if (options.instances) {
    per_pixel += static_cast<std::int64_t>(sizeof(ObjectId));
    if (options.instances->target == InstanceTarget::weight_map)
      per_pixel += static_cast<std::int64_t>(sizeof(float));
  }
  return h * w * per_pixel;
}

std::size_t FileDataset::cache_capacity(const FileDatasetOptions& options) {
  const std::int64_t bytes = sample_bytes(options);
  if (options.cache_mib <= 0 || bytes <= 0) return 0;
  const std::int64_t mib = std::min(options.cache_mib, std::numeric_limits<std::int64_t>::max() >> 20);
  return static_cast<std::size_t>(mib * (std::int64_t{1} << 20) / bytes);
}

}  // namespace unet
