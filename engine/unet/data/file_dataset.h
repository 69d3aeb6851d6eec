// Image/mask pairs read from files (the folder and Data Science Bowl 2018 layouts) as a Dataset: each pair is
// decoded with the image module, given the model's channels, normalised (statistics over the whole image as
// stored), resized to the training size in resize mode (kept at its own size in patch mode) and its mask made
// binary or checked as class indices, all as FileDatasetOptions says and nothing more. The rule
// that matters: one function, load_pair(), turns files into a sample, whether the preflight scan calls it
// (and keeps the result in the cache) or get() does on demand, so a cached and an uncached sample are the
// same bytes; and every file that cannot become part of a sample is a DataProblem naming that file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "unet/config/config.h"
#include "unet/data/dataset.h"
#include "unet/io/image.h"

namespace unet {

class DecodeBudget;

// One bad file (or folder) and what is wrong with it, for the preflight report.
struct DataProblem {
  std::filesystem::path path;
  std::string problem;  // without the path: "missing mask (looked for masks/a.* and masks/a_mask.*)"

  std::string text() const { return path.string() + ": " + problem; }  // one line
  bool operator==(const DataProblem&) const = default;
};

// An image and the mask file(s) that label it. With several masks (one per instance, as DSB 2018 stores
// nuclei) they are merged with OR into one binary mask, or (task "instances") numbered one object each.
struct FilePair {
  std::filesystem::path image;
  std::vector<std::filesystem::path> masks;
  std::int64_t page = 0;  // a multi-page TIFF's page (its masks' page alike): one sample per page
  bool operator==(const FilePair&) const = default;
};

struct FileDatasetOptions {
  // Every sample is resized to this; 0 x 0: samples keep their files' size (patch mode).
  std::int64_t height = 128, width = 128;
  std::int64_t channels = 3;  // images are converted to this (convert_channels' rules)...
  std::vector<std::int64_t>
      channel_indices{};  // ...or these of the file's channels are taken (data.channels)
  // How the stored values become the samples' (data.normalize). A zscore over the dataset without its values:
  // load_pair leaves the values as stored, and the preflight scan normalises once it has measured them.
  NormalizeDesc normalize{};
  int classes = 1;  // 1: masks binarised (any non-zero is 1); > 1: values are indices
  // task "instances": the masks are instance labels (several files: one object each, as DSB 2018 stores
  // nuclei; one file: a label image whose every non-zero value is an object), kept as the sample's
  // instances, and the sample's mask is the target made from them (data/instance_target.h).
  std::optional<InstancesConfig> instances;
  int ignore_index =
      -1;  // loss.ignore_index: a mask value kept as it is (not binarised, not a class); -1: none
  std::int64_t max_side = 16384;  // the largest width or height a file may declare
  std::int64_t cache_mib = 2048;  // decoded samples kept up to this; the rest decoded on each get()
  int threads = 0;                // decoding threads of a preflight scan; 0: one per hardware thread
};

// Throws Error(config) naming the bad option.
void validate(const FileDatasetOptions& options);

// Decodes, converts and resizes one pair. Each bad file adds one problem (a file's first problem only);
// returns the sample only when there is none. `stored`, when given, receives the image's header as stored
// whenever it could be read (even if the pair is bad), for the preflight's statistics. Throws only for
// failures that are not about the files (out of memory).
// `budget`, when given, is leased what the pair needs to decode (from its headers) before any pixel is
// decoded (decode_budget.h).
std::optional<Sample> load_pair(const FilePair& pair, const FileDatasetOptions& options,
                                std::vector<DataProblem>& problems, ImageInfo* stored = nullptr,
                                DecodeBudget* budget = nullptr);

// Decodes one file only to check it (the header first, then every pixel): for files the preflight reports
// for another reason (a partner missing, a duplicate), so that their own damage shows in the same scan.
// Returns false after adding the file's problem.
bool check_file(const std::filesystem::path& path, std::int64_t max_side, std::vector<DataProblem>& problems,
                ImageInfo* stored = nullptr, DecodeBudget* budget = nullptr);

class FileDataset final : public Dataset {
 public:
  // `origin` starts describe() ("folder /data/cells"); `skipped` is how many samples the preflight left out.
  // `cached[i]`, where it holds a sample, is pair i already loaded; the other pairs are loaded on each get().
  // No file is read here: check the pairs first (scan_dataset() in preflight.h does, and fills the cache).
  FileDataset(std::vector<FilePair> pairs, FileDatasetOptions options, std::string origin,
              std::size_t skipped = 0, std::vector<Sample> cached = {});

  std::size_t size() const override { return pairs_.size(); }
  // Thread-safe: the cache is never written after construction, and loading shares no state. A pair that
  // has gone bad since the preflight throws Error(data) naming its files.
  Sample get(std::size_t index) const override;
  std::int64_t height() const override { return options_.height; }
  std::int64_t width() const override { return options_.width; }
  std::int64_t channels() const override { return options_.channels; }
  int classes() const override { return options_.classes; }
  std::optional<NormalizeDesc> measured_normalization() const override;
  std::int64_t sample_area(std::size_t index) const override;
  // "folder /data/cells: 96 images -> 128x128x3 (3 skipped)", "... 27 images at their own size, 1 channel"
  std::string describe() const override;
  // The image's file name ("cell-017.png").
  std::string sample_name(std::size_t index) const override {
    const FilePair& pair = pairs_.at(index);
    const std::string file = pair.image.filename().string();
    return pair.page > 0 ? file + "#" + std::to_string(pair.page + 1) : file;
  }

  const std::vector<FilePair>& pairs() const noexcept { return pairs_; }
  const FileDatasetOptions& options() const noexcept { return options_; }
  std::size_t cached_count() const noexcept { return cached_count_; }

  // Bytes one loaded sample of `height` x `width` holds (image and mask, and for task "instances" its labels
  // and weights); the options' size by default.
  static std::int64_t sample_bytes(const FileDatasetOptions& options, std::int64_t height = 0,
                                   std::int64_t width = 0);
  // How many samples options.cache_mib holds (resize mode; in patch mode the scan counts the bytes).
  static std::size_t cache_capacity(const FileDatasetOptions& options);

 private:
  std::vector<FilePair> pairs_;
  FileDatasetOptions options_;
  std::string origin_;
  std::size_t skipped_ = 0;
  std::vector<Sample> cache_;  // [pairs_.size()] or empty; a sample without pixels is loaded on demand
  std::size_t cached_count_ = 0;
};

}  // namespace unet
