#include "unet/data/dataset_folders.h"

#include "unet/config/config.h"

namespace unet {
namespace fs = std::filesystem;

namespace {

// Absolute, with symbolic links and "..", "." resolved as far as the path exists, and no trailing separator:
// two spellings of one folder compare equal.
fs::path normal(const fs::path& p) {
  std::error_code ec;
  fs::path absolute = fs::absolute(p, ec);
  if (ec) absolute = p;
  fs::path out = fs::weakly_canonical(absolute, ec);
  if (ec) out = absolute.lexically_normal();
  if (out.filename().empty() && out.has_parent_path() && out != out.root_path()) out = out.parent_path();
  return out;
}

// Whether `inner` is `outer` or lies inside it (both normal).
bool within(const fs::path& inner, const fs::path& outer) {
  const fs::path relative = inner.lexically_relative(outer);
  return !relative.empty() && *relative.begin() != "..";
}

bool is_folder(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool holds_images_and_masks(const fs::path& folder) {
  return is_folder(folder / "images") && is_folder(folder / "masks");
}

std::optional<DatasetMembership> training_set_membership(const fs::path& folder,
                                                         const DatasetLocation& training) {
  const fs::path root = normal(training.root);
  if (folder == root) return DatasetMembership{root, "the training set's folder"};
  if (training.layout == DataSource::dsb2018 && within(folder, root))
    return DatasetMembership{root, "inside the training set's folder " + root.string() +
                                       " (DSB 2018 layout: every folder in it is read)"};
  for (const std::string part : {"images", "masks"})
    if (within(folder, root / part))
      return DatasetMembership{
          root,
          (folder == root / part ? "the training set's " : "inside the training set's ") + part + "/ folder"};
  return std::nullopt;
}

// A folder among `folder`'s holding <id>/images/<id>.png, a DSB 2018 sample; empty when there is none.
std::string dsb2018_sample_in(const fs::path& folder) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path sample = it->path();
    const std::string id = sample.filename().string();
    std::error_code exists_ec;
    if (is_folder(sample) && fs::exists(sample / "images" / (id + ".png"), exists_ec))
      return id + "/images/" + id + ".png";
  }
  return {};
}

}  // namespace

std::optional<DatasetLocation> dataset_location(const Config& config) {
  if (config.data.source == DataSource::synthetic || config.data.path.empty()) return std::nullopt;
  return DatasetLocation{config.data.source, config.resolve(config.data.path)};
}

std::optional<DatasetMembership> dataset_membership(const fs::path& folder,
                                                    const std::optional<DatasetLocation>& training) {
  const fs::path f = normal(folder);
  if (training && !training->root.empty())
    if (auto member = training_set_membership(f, *training)) return member;
  if (holds_images_and_masks(f))
    return DatasetMembership{f, "a dataset's folder (it holds images/ and masks/)"};
  // Inside the images/ or masks/ folder of a dataset: some folder on the way up is one of those.
  for (fs::path child = f, parent = f.parent_path(); child != parent;
       child = parent, parent = parent.parent_path()) {
    const std::string name = child.filename().string();
    if ((name == "images" || name == "masks") && holds_images_and_masks(parent))
      return DatasetMembership{parent, (child == f ? "the " : "inside the ") + name +
                                           "/ folder of the dataset in " + parent.string()};
  }
  if (const std::string sample = dsb2018_sample_in(f); !sample.empty())
    return DatasetMembership{f, "a DSB 2018 dataset's folder (" + sample + " is a sample in it)"};
  return std::nullopt;
}

}  // namespace unet
