// The Augmentation tab: a grid of training samples exactly as the trainer feeds them to the model (issue 26:
// "a live preview of augmented samples with their masks, so a user sees what the model will see"). The
// samples are the first ones of an epoch's order, made by the engine's own assemble_batch with the form's
// config (patch mode's patches, every augment.* setting, the run's seed), shown through display_pixels with
// their masks laid over them, each captioned with what was drawn for it (describe(AugmentDraw), the sample's
// name, "on foreground" for a patch centred on a labelled pixel). New draw shows the next epoch's samples.
//
// No file is read on the GUI thread: opening the dataset and assembling the samples are a Task. The tab
// redraws (debounced) when a data.* or augment.* setting changes while it is shown, and when it is shown
// next otherwise; it reopens the dataset only when a setting the dataset depends on changed (source, path,
// size, mode, normalisation, channels, classes...), and reuses the opened one otherwise.
#pragma once

#include <QImage>
#include <QLabel>
#include <QPointer>
#include <QString>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "gui/task.h"
#include "unet/config/config.h"
#include "unet/data/dataset.h"

class QCheckBox;
class QGridLayout;
class QSlider;
class QTimer;

namespace unet::gui {

class ConfigPanel;

// One sample as the model sees it: its pixels (display_pixels of the normalised values), its mask as a layer
// (ImageView's: each class in its colour, the ignore label grey, background transparent) and its caption.
struct AugmentedTile {
  QImage image;
  QImage mask_layer;
  QString caption;
};

// The first `count` training samples of epoch `epoch` of a run of `config`, as its trainer assembles them.
// Opens the dataset when `dataset` is null (dataset() then holds it, for the next task to reuse).
class AugmentPreviewTask : public Task {
  Q_OBJECT
 public:
  AugmentPreviewTask(Config config, std::shared_ptr<const Dataset> dataset, std::int64_t epoch, int count,
                     QObject* parent = nullptr);
  ~AugmentPreviewTask() override;
  const Config& config() const { return config_; }
  std::int64_t epoch() const { return epoch_; }
  // Once succeeded (and after a failure that came after the opening).
  const std::shared_ptr<const Dataset>& dataset() const { return dataset_; }
  const std::vector<AugmentedTile>& tiles() const { return tiles_; }

 protected:
  void execute() override;

 private:
  const Config config_;
  std::shared_ptr<const Dataset> dataset_;
  const std::int64_t epoch_;
  const int count_;
  std::vector<AugmentedTile> tiles_;
};

class AugmentPreview : public QWidget {
  Q_OBJECT
 public:
  static constexpr int sample_count = 8;
  static constexpr int tile_side = 200;  // screen pixels a tile's picture is fitted into

  explicit AugmentPreview(const ConfigPanel& config, QWidget* parent = nullptr);

  // Draws the samples of the shown epoch with the form's settings now; the task, or nullptr when the
  // settings are not valid (status() says so).
  Task* redraw();
  // New draw: the next epoch's samples.
  Task* new_draw();

  std::int64_t epoch() const { return epoch_; }
  int tile_count() const { return static_cast<int>(tiles_.size()); }
  const AugmentedTile& tile(int i) const { return tiles_.at(static_cast<std::size_t>(i)); }
  // What the tab says above the grid: the dataset and epoch shown, or why nothing is.
  QString status() const { return status_->text(); }
  // The masks' opacity, 0..100 (0 with Masks unchecked).
  int mask_opacity() const;
  // The dataset the tiles were drawn from (kept for the next draws); null before the first.
  const Dataset* dataset() const { return dataset_.get(); }

 signals:
  // A draw's tiles are shown (or why they cannot be).
  void drawn();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void settings_changed();
  void show_draw(const AugmentPreviewTask& task);
  void show_tiles();

  const ConfigPanel& config_;
  QLabel* status_ = nullptr;
  QCheckBox* masks_ = nullptr;
  QSlider* opacity_ = nullptr;
  QGridLayout* grid_ = nullptr;
  QTimer* debounce_ = nullptr;
  std::vector<QLabel*> pictures_, captions_;
  std::vector<AugmentedTile> tiles_;
  std::int64_t epoch_ = 0;
  QPointer<AugmentPreviewTask> task_;  // the draw under way; its answer is dropped once another starts
  // The opened dataset and the config it was opened with (reused while the dataset's settings stay), and the
  // config the tiles were drawn with; whether the settings changed since.
  std::shared_ptr<const Dataset> dataset_;
  std::optional<Config> opened_with_, drawn_with_;
  bool stale_ = true;
};

}  // namespace unet::gui
