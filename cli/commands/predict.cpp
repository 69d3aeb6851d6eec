// `unet-train predict`: a folder of images through a checkpoint's model, a probability or mask PNG per image
// at its own size, or for a task-instances checkpoint its objects (a 16-bit label PNG and a CSV table per
// image); every image planned against the device's memory before it runs, and no output may replace an input
// or another output.
#include <sys/stat.h>
#include <cmath>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "cli/commands.h"
#include "cli/text.h"
#include "unet/backend/devices.h"
#include "unet/infer/instance_output.h"
#include "unet/infer/predictor.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

namespace unet::cli {
namespace {

enum class OutputKind { probability, mask, labels };

// A number from a flag's text: all of it, finite; ConfigError naming the flag and the text otherwise.
double number_flag(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v) ||
      std::isspace(static_cast<unsigned char>(text.front())))
    throw ConfigError(flag, "must be a number, got '" + text + "'");
  return v;
}

// --tile N or --tile HxW: whole numbers of pixels.
std::pair<std::int64_t, std::int64_t> tile_flag(const std::string& text) {
  const auto bad = [&] {
    return ConfigError("--tile", "must be N or HxW pixels, such as 256 or 256x512, got '" + text + "'");
  };
  const auto parse_side = [&](std::string_view digits) {
    if (digits.empty() || digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      throw bad();
    return static_cast<std::int64_t>(std::stoll(std::string(digits)));
  };
  const std::size_t x = text.find('x');
  if (x == std::string::npos) {
    const std::int64_t side = parse_side(text);
    return {side, side};
  }
  return {parse_side(std::string_view(text).substr(0, x)), parse_side(std::string_view(text).substr(x + 1))};
}

// predict's options from its flags, checked against the model; errors name the flag and its value.
PredictOptions predict_options(const Invocation& inv, const Config& config) {
  PredictOptions o;
  if (inv.mode) o.mode = predict_mode_from_string(*inv.mode, "--mode");
  if (inv.tile) std::tie(o.tile_height, o.tile_width) = tile_flag(*inv.tile);
  if (inv.overlap) o.overlap = number_flag("--overlap", *inv.overlap);
  if (inv.blend) {
    if (*inv.blend != "gaussian" && *inv.blend != "uniform")
      throw ConfigError("--blend", "must be one of gaussian, uniform, got '" + *inv.blend + "'");
    o.gaussian = *inv.blend == "gaussian";
  }
  if (inv.padding) o.padding = predict_padding_from_string(*inv.padding, "--padding");
  if (inv.tta) o.augmentation = predict_augmentation_from_string(*inv.tta, "--tta");
  o.batch = std::clamp<std::int64_t>(config.train.batch_size, 1, 4096);
  // Tiling flags mean nothing to a resize: refused rather than ignored.
  if (o.mode == PredictMode::resize || o.mode == PredictMode::whole)
    for (const auto& [flag, given] :
         {std::pair{"--tile", inv.tile.has_value()}, std::pair{"--overlap", inv.overlap.has_value()},
          std::pair{"--blend", inv.blend.has_value()}})
      if (given)
        throw ConfigError(flag, std::string("applies to tiles; --mode ") + to_string(o.mode) + " makes none");
  if (o.mode == PredictMode::resize && inv.padding)
    throw ConfigError("--padding", "--mode resize pads nothing (it resizes the image to data.image_size)");
  try {
    validate(o, config.model);
  } catch (const ConfigError& e) {
    throw ConfigError("--" + e.key(), e.message().substr(e.key().size() + 2));
  }
  return o;
}

std::string size_text(std::int64_t height, std::int64_t width) {
  return std::to_string(width) + "x" + std::to_string(height);
}

// The config keys predict reads: the device, the model inputs per forward pass, the size images are resized
// to (and tiles default to), the device's cap (what its memory plan is checked against), and the GPU's
// numerics. Any other --set would change nothing (predict computes in fp32 whatever precision says) or
// describe weights the checkpoint does not hold (model.*): refused, naming the key, rather than accepted and
// ignored.
void refuse_unread_by_predict(std::string_view assignment) {
  static constexpr std::string_view kRead[] = {
      "devices",   "train.batch_size",   "data.image_size",      "memory.cap_mib",
      "cuda.tf32", "cuda.deterministic", "cuda.expandable_arena"};
  const std::string key = override_key(assignment);
  if (std::find(std::begin(kRead), std::end(kRead), key) != std::end(kRead)) return;
  const std::string why =
      key.starts_with("model.")
          ? "predict runs the checkpoint's model, whose weights it holds, and cannot change it"
          : "does not affect predict (it computes in fp32 on the first device)";
  throw ConfigError(key, why +
                             "; predict takes --set devices, train.batch_size, data.image_size, "
                             "memory.cap_mib and cuda.tf32/deterministic/expandable_arena");
}

}  // namespace

int predict(const Invocation& inv) {
  if (!inv.checkpoint) throw ConfigError("--checkpoint", "predict needs --checkpoint CKPT, the model to use");
  if (!inv.input) throw ConfigError("--input", "predict needs --input DIR, a folder of images");
  if (!inv.output) throw ConfigError("--output", "predict needs --output DIR, where the images go");
  // The kind asked for; without --output-kind, labels for a task-instances checkpoint (its objects are what
  // it was trained to find), probability maps for any other, decided once the checkpoint is read.
  std::optional<OutputKind> asked;
  if (inv.output_kind) {
    if (*inv.output_kind == "probability")
      asked = OutputKind::probability;
    else if (*inv.output_kind == "mask")
      asked = OutputKind::mask;
    else if (*inv.output_kind == "labels")
      asked = OutputKind::labels;
    else
      throw ConfigError("--output-kind",
                        "must be one of probability, mask, labels, got '" + *inv.output_kind + "'");
  }
  double threshold = 0.5;
  if (inv.threshold) {
    threshold = number_flag("--threshold", *inv.threshold);
    if (asked != OutputKind::mask)
      throw ConfigError("--threshold",
                        "applies to --output-kind mask; probability images are not thresholded, and label "
                        "images take the checkpoint's instances.seed_threshold and foreground_threshold");
    if (!(threshold >= 0 && threshold <= 1))
      throw ConfigError("--threshold", "must be in 0..1, got " + *inv.threshold);
  }
  LabelFormat label_format = LabelFormat::png;
  if (inv.labels_format) {
    label_format = label_format_from_string(*inv.labels_format, "--labels-format");
    if (asked && asked != OutputKind::labels)
      throw ConfigError("--labels-format",
                        "applies to --output-kind labels; probability and mask images are "
                        "8-bit PNGs");
  }
  const std::filesystem::path input = *inv.input, output = *inv.output;
  std::error_code ec;
  if (!std::filesystem::is_directory(input, ec))
    throw ConfigError("--input", input.string() + " is not a folder");
  // The inputs' folder (by any path that leads to it) never takes the outputs: they would replace or mingle
  // with the user's images.
  if (std::filesystem::equivalent(input, output, ec))
    throw ConfigError("--output", output.string() + " is the input folder " + input.string() +
                                      ": the outputs would replace the images; choose another folder");
  Checkpoint checkpoint = load_checkpoint(*inv.checkpoint);
  // The device: cpu:0 unless --set devices=[...] names one (its first is used).
  DeviceId device;
  if (!inv.overrides.empty()) {
    nlohmann::json doc = config_to_json(checkpoint.config);
    for (const std::string& assignment : inv.overrides) {
      apply_override(doc, assignment);  // an unknown key or a bad value is refused as in training
      refuse_unread_by_predict(assignment);
    }
    checkpoint.config = config_from_json(doc, checkpoint.config.base_dir);
    device = checkpoint.config.devices.front();
  }
  const bool instances = checkpoint.config.task == ModelTask::instances;
  const OutputKind kind = asked.value_or(instances ? OutputKind::labels : OutputKind::probability);
  if (kind == OutputKind::labels && !instances)
    throw ConfigError("--output-kind", "labels are the objects of a task \"instances\" model; " +
                                           *inv.checkpoint + " was trained with task \"" +
                                           to_string(checkpoint.config.task) +
                                           "\": give --output-kind probability or mask");
  if (inv.labels_format && kind != OutputKind::labels)
    throw ConfigError("--labels-format",
                      "applies to label images, the output of a task \"instances\" model; " +
                          *inv.checkpoint + " was trained with task \"" + to_string(checkpoint.config.task) +
                          "\"");
  const PredictOptions options = predict_options(inv, checkpoint.config);
  const std::int64_t channels = checkpoint.config.model.classes;
  if (inv.threshold && channels > 1)
    throw ConfigError("--threshold", "the model has " + std::to_string(channels) +
                                         " classes: its mask is the most probable class, with no threshold");

  std::vector<std::filesystem::path> files;
  // Folders are not inputs; anything else is, so that a FIFO, a device or a broken link is named and skipped
  // below (read_image refuses it without reading or waiting on it) instead of vanishing silently.
  for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
    std::error_code file_kind;
    if (entry.path().filename().string().front() != '.' && !entry.is_directory(file_kind))
      files.push_back(entry.path());
  }
  if (ec) throw Error(ErrorKind::io, "cannot list " + input.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty())
    throw Error(ErrorKind::data, input.string() + ": no image files in the folder, nothing to predict");

  // The channels written: binary models give the foreground's probability; multi-class ones a map per class
  // but the background; a mask is one image (labels: none, their outputs are the label image and the CSV).
  const std::int64_t first_channel = kind != OutputKind::probability || channels == 1 ? 0 : 1;
  const std::int64_t end_channel = kind == OutputKind::probability ? channels : 1;
  // Output names: the input's stem, or its whole name when two inputs share a stem (a.png and a.jpg); then
  // _class<k> (a probability image of a multi-class model), _mask, or _labels.png (.tif) and _objects.csv.
  std::map<std::string, int> stems;
  for (const auto& f : files) ++stems[f.stem().string()];
  auto outputs_of = [&](const std::filesystem::path& f) {
    const std::string base = stems[f.stem().string()] > 1 ? f.filename().string() : f.stem().string();
    std::vector<std::filesystem::path> names;
    if (kind == OutputKind::labels) {
      names = {output / (base + label_file_suffix(label_format)), output / (base + "_objects.csv")};
    } else if (kind == OutputKind::mask) {
      names = {output / (base + "_mask.png")};
    } else {
      for (std::int64_t k = first_channel; k < end_channel; ++k)
        names.push_back(output /
                        (channels > 1 ? base + "_class" + std::to_string(k) + ".png" : base + ".png"));
    }
    return names;
  };
  // No output may replace an input (whatever path, link or hard link leads to it: inputs are known by device
  // and inode, one stat each, so that thousands of inputs cost thousands of checks, not millions), nor
  // another output (x.png and x.jpg are written as x.png.png and x.jpg.png, which an input x.png.png would
  // also be), nor an existing file without --overwrite.
  std::map<std::pair<dev_t, ino_t>, std::size_t> input_at;
  for (std::size_t i = 0; i < files.size(); ++i) {
    struct stat st {};
    if (::stat(files[i].c_str(), &st) == 0) input_at.emplace(std::pair{st.st_dev, st.st_ino}, i);
  }
  std::map<std::filesystem::path, std::size_t> written_by;
  std::vector<std::string> existing;
  for (std::size_t i = 0; i < files.size(); ++i)
    for (const std::filesystem::path& target : outputs_of(files[i])) {
      if (const auto [at, fresh] = written_by.emplace(target, i); !fresh)
        throw Error(ErrorKind::data,
                    input.string() + ": " + files[at->second].filename().string() + " and " +
                        files[i].filename().string() + " would both be written as " +
                        target.filename().string(),
                    {}, "rename one of them, or predict them into separate --output folders");
      struct stat st {};
      if (::stat(target.c_str(), &st) == 0)
        if (const auto in = input_at.find({st.st_dev, st.st_ino}); in != input_at.end())
          throw ConfigError("--output", output.string() + ": " + target.filename().string() +
                                            " would replace the input " + files[in->second].string() +
                                            "; choose an --output folder that holds no input");
      std::error_code exists_error;
      if (std::filesystem::exists(std::filesystem::symlink_status(target, exists_error)))
        existing.push_back(target.string());
    }
  if (!existing.empty() && !inv.overwrite)
    throw ConfigError("--output", existing.front() + " exists" +
                                      (existing.size() > 1 ? " (and " + std::to_string(existing.size() - 1) +
                                                                 " more of the outputs)"
                                                           : "") +
                                      "; give --overwrite to replace, or choose another --output folder");
  std::filesystem::create_directories(output, ec);
  if (ec) throw Error(ErrorKind::io, "cannot create " + output.string() + ": " + ec.message());

  Predictor predictor(checkpoint, device);
  const DataConfig& data = checkpoint.config.data;
  // What is kept of an image until its last row: its 8-bit outputs (a byte per image written per pixel), or
  // for labels the two maps the objects are found in and the finding's working images. The float
  // probabilities are never held whole: they come a row at a time (Predictor::predict_rows).
  const std::int64_t output_bytes_per_pixel =
      kind == OutputKind::labels ? InstanceRows::bytes_per_pixel : end_channel - first_channel;
  // An image that does not fit: the message names it and the figures; the flags that would make it fit
  // follow, each tried against the plan (a tile halved until it fits, a smaller batch, masks).
  auto refusal = [&](const std::string& name, const ModelImage& image, const PredictMemory& memory) {
    std::vector<std::string> fixes;
    auto fits = [&](const PredictOptions& o, std::int64_t bytes_per_pixel) {
      return predictor.memory_for(image.height, image.width, o, bytes_per_pixel).fits();
    };
    const std::int64_t multiple = checkpoint.config.model.size_multiple();
    if (memory.mode == PredictMode::tiled || memory.mode == PredictMode::whole) {
      PredictOptions smaller = options;
      smaller.mode = PredictMode::tiled;
      std::int64_t th = memory.input_height, tw = memory.input_width;
      while (th > multiple || tw > multiple) {
        th = std::max(multiple, th / 2 / multiple * multiple);
        tw = std::max(multiple, tw / 2 / multiple * multiple);
        smaller.tile_height = th;
        smaller.tile_width = tw;
        if (fits(smaller, output_bytes_per_pixel)) {
          fixes.push_back((memory.mode == PredictMode::whole ? "--mode tiled --tile " : "--tile ") +
                          (th == tw ? std::to_string(th) : std::to_string(th) + "x" + std::to_string(tw)));
          break;
        }
      }
    }
    for (std::int64_t batch = memory.batch / 2; batch >= 1; batch /= 2) {
      PredictOptions fewer = options;
      fewer.batch = batch;
      if (fits(fewer, output_bytes_per_pixel)) {
        fixes.push_back("--set train.batch_size=" + std::to_string(batch));
        break;
      }
    }
    if (kind == OutputKind::probability && output_bytes_per_pixel > 1 && fits(options, 1))
      fixes.push_back("--output-kind mask");
    std::string text = memory.shortfall(name);
    if (fixes.empty()) {
      text +=
          "; a smaller --tile, a smaller --set train.batch_size or --output-kind mask alone would not "
          "make it fit: free memory, or predict it on a larger device";
    } else {
      text += "; it fits with ";
      for (std::size_t f = 0; f < fixes.size(); ++f)
        text += (f == 0 ? "" : f + 1 == fixes.size() ? " or " : ", ") + fixes[f];
    }
    return text;
  };

  const auto chunk = static_cast<std::size_t>(options.batch);
  std::optional<InstanceRows> instance_rows;  // labels: each image's objects from its rows
  if (kind == OutputKind::labels) instance_rows.emplace(checkpoint.config.instances);
  const InputRecipe recipe = input_recipe(checkpoint.config);
  int written = 0, failed = 0, unwritten = 0;
  for (std::size_t first = 0; first < files.size(); first += chunk) {
    std::vector<ModelImage> images;
    std::vector<std::string> names;
    std::vector<std::size_t> sources;  // indices into files
    for (std::size_t i = first; i < std::min(files.size(), first + chunk); ++i) {
      try {
        // The model's input (its channels, its data.normalize over the whole image); one the model cannot
        // take is skipped here, not left to fail the whole batch.
        ModelImage image = read_model_image(files[i], recipe);
        // Nor one that would not fit in memory: planned before it runs, refused with what would fit.
        if (const PredictMemory memory =
                predictor.memory_for(image.height, image.width, options, output_bytes_per_pixel);
            !memory.fits())
          throw Error(ErrorKind::out_of_memory, refusal(files[i].string(), image, memory));
        images.push_back(std::move(image));
        names.push_back(files[i].string());
        sources.push_back(i);
      } catch (const Error& e) {
        std::fprintf(stderr, "unet-train: skipped %s\n", printable(e.what()).c_str());
        ++failed;
      }
    }
    if (images.empty()) continue;
    PredictControl control;
    std::size_t finished = 0;                  // of `images`, the first ones
    std::optional<std::size_t> objects_found;  // labels: the objects of the image just finished
    control.on_image = [&](const PredictProgress& progress) {
      finished = progress.image + 1;
      const ModelImage& image = images[progress.image];
      std::string how;
      if (progress.mode == PredictMode::resize)
        how = "resized to " + size_text(data.image_height, data.image_width);
      else if (progress.mode == PredictMode::whole)
        how = "whole";
      else
        how = "in " + std::to_string(progress.tiles) + (progress.tiles == 1 ? " tile" : " tiles");
      if (options.augmentation == PredictAugmentation::flips) how += ", 4 flips each";
      if (objects_found) {
        how += ", " + std::to_string(*objects_found) + (*objects_found == 1 ? " object" : " objects");
        objects_found.reset();
      }
      const std::size_t index = sources[progress.image];
      std::fprintf(stderr, "[%zu/%zu] %s %s %s\n", index + 1, files.size(),
                   printable(files[index].filename().string()).c_str(),
                   size_text(image.height, image.width).c_str(), how.c_str());
    };
    // Each image's 8-bit outputs, filled a row at a time and written after its last row.
    std::vector<Image> outputs;
    PredictionSink sink;
    sink.bytes_per_pixel = output_bytes_per_pixel;
    sink.row = [&](const PredictionRow& row) {
      if (kind == OutputKind::labels) {
        std::optional<InstanceOutput> found = instance_rows->add(row);
        if (!found) return;
        objects_found = found->objects.size();
        const std::filesystem::path& source = files[sources[row.image]];
        const std::vector<std::filesystem::path> targets = outputs_of(source);
        try {
          // The table's ids are the label image's: without the image, no table.
          write_label_image(targets[0], found->labels, source.string(), label_format);
          write_objects_csv(targets[1], found->objects);
          ++written;
        } catch (const Error& e) {
          std::fprintf(stderr, "unet-train: not written: %s\n", printable(e.what()).c_str());
          ++unwritten;
        }
        return;
      }
      if (row.row == 0)
        outputs.assign(static_cast<std::size_t>(end_channel - first_channel),
                       Image{row.height, row.width, 1,
                             std::vector<std::uint8_t>(static_cast<std::size_t>(row.height * row.width))});
      for (std::int64_t k = first_channel; k < end_channel; ++k) {
        Image& out = outputs[static_cast<std::size_t>(k - first_channel)];
        const std::span<std::uint8_t> line(out.pixels.data() + row.row * row.width,
                                           static_cast<std::size_t>(row.width));
        if (kind == OutputKind::mask)
          mask_row(row, threshold, line);
        else
          probability_row(row, k, line);
      }
      if (row.row + 1 < row.height) return;
      const std::vector<std::filesystem::path> targets = outputs_of(files[sources[row.image]]);
      for (std::int64_t k = first_channel; k < end_channel; ++k) {
        try {
          write_png(targets[static_cast<std::size_t>(k - first_channel)],
                    outputs[static_cast<std::size_t>(k - first_channel)]);
          ++written;
        } catch (const Error& e) {
          std::fprintf(stderr, "unet-train: not written: %s\n", printable(e.what()).c_str());
          ++unwritten;
        }
      }
      outputs.clear();
    };
    try {
      predictor.predict_rows(images, names, options, sink, control);
    } catch (const Error& e) {
      // Each image was planned as it was read; the host's memory can still shrink before or while they run
      // (another process), and an allocation then fails: the images not yet written are named as skipped.
      if (e.kind() != ErrorKind::out_of_memory) throw;
      const std::size_t left = images.size() - finished;
      std::fprintf(stderr, "unet-train: skipped %zu image%s from %s on: %s\n", left, left == 1 ? "" : "s",
                   printable(files[sources[finished]].filename().string()).c_str(),
                   printable(e.what()).c_str());
      failed += static_cast<int>(left);
    }
  }
  const char* what = kind == OutputKind::mask ? "mask" : kind == OutputKind::labels ? "label" : "probability";
  std::printf("wrote %d %s image%s", written, what, written == 1 ? "" : "s");
  if (kind == OutputKind::labels) std::printf(" and %d object table%s", written, written == 1 ? "" : "s");
  std::printf(" to %s", printable(output.string()).c_str());
  if (failed) std::printf("; %d file%s skipped", failed, failed == 1 ? "" : "s");
  if (unwritten) std::printf("; %d image%s not written", unwritten, unwritten == 1 ? "" : "s");
  std::printf("\n");
  return failed || unwritten ? 1 : 0;
}

}  // namespace unet::cli
