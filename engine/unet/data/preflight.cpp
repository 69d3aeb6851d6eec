// The preflight scan in two steps: listing (which files form which samples, and which entries do not belong)
// and decoding (every file, on a pool of threads). The one non-obvious rule: a sample already known to be
// bad from the listing still has its files decoded, one by one, so that a file with two problems (no
// partner and truncated) is not fixed in two rounds.
#include "unet/data/preflight.h"

#include "unet/core/checked_math.h"
#include "unet/core/number_text.h"
#include "unet/core/parallel.h"
#include "unet/core/utf8.h"
#include "unet/data/decode_budget.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <optional>
#include <system_error>
#include <thread>

#include "unet/config/config.h"
#include "unet/io/sha256.h"

namespace unet {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxSizesShown = 12;
constexpr std::size_t kMaxProblemLines = 100;  // in an error message; the report keeps them all

bool hidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name.front() == '.';
}

std::string layout_text(DataLayout layout) {
  return layout == DataLayout::dsb2018
             ? "the dsb2018 layout is path/<id>/images/<id>.png and path/<id>/masks/*.png"
             : "the folder layout reads path/images/* and path/masks/*, matched by file stem";
}

// One sample as the listing sees it. A bad one has a problem already; its existing files are still checked.
struct Candidate {
  FilePair pair;
  bool bad = false;
  std::vector<fs::path> files;  // the files that exist, for checking a bad candidate
  // The listing's problems about this sample: indices into Listing::problems (for SampleCheck).
  std::vector<std::size_t> listing_problems;
};

struct Listing {
  std::vector<Candidate> candidates;
  std::vector<fs::path> orphans;  // files that belong to no sample (reported), still checked
  std::vector<DataProblem> problems;

  void report(const fs::path& path, std::string problem) { problems.push_back({path, std::move(problem)}); }
  // A problem that makes `c` bad, remembered as one of its own.
  void report_about(Candidate& c, const fs::path& path, std::string problem) {
    c.bad = true;
    c.listing_problems.push_back(problems.size());
    report(path, std::move(problem));
  }
};

struct Entry {
  fs::path path;
  bool file = false, folder = false;
};

// The entries of a folder that are not hidden, sorted by name; nullopt (and a problem) when the folder is
// missing or cannot be listed. `missing` is the problem for a folder that is not there.
std::optional<std::vector<Entry>> list_folder_entries(const fs::path& folder, Listing& listing,
                                                      const std::string& missing) {
  std::error_code ec;
  const fs::file_status status = fs::status(folder, ec);
  if (!fs::exists(status)) {
    listing.report(folder, missing);
    return std::nullopt;
  }
  if (!fs::is_directory(status)) {
    listing.report(folder, "is a file, not a folder");
    return std::nullopt;
  }
  std::vector<Entry> entries;
  fs::directory_iterator it(folder, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (hidden(it->path())) continue;
    // Sample names are written as JSON text (validation.json, the workbench's lists): a name that is not
    // UTF-8 is reported here, by path, rather than failing the run when it is written.
    if (const std::string name = it->path().filename().native(); !is_valid_utf8(name)) {
      listing.report(it->path(), "its name " + not_utf8_problem(name) +
                                     ": sample names are recorded as UTF-8 text; rename the file");
      continue;
    }
    Entry e;
    e.path = it->path();
    std::error_code type_ec;
    e.file = it->is_regular_file(type_ec);  // follows links
    e.folder = !e.file && it->is_directory(type_ec);
    entries.push_back(std::move(e));
  }
  if (ec) {
    listing.report(folder, "cannot list the folder: " + ec.message());
    return std::nullopt;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return entries;
}

// Whether `path` is a folder; if not, a problem says what it is.
bool is_folder(const fs::path& path, Listing& listing) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status)) return true;
  listing.report(path, fs::exists(status) ? "is a file, not a folder" : "no such folder");
  return false;
}

std::string not_a_file(const Entry& e, const std::string& where) {
  return e.folder ? "a folder inside " + where + ": only the files directly in " + where + " are read"
                  : "not a regular file (a broken link?)";
}

Listing list_folder_layout(const fs::path& root) {
  Listing out;
  const std::string layout = layout_text(DataLayout::folder);
  if (!is_folder(root, out)) return out;
  const auto images = list_folder_entries(root / "images", out, "missing: " + layout);
  const auto masks = list_folder_entries(root / "masks", out, "missing: " + layout);
  if (!images) return out;

  std::map<std::string, std::vector<fs::path>> images_by_stem;
  for (const Entry& e : *images) {
    if (e.file)
      images_by_stem[e.path.stem().string()].push_back(e.path);
    else
      out.report(e.path, not_a_file(e, "images/"));
  }

  // Masks keyed by the stem of the image they belong to: the same stem, or the stem plus "_mask".
  std::map<std::string, std::vector<fs::path>> masks_by_stem;
  for (const Entry& e : masks ? *masks : std::vector<Entry>{}) {
    if (!e.file) {
      out.report(e.path, not_a_file(e, "masks/"));
      continue;
    }
    const std::string stem = e.path.stem().string();
    const bool suffixed = stem.ends_with("_mask");
    const std::string base = suffixed ? stem.substr(0, stem.size() - 5) : stem;
    if (images_by_stem.count(stem)) {
      masks_by_stem[stem].push_back(e.path);
    } else if (suffixed && images_by_stem.count(base)) {
      masks_by_stem[base].push_back(e.path);
    } else {
      out.report(e.path, "mask with no image (looked for images/" + stem + ".*" +
                             (suffixed ? " and images/" + base + ".*" : std::string()) + ")");
      out.orphans.push_back(e.path);
    }
  }

  for (const auto& [stem, files] : images_by_stem) {
    const std::vector<fs::path>& stem_masks = masks_by_stem[stem];
    const std::size_t problems_before = out.problems.size();
    if (files.size() > 1) {
      std::string others;
      for (std::size_t i = 1; i < files.size(); ++i)
        others += (i > 1 ? ", images/" : "images/") + files[i].filename().string();
      out.report(files.front(), "has the same stem \"" + stem + "\" as " + others +
                                    ": masks are matched by stem, so keep one image per stem");
    } else if (stem_masks.empty()) {
      out.report(files.front(),
                 "missing mask (looked for masks/" + stem + ".* and masks/" + stem + "_mask.*)");
    } else if (stem_masks.size() > 1) {
      std::string names;
      for (std::size_t i = 0; i < stem_masks.size(); ++i)
        names += (i > 0 ? " and masks/" : "masks/") + stem_masks[i].filename().string();
      out.report(files.front(), "has more than one mask (" + names + "): keep one");
    }
    const bool bad = files.size() > 1 || stem_masks.size() != 1;
    for (const fs::path& image : files) {
      Candidate c;
      c.pair.image = image;
      c.bad = bad;
      if (out.problems.size() > problems_before) c.listing_problems.push_back(problems_before);
      c.files.push_back(image);
      if (files.size() == 1) {
        c.pair.masks = stem_masks;
        c.files.insert(c.files.end(), stem_masks.begin(), stem_masks.end());
      }
      out.candidates.push_back(std::move(c));
    }
    // The masks of a duplicated stem belong to no single image; they are checked on their own.
    if (files.size() > 1) out.orphans.insert(out.orphans.end(), stem_masks.begin(), stem_masks.end());
  }
  return out;
}

Listing list_dsb2018_layout(const fs::path& root) {
  Listing out;
  const std::string layout = layout_text(DataLayout::dsb2018);
  const auto samples = list_folder_entries(root, out, "no such folder");
  if (!samples) return out;
  for (const Entry& sample : *samples) {
    if (!sample.folder) {
      out.report(sample.path, "not a sample folder: " + layout);
      continue;
    }
    const std::string id = sample.path.filename().string();
    Candidate c;
    c.pair.image = sample.path / "images" / (id + ".png");
    const auto report = [&](const fs::path& path, std::string problem) {
      out.report_about(c, path, std::move(problem));
    };

    std::error_code ec;
    if (!fs::is_directory(sample.path / "images", ec)) {
      report(sample.path, "no images/ folder, so not a DSB 2018 sample (" + layout +
                              "); is data.path the folder that holds the sample folders?");
      out.candidates.push_back(std::move(c));
      continue;
    }
    // Only images/ and masks/ belong in a sample folder.
    Listing inner;
    for (const Entry& e : list_folder_entries(sample.path, inner, "").value_or(std::vector<Entry>{})) {
      const std::string name = e.path.filename().string();
      if (!(e.folder && (name == "images" || name == "masks")))
        report(e.path, "does not belong in a DSB 2018 sample folder (only images/ and masks/ do)");
    }
    bool image_found = false;
    for (const Entry& e :
         list_folder_entries(sample.path / "images", inner, "").value_or(std::vector<Entry>{})) {
      if (e.file && e.path.filename() == id + ".png") {
        image_found = true;
        c.files.push_back(e.path);
      } else if (e.file) {
        report(e.path, "not " + id + ".png: a DSB 2018 sample has exactly one image, images/" + id + ".png");
        out.orphans.push_back(e.path);
      } else {
        report(e.path, not_a_file(e, "images/"));
      }
    }
    if (!image_found) report(sample.path / "images", "no " + id + ".png in it");

    const fs::path masks_dir = sample.path / "masks";
    if (fs::is_directory(masks_dir, ec)) {
      for (const Entry& e : list_folder_entries(masks_dir, inner, "").value_or(std::vector<Entry>{})) {
        if (e.file) {
          c.pair.masks.push_back(e.path);
          c.files.push_back(e.path);
        } else {
          report(e.path, not_a_file(e, "masks/"));
        }
      }
    }
    if (c.pair.masks.empty())
      report(masks_dir, "no masks (the DSB 2018 test set has none: use it with predict)");
    // Listing errors inside the sample (unreadable folders) are its problems too.
    for (DataProblem& p : inner.problems) report(p.path, std::move(p.problem));
    out.candidates.push_back(std::move(c));
  }
  return out;
}

// A multi-page TIFF is one sample per page, each page's mask the same page of the mask file(s), which must
// have as many pages. Only headers are read; a file whose header cannot be read is left to the decoding,
// which reports it.
void expand_pages(Listing& listing, std::int64_t max_side) {
  const ImageLimits limits{max_side, max_side};
  std::vector<Candidate> expanded;
  expanded.reserve(listing.candidates.size());
  for (Candidate& c : listing.candidates) {
    std::int64_t pages = 1;
    if (!c.bad) {
      try {
        pages = probe_image(c.pair.image, limits).pages;
      } catch (const Error&) {
      }
    }
    if (pages > 1) {
      for (const fs::path& mask : c.pair.masks) {
        std::int64_t mask_pages = pages;
        try {
          mask_pages = probe_image(mask, limits).pages;
        } catch (const Error&) {
        }
        if (mask_pages != pages)
          listing.report_about(c, mask,
                               "the mask has " + std::to_string(mask_pages) + " page(s) but its image " +
                                   c.pair.image.string() + " has " + std::to_string(pages) +
                                   ": a multi-page image needs a mask page for each of its pages");
      }
    }
    if (pages <= 1 || c.bad) {
      expanded.push_back(std::move(c));
      continue;
    }
    for (std::int64_t page = 0; page < pages; ++page) {
      Candidate one = c;
      one.pair.page = page;
      expanded.push_back(std::move(one));
    }
  }
  listing.candidates = std::move(expanded);
}

// What decoding one candidate or one orphan gave.
struct Checked {
  std::vector<DataProblem> problems;
  std::optional<Sample> sample;  // a good candidate's sample, where the cache keeps it
  bool usable = false;
  Sha256::Digest content{};               // a usable sample's files' bytes (PreflightReport::content)
  std::optional<ChannelMoments> moments;  // a usable sample's values, for a zscore over the dataset
  std::vector<std::int64_t> mask_values;  // a usable sample's SampleCheck::mask_values
};

// Pixels of each value in a loaded sample's mask: [value] -> count, up to the largest value present.
std::vector<std::int64_t> count_mask_values(const Sample& sample) {
  std::array<std::int64_t, 256> counts{};
  for (const std::uint8_t v : sample.mask) ++counts[v];
  std::size_t end = counts.size();
  while (end > 0 && counts[end - 1] == 0) --end;
  return {counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(end)};
}

// The SHA-256 of the files' bytes, one after the other. Read right after decoding them, so from the page
// cache; false when one cannot be read now (the sample is then a problem like any unreadable file).
bool hash_files(const FilePair& pair, Sha256::Digest& digest, std::vector<DataProblem>& problems) {
  Sha256 sha;
  std::vector<char> buffer(std::size_t{1} << 16);
  std::vector<fs::path> files{pair.image};
  files.insert(files.end(), pair.masks.begin(), pair.masks.end());
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      sha.update(std::as_bytes(std::span(buffer.data(), static_cast<std::size_t>(in.gcount()))));
    }
    if (!in.eof()) {
      problems.push_back({file, "cannot be read again to hash its bytes"});
      return false;
    }
  }
  digest = sha.finish();
  return true;
}

std::string count_text(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// One problem a line, each line starting with a newline and `indent`.
std::string problem_list(const std::vector<DataProblem>& problems, std::size_t max_lines,
                         const std::string& indent) {
  std::string text;
  const std::size_t shown = std::min(problems.size(), max_lines);
  for (std::size_t i = 0; i < shown; ++i) text += "\n" + indent + problems[i].text();
  if (problems.size() > shown)
    text += "\n" + indent + "... and " + std::to_string(problems.size() - shown) + " more";
  return text;
}

// What the masks are read as: a binary mask, class indices, or (task "instances") object labels and the
// target made from them.
std::string describe_masks(const FileDatasetOptions& target) {
  if (target.instances) {
    const InstancesConfig& i = *target.instances;
    std::string made = i.target == InstanceTarget::boundary
                           ? "three classes (0 background, 1 interior, 2 a boundary " +
                                 std::to_string(i.boundary_width) + " px wide)"
                           : "a binary mask, touching objects a pixel apart, with border weights (w0 " +
                                 number_text_as_written(i.border_w0) + ", sigma " +
                                 number_text_as_written(i.border_sigma) + " px)";
    return "hold objects (each its own id), trained as " + made + " (instances.target " +
           to_string(i.target) + ")";
  }
  return target.classes == 1 ? std::string("binarised (any non-zero value is foreground)")
                             : "hold class indices 0.." + std::to_string(target.classes - 1);
}

}  // namespace

DataSourceOptions data_source_options(const Config& config) {
  const DataConfig& d = config.data;
  DataSourceOptions o;
  const std::string source = to_string(d.source);
  if (d.source == DataSource::synthetic)
    throw ConfigError("data.source", "\"" + source + "\" is not read from files");
  o.layout = d.source;
  if (d.path.empty()) throw ConfigError("data.path", "required when data.source is \"" + source + "\"");
  o.root = config.resolve(d.path);
  // Patch mode keeps the files' size (0 x 0); resize mode resizes to data.image_size.
  o.target.height = d.mode == DataMode::patch ? 0 : d.image_height;
  o.target.width = d.mode == DataMode::patch ? 0 : d.image_width;
  o.target.channels = config.model.in_channels;
  o.target.channel_indices = d.channels;
  o.target.normalize = d.normalize;
  o.target.classes = config.model.classes;
  if (config.task == ModelTask::instances) o.target.instances = config.instances;
  o.target.ignore_index = config.loss.ignore_index;
  o.target.max_side = d.max_image_side;
  o.target.cache_mib = d.cache_mib;
  o.skip_bad = d.skip_bad;
  return o;
}

std::string PreflightReport::origin() const {
  return layout == DataLayout::synthetic ? "synthetic" : std::string(to_string(layout)) + " " + root.string();
}

std::string PreflightReport::summary(std::size_t max_problems) const {
  const bool files = layout != DataLayout::synthetic;
  std::string text = origin() + ": " + count_text(found, "sample", "samples");
  if (files) {
    text += " found, " + std::to_string(usable) + " usable, " + std::to_string(skipped) +
            (skip_bad ? " skipped" : " bad");
    if (skip_bad && skipped > 0) text += " (left out: data.skip_bad is true)";
  } else {
    text += " generated";
  }

  if (!sizes.empty()) {
    // Most common first.
    std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::size_t>> by_count(sizes.begin(),
                                                                                        sizes.end());
    std::stable_sort(by_count.begin(), by_count.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    text += "\n  image sizes (width x height):";
    for (std::size_t i = 0; i < std::min(by_count.size(), kMaxSizesShown); ++i) {
      const auto& [hw, n] = by_count[i];
      text += (i > 0 ? ", " : " ") + std::to_string(hw.second) + "x" + std::to_string(hw.first) + " (" +
              std::to_string(n) + ")";
    }
    if (by_count.size() > kMaxSizesShown)
      text += " and " + std::to_string(by_count.size() - kMaxSizesShown) + " more sizes";
  }
  if (!channels.empty()) {
    text += "\n  image channels as stored:";
    bool first = true;
    for (const auto& [c, n] : channels) {
      text += (first ? " " : ", ") + std::to_string(c) + " (" + std::to_string(n) + ")";
      first = false;
    }
  }
  text += std::string("\n  each sample ") +
          (target.height == 0 ? "keeps its own size (patch mode)"
                              : "becomes " + std::to_string(target.width) + "x" +
                                    std::to_string(target.height) + " (width x height)") +
          ", " + count_text(static_cast<std::size_t>(target.channels), "channel", "channels") +
          ", normalised " + describe(target.normalize) + "; masks " + describe_masks(target) +
          (target.ignore_index >= 0
               ? ", " + std::to_string(target.ignore_index) + " marking unlabelled pixels (loss.ignore_index)"
               : std::string());
  if (usable > 0) {
    text += "\n  " + std::to_string(cached) + " of " + std::to_string(usable) + " samples kept in memory";
    if (files) text += " (data.cache_mib " + std::to_string(target.cache_mib) + ")";
    if (cached < usable) text += ", the rest decoded each time they are read";
  }
  if (!problems.empty())
    text += "\n  " + count_text(problems.size(), "problem", "problems") + ":" +
            problem_list(problems, max_problems, "    ");
  return text;
}

DatasetError::DatasetError(const std::string& headline, PreflightReport report, std::source_location where)
    : Error(ErrorKind::data, headline + problem_list(report.problems, kMaxProblemLines, "  "), {}, {}, where),
      headline_(std::make_shared<const std::string>(headline)),
      report_(std::make_shared<const PreflightReport>(std::move(report))) {}

std::vector<std::string> DatasetError::problem_lines() const {
  const std::vector<DataProblem>& problems = report_->problems;
  const std::size_t shown = std::min(problems.size(), kMaxProblemLines);
  std::vector<std::string> lines;
  lines.reserve(shown + 1);
  for (std::size_t i = 0; i < shown; ++i) lines.push_back(problems[i].text());
  if (problems.size() > shown)
    lines.push_back("... and " + std::to_string(problems.size() - shown) + " more");
  return lines;
}

PreflightResult scan_dataset(const DataSourceOptions& options) {
  validate(options.target);
  if (options.layout == DataLayout::synthetic)
    throw Error(ErrorKind::config, "the synthetic source has no files to scan");
  if (options.layout == DataLayout::dsb2018 && options.target.classes != 1 && !options.target.instances)
    throw ConfigError("model.classes",
                      "must be 1 with data.source \"dsb2018\" (its nucleus masks are binary), got " +
                          std::to_string(options.target.classes));

  const auto stop_if_requested = [&] {
    if (options.stop.stop_requested())
      throw Error(ErrorKind::cancelled, "the scan of " + options.root.string() + " was stopped");
  };
  stop_if_requested();
  Listing listing = options.layout == DataLayout::folder ? list_folder_layout(options.root)
                                                         : list_dsb2018_layout(options.root);
  expand_pages(listing, options.target.max_side);
  stop_if_requested();
  const std::size_t candidates = listing.candidates.size();
  const bool own_size = options.target.height == 0;
  const std::size_t capacity = own_size ? candidates : FileDataset::cache_capacity(options.target);
  // Samples of their own size are kept while their bytes fit data.cache_mib (which ones is then a matter of
  // which the threads loaded first: a sample is the same cached or not).
  std::atomic<std::int64_t> cache_bytes_left{options.target.cache_mib * (std::int64_t{1} << 20)};
  const bool measure = options.target.normalize.needs_dataset_statistics();

  // The cache keeps the first `capacity` candidates that the listing found good.
  std::vector<bool> keep(candidates, false);
  for (std::size_t i = 0, good = 0; i < candidates; ++i)
    if (!listing.candidates[i].bad) keep[i] = good++ < capacity;

  // Tasks [0, candidates) are the candidates, the rest the orphans.
  std::vector<Checked> checked(candidates + listing.orphans.size());
  std::vector<std::optional<ImageInfo>> stored(checked.size());
  const std::int64_t max_side = options.target.max_side;
  DecodeBudget budget(checked_mul(checked_mul(max_side, max_side, "data.max_image_side squared"),
                                  kDecodeBytesPerPixel, "the decoding budget"),
                      options.stop);
  parallel_for(checked.size(), options.target.threads, [&](std::size_t i) {
    stop_if_requested();
    Checked& out = checked[i];
    if (i >= candidates) {
      check_file(listing.orphans[i - candidates], max_side, out.problems, nullptr, &budget);
      return;
    }
    const Candidate& c = listing.candidates[i];
    ImageInfo info;  // width 0 until a header is read
    if (c.bad) {
      for (const fs::path& file : c.files)
        check_file(file, max_side, out.problems, file == c.pair.image ? &info : nullptr, &budget);
    } else {
      std::optional<Sample> sample = load_pair(c.pair, options.target, out.problems, &info, &budget);
      out.usable =
          sample.has_value() && (!options.hash_content || hash_files(c.pair, out.content, out.problems));
      if (out.usable) out.mask_values = count_mask_values(*sample);
      if (out.usable && measure) {
        out.moments.emplace(options.target.channels);
        out.moments->add(sample->image);
      }
      if (keep[i] && own_size && sample) {
        const std::int64_t bytes = FileDataset::sample_bytes(options.target, sample->height, sample->width);
        keep[i] = cache_bytes_left.fetch_sub(bytes) >= bytes;
      }
      if (keep[i]) out.sample = std::move(sample);
    }
    if (info.width > 0) stored[i] = info;
  });

  PreflightResult result;
  result.decode_budget_bytes = budget.capacity();
  result.decode_peak_bytes = budget.peak();
  PreflightReport& report = result.report;
  report.layout = options.layout;
  report.root = options.root;
  report.target = options.target;
  report.skip_bad = options.skip_bad;
  report.found = candidates;
  result.samples.reserve(candidates);
  for (std::size_t i = 0; i < candidates; ++i) {
    const Candidate& c = listing.candidates[i];
    SampleCheck& sample = result.samples.emplace_back();
    sample.pair = c.pair;
    sample.usable = checked[i].usable;
    for (const std::size_t p : c.listing_problems) sample.problems.push_back(listing.problems[p]);
    sample.problems.insert(sample.problems.end(), checked[i].problems.begin(), checked[i].problems.end());
    sample.mask_values = std::move(checked[i].mask_values);
  }
  report.problems = std::move(listing.problems);
  for (std::size_t i = 0; i < checked.size(); ++i) {
    Checked& c = checked[i];
    report.problems.insert(report.problems.end(), c.problems.begin(), c.problems.end());
    if (stored[i] && i < candidates) {
      ++report.sizes[{stored[i]->height, stored[i]->width}];
      ++report.channels[stored[i]->channels];
    }
    if (!c.usable) continue;
    if (options.hash_content)
      report.content.push_back(
          {listing.candidates[i].pair.image.lexically_relative(options.root).generic_string(), c.content});
    result.pairs.push_back(std::move(listing.candidates[i].pair));
    result.cached.push_back(c.sample ? std::move(*c.sample) : Sample{});
    if (c.sample) ++report.cached;
  }
  report.usable = result.pairs.size();
  report.skipped = report.found - report.usable;
  if (measure && report.usable > 0) {
    // The dataset's mean and std, merged in the layout's order (the same figures whatever the threads did),
    // then the kept samples normalised with them; the others are normalised as they are loaded.
    ChannelMoments all(options.target.channels);
    for (const Checked& c : checked)
      if (c.moments) all.merge(*c.moments);
    report.target.normalize.mean = all.mean();
    report.target.normalize.std = all.std();
    ChannelAffine affine;
    fixed_normalization(report.target.normalize, options.target.channels, affine);
    for (Sample& s : result.cached)
      if (!s.image.empty()) normalize_in_place(affine, s.image, s.channels);
  }
  std::stable_sort(report.problems.begin(), report.problems.end(),
                   [](const DataProblem& a, const DataProblem& b) { return a.path < b.path; });
  return result;
}

PreflightResult preflight(const DataSourceOptions& options) {
  PreflightResult result = scan_dataset(options);
  const PreflightReport& r = result.report;
  const std::string where = r.origin() + ": ";
  if (r.usable == 0) {
    std::string message =
        where + (r.found == 0
                     ? "no samples found (" + layout_text(r.layout) + ")"
                     : "no usable sample (" + count_text(r.found, "sample", "samples") + " found, all bad)");
    if (!r.problems.empty()) message += "; " + count_text(r.problems.size(), "problem", "problems") + ":";
    throw DatasetError(message, r);
  }
  if (!r.problems.empty() && !options.skip_bad) {
    throw DatasetError(where + count_text(r.problems.size(), "problem", "problems") + " in " +
                           count_text(r.found, "sample", "samples") +
                           ", so the run did not start; fix them, or "
                           "set data.skip_bad to true to train on the " +
                           std::to_string(r.usable) + " good samples:",
                       r);
  }
  return result;
}

PreflightResult preflight(const Config& config) {
  return preflight(data_source_options(config));
}

std::shared_ptr<const FileDataset> open_file_dataset(const DataSourceOptions& options,
                                                     PreflightReport* report) {
  PreflightResult result;
  try {
    result = preflight(options);
  } catch (const DatasetError& e) {
    if (report) *report = e.report();
    throw;
  }
  if (report) *report = result.report;
  // report.target: the options with what the scan measured (a zscore over the dataset's mean and std).
  return std::make_shared<const FileDataset>(std::move(result.pairs), result.report.target,
                                             result.report.origin(), result.report.skipped,
                                             std::move(result.cached));
}

}  // namespace unet
