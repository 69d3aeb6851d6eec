#include "gui/augment_preview.h"

#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QPushButton>
#include <QScrollArea>
#include <QSlider>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>

#include "gui/config_panel.h"
#include "gui/image_view.h"
#include "gui/predictions_tab.h"
#include "gui/setting_labels.h"
#include "unet/data/open_dataset.h"
#include "unet/model/normalize.h"
#include "unet/step/data_plan.h"
#include "unet/train/epoch_plan.h"
#include "unet/train/observer.h"
#include "unet/train/validation.h"

namespace unet::gui {

namespace {

constexpr int kColumns = 4;
constexpr int kDebounceMs = 300;  // a burst of edits (typing a path) redraws once

// The settings the opened dataset depends on: the data's, less those that only choose and draw from it.
DataConfig dataset_part(DataConfig d) {
  d.val_fraction = 0;
  d.augment = false;
  d.shuffle = false;
  d.prefetch = 0;
  d.cache_mib = 0;  // the tab opens it without a cache whatever this says
  d.validation_split.clear();
  d.patch_height = d.patch_width = 0;
  d.foreground_oversample = 0;
  d.patches_per_epoch = 0;
  return d;
}

bool opens_same_dataset(const Config& a, const Config& b) {
  return dataset_part(a.data) == dataset_part(b.data) && a.model.in_channels == b.model.in_channels &&
         a.model.classes == b.model.classes && a.loss.ignore_index == b.loss.ignore_index;
}

// The settings the drawn samples depend on.
bool draws_the_same(const Config& a, const Config& b) {
  return opens_same_dataset(a, b) && a.data == b.data && a.augment == b.augment;
}

// The training samples of a run of `config` over `dataset`, split as the trainer splits them (a named
// data.validation_split's too; every sample trains when data.val_path holds the validation samples).
std::vector<std::size_t> training_samples(const Config& config, const Dataset& dataset) {
  if (!config.data.val_path.empty()) {
    std::vector<std::size_t> all(dataset.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  DataSplit split = split_dataset(dataset.size(), config.data.val_fraction, config.data.seed);
  if (!config.data.validation_split.empty()) {
    TrainerObserver quiet;
    split = choose_validation_split(config, dataset, std::move(split), {}, /*continues_run=*/false,
                                    /*writes_files=*/false, quiet);
  }
  return split.train;
}

// Sample `i` of `batch` as 8-bit pixels to show: one channel grey, three or more the first three as RGB, two
// the first as grey.
QImage batch_picture(const HostBatch& batch, std::int64_t i, const NormalizeDesc& normalize) {
  const std::int64_t h = batch.height, w = batch.width, c = batch.channels;
  const std::span<const float> values(batch.pixels.data() + i * h * w * c,
                                      static_cast<std::size_t>(h * w * c));
  const std::vector<std::uint8_t> pixels = display_pixels(values, normalize);
  QImage out(static_cast<int>(w), static_cast<int>(h), QImage::Format_RGB32);
  for (std::int64_t y = 0; y < h; ++y) {
    auto* line = reinterpret_cast<QRgb*>(out.scanLine(static_cast<int>(y)));
    for (std::int64_t x = 0; x < w; ++x) {
      const std::uint8_t* p = pixels.data() + (y * w + x) * c;
      line[x] = c >= 3 ? qRgb(p[0], p[1], p[2]) : qRgb(p[0], p[0], p[0]);
    }
  }
  return out;
}

// Sample `i`'s mask as ImageView's layer: class k > 0 in class_colour(k) (a binary model's 1), the ignore
// label grey, the background transparent.
QImage batch_mask_layer(const HostBatch& batch, std::int64_t i, int classes, int ignore_index) {
  const std::int64_t h = batch.height, w = batch.width;
  QImage out(static_cast<int>(w), static_cast<int>(h), QImage::Format_ARGB32);
  out.fill(Qt::transparent);
  const std::uint8_t* mask = batch.masks.data() + i * h * w;
  for (std::int64_t y = 0; y < h; ++y) {
    auto* line = reinterpret_cast<QRgb*>(out.scanLine(static_cast<int>(y)));
    for (std::int64_t x = 0; x < w; ++x) {
      const int v = mask[y * w + x];
      if (v == 0) continue;
      const QColor colour = v == ignore_index ? QColor(128, 128, 128) : class_colour(classes == 1 ? 1 : v);
      line[x] = colour.rgb();  // opaque: the opacity slider sets how strongly it covers the picture
    }
  }
  return out;
}

}  // namespace

AugmentPreviewTask::AugmentPreviewTask(Config config, std::shared_ptr<const Dataset> dataset,
                                       std::int64_t epoch, int count, QObject* parent)
    : Task(parent), config_(std::move(config)), dataset_(std::move(dataset)), epoch_(epoch), count_(count) {}

AugmentPreviewTask::~AugmentPreviewTask() {
  end_work();
}

void AugmentPreviewTask::execute() {
  if (!dataset_) {
    // No decoded sample kept: the tab shows a few, and the dataset stays open while the tab is used.
    Config opening = config_;
    opening.data.cache_mib = 0;
    dataset_ = open_dataset(opening, nullptr, stop_token());
  }
  const Dataset& dataset = *dataset_;
  // A zscore over the dataset is measured by the opening, as the trainer takes it.
  const NormalizeDesc normalize = dataset.measured_normalization().value_or(config_.data.normalize);
  const std::vector<std::size_t> train = training_samples(config_, dataset);
  const std::vector<std::size_t> order =
      training_order(config_, train, epoch_, samples_per_epoch(config_, dataset, train));
  const auto n = std::min<std::size_t>(order.size(), static_cast<std::size_t>(count_));
  // The epoch's first samples at their positions in its order: what the trainer's first step assembles.
  const std::vector<std::size_t> samples(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<std::int64_t> positions(n);
  for (std::size_t p = 0; p < n; ++p) positions[p] = static_cast<std::int64_t>(p);
  const BatchRecipe recipe = training_recipe(config_);
  HostBatch batch;
  assemble_batch(dataset, samples, positions, epoch_, recipe, batch);
  for (std::size_t i = 0; i < n; ++i) {
    if (abort_requested()) {
      ended_aborted();
      return;
    }
    const SampleDraw draw = draw_for(recipe, dataset.get(samples[i]), epoch_, positions[i]);
    QString caption = QString::fromStdString(dataset.sample_name(samples[i]));
    caption += ": " + (draw.augmentation ? QString::fromStdString(describe(*draw.augmentation))
                                         : tr("not augmented (data.augment is off)"));
    if (draw.place && draw.place->on_foreground) caption += tr(", on foreground");
    const auto at = static_cast<std::int64_t>(i);
    tiles_.push_back({batch_picture(batch, at, normalize),
                      batch_mask_layer(batch, at, dataset.classes(), config_.loss.ignore_index), caption});
  }
}

AugmentPreview::AugmentPreview(const ConfigPanel& config, QWidget* parent)
    : QWidget(parent), config_(config) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  status_ = new QLabel(tr("The samples are drawn when this tab is shown."), this);
  status_->setObjectName("augment_status");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* new_draw_button = new QPushButton(tr("New draw"), this);
  new_draw_button->setToolTip(tr("The next epoch's samples, with what is drawn for them"));
  masks_ = new QCheckBox(tr("Masks"), this);
  masks_->setChecked(true);
  opacity_ = new QSlider(Qt::Horizontal, this);
  opacity_->setRange(0, 100);
  opacity_->setValue(ImageView::default_opacity);
  opacity_->setMaximumWidth(160);
  opacity_->setToolTip(tr("The masks' opacity"));
  top->addWidget(status_, 1);
  top->addWidget(masks_, 0, Qt::AlignTop);
  top->addWidget(opacity_, 0, Qt::AlignTop);
  top->addWidget(new_draw_button, 0, Qt::AlignTop);
  layout->addLayout(top);

  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  auto* sheet = new QWidget(scroll);
  // The tiles packed at the top left, whatever room the tab has.
  auto* sheet_layout = new QVBoxLayout(sheet);
  grid_ = new QGridLayout;
  grid_->setColumnStretch(kColumns, 1);
  sheet_layout->addLayout(grid_);
  sheet_layout->addStretch(1);
  scroll->setWidget(sheet);
  layout->addWidget(scroll, 1);

  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(kDebounceMs);
  connect(debounce_, &QTimer::timeout, this, [this] { redraw(); });
  connect(new_draw_button, &QPushButton::clicked, this, [this] { new_draw(); });
  connect(masks_, &QCheckBox::toggled, this, [this] { show_tiles(); });
  connect(opacity_, &QSlider::valueChanged, this, [this] { show_tiles(); });
  connect(&config_, &ConfigPanel::config_changed, this, &AugmentPreview::settings_changed);
}

int AugmentPreview::mask_opacity() const {
  return masks_->isChecked() ? opacity_->value() : 0;
}

void AugmentPreview::settings_changed() {
  const std::optional<Config> config = config_.config();
  if (!stale_ && config && drawn_with_ && draws_the_same(*config, *drawn_with_)) return;
  stale_ = true;
  if (isVisible()) debounce_->start();
}

void AugmentPreview::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) redraw();
}

Task* AugmentPreview::new_draw() {
  ++epoch_;
  return redraw();
}

Task* AugmentPreview::redraw() {
  debounce_->stop();
  if (task_) task_->abort();  // its answer is dropped
  stale_ = false;
  const std::optional<Config> config = config_.config();
  drawn_with_ = config;
  if (!config) {
    tiles_.clear();
    show_tiles();
    status_->setText(tr("Fix the settings first: the samples are drawn once they are valid."));
    emit drawn();
    return nullptr;
  }
  if (opened_with_ && !opens_same_dataset(*config, *opened_with_)) dataset_.reset();
  status_->setText(dataset_ ? tr("Drawing epoch %1's samples…").arg(epoch_ + 1) : tr("Opening the dataset…"));
  auto* task = new AugmentPreviewTask(*config, dataset_, epoch_, sample_count);
  task_ = task;
  return start_owned(task, this, [this, task] {
    if (task != task_) return;  // another draw has started since
    show_draw(*task);
  });
}

void AugmentPreview::show_draw(const AugmentPreviewTask& task) {
  if (task.dataset()) {
    dataset_ = task.dataset();
    opened_with_ = task.config();
  }
  if (task.state() == Task::State::succeeded) {
    tiles_ = task.tiles();
    const QString mode = task.config().data.mode == DataMode::patch ? tr("patches of %1x%2 (width x height)")
                                                                    : tr("%1x%2 images");
    const QString size = tiles_.empty()
                             ? QString()
                             : mode.arg(tiles_.front().image.width()).arg(tiles_.front().image.height());
    status_->setText(
        tiles_.empty()
            ? tr("%1: no training sample to show").arg(QString::fromStdString(dataset_->describe()))
            : tr("%1\nEpoch %2's first %3 training samples as the model sees them: %4")
                  .arg(QString::fromStdString(dataset_->describe()))
                  .arg(task.epoch() + 1)
                  .arg(tiles_.size())
                  .arg(size));
  } else if (task.state() == Task::State::failed) {
    tiles_.clear();
    status_->setText(with_setting_labels(tr("Cannot draw the samples: %1").arg(task.failure())).text);
  }
  show_tiles();
  emit drawn();
}

void AugmentPreview::show_tiles() {
  // One picture and caption per tile, made once and reused by the next draws.
  while (pictures_.size() < tiles_.size()) {
    const auto i = static_cast<int>(pictures_.size());
    auto* cell = new QWidget(grid_->parentWidget());  // the sheet
    auto* cell_layout = new QVBoxLayout(cell);
    auto* picture = new QLabel(cell);
    picture->setFixedSize(tile_side, tile_side);
    picture->setAlignment(Qt::AlignCenter);
    auto* caption = new QLabel(cell);
    caption->setWordWrap(true);
    caption->setFixedWidth(tile_side);
    caption->setTextInteractionFlags(Qt::TextSelectableByMouse);
    cell_layout->addWidget(picture);
    cell_layout->addWidget(caption);
    cell_layout->addStretch(1);
    grid_->addWidget(cell, i / kColumns, i % kColumns, Qt::AlignTop | Qt::AlignLeft);
    pictures_.push_back(picture);
    captions_.push_back(caption);
  }
  const double opacity = mask_opacity() / 100.0;
  for (std::size_t i = 0; i < pictures_.size(); ++i) {
    const bool used = i < tiles_.size();
    pictures_[i]->parentWidget()->setVisible(used);
    if (!used) continue;
    const QImage shown = ImageView::compose(tiles_[i].image, tiles_[i].mask_layer, opacity);
    // Nearest neighbour: the pixels the model sees stay distinct at any size.
    pictures_[i]->setPixmap(
        QPixmap::fromImage(shown.scaled(tile_side, tile_side, Qt::KeepAspectRatio, Qt::FastTransformation)));
    captions_[i]->setText(tiles_[i].caption);
  }
}

}  // namespace unet::gui
