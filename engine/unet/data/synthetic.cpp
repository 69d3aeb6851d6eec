// How a synthetic cells image is drawn. Two random streams per sample, both fixed by (seed, index): one lays
// out the scene (illumination, colours, cells), the other draws the pixel noise, so the cells of a sample can
// be listed without rendering it. Painting visits each cell's bounding box only; the noise goes on last.
#include "unet/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "unet/core/error.h"
#include "unet/core/rng.h"
#include "unet/data/instance_target.h"

namespace unet {

namespace {

constexpr std::int64_t kMinSide = 8;
constexpr std::int64_t kMaxSide = 16384;
constexpr std::int64_t kMaxChannels = 64;
constexpr int kMaxClasses = 255;
constexpr int kMinCells = 3;
constexpr int kMaxCells = 30;

// Keeps these streams apart from others drawn from the same user seed (weights, shuffling).
constexpr std::uint64_t kSyntheticSalt = 0x73796E7468636C6CULL;  // "synthcll"

std::uint64_t scene_seed(std::uint64_t seed) {
  std::uint64_t state = seed ^ kSyntheticSalt;
  return splitmix64(state);
}

double lerp(double from, double to, double t) {
  return from + (to - from) * t;
}

// Position of a point in the ellipse's own frame, in units of its semi-axes: inside iff u^2 + v^2 <= 1.
// Painting and SyntheticCell::contains() both go through here, so they agree on every pixel.
struct EllipseFrame {
  double center_y, center_x, cos_angle, sin_angle, inv_major, inv_minor;

  explicit EllipseFrame(const SyntheticCell& cell)
      : center_y(cell.center_y),
        center_x(cell.center_x),
        cos_angle(std::cos(cell.angle)),
        sin_angle(std::sin(cell.angle)),
        inv_major(1.0 / cell.semi_major),
        inv_minor(1.0 / cell.semi_minor) {}

  void locate(double y, double x, double& u, double& v) const {
    const double dy = y - center_y, dx = x - center_x;
    u = (dx * cos_angle + dy * sin_angle) * inv_major;
    v = (dy * cos_angle - dx * sin_angle) * inv_minor;
  }
};

// A cell and how its inside looks: a brighter core and a mottled texture.
struct PaintedCell {
  SyntheticCell shape;
  double core = 0;  // intensity falls by this fraction from the centre to the rim
  double mottle = 0;
  double mottle_freq_u = 0, mottle_freq_v = 0, mottle_phase_u = 0, mottle_phase_v = 0;
};

struct Scene {
  // Background grey level at pixel centre (y, x), d its distance from the hotspot:
  //   base + gradient_y * (y/H - 1/2) + gradient_x * (x/W - 1/2) + hotspot * max(0, 1 - d^2 / radius^2)
  double background_base = 0, gradient_y = 0, gradient_x = 0;
  double hotspot_y = 0, hotspot_x = 0, hotspot = 0, hotspot_inv_radius2 = 0;
  double noise_sigma = 0;  // grey levels at black; grows with brightness
  // How much of the background intensity, and of a cell's signal per label, each channel shows.
  std::vector<float> background_weight;  // [channels]
  std::vector<float> cell_weight;        // [labels + 1, channels]
  std::vector<PaintedCell> cells;
};

// Per-channel weights for channel counts without a colour meaning: each channel a different mix.
float generic_background_weight(std::int64_t k) {
  return static_cast<float>(0.75 + 0.25 * std::cos(1.3 * k));
}
float generic_cell_weight(std::int64_t k) {
  return static_cast<float>(0.6 + 0.4 * std::cos(2.4 * k));
}

// The values cells write to the mask: with instances every cell is of one kind (the mask becomes the target).
int cell_labels(const SyntheticOptions& options) {
  return options.instances ? 1 : std::max(1, options.classes - 1);
}

// The layout of the cells (draw_scene): clusters of 1..4 cells, their sizes drawn with these odds, so that a
// cluster has 0.6 x 1 + 0.2 x 2 + 0.12 x 3 + 0.08 x 4 = 1.68 cells on average and 64 % of the cells are in
// one of two or more; cells placed apart that touch one by chance raise the share that touches to about 75 %
// (synthetic.h).
int draw_cluster_size(Rng& rng) {
  const double u = rng.uniform();
  return u < 0.6 ? 1 : u < 0.8 ? 2 : u < 0.92 ? 3 : 4;
}

// Distance from the centre of `cell` to its rim in the direction `direction` (radians from +x towards +y).
double rim_distance(const SyntheticCell& cell, double direction) {
  const double along = std::cos(direction - cell.angle) / cell.semi_major;
  const double across = std::sin(direction - cell.angle) / cell.semi_minor;
  return 1.0 / std::sqrt(along * along + across * across);
}

bool inside_image(const SyntheticOptions& options, double y, double x) {
  return y >= 0 && y < static_cast<double>(options.height) && x >= 0 &&
         x < static_cast<double>(options.width);
}

// Centres anywhere in the image (so cells near the edge are cut); a few tries to keep the centre away from
// the cells so far, though a cell may still touch or overlap one by chance.
void place_apart(const Scene& scene, const SyntheticOptions& options, Rng& rng, double radius,
                 SyntheticCell& cell) {
  for (int attempt = 0; attempt < 6; ++attempt) {
    cell.center_y = rng.uniform(0.0, static_cast<double>(options.height));
    cell.center_x = rng.uniform(0.0, static_cast<double>(options.width));
    const bool crowded = std::any_of(scene.cells.begin(), scene.cells.end(), [&](const PaintedCell& other) {
      const double dy = other.shape.center_y - cell.center_y, dx = other.shape.center_x - cell.center_x;
      const double apart = 0.7 * (radius + std::sqrt(other.shape.semi_major * other.shape.semi_minor));
      return dy * dy + dx * dx < apart * apart;
    });
    if (!crowded) return;
  }
}

// Places `cell` against a cell of `cluster`, drawn at random, in a random direction: the centres lie
// 0.75..0.97 of the sum of the two rims' distances along that direction apart, so that along the line between
// the centres the ellipses overlap by 3..25 % of it and the later cell covers that part of the earlier. The
// place is refused when the centre leaves the image, falls inside an earlier cell, or the cell would cover an
// earlier cell's centre (so that no cell placed in a cluster hides an earlier cell's middle). False when a
// few tries find no place.
bool attach_to_cluster(const Scene& scene, const std::vector<std::size_t>& cluster,
                       const SyntheticOptions& options, Rng& rng, SyntheticCell& cell) {
  constexpr double pi = std::numbers::pi;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const SyntheticCell& anchor = scene.cells[cluster[rng.below(cluster.size())]].shape;
    const double direction = rng.uniform(0.0, 2.0 * pi);
    const double distance =
        rng.uniform(0.75, 0.97) * (rim_distance(anchor, direction) + rim_distance(cell, direction + pi));
    cell.center_y = anchor.center_y + distance * std::sin(direction);
    cell.center_x = anchor.center_x + distance * std::cos(direction);
    if (!inside_image(options, cell.center_y, cell.center_x)) continue;
    const bool covers = std::any_of(scene.cells.begin(), scene.cells.end(), [&](const PaintedCell& other) {
      return other.shape.contains(cell.center_y, cell.center_x) ||
             cell.contains(other.shape.center_y, other.shape.center_x);
    });
    if (!covers) return true;
  }
  return false;
}

Scene draw_scene(const SyntheticOptions& options, std::size_t index) {
  Rng rng(scene_seed(options.seed), 2 * static_cast<std::uint64_t>(index));
  const double height = static_cast<double>(options.height), width = static_cast<double>(options.width);
  const double side = std::sqrt(height * width);
  const double pi = std::numbers::pi;
  Scene scene;

  // Uneven illumination: a tilt and a broad bright patch over a dark base.
  scene.background_base = rng.uniform(10.0, 30.0);
  const double tilt = rng.uniform(0.0, 45.0), tilt_direction = rng.uniform(0.0, 2.0 * pi);
  scene.gradient_y = tilt * std::sin(tilt_direction);
  scene.gradient_x = tilt * std::cos(tilt_direction);
  scene.hotspot_y = rng.uniform(0.0, height);
  scene.hotspot_x = rng.uniform(0.0, width);
  scene.hotspot = rng.uniform(0.0, 40.0);
  const double hotspot_radius = side * rng.uniform(0.4, 0.9);
  scene.hotspot_inv_radius2 = 1.0 / (hotspot_radius * hotspot_radius);
  scene.noise_sigma = rng.uniform(9.0, 18.0);

  // Colour: a stain hue for the cells against a greyish background tint (RGB); other channel counts get fixed
  // mixes of the same intensity.
  const auto channels = options.channels;
  const int labels = cell_labels(options);
  const bool rgb = channels == 3 || channels == 4;
  const double stain_red = rng.uniform(0.55, 0.85), stain_green = rng.uniform(0.25, 0.45);
  const double tint_red = rng.uniform(0.7, 0.9), tint_green = rng.uniform(0.75, 0.95);
  scene.background_weight.resize(static_cast<std::size_t>(channels));
  scene.cell_weight.assign(static_cast<std::size_t>((labels + 1) * channels), 0.0f);
  for (std::int64_t k = 0; k < channels; ++k) {
    scene.background_weight[k] = rgb ? static_cast<float>(k == 0   ? tint_red
                                                          : k == 1 ? tint_green
                                                                   : 1.0)
                                     : generic_background_weight(k);
  }
  // A cell's kind t in [0, 1] runs from "big, round, bright" (0) to "small, elongated, dimmer" (1). With
  // several cell classes the class fixes t, and in colour it also shifts the hue; with one, t varies from
  // cell to cell.
  const auto kind_of_label = [labels](int label) {
    return labels > 1 ? (label - 1) / double(labels - 1) : 0.5;
  };
  for (int label = 1; label <= labels; ++label) {
    const double red =
        std::clamp(stain_red + (labels > 1 ? 0.3 * (0.5 - kind_of_label(label)) : 0.0), 0.2, 1.0);
    float* row = scene.cell_weight.data() + static_cast<std::size_t>(label * channels);
    for (std::int64_t k = 0; k < channels; ++k) {
      row[k] = rgb ? static_cast<float>(k == 0 ? red : k == 1 ? stain_green : 1.0) : generic_cell_weight(k);
    }
  }

  // Cells: one typical radius per image (a magnification), the count from a target coverage.
  // Radii are 2..9 % of the side, but at least a pixel and a half so that tiny images still show cells.
  const double min_radius = std::max(0.02 * side, 1.5), max_radius = std::max(0.09 * side, 2.5);
  const double typical_radius = std::clamp(side * rng.uniform(0.035, 0.065), min_radius, max_radius);
  const double coverage = rng.uniform(0.08, 0.35);
  const int count = static_cast<int>(std::clamp<double>(
      std::round(coverage * height * width / (pi * typical_radius * typical_radius)), kMinCells, kMaxCells));
  scene.cells.reserve(static_cast<std::size_t>(count));
  std::vector<std::size_t> cluster;  // the current cluster's cells (indices into scene.cells)
  int cluster_left = 0;              // cells still to join it
  for (int i = 0; i < count; ++i) {
    PaintedCell cell;
    int label = 1;
    double kind = 0;
    if (labels > 1) {
      label = 1 + static_cast<int>(rng.below(static_cast<std::uint64_t>(labels)));
      kind = kind_of_label(label);
    } else {
      const double u = rng.uniform();
      kind = u * u;  // mostly round and bright, like most nuclei
    }
    // Radius of the circle of equal area; the semi-axes stretch it by the aspect ratio.
    const double radius =
        std::clamp(typical_radius * lerp(1.2, 0.75, kind) * rng.uniform(0.8, 1.2), min_radius, max_radius);
    const double aspect = lerp(1.0, 2.2, kind) * rng.uniform(1.0, 1.3);
    cell.shape.semi_major = radius * std::sqrt(aspect);
    cell.shape.semi_minor = radius / std::sqrt(aspect);
    cell.shape.angle = rng.uniform(0.0, pi);
    cell.shape.label = static_cast<std::uint8_t>(label);
    const bool dim = rng.uniform() < 0.15;
    cell.shape.brightness =
        dim ? rng.uniform(22.0, 40.0) : rng.uniform(lerp(80.0, 50.0, kind), lerp(180.0, 110.0, kind));

    // A cluster's first cell lies apart; the next ones of the cluster lean on it and on each other. A cell
    // that finds no place in its cluster lies apart and starts a cluster of its own.
    const bool attached = cluster_left > 0 && attach_to_cluster(scene, cluster, options, rng, cell.shape);
    if (attached) {
      --cluster_left;
    } else {
      place_apart(scene, options, rng, radius, cell.shape);
      cluster.clear();
      cluster_left = draw_cluster_size(rng) - 1;
    }
    cluster.push_back(scene.cells.size());

    cell.core = rng.uniform(0.25, 0.5);
    cell.mottle = rng.uniform(0.06, 0.2);
    cell.mottle_freq_u = rng.uniform(2.5, 6.0);
    cell.mottle_freq_v = rng.uniform(2.5, 6.0);
    cell.mottle_phase_u = rng.uniform(0.0, 2.0 * pi);
    cell.mottle_phase_v = rng.uniform(0.0, 2.0 * pi);
    scene.cells.push_back(cell);
  }
  return scene;
}

// Paints every cell into `signal` (grey levels above the background) and `owner` (the painting cell's index
// + 1, 0 for the background); a later cell overwrites.
void paint_cells(const Scene& scene, std::int64_t height, std::int64_t width, std::vector<float>& signal,
                 std::vector<ObjectId>& owner) {
  for (std::size_t index = 0; index < scene.cells.size(); ++index) {
    const PaintedCell& cell = scene.cells[index];
    const SyntheticCell& shape = cell.shape;
    const EllipseFrame frame(shape);
    // Half extents of the ellipse's axis-aligned bounding box.
    const double a = shape.semi_major, b = shape.semi_minor;
    const double c = frame.cos_angle, s = frame.sin_angle;
    const double extent_x = std::sqrt(a * a * c * c + b * b * s * s);
    const double extent_y = std::sqrt(a * a * s * s + b * b * c * c);
    // Pixel p has its centre at p + 0.5; one pixel of margin, the inside-test decides.
    const auto first_y =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(shape.center_y - extent_y)) - 1);
    const auto last_y =
        std::min<std::int64_t>(height - 1, static_cast<std::int64_t>(std::ceil(shape.center_y + extent_y)));
    const auto first_x =
        std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(shape.center_x - extent_x)) - 1);
    const auto last_x =
        std::min<std::int64_t>(width - 1, static_cast<std::int64_t>(std::ceil(shape.center_x + extent_x)));
    for (std::int64_t y = first_y; y <= last_y; ++y) {
      for (std::int64_t x = first_x; x <= last_x; ++x) {
        double u = 0, v = 0;
        frame.locate(static_cast<double>(y) + 0.5, static_cast<double>(x) + 0.5, u, v);
        const double rho2 = u * u + v * v;
        if (rho2 > 1.0) continue;
        const double texture = 1.0 + cell.mottle * std::sin(cell.mottle_freq_u * u + cell.mottle_phase_u) *
                                         std::sin(cell.mottle_freq_v * v + cell.mottle_phase_v);
        const auto p = static_cast<std::size_t>(y * width + x);
        signal[p] = static_cast<float>(shape.brightness * (1.0 - cell.core * rho2) * texture);
        owner[p] = static_cast<ObjectId>(index + 1);
      }
    }
  }
}

// The owners as instance ids: the cells that own a pixel numbered 1..n in painting order.
void number_visible_cells(std::size_t cells, std::vector<ObjectId>& owner) {
  std::vector<ObjectId> id_of(cells + 1, 0);  // by owner; the background (0) stays 0
  for (const ObjectId o : owner) id_of[o] = 1;
  id_of[0] = 0;
  ObjectId next = 0;
  for (std::size_t o = 1; o <= cells; ++o) id_of[o] = id_of[o] != 0 ? ++next : 0;
  for (ObjectId& o : owner) o = id_of[o];
}

// A standard normal, near enough for pixel noise and much cheaper than Box-Muller: the sum of four uniforms
// from one 64-bit draw (Irwin-Hall), rescaled to unit variance.
double pixel_noise(Rng& rng) {
  const std::uint64_t bits = rng.next_u64();
  const std::uint64_t sum =
      (bits & 0xFFFF) + ((bits >> 16) & 0xFFFF) + ((bits >> 32) & 0xFFFF) + (bits >> 48);
  // Each part is uniform on [0, 1) after (part + 0.5) / 65536; their sum has mean 2 and variance 1/3.
  return ((static_cast<double>(sum) + 2.0) / 65536.0 - 2.0) * std::numbers::sqrt3;
}

}  // namespace

void validate(const SyntheticOptions& options) {
  const auto fail = [](const std::string& what) {
    throw Error(ErrorKind::config, "synthetic dataset: " + what, {},
                "count >= 1, height and width " + std::to_string(kMinSide) + ".." + std::to_string(kMaxSide) +
                    ", channels 1.." + std::to_string(kMaxChannels) + ", classes 1.." +
                    std::to_string(kMaxClasses));
  };
  if (options.count < 1) fail("count must be at least 1, got 0");
  if (options.height < kMinSide || options.height > kMaxSide)
    fail("height must be " + std::to_string(kMinSide) + ".." + std::to_string(kMaxSide) + ", got " +
         std::to_string(options.height));
  if (options.width < kMinSide || options.width > kMaxSide)
    fail("width must be " + std::to_string(kMinSide) + ".." + std::to_string(kMaxSide) + ", got " +
         std::to_string(options.width));
  if (options.channels < 1 || options.channels > kMaxChannels)
    fail("channels must be 1.." + std::to_string(kMaxChannels) + ", got " + std::to_string(options.channels));
  if (options.classes < 1 || options.classes > kMaxClasses)
    fail("classes must be 1.." + std::to_string(kMaxClasses) + ", got " + std::to_string(options.classes));
  if (options.instances) {
    const bool boundary = options.instances->target == InstanceTarget::boundary;
    const int wanted = boundary ? 3 : 1;
    if (options.classes != wanted)
      fail("classes must be " + std::to_string(wanted) + " with instances target " +
           to_string(options.instances->target) + ", got " + std::to_string(options.classes));
  }
}

bool SyntheticCell::contains(double y, double x) const {
  double u = 0, v = 0;
  EllipseFrame(*this).locate(y, x, u, v);
  return u * u + v * v <= 1.0;
}

SyntheticCells::SyntheticCells(const SyntheticOptions& options) : options_(options) {
  validate(options_);
}

void SyntheticCells::check_index(std::size_t index) const {
  if (index >= options_.count)
    throw Error(ErrorKind::usage, "synthetic cells: index " + std::to_string(index) + " out of range (" +
                                      std::to_string(options_.count) + " images)");
}

std::vector<SyntheticCell> SyntheticCells::cells(std::size_t index) const {
  check_index(index);
  const Scene scene = draw_scene(options_, index);
  std::vector<SyntheticCell> shapes;
  shapes.reserve(scene.cells.size());
  for (const PaintedCell& cell : scene.cells) shapes.push_back(cell.shape);
  return shapes;
}

Sample SyntheticCells::get(std::size_t index) const {
  check_index(index);
  const std::int64_t height = options_.height, width = options_.width, channels = options_.channels;
  const auto pixels = static_cast<std::size_t>(height * width);
  const Scene scene = draw_scene(options_, index);

  Sample sample;
  sample.height = height;
  sample.width = width;
  sample.channels = channels;
  sample.source = "synthetic #" + std::to_string(index);
  sample.mask.assign(pixels, 0);
  sample.image.resize(pixels * static_cast<std::size_t>(channels));

  std::vector<float> signal(pixels, 0.0f);
  LabelImage owner(height, width);
  paint_cells(scene, height, width, signal, owner.ids);
  for (std::size_t p = 0; p < pixels; ++p)
    sample.mask[p] = owner.ids[p] != 0 ? scene.cells[owner.ids[p] - 1].shape.label : 0;

  // Background plus cell signal, mixed per channel, then noise that grows with brightness (shot noise).
  Rng noise(scene_seed(options_.seed), 2 * static_cast<std::uint64_t>(index) + 1);
  const bool alpha = channels == 4;
  const double inv_height = 1.0 / static_cast<double>(height), inv_width = 1.0 / static_cast<double>(width);
  float* out = sample.image.data();
  for (std::int64_t y = 0; y < height; ++y) {
    const double fy = (static_cast<double>(y) + 0.5) * inv_height - 0.5;
    const double hy = static_cast<double>(y) + 0.5 - scene.hotspot_y;
    for (std::int64_t x = 0; x < width; ++x) {
      const double hx = static_cast<double>(x) + 0.5 - scene.hotspot_x;
      const double background =
          scene.background_base + scene.gradient_y * fy +
          scene.gradient_x * ((static_cast<double>(x) + 0.5) * inv_width - 0.5) +
          scene.hotspot * std::max(0.0, 1.0 - (hy * hy + hx * hx) * scene.hotspot_inv_radius2);
      const auto p = static_cast<std::size_t>(y * width + x);
      const float* cell_weight =
          scene.cell_weight.data() + static_cast<std::size_t>(sample.mask[p] * channels);
      for (std::int64_t k = 0; k < channels; ++k) {
        if (alpha && k == 3) {
          *out++ = 255;
          continue;
        }
        double value = background * scene.background_weight[k] + signal[p] * cell_weight[k];
        value += scene.noise_sigma * (1.0 + 0.5 * value / 255.0) * pixel_noise(noise);
        // Rounded to the 8-bit value a file would store; the clamped value is not negative.
        *out++ = std::floor(static_cast<float>(std::clamp(value, 0.0, 255.0) + 0.5));
      }
    }
  }
  const ChannelAffine affine =
      image_normalization(options_.normalize, sample.image, channels, 8, false, sample.source);
  normalize_in_place(affine, sample.image, channels);
  if (options_.instances) {
    number_visible_cells(scene.cells.size(), owner.ids);
    sample.instances = std::move(owner);
    make_instance_target(sample, *options_.instances);
  }
  return sample;
}

std::int64_t SyntheticCells::sample_bytes() const noexcept {
  std::int64_t per_pixel = options_.channels * static_cast<std::int64_t>(sizeof(float)) + 1;
  if (options_.instances) {
    per_pixel += static_cast<std::int64_t>(sizeof(ObjectId));
    if (options_.instances->target == InstanceTarget::weight_map)
      per_pixel += static_cast<std::int64_t>(sizeof(float));
  }
  return options_.height * options_.width * per_pixel;
}

Image eight_bit_image(const Sample& sample) {
  return {sample.height, sample.width, sample.channels, display_pixels(sample.image, NormalizeDesc{})};
}

std::string SyntheticCells::describe() const {
  std::string text = "synthetic cells: " + std::to_string(options_.count) + " images " +
                     std::to_string(options_.height) + "x" + std::to_string(options_.width) + "x" +
                     std::to_string(options_.channels);
  if (options_.instances)
    text += std::string(", instances (target ") + to_string(options_.instances->target) + ")";
  else if (options_.classes > 1)
    text += ", " + std::to_string(options_.classes) + " classes";
  return text + ", seed " + std::to_string(options_.seed);
}

}  // namespace unet
