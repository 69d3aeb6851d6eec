// Which folders belong to a dataset, so that nothing is written into one by accident: the workbench's Save
// masks… refuses them (issue 25: `_mask.png` files saved into a dataset's images/ folder broke the next Start
// on it, whose preflight reads every file there). A folder belongs to a dataset when the preflight
// (preflight.h) would read it or the files put in it: for the training set the config names, and for any
// dataset whose layout shows on disk.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "unet/config/config_enums.h"

namespace unet {

struct Config;

// A training set on files: its layout and root folder.
struct DatasetLocation {
  DataSource layout = DataSource::folder;
  std::filesystem::path root;
};

// The config's training set (data.source, data.path resolved); nullopt for the synthetic source or no path.
std::optional<DatasetLocation> dataset_location(const Config& config);

// A folder found to be part of a dataset: the dataset's root, and what the folder is to it, a phrase that
// follows the folder's path ("the training set's images/ folder", "inside the masks/ folder of the dataset
// in /data/cells").
struct DatasetMembership {
  std::filesystem::path root;
  std::string role;
};

// Whether the preflight would read `folder`, or files put in it, as part of `training` (its root; under the
// folder layout its images/ and masks/ and what is inside them, under DSB 2018 everything inside the root),
// or of a dataset whose layout shows on disk: a folder holding images/ and masks/ (a folder layout's root, a
// DSB 2018 sample), what is inside the images/ or masks/ folder of one, a DSB 2018 root (it holds a sample
// <id>/images/<id>.png). `folder` need not exist. Never throws: what cannot be read counts as absent.
std::optional<DatasetMembership> dataset_membership(const std::filesystem::path& folder,
                                                    const std::optional<DatasetLocation>& training);

}  // namespace unet
