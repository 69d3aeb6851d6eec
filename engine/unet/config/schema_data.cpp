// The data.* rows of the key table (DataConfig): where the samples come from, their size or patches, their
// channels and normalisation, and how they are loaded.
#include <cstdint>
#include <string>

#include "unet/config/schema_rows.h"
#include "unet/config/schema_rules.h"

namespace unet::schema_rows {

using config_detail::show;

void add_data_keys(SchemaRows& rows) {
  {
    ConfigKey& k =
        rows.add("data.source", ConfigType::enumeration, "Data", "Source",
                 "synthetic: generated shapes; folder: path/images/* and path/masks/*, matched by file stem; "
                 "dsb2018: the Data Science Bowl 2018 layout, instance masks merged.");
    bind_names(
        k, kDataSourceNames, [](auto& c) -> auto& { return c.data.source; });
  }
  bind(rows.add("data.path", ConfigType::path, "Data", "Dataset folder",
                "Required for the folder and dsb2018 sources; relative to the config file."),
       &Config::data, &DataConfig::path);
  {
    ConfigKey& k = rows.add("data.image_size", ConfigType::integer_pair, "Data", "Image size",
                            "[height, width] the images are resized to; each a multiple of 2^model.depth.");
    k.min = 1;
    k.max = kMaxImageSide;
    k.choices = {"height", "width"};  // the names of the pair's two values
    k.get = [](const Config& c) { return json::array({c.data.image_height, c.data.image_width}); };
    k.set = [](Config& c, const json& v) {
      c.data.image_height = v[0].get<std::int64_t>();
      c.data.image_width = v[1].get<std::int64_t>();
    };
  }
  {
    ConfigKey& k = rows.add("data.val_fraction", ConfigType::number, "Data", "Validation fraction",
                            "The share of samples held out for validation, in [0, 1).");
    k.min = 0;
    k.max = 1;
    k.max_exclusive = true;
    bind(k, &Config::data, &DataConfig::val_fraction);
  }
  bind(
      rows.add("data.augment", ConfigType::boolean, "Data", "Augment",
               "Random augmentation of the training images: the master switch of every augment.* key (false: "
               "none of them is applied)."),
      &Config::data, &DataConfig::augment);
  bind(rows.add("data.shuffle", ConfigType::boolean, "Data", "Shuffle",
                "Shuffle the training samples every epoch; false: the same order every epoch (the order "
                "data.seed's split left them in, not the files' order)."),
       &Config::data, &DataConfig::shuffle);
  bind(rows.integer("data.synthetic_samples", "Data", "Synthetic samples",
                    "How many images the synthetic source generates.", 2, kMaxSamples),
       &Config::data, &DataConfig::synthetic_samples);
  bind(rows.seed("data.seed", "Data", "Seeds the split, the shuffling, augmentation and synthetic images."),
       &Config::data, &DataConfig::seed);
  bind(rows.add(
           "data.skip_bad", ConfigType::boolean, "Data", "Skip bad files",
           "false: any bad file (missing partner, damaged, wrong size...) stops the run and all are listed; "
           "true: bad samples are left out and counted."),
       &Config::data, &DataConfig::skip_bad);
  bind(rows.integer(
           "data.max_image_side", "Data", "Largest image side",
           "The largest width or height an image or mask file may declare; larger files are refused "
           "before they are decoded. It also bounds the data scan's memory: its threads together decode "
           "at most what one pair of this side needs (24 bytes a pixel: 6 GiB at 16384, 384 MiB at "
           "4096).",
           16, 65536),
       &Config::data, &DataConfig::max_image_side);
  bind(rows.integer("data.prefetch", "Data", "Prefetch (batches)",
                    "Steps' batches the loader's workers prepare ahead of training.", 1, 64),
       &Config::data, &DataConfig::prefetch);
  // The upper bound keeps prefetch_mib * 2^20 bytes inside int64.
  bind(rows.integer("data.prefetch_mib", "Data", "Prefetch memory (MiB)",
                    "The batches prepared ahead take at most this many MiB (a step larger than this is still "
                    "prepared, alone). 0: no bound but data.prefetch.",
                    0, static_cast<double>(INT64_MAX >> 20)),
       &Config::data, &DataConfig::prefetch_mib);
  bind(rows.integer(
           "data.workers", "Data", "Loader threads",
           "Threads that decode, crop and augment training batches, several steps at once (at most "
           "data.prefetch); the batches are the same whatever their number. 0: one per hardware thread, "
           "at most 8.",
           0, 256),
       &Config::data, &DataConfig::workers);
  // The upper bound keeps cache_mib * 2^20 bytes inside int64.
  bind(rows.integer("data.cache_mib", "Data", "Sample cache (MiB)",
                    "Decoded samples are kept in memory up to this many MiB; the rest are decoded again each "
                    "time they are read. 0: nothing is kept.",
                    0, static_cast<double>(INT64_MAX >> 20)),
       &Config::data, &DataConfig::cache_mib);
  bind(
      rows.add(
          "data.validation_split", ConfigType::path, "Data", "Validation split from",
          "A run folder (or its validation.json) whose validation images this run validates on too, so that "
          "runs compare on the same images; it takes the place of val_fraction. Empty: val_fraction and seed "
          "choose them. Every run writes its own split to validation.json, and a resumed run keeps it."),
      &Config::data, &DataConfig::validation_split);

  bind(
      rows.add(
          "data.val_path", ConfigType::path, "Data", "Validation folder",
          "A folder of the same layout as data.path whose images are the validation set (images that are not "
          "neighbours of the training ones validate honestly); it takes the place of val_fraction and "
          "validation_split. Empty: validation images come from data.path."),
      &Config::data, &DataConfig::val_path);
  {
    ConfigKey& k =
        rows.add("data.mode", ConfigType::enumeration, "Data", "Training input",
                 "resize: every image resized to data.image_size; patch: random data.patch_size crops at "
                 "the file's own resolution (validation and prediction run tiled over whole images).");
    bind_names(
        k, kDataModeNames, [](auto& c) -> auto& { return c.data.mode; });
  }
  {
    ConfigKey& k = rows.add("data.patch_size", ConfigType::integer_pair, "Data", "Patch size",
                            "[height, width] of the training patches in patch mode; each a multiple of "
                            "2^model.depth. Images smaller than a patch are padded.");
    k.min = 1;
    k.max = kMaxImageSide;
    k.choices = {"height", "width"};
    k.get = [](const Config& c) { return json::array({c.data.patch_height, c.data.patch_width}); };
    k.set = [](Config& c, const json& v) {
      c.data.patch_height = v[0].get<std::int64_t>();
      c.data.patch_width = v[1].get<std::int64_t>();
    };
  }
  {
    ConfigKey& k =
        rows.add("data.foreground_oversample", ConfigType::number, "Data", "Foreground patches",
                 "The share of patches centred on a labelled foreground pixel (nnU-Net's 0.33); the "
                 "others are centred anywhere in the image.");
    k.min = 0;
    k.max = 1;
    bind(k, &Config::data, &DataConfig::foreground_oversample);
  }
  bind(rows.integer(
           "data.patches_per_epoch", "Data", "Patches per epoch",
           "Patches in an epoch of patch mode; 0: the training images' area over the patch's (an epoch "
           "sees about every pixel once).",
           0, kMaxSamples),
       &Config::data, &DataConfig::patches_per_epoch);
  {
    ConfigKey& k =
        rows.add("data.channels", ConfigType::number_list, "Data", "Channels",
                 "Which of the files' channels the model reads, by index from 0 (e.g. [0, 2] of a "
                 "5-channel TIFF); as many as model.in_channels. Empty: gray and colour images are "
                 "converted to model.in_channels.");
    k.min = 0;
    k.max = 63;
    k.check = [](const json& v) -> std::optional<std::string> {
      for (const json& e : v)
        if (e.get<double>() != static_cast<double>(static_cast<std::int64_t>(e.get<double>())))
          return show(e) + " is not a channel index (whole numbers from 0)";
      return std::nullopt;
    };
    k.get = [](const Config& c) { return json(c.data.channels); };
    k.set = [](Config& c, const json& v) {
      c.data.channels.clear();
      for (const json& e : v) c.data.channels.push_back(static_cast<std::int64_t>(e.get<double>()));
    };
  }
  {
    ConfigKey& k = rows.add(
        "data.normalize", ConfigType::enumeration, "Data", "Normalisation",
        "How stored values become the model's input, saved with the model and applied alike by "
        "training, prediction and export: scale_255 (value / 255 for 8-bit images, / 65535 for 16-bit); "
        "percentile "
        "(per image and channel, between data.normalize_percentiles); zscore (mean 0, std 1, "
        "per image or over the dataset: data.normalize_scope); range (data.normalize_range to "
        "[0, 1], for 16-bit data).");
    bind_names(
        k, kNormalizeModeNames, [](auto& c) -> auto& { return c.data.normalize.mode; });
  }
  // A number_list of exactly two values, the first below the second.
  const auto number_pair = [](ConfigKey& k, const char* first, const char* second) {
    k.check = [first, second](const json& v) -> std::optional<std::string> {
      if (v.size() != 2)
        return "must hold two numbers [" + std::string(first) + ", " + second + "], got " +
               std::to_string(v.size());
      if (!(v[0].get<double>() < v[1].get<double>()))
        return std::string(first) + " " + show(v[0]) + " must be below " + second + " " + show(v[1]);
      return std::nullopt;
    };
  };
  {
    ConfigKey& k =
        rows.add("data.normalize_percentiles", ConfigType::number_list, "Data", "Percentiles",
                 "percentile normalisation: [low, high] percentiles (0..100) mapped to 0 and 1, per image "
                 "and channel.");
    k.min = 0;
    k.max = 100;
    number_pair(k, "low", "high");
    k.get = [](const Config& c) {
      return json::array({c.data.normalize.low_percentile, c.data.normalize.high_percentile});
    };
    k.set = [](Config& c, const json& v) {
      c.data.normalize.low_percentile = v[0].get<double>();
      c.data.normalize.high_percentile = v[1].get<double>();
    };
  }
  bind(rows.add("data.normalize_clip", ConfigType::boolean, "Data", "Clip to [0, 1]",
                "percentile and range normalisation: clip the results to [0, 1]; false keeps the tails."),
       &Config::data, &DataConfig::normalize, &NormalizeDesc::clip);
  {
    ConfigKey& k =
        rows.add("data.normalize_scope", ConfigType::enumeration, "Data", "zscore over",
                 "zscore normalisation: image (each image's own mean and std, per channel) or dataset "
                 "(the training data's, measured by the data scan and saved with the model).");
    bind_names(
        k, kNormalizeScopeNames, [](auto& c) -> auto& { return c.data.normalize.scope; });
  }
  {
    ConfigKey& k =
        rows.add("data.normalize_range", ConfigType::number_list, "Data", "Value range",
                 "range normalisation: [min, max] stored values mapped to 0 and 1 (16-bit: [0, 65535]).");
    number_pair(k, "min", "max");
    k.get = [](const Config& c) {
      return json::array({c.data.normalize.range_min, c.data.normalize.range_max});
    };
    k.set = [](Config& c, const json& v) {
      c.data.normalize.range_min = v[0].get<double>();
      c.data.normalize.range_max = v[1].get<double>();
    };
  }
  bind(rows.add(
           "data.normalize_mean", ConfigType::number_list, "Data", "Dataset mean",
           "zscore over the dataset: the mean of each channel. Empty: measured by the data scan and saved "
           "with "
           "the run."),
       &Config::data, &DataConfig::normalize, &NormalizeDesc::mean);
  {
    ConfigKey& k =
        rows.add("data.normalize_std", ConfigType::number_list, "Data", "Dataset std",
                 "zscore over the dataset: the standard deviation of each channel, > 0. Empty: measured "
                 "by the data scan and saved with the run.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::data, &DataConfig::normalize, &NormalizeDesc::std);
  }
}

}  // namespace unet::schema_rows
