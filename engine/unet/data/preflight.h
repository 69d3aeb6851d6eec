// The scan that runs before training on files: it lists a folder or DSB 2018 layout, decodes every file (in
// parallel threads) exactly as training will read it, and reports counts, the sizes and channels found, and
// every bad file by path, all at once, so that a user fixes a dataset in one round instead of one error per
// run. The rule that matters: every entry that is not hidden (a name starting with '.') in the folders a
// layout reads is either used or reported; nothing is dropped silently. In strict mode (data.skip_bad false)
// any problem stops the run before it starts; with skip_bad, bad samples are left out and counted. No usable
// sample at all is always an error.
//
// Layouts:
//   folder   root/images/* and root/masks/*, matched by file stem (case-sensitive); a mask may also be
//            named <stem>_mask.<ext>. Any file is read by its bytes (PNG, JPEG or TIFF), whatever its
//            extension; a multi-page TIFF is a sample per page, its mask file the same pages. Read: images/
//            and masks/ (other entries of the root are not part of the layout).
//   dsb2018  root/<id>/images/<id>.png (exactly one image) and root/<id>/masks/*.png (one per nucleus,
//            merged with OR into one binary mask, so model.classes must be 1). Read: the root, each <id>/,
//            its images/ and its masks/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "unet/config/config_enums.h"
#include "unet/core/error.h"
#include "unet/data/file_dataset.h"

namespace unet {

struct Config;

// A layout is the config's data.source (one enumeration, one name table: config_enums.h). synthetic has no
// files: it only names the source of a report that open_dataset() fills without a scan.
using DataLayout = DataSource;

struct DataSourceOptions {
  DataLayout layout = DataLayout::folder;
  std::filesystem::path root;
  FileDatasetOptions target;
  bool skip_bad = false;
  // A stop requested here ends the scan within a file's decoding per thread, with Error(cancelled): a user
  // who stops a run during the scan of a large dataset is not kept waiting for the rest of it.
  std::stop_token stop;
  // Hash every usable sample's file bytes into PreflightReport::content (a second read, from the page cache):
  // what the processes of a run compare. Off for a run of one process.
  bool hash_content = false;
};

// From data.source, data.path (resolved), data.image_size, model.in_channels, model.classes,
// data.max_image_side, data.cache_mib and data.skip_bad. Throws ConfigError for the synthetic source.
DataSourceOptions data_source_options(const Config& config);

struct PreflightReport {
  DataLayout layout = DataLayout::folder;
  std::filesystem::path root;
  FileDatasetOptions target;
  bool skip_bad = false;

  std::size_t found = 0;    // samples found: files in images/ (folder), sample folders (dsb2018)
  std::size_t usable = 0;   // of those, the ones without a problem
  std::size_t skipped = 0;  // found - usable: left out with skip_bad, refused without
  std::size_t cached = 0;   // usable samples kept in memory (data.cache_mib)
  // Images as stored, whenever their header could be read: (height, width) -> count, channels -> count.
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> sizes;
  std::map<std::int64_t, std::size_t> channels;
  // Every problem: bad files, files without a partner, unexpected entries, in the layout's order.
  std::vector<DataProblem> problems;
  // What the usable samples' files hold, one entry per sample in the dataset's order: the image's path
  // relative to the root and the SHA-256 of the image's bytes then each mask's. The processes of a run
  // compare them (dist/run_agreement.h), so that a copy of the data that differs in one file's bytes is
  // noticed. Empty unless the scan was asked to (DataSourceOptions::hash_content).
  struct SampleDigest {
    std::string name;
    std::array<std::uint8_t, 32> sha256{};
  };
  std::vector<SampleDigest> content;

  // Several lines for the CLI, the log and the GUI: counts, sizes, channels, the conversion, then up to
  // `max_problems` problems, one per line ("... and N more" past that).
  std::string summary(std::size_t max_problems = 100) const;
  // "folder /data/cells"; "synthetic" for the generated source
  std::string origin() const;
};

// A scan that refuses to start a run; what() is the headline followed by the problems, one per line (up to
// 100, then "... and N more"), report() holds them all. Front ends that escape each line they print (the CLI)
// print headline() and problem_lines() line by line, so that a file name cannot make or hide a line.
class DatasetError : public Error {
 public:
  DatasetError(const std::string& headline, PreflightReport report,
               std::source_location where = std::source_location::current());
  const PreflightReport& report() const noexcept { return *report_; }
  const std::string& headline() const noexcept { return *headline_; }
  // The problems what() lists, one string each ("path: problem"), and "... and N more" past 100.
  std::vector<std::string> problem_lines() const;

 private:
  std::shared_ptr<const std::string> headline_;  // shared: exceptions are copied
  std::shared_ptr<const PreflightReport> report_;
};

// One sample as the scan found it, usable or not: what the workbench's dataset browser lists. A problem
// about no sample (a mask without an image, a folder that does not belong) is only in the report.
struct SampleCheck {
  FilePair pair;  // the image and the masks found for it (none when its mask is missing)
  bool usable = false;
  // Its own problems: the listing's about it (a missing or second mask) and its files' (size, classes...).
  std::vector<DataProblem> problems;
  // Pixels of each mask value as training reads the mask (binarised, or class indices), [value] -> count,
  // up to the largest value present; empty unless usable.
  std::vector<std::int64_t> mask_values;
};

struct PreflightResult {
  PreflightReport report;
  std::vector<SampleCheck> samples;  // every sample found (report.found), in the layout's order
  std::vector<FilePair> pairs;       // the usable samples, in the layout's order (sorted by name)
  std::vector<Sample> cached;        // [pairs.size()]: the loaded sample where the cache holds it, else empty
  // The scan's threads share a DecodeBudget (decode_budget.h) of what one pair of data.max_image_side x
  // data.max_image_side needs; these are its capacity and the most its leases held at once.
  std::int64_t decode_budget_bytes = 0, decode_peak_bytes = 0;
};

// Lists and decodes everything and reports what it found; bad files never throw (they are problems).
// Throws Error(config) for bad options only (the synthetic layout, dsb2018 with classes other than 1), and
// Error(cancelled) when options.stop is requested.
PreflightResult scan_dataset(const DataSourceOptions& options);

// scan_dataset(), then the policy: with any problem in strict mode, or no usable sample at all, throws
// DatasetError listing every problem.
PreflightResult preflight(const DataSourceOptions& options);
PreflightResult preflight(const Config& config);

// The preflight, then the dataset over the usable pairs, with the scan's decoded samples as its cache.
// `report`, when given, receives the report, also when the preflight throws.
std::shared_ptr<const FileDataset> open_file_dataset(const DataSourceOptions& options,
                                                     PreflightReport* report = nullptr);

}  // namespace unet
