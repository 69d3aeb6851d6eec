// The key table: every config key declared once, with its type, bounds, group, label, help text, its own
// check where it has one, and how it is read from and written to the typed Config (config.h says why). Also
// how a dotted path finds its key or section. What is checked with the table is in validate.cpp.
#include <algorithm>
#include <cstdint>

#include "unet/backend/communicator_choice.h"
#include "unet/config/checkpoint_name.h"
#include "unet/config/config.h"
#include "unet/config/schema_rules.h"

namespace unet {

using config_detail::check_template;
using config_detail::section_of;
using config_detail::show;

namespace {

using json = nlohmann::json;

// --- devices -----------------------------------------------------------------------------------------------

std::optional<std::string> check_devices(const json& v) {
  std::vector<DeviceId> seen;
  std::optional<DeviceId> first_cpu, first_cuda;
  for (const json& e : v) {
    const std::optional<DeviceId> device = parse_device(e.get_ref<const std::string&>());
    if (!device) return show(e) + " is not a device; use " + device_forms() + " (N = 0, 1, ...)";
    // Two replicas on one GPU sum through the device communicator, which tests use; for a run, a larger
    // batch on one replica does the same work with less memory, and NCCL refuses it.
    if (std::find(seen.begin(), seen.end(), *device) != seen.end())
      return "lists " + device->str() + " twice" +
             (device->kind == DeviceKind::cuda
                  ? std::string(": NCCL cannot put two replicas on one GPU; for a larger batch than fits, "
                                "use train.accumulation, which splits it exactly")
                  : std::string());
    seen.push_back(*device);
    std::optional<DeviceId>& first = device->kind == DeviceKind::cpu ? first_cpu : first_cuda;
    if (!first) first = *device;
  }
  if (first_cpu && first_cuda)
    return "cannot mix CPU and CUDA devices in one run, got " + first_cpu->str() + " and " +
           first_cuda->str();
  return std::nullopt;
}

// --- the schema --------------------------------------------------------------------------------------------

template <class Section, class T>
void bind(ConfigKey& k, Section Config::*section, T Section::*field) {
  k.get = [section, field](const Config& c) { return json((c.*section).*field); };
  k.set = [section, field](Config& c, const json& v) { (c.*section).*field = v.get<T>(); };
}

// A field of a struct inside a section (data.normalize's keys).
template <class Section, class Inner, class T>
void bind(ConfigKey& k, Section Config::*section, Inner Section::*inner, T Inner::*field) {
  k.get = [section, inner, field](const Config& c) { return json(((c.*section).*inner).*field); };
  k.set = [section, inner, field](Config& c, const json& v) { ((c.*section).*inner).*field = v.get<T>(); };
}

// An enumeration key: its choices, how it is written and how it is read all come from its one name table
// (config_enums.h). `field` returns the Config's member, for a const Config and a Config alike.
template <class E, std::size_t N, class Field>
void bind_names(ConfigKey& k, const EnumName<E> (&names)[N], Field field) {
  k.choices = names_of(names);
  k.get = [&names, field](const Config& c) { return json(name_in(names, field(c))); };
  k.set = [&names, field](Config& c, const json& v) {
    field(c) = *value_in(names, v.get_ref<const std::string&>());
  };
}

// Bounds on counts. Each is far above any run that makes sense on one machine, and low enough that products
// of them (batch x accumulation, samples x image bytes, epochs x steps per epoch) stay well inside int64, so
// that no user number can wrap into a small or negative count.
constexpr double kMaxBatch = 65536;            // train.batch_size, train.accumulation
constexpr double kMaxImageSide = 65536;        // data.image_size (data.max_image_side has the same bound)
constexpr double kMaxSamples = 16777216;       // data.synthetic_samples: 2^24
constexpr double kMaxEpochs = 1000000;         // train.epochs, checkpoint.every_epochs, checkpoint.keep_last
constexpr double kMaxSteps = 1000000000000.0;  // train.steps: 10^12

// A new key at the end of `keys`; the reference is used before the next one is added.
ConfigKey& add_key(std::vector<ConfigKey>& keys, std::string path, ConfigType type, const char* group,
                   const char* label, const char* help) {
  ConfigKey& k = keys.emplace_back();
  k.path = std::move(path);
  k.type = type;
  k.group = group;
  k.label = label;
  k.help = help;
  return k;
}

// --- augmentation ------------------------------------------------------------------------------------------

// A range key's own rule: exactly [low, high] with low <= high (each value's bounds are the key's min and
// max).
std::optional<std::string> check_range(const json& v) {
  if (v.size() != 2) return "must be [low, high], two numbers; got " + std::to_string(v.size());
  if (v[0].get<double>() > v[1].get<double>()) return "must be [low, high] with low <= high, got " + show(v);
  return std::nullopt;
}

// The augment.* keys (AugmentConfig): each transform's probability, then its range.
void add_augment_keys(std::vector<ConfigKey>& keys) {
  const auto add = [&keys](std::string path, ConfigType type, const char* label,
                           const char* help) -> ConfigKey& {
    return add_key(keys, std::move(path), type, "Augment", label, help);
  };
  const auto number = [&add](std::string path, const char* label, const char* help, double min,
                             double max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto probability = [&number](std::string path, const char* label, const char* what) -> ConfigKey& {
    ConfigKey& k = number(std::move(path), label, "", 0, 1);
    k.help = std::string("The share of training samples ") + what + ", in [0, 1]; 0 turns it off.";
    return k;
  };
  // Every value in [min, max]; min_exclusive for factors, which 0 would make meaningless.
  const auto range = [&add](std::string path, const char* label, const char* help, double min,
                            bool min_exclusive, double max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number_list, label, help);
    k.min = min;
    k.min_exclusive = min_exclusive;
    k.max = max;
    k.check = check_range;
    return k;
  };
  using A = AugmentConfig;
  bind(add("augment.flips", ConfigType::boolean, "Flips and quarter turns",
           "Flip each training sample left-right and top-bottom, each with probability 1/2, and turn it by a "
           "random number of quarter turns (odd ones on square images only): lossless. Like every augment.* "
           "key, read only when data.augment is true."),
       &Config::augment, &A::flips);
  bind(probability("augment.rotation_p", "Rotation probability",
                   "rotated by an angle up to augment.rotation_deg"),
       &Config::augment, &A::rotation_p);
  bind(number("augment.rotation_deg", "Rotation (degrees)",
              "The largest rotation: the angle is uniform in [-rotation_deg, rotation_deg] degrees "
              "(nnU-Net: 180).",
              0, 180),
       &Config::augment, &A::rotation_deg);
  bind(probability("augment.scale_p", "Scaling probability", "zoomed by a factor from augment.scale_range"),
       &Config::augment, &A::scale_p);
  bind(
      range("augment.scale_range", "Scale range",
            "[low, high] of the zoom factor, uniform; above 1 magnifies (nnU-Net: [0.7, 1.4]).", 0, true, 16),
      &Config::augment, &A::scale_range);
  bind(probability("augment.elastic_p", "Elastic probability", "deformed elastically"), &Config::augment,
       &A::elastic_p);
  {
    ConfigKey& k = add("augment.elastic_grid", ConfigType::integer, "Elastic grid",
                       "Points per side of the coarse grid of random displacements, interpolated bicubically "
                       "over the sample (the U-Net paper: 3).");
    k.min = 2;
    k.max = 64;
    bind(k, &Config::augment, &A::elastic_grid);
  }
  bind(number("augment.elastic_sigma", "Elastic sigma (pixels)",
              "The standard deviation of each grid point's displacement, in pixels (the U-Net paper: 10).", 0,
              1024),
       &Config::augment, &A::elastic_sigma);
  bind(probability("augment.brightness_p", "Brightness probability",
                   "whose values are multiplied by a factor from augment.brightness_range"),
       &Config::augment, &A::brightness_p);
  bind(range("augment.brightness_range", "Brightness range",
             "[low, high] of the factor the normalised values are multiplied by, uniform (nnU-Net: [0.75, "
             "1.25]).",
             0, true, 16),
       &Config::augment, &A::brightness_range);
  bind(probability("augment.contrast_p", "Contrast probability",
                   "whose contrast is scaled by a factor from augment.contrast_range"),
       &Config::augment, &A::contrast_p);
  bind(range(
           "augment.contrast_range", "Contrast range",
           "[low, high] of the factor each channel's values are scaled by around their mean, then clipped to "
           "the channel's own min and max (nnU-Net's rule and range: [0.75, 1.25]).",
           0, false, 16),
       &Config::augment, &A::contrast_range);
  bind(probability("augment.gamma_p", "Gamma probability", "given a gamma from augment.gamma_range"),
       &Config::augment, &A::gamma_p);
  bind(
      range("augment.gamma_range", "Gamma range",
            "[low, high] of the exponent applied to each channel rescaled to [0, 1] by its min and max, then "
            "scaled back (nnU-Net: [0.7, 1.5]).",
            0, true, 16),
      &Config::augment, &A::gamma_range);
  bind(probability("augment.noise_p", "Noise probability", "given Gaussian noise"), &Config::augment,
       &A::noise_p);
  bind(number(
           "augment.noise_sigma", "Noise sigma",
           "The largest standard deviation of the Gaussian noise added to the normalised values; each noisy "
           "sample's is uniform in [0, noise_sigma] (nnU-Net: 0.1).",
           0, 16),
       &Config::augment, &A::noise_sigma);
  bind(probability("augment.blur_p", "Blur probability", "blurred"), &Config::augment, &A::blur_p);
  bind(
      range("augment.blur_sigma", "Blur sigma range",
            "[low, high] of the Gaussian blur's sigma in pixels, uniform, each channel alike (nnU-Net: [0.5, "
            "1.0]).",
            0, true, 32),
      &Config::augment, &A::blur_sigma);
}

std::vector<ConfigKey> build_schema() {
  std::vector<ConfigKey> keys;
  const auto add = [&keys](std::string path, ConfigType type, const char* group, const char* label,
                           const char* help) -> ConfigKey& {
    return add_key(keys, std::move(path), type, group, label, help);
  };
  const auto integer = [&add](std::string path, const char* group, const char* label, const char* help,
                              std::optional<double> min, std::optional<double> max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto seed = [&add](std::string path, const char* group, const char* help) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::integer, group, "Seed", help);
    k.min = 0;
    k.unsigned64 = true;
    return k;
  };

  // Model: the ranges validate(UNetSpec) enforces.
  bind(integer("model.in_channels", "Model", "Input channels",
               "Channels of the input images: 1 grayscale, 3 RGB.", 1, 64),
       &Config::model, &UNetSpec::in_channels);
  bind(integer("model.classes", "Model", "Classes",
               "Output channels: 1 for binary masks (sigmoid), more for one channel per class (softmax).", 1,
               255),
       &Config::model, &UNetSpec::classes);
  bind(integer("model.width", "Model", "Base width",
               "Channels of the first level; each level down doubles them.", 1, 1024),
       &Config::model, &UNetSpec::width);
  bind(integer("model.depth", "Model", "Depth",
               "Down-sampling levels; image height and width must be multiples of 2^depth.", 1, 6),
       &Config::model, &UNetSpec::depth);
  bind(add("model.separable", ConfigType::boolean, "Model", "Separable convolutions",
           "Depthwise-separable 3x3 convolutions: fewer parameters and less compute."),
       &Config::model, &UNetSpec::separable);

  // Loss: docs/MODEL.md, "Losses". The cross-key rules against model.classes are in config_problems().
  {
    // The kinds, their names and help text: the table kLossKinds in unet/loss/terms.h.
    ConfigKey& k = add("loss.kind", ConfigType::enumeration, "Loss", "Loss", "");
    k.help = loss_kinds_help();
    k.choices = loss_kind_names();
    k.get = [](const Config& c) { return json(to_string(c.loss.kind)); };
    k.set = [](Config& c, const json& v) { c.loss.kind = *parse_loss_kind(v.get<std::string>()); };
  }
  {
    ConfigKey& k = add("loss.cross_entropy_weight", ConfigType::number, "Loss", "Cross-entropy weight",
                       "The cross-entropy (or focal) term's weight, in every loss kind that has the term "
                       "(alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::cross_entropy_weight);
  }
  {
    ConfigKey& k =
        add("loss.dice_weight", ConfigType::number, "Loss", "Dice weight",
            "The Dice term's weight, in every loss kind that has the term (alone, it scales the loss).");
    k.min = 0;
    bind(k, &Config::loss, &LossConfig::dice_weight);
  }
  {
    ConfigKey& k = add("loss.focal_gamma", ConfigType::number, "Loss", "Focal gamma",
                       "Focal kinds: the focusing exponent of (1 - p_t)^gamma; 0 gives cross-entropy.");
    k.min = 0;
    k.max = 100;
    bind(k, &Config::loss, &LossConfig::focal_gamma);
  }
  {
    ConfigKey& k = add("loss.focal_alpha", ConfigType::number, "Loss", "Focal alpha",
                       "Focal kinds, binary models only: the foreground's weight alpha (the background's 1 - "
                       "alpha), as torchvision's sigmoid_focal_loss; -1 turns it off.");
    k.min = -1;
    k.max = 1;
    k.check = [](const json& v) -> std::optional<std::string> {
      const double a = v.get<double>();
      if (a < 0 && a != -1) return "must be -1 (off) or in [0, 1], got " + show(v);
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::focal_alpha);
  }
  {
    ConfigKey& k = add("loss.class_weights", ConfigType::number_list, "Loss", "Class weights",
                       "One weight per class, background first (a binary model: [background, foreground]); "
                       "they weight each pixel's cross-entropy/focal term by its class, and the Dice term's "
                       "mean over classes. Empty: all 1.");
    k.min = 0;
    k.check = [](const json& v) -> std::optional<std::string> {
      if (v.size() > static_cast<std::size_t>(kMaxLossClasses - 1))
        return "holds " + std::to_string(v.size()) + " weights; a model has at most 255 classes";
      if (!v.empty() && std::all_of(v.begin(), v.end(), [](const json& w) { return w.get<double>() == 0; }))
        return std::string("must hold at least one weight > 0");
      return std::nullopt;
    };
    bind(k, &Config::loss, &LossConfig::class_weights);
  }
  bind(integer("loss.ignore_index", "Loss", "Ignore label",
               "A mask value whose pixels add no loss, no gradient and no metric (unlabelled pixels, e.g. "
               "255); -1: none.",
               -1, 255),
       &Config::loss, &LossConfig::ignore_index);
  {
    ConfigKey& k = add("loss.dice_smooth", ConfigType::number, "Loss", "Dice smoothing",
                       "s in (2 sum(p t) + s) / (sum(p) + sum(t) + s): keeps Dice defined for a class absent "
                       "from an image and its prediction.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::loss, &LossConfig::dice_smooth);
  }
  bind(add("loss.dice_include_background", ConfigType::boolean, "Loss", "Dice of the background",
           "Include class 0 (the background) in the Dice term's mean over classes; false, as nnU-Net, scores "
           "the foreground classes only."),
       &Config::loss, &LossConfig::dice_include_background);

  {
    ConfigKey& k =
        add("data.source", ConfigType::enumeration, "Data", "Source",
            "synthetic: generated shapes; folder: path/images/* and path/masks/*, matched by file stem; "
            "dsb2018: the Data Science Bowl 2018 layout, instance masks merged.");
    bind_names(
        k, kDataSourceNames, [](auto& c) -> auto& { return c.data.source; });
  }
  bind(add("data.path", ConfigType::path, "Data", "Dataset folder",
           "Required for the folder and dsb2018 sources; relative to the config file."),
       &Config::data, &DataConfig::path);
  {
    ConfigKey& k = add("data.image_size", ConfigType::integer_pair, "Data", "Image size",
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
    ConfigKey& k = add("data.val_fraction", ConfigType::number, "Data", "Validation fraction",
                       "The share of samples held out for validation, in [0, 1).");
    k.min = 0;
    k.max = 1;
    k.max_exclusive = true;
    bind(k, &Config::data, &DataConfig::val_fraction);
  }
  bind(add("data.augment", ConfigType::boolean, "Data", "Augment",
           "Random augmentation of the training images: the master switch of every augment.* key (false: "
           "none of them is applied)."),
       &Config::data, &DataConfig::augment);
  bind(add("data.shuffle", ConfigType::boolean, "Data", "Shuffle",
           "Shuffle the training samples every epoch."),
       &Config::data, &DataConfig::shuffle);
  bind(integer("data.synthetic_samples", "Data", "Synthetic samples",
               "How many images the synthetic source generates.", 2, kMaxSamples),
       &Config::data, &DataConfig::synthetic_samples);
  bind(seed("data.seed", "Data", "Seeds the split, the shuffling, augmentation and synthetic images."),
       &Config::data, &DataConfig::seed);
  bind(add("data.skip_bad", ConfigType::boolean, "Data", "Skip bad files",
           "false: any bad file (missing partner, damaged, wrong size...) stops the run and all are listed; "
           "true: bad samples are left out and counted."),
       &Config::data, &DataConfig::skip_bad);
  bind(integer("data.max_image_side", "Data", "Largest image side",
               "The largest width or height an image or mask file may declare; larger files are refused "
               "before they are decoded. It also bounds the data scan's memory: its threads together decode "
               "at most what one pair of this side needs (24 bytes a pixel: 6 GiB at 16384, 384 MiB at "
               "4096).",
               16, 65536),
       &Config::data, &DataConfig::max_image_side);
  bind(integer("data.prefetch", "Data", "Prefetch (batches)",
               "Steps' batches the loader's workers prepare ahead of training.", 1, 64),
       &Config::data, &DataConfig::prefetch);
  // The upper bound keeps prefetch_mib * 2^20 bytes inside int64.
  bind(integer("data.prefetch_mib", "Data", "Prefetch memory (MiB)",
               "The batches prepared ahead take at most this many MiB (a step larger than this is still "
               "prepared, alone). 0: no bound but data.prefetch.",
               0, static_cast<double>(INT64_MAX >> 20)),
       &Config::data, &DataConfig::prefetch_mib);
  bind(integer("data.workers", "Data", "Loader threads",
               "Threads that decode, crop and augment training batches, several steps at once (at most "
               "data.prefetch); the batches are the same whatever their number. 0: one per hardware thread, "
               "at most 8.",
               0, 256),
       &Config::data, &DataConfig::workers);
  // The upper bound keeps cache_mib * 2^20 bytes inside int64.
  bind(integer("data.cache_mib", "Data", "Sample cache (MiB)",
               "Decoded samples are kept in memory up to this many MiB; the rest are decoded again each "
               "time they are read. 0: nothing is kept.",
               0, static_cast<double>(INT64_MAX >> 20)),
       &Config::data, &DataConfig::cache_mib);
  bind(
      add("data.validation_split", ConfigType::path, "Data", "Validation split from",
          "A run folder (or its validation.json) whose validation images this run validates on too, so that "
          "runs compare on the same images; it takes the place of val_fraction. Empty: val_fraction and seed "
          "choose them. Every run writes its own split to validation.json, and a resumed run keeps it."),
      &Config::data, &DataConfig::validation_split);

  bind(
      add("data.val_path", ConfigType::path, "Data", "Validation folder",
          "A folder of the same layout as data.path whose images are the validation set (images that are not "
          "neighbours of the training ones validate honestly); it takes the place of val_fraction and "
          "validation_split. Empty: validation images come from data.path."),
      &Config::data, &DataConfig::val_path);
  {
    ConfigKey& k =
        add("data.mode", ConfigType::enumeration, "Data", "Training input",
            "resize: every image resized to data.image_size; patch: random data.patch_size crops at "
            "the file's own resolution (validation and prediction run tiled over whole images).");
    bind_names(
        k, kDataModeNames, [](auto& c) -> auto& { return c.data.mode; });
  }
  {
    ConfigKey& k = add("data.patch_size", ConfigType::integer_pair, "Data", "Patch size",
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
    ConfigKey& k = add("data.foreground_oversample", ConfigType::number, "Data", "Foreground patches",
                       "The share of patches centred on a labelled foreground pixel (nnU-Net's 0.33); the "
                       "others are centred anywhere in the image.");
    k.min = 0;
    k.max = 1;
    bind(k, &Config::data, &DataConfig::foreground_oversample);
  }
  bind(integer("data.patches_per_epoch", "Data", "Patches per epoch",
               "Patches in an epoch of patch mode; 0: the training images' area over the patch's (an epoch "
               "sees about every pixel once).",
               0, kMaxSamples),
       &Config::data, &DataConfig::patches_per_epoch);
  {
    ConfigKey& k = add("data.channels", ConfigType::number_list, "Data", "Channels",
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
    ConfigKey& k =
        add("data.normalize", ConfigType::enumeration, "Data", "Normalisation",
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
        add("data.normalize_percentiles", ConfigType::number_list, "Data", "Percentiles",
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
  bind(add("data.normalize_clip", ConfigType::boolean, "Data", "Clip to [0, 1]",
           "percentile and range normalisation: clip the results to [0, 1]; false keeps the tails."),
       &Config::data, &DataConfig::normalize, &NormalizeDesc::clip);
  {
    ConfigKey& k = add("data.normalize_scope", ConfigType::enumeration, "Data", "zscore over",
                       "zscore normalisation: image (each image's own mean and std, per channel) or dataset "
                       "(the training data's, measured by the data scan and saved with the model).");
    bind_names(
        k, kNormalizeScopeNames, [](auto& c) -> auto& { return c.data.normalize.scope; });
  }
  {
    ConfigKey& k =
        add("data.normalize_range", ConfigType::number_list, "Data", "Value range",
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
  bind(add("data.normalize_mean", ConfigType::number_list, "Data", "Dataset mean",
           "zscore over the dataset: the mean of each channel. Empty: measured by the data scan and saved "
           "with "
           "the run."),
       &Config::data, &DataConfig::normalize, &NormalizeDesc::mean);
  {
    ConfigKey& k =
        add("data.normalize_std", ConfigType::number_list, "Data", "Dataset std",
            "zscore over the dataset: the standard deviation of each channel, > 0. Empty: measured "
            "by the data scan and saved with the run.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::data, &DataConfig::normalize, &NormalizeDesc::std);
  }
  add_augment_keys(keys);

  bind(integer("train.epochs", "Training", "Epochs", "Passes over the training set.", 1, kMaxEpochs),
       &Config::train, &TrainConfig::epochs);
  bind(integer("train.steps", "Training", "Steps", "Optimizer steps to run; > 0 overrides epochs.", 0,
               kMaxSteps),
       &Config::train, &TrainConfig::steps);
  bind(integer("train.batch_size", "Training", "Batch size", "The global batch: all devices together.", 1,
               kMaxBatch),
       &Config::train, &TrainConfig::batch_size);
  bind(integer("train.accumulation", "Training", "Gradient accumulation",
               "Micro-batches whose gradients are summed before each optimizer step.", 1, kMaxBatch),
       &Config::train, &TrainConfig::accumulation);
  {
    ConfigKey& k =
        add("train.lr", ConfigType::number, "Training", "Learning rate", "The optimizer's step size.");
    k.min = 0;
    k.min_exclusive = true;
    bind(k, &Config::train, &TrainConfig::lr);
  }
  {
    ConfigKey& k =
        add("train.weight_decay", ConfigType::number, "Training", "Weight decay",
            "Added to the gradient as weight_decay x weight (L2) by adam and sgd; decoupled by adamw "
            "(each weight multiplied by 1 - lr x weight_decay); 0 turns it off.");
    k.min = 0;
    bind(k, &Config::train, &TrainConfig::weight_decay);
  }
  bind(seed("train.seed", "Training", "Seeds the weight initialisation."), &Config::train,
       &TrainConfig::seed);
  bind(integer("train.val_every_steps", "Training", "Validate every N steps",
               "> 0: validate also every this many optimizer steps, for long epochs; best.safetensors, the "
               "plateau schedule and early stopping see each validation. 0: at each epoch's end only.",
               0, kMaxSteps),
       &Config::train, &TrainConfig::val_every_steps);

  // A number key with inclusive bounds unless said otherwise.
  const auto number = [&add](std::string path, const char* group, const char* label, const char* help,
                             std::optional<double> min, std::optional<double> max) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::number, group, label, help);
    k.min = min;
    k.max = max;
    return k;
  };
  const auto choice = [&add](std::string path, const char* group, const char* label, const char* help,
                             std::vector<std::string> choices) -> ConfigKey& {
    ConfigKey& k = add(std::move(path), ConfigType::enumeration, group, label, help);
    k.choices = std::move(choices);
    return k;
  };
  const std::vector<std::string> monitors{"val_loss", "val_iou", "val_dice", "val_acc", "loss"};

  bind_names(
      add("optimizer.kind", ConfigType::enumeration, "Optimizer", "Optimizer",
          "adam: torch.optim.Adam (weight decay as L2); adamw: AdamW (decoupled weight decay); sgd: "
          "SGD with momentum (Nesterov optional), as nnU-Net trains."),
      kOptimizerKindNames, [](auto& c) -> auto& { return c.optimizer.kind; });
  {
    ConfigKey& k = number("optimizer.beta1", "Optimizer", "Beta 1",
                          "adam, adamw: decay of the gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta1);
  }
  {
    ConfigKey& k = number("optimizer.beta2", "Optimizer", "Beta 2",
                          "adam, adamw: decay of the squared gradients' running mean, in [0, 1).", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::beta2);
  }
  {
    ConfigKey& k = number("optimizer.eps", "Optimizer", "Epsilon",
                          "adam, adamw: added to the denominator for numerical stability.", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::eps);
  }
  {
    ConfigKey& k = number("optimizer.momentum", "Optimizer", "Momentum",
                          "sgd: momentum in [0, 1); 0 is plain SGD. nnU-Net uses 0.99 with Nesterov.", 0, 1);
    k.max_exclusive = true;
    bind(k, &Config::optimizer, &OptimizerConfig::momentum);
  }
  bind(add("optimizer.nesterov", ConfigType::boolean, "Optimizer", "Nesterov momentum",
           "sgd: Nesterov's momentum (needs optimizer.momentum > 0)."),
       &Config::optimizer, &OptimizerConfig::nesterov);
  bind(number("optimizer.clip_grad_norm", "Optimizer", "Clip gradient norm",
              "> 0: gradients whose global L2 norm exceeds this are scaled down to it before each step "
              "(torch.nn.utils.clip_grad_norm_); 0 turns clipping off. The norm is logged either way.",
              0, {}),
       &Config::optimizer, &OptimizerConfig::clip_grad_norm);

  bind_names(
      add("schedule.kind", ConfigType::enumeration, "Schedule", "Learning-rate schedule",
          "constant; step (x gamma every step_epochs epochs); cosine (down to min_lr); one_cycle (up "
          "to train.lr and down, per step); poly (nnU-Net's (1 - t/T)^power); plateau (x gamma when "
          "the monitored metric stops improving)."),
      kScheduleKindNames, [](auto& c) -> auto& { return c.schedule.kind; });
  bind(integer("schedule.warmup_steps", "Schedule", "Warm-up steps",
               "Optimizer steps over which the rate rises linearly from warmup_start_factor x train.lr to "
               "train.lr before the schedule begins; 0: none. Not with one_cycle, which warms up itself.",
               0, kMaxSteps),
       &Config::schedule, &ScheduleConfig::warmup_steps);
  {
    ConfigKey& k = number("schedule.warmup_start_factor", "Schedule", "Warm-up start factor",
                          "The share of train.lr the warm-up starts from, in (0, 1].", 0, 1);
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::warmup_start_factor);
  }
  bind(integer("schedule.step_epochs", "Schedule", "Step every (epochs)",
               "step: the rate is multiplied by gamma every this many epochs.", 1, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::step_epochs);
  {
    ConfigKey& k = number("schedule.gamma", "Schedule", "Gamma",
                          "step and plateau: the factor the rate is multiplied by, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::gamma);
  }
  bind(number("schedule.min_lr", "Schedule", "Minimum rate",
              "cosine: the rate it ends at (eta_min); plateau: the rate it never goes below. Below train.lr.",
              0, {}),
       &Config::schedule, &ScheduleConfig::min_lr);
  {
    ConfigKey& k = number("schedule.power", "Schedule", "Power", "poly: the exponent (nnU-Net: 0.9).", 0, {});
    k.min_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::power);
  }
  {
    ConfigKey& k = number("schedule.pct_start", "Schedule", "Rising share",
                          "one_cycle: the share of the run spent rising to train.lr, in (0, 1).", 0, 1);
    k.min_exclusive = true;
    k.max_exclusive = true;
    bind(k, &Config::schedule, &ScheduleConfig::pct_start);
  }
  {
    ConfigKey& k = number("schedule.div_factor", "Schedule", "Start divisor",
                          "one_cycle: the rate starts at train.lr / div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::div_factor);
  }
  {
    ConfigKey& k = number("schedule.final_div_factor", "Schedule", "End divisor",
                          "one_cycle: the rate ends at the start rate / final_div_factor.", 1, {});
    bind(k, &Config::schedule, &ScheduleConfig::final_div_factor);
  }
  bind(add("schedule.cycle_momentum", ConfigType::boolean, "Schedule", "Cycle momentum",
           "one_cycle: cycle Adam's beta1 or SGD's momentum inversely to the rate, between 0.85 and 0.95 "
           "(torch.optim.lr_scheduler.OneCycleLR's default)."),
       &Config::schedule, &ScheduleConfig::cycle_momentum);
  bind(choice("schedule.monitor", "Schedule", "Plateau monitor",
              "plateau: the metric watched after each validation; losses improve downwards, the others "
              "upwards.",
              monitors),
       &Config::schedule, &ScheduleConfig::monitor);
  bind(integer("schedule.patience", "Schedule", "Plateau patience",
               "plateau: validations without improvement before the rate is lowered.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::patience);
  bind(number("schedule.threshold", "Schedule", "Plateau threshold",
              "plateau: the relative improvement that counts (1e-4: 0.01 %).", 0, {}),
       &Config::schedule, &ScheduleConfig::threshold);
  bind(integer("schedule.cooldown", "Schedule", "Plateau cooldown",
               "plateau: validations after a reduction before patience counts again.", 0, kMaxEpochs),
       &Config::schedule, &ScheduleConfig::cooldown);

  bind(integer("early_stopping.patience", "Early stopping", "Patience",
               "Stop when the monitored metric has not improved for this many validations; 0 turns early "
               "stopping off.",
               0, kMaxEpochs),
       &Config::early_stopping, &EarlyStoppingConfig::patience);
  bind(choice("early_stopping.monitor", "Early stopping", "Monitor",
              "The metric early stopping watches; losses improve downwards, the others upwards.", monitors),
       &Config::early_stopping, &EarlyStoppingConfig::monitor);
  bind(number("early_stopping.min_delta", "Early stopping", "Minimum change",
              "An improvement smaller than this does not count.", 0, {}),
       &Config::early_stopping, &EarlyStoppingConfig::min_delta);
  bind(add("early_stopping.restore_best", ConfigType::boolean, "Early stopping", "Restore best weights",
           "When early stopping ends the run, go back to the weights of its best validation: the run's "
           "model and last.safetensors are those."),
       &Config::early_stopping, &EarlyStoppingConfig::restore_best);

  {
    ConfigKey& k = add("precision", ConfigType::enumeration, "Precision", "Precision",
                       "fp32, or mixed precision computing in fp16 (with loss scaling) or bf16.");
    bind_names(
        k, kPrecisionNames, [](auto& c) -> auto& { return c.precision; });
  }

  bind(add("memory.checkpointing", ConfigType::boolean, "Memory", "Activation checkpointing",
           "Recompute activations in the backward pass instead of keeping them: less memory, more compute."),
       &Config::memory, &MemoryConfig::checkpointing);
  bind(add("memory.growth", ConfigType::boolean, "Memory", "Grow on demand",
           "Reserve device memory as it is needed rather than up front."),
       &Config::memory, &MemoryConfig::growth);
  // The upper bound keeps cap_mib * 2^20 bytes inside int64.
  bind(integer("memory.cap_mib", "Memory", "Memory cap (MiB)",
               "> 0 makes every device behave as if it had this much memory; 0: no cap.", 0,
               static_cast<double>(INT64_MAX >> 20)),
       &Config::memory, &MemoryConfig::cap_mib);
  bind(add("memory.auto_recover_oom", ConfigType::boolean, "Memory", "Recover from out-of-memory",
           "Try to continue after an out-of-memory error instead of stopping the run."),
       &Config::memory, &MemoryConfig::auto_recover_oom);

  {
    ConfigKey& k =
        add("devices", ConfigType::string_list, "Devices", "Devices",
            "cpu, cpu:N (CPU replicas, data-parallel on one CPU) or cuda:N; CPU and CUDA devices do not "
            "mix in one run.");
    k.non_empty = true;
    k.check = check_devices;
    k.get = [](const Config& c) { return json(device_names(c.devices)); };
    k.set = [](Config& c, const json& v) {
      c.devices.clear();
      for (const json& e : v) c.devices.push_back(*parse_device(e.get_ref<const std::string&>()));
    };
  }

  bind(add("cuda.tf32", ConfigType::boolean, "Devices", "TF32 on GPUs",
           "GPUs only: let fp32 convolutions use TF32 tensor cores (Ampere and newer): faster, with inputs "
           "rounded to 10-bit mantissas. No effect on CPUs or in mixed precision."),
       &Config::cuda, &CudaConfig::tf32);
  bind(add("cuda.deterministic", ConfigType::boolean, "Devices", "Deterministic GPU convolutions",
           "GPUs only: use only convolution algorithms cuDNN reports as deterministic, so that a run repeats "
           "bit for bit on the same GPU; false may pick faster ones. No effect on CPUs."),
       &Config::cuda, &CudaConfig::deterministic);
  bind(add("cuda.expandable_arena", ConfigType::boolean, "Devices", "Expandable GPU memory arena",
           "GPUs only: take device memory as one address range backed page by page (2 MiB) as the run "
           "grows, so that memory is not split between block sizes and the plan's reserved bytes are exact; "
           "false: one cudaMalloc per new block, for tools that follow only cudaMalloc. Used only where the "
           "driver supports virtual memory management. No effect on CPUs."),
       &Config::cuda, &CudaConfig::expandable_arena);
  {
    ConfigKey& k =
        add("cuda.communicator", ConfigType::enumeration, "Devices", "GPU communicator",
            "Several GPUs only: how replicas sum their gradients. auto: NCCL between distinct GPUs "
            "when it is installed, else the device communicator; nccl: NCCL or an error saying why "
            "not; device: the project's own sum, in rank order as CPU replicas add (through peer "
            "pointers, or the host without peer access). No effect on CPUs or one GPU.");
    k.choices = {"auto", "nccl", "device"};
    k.get = [](const Config& c) { return json(to_string(c.cuda.communicator)); };
    k.set = [](Config& c, const json& v) {
      c.cuda.communicator = *parse_communicator_choice(v.get<std::string>());
    };
  }

  {
    ConfigKey& k = add(
        "cuda.comm_dtype", ConfigType::enumeration, "Devices", "GPU gradient sums in",
        "Several GPUs summing through NCCL only: f32, or bf16 (the gradients cast to bf16, summed, cast "
        "back: half the traffic between GPUs, with 8 significant bits, as PyTorch DDP's bf16 compression "
        "hook). A run whose GPUs sum otherwise (the device communicator) refuses bf16; CPU replicas always "
        "sum in f32.");
    k.choices = {"f32", "bf16"};
    k.get = [](const Config& c) { return json(c.cuda.bf16_sums ? "bf16" : "f32"); };
    k.set = [](Config& c, const json& v) { c.cuda.bf16_sums = v.get<std::string>() == "bf16"; };
  }

  bind(integer("comm.bucket_mib", "Devices", "Gradient bucket (MiB)",
               "Several replicas only: gradients are summed across replicas in buckets of this many MiB as "
               "backward finishes them (the decoder's first), on the last micro-batch of a step, so that the "
               "sums overlap the rest of backward; 0: one sum of all gradients after backward. The sums "
               "are the same either way.",
               0, 1024),
       &Config::comm, &CommConfig::bucket_mib);

  {
    ConfigKey& k = add("checkpoint.dir", ConfigType::path, "Checkpoints", "Run folder",
                       "Where checkpoints and metrics.jsonl go; relative to the config file.");
    k.non_empty = true;
    bind(k, &Config::checkpoint, &CheckpointConfig::dir);
  }
  bind(integer("checkpoint.every_epochs", "Checkpoints", "Every N epochs",
               "Periodic checkpoint interval; 0 turns periodic checkpoints off (last.safetensors is still "
               "written).",
               0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::every_epochs);
  {
    ConfigKey& k =
        add("checkpoint.template", ConfigType::string, "Checkpoints", "File name template",
            "Placeholders {epoch}, {step}, {loss}, {val_loss}, {val_iou}, {val_dice}, {val_acc}, each "
            "with an optional {fmt} format spec such as {epoch:02d}, {val_loss:.4f} or {val_acc:.1%}.");
    k.non_empty = true;
    k.check = check_template;
    bind(k, &Config::checkpoint, &CheckpointConfig::filename_template);
  }
  bind(add("checkpoint.save_best_only", ConfigType::boolean, "Checkpoints", "Save best only",
           "Write a periodic checkpoint only when the monitored metric improves."),
       &Config::checkpoint, &CheckpointConfig::save_best_only);
  {
    ConfigKey& k = add("checkpoint.monitor", ConfigType::enumeration, "Checkpoints", "Monitor",
                       "The metric best.safetensors follows and save_best_only compares: losses improve "
                       "downwards, the others upwards.");
    k.choices = monitors;
    bind(k, &Config::checkpoint, &CheckpointConfig::monitor);
  }
  {
    ConfigKey& k =
        add("checkpoint.monitor_class", ConfigType::string, "Checkpoints", "Monitored class",
            "Which class val_iou and val_dice follow, for best.safetensors, early stopping and the "
            "plateau schedule alike: \"mean\" (the mean over the foreground classes) or a class's "
            "number, 0 being the background (a binary model's foreground is 1).");
    k.check = [](const json& v) -> std::optional<std::string> {
      const std::string text = v.get<std::string>();
      if (text == "mean" || monitor_class_index(text)) return std::nullopt;
      return "must be \"mean\" or a class number from 0 to 254, got " + show(v);
    };
    bind(k, &Config::checkpoint, &CheckpointConfig::monitor_class);
  }
  bind(integer("checkpoint.keep_last", "Checkpoints", "Keep last",
               "How many of the newest periodic checkpoints to keep.", 0, kMaxEpochs),
       &Config::checkpoint, &CheckpointConfig::keep_last);

  const Config defaults;
  for (ConfigKey& k : keys) k.default_value = k.get(defaults);
  return keys;
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = build_schema();
  return schema;
}

const ConfigKey* find_config_key(std::string_view path) {
  for (const ConfigKey& k : config_schema())
    if (k.path == path) return &k;
  return nullptr;
}

const std::vector<std::string>& config_detail::section_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ConfigKey& k : config_schema()) {
      const std::string s(section_of(k.path));
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }();
  return names;
}

bool config_detail::is_section(std::string_view name) {
  const auto& names = section_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The value at a dotted path, or nullptr when it or its section is missing (or the section is not an object).
const json* config_detail::lookup(const json& j, std::string_view path) {
  const auto dot = path.find('.');
  if (dot == std::string_view::npos) {
    const auto it = j.find(std::string(path));
    return it == j.end() ? nullptr : &*it;
  }
  const auto section = j.find(std::string(path.substr(0, dot)));
  if (section == j.end() || !section->is_object()) return nullptr;
  const auto it = section->find(std::string(path.substr(dot + 1)));
  return it == section->end() ? nullptr : &*it;
}

}  // namespace unet
