#include "gui/predict_window.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QPointer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "gui/file_tasks.h"
#include "gui/image_view.h"
#include "gui/natural_order.h"
#include "gui/object_overlay.h"
#include "gui/predictions_tab.h"
#include "unet/io/checkpoint.h"
#include "unet/io/image.h"

namespace unet::gui {

namespace {

const QStringList kImageFilters{"*.png", "*.PNG", "*.jpg", "*.JPG", "*.jpeg", "*.JPEG"};

// A new folder for the masks of the images in `first_input`'s folder: beside it, <folder><suffix> ("-masks",
// or "-labels" for objects; numbered when it exists), or beside the dataset when that folder would be read as
// part of one (a DSB 2018 sample's images/). On the task's thread: it looks at the disk.
QString default_masks_folder(const QString& first_input, const std::optional<DatasetLocation>& training,
                             const std::string& suffix) {
  std::error_code ec;
  const std::filesystem::path inputs = std::filesystem::absolute(first_input.toStdString(), ec).parent_path();
  std::filesystem::path folder = free_folder_beside(inputs, suffix);
  if (const std::optional<DatasetMembership> dataset = dataset_membership(folder, training))
    folder = free_folder_beside(dataset->root, suffix);
  return QString::fromStdString(folder.string());
}

// Options that make the same results: the overlap counts only where there are tiles.
bool same_results(const PredictOptions& a, const PredictOptions& b) {
  const bool tiles = a.mode == PredictMode::automatic || a.mode == PredictMode::tiled;
  return a.mode == b.mode && a.augmentation == b.augmentation && (!tiles || a.overlap == b.overlap);
}

}  // namespace

// The images through the model, one at a time as the CLI's predict: a file that cannot be read is named, the
// others go on; a stop ends it between forward passes (or between an image's tiles), keeping the images
// finished. A task-instances model's objects are found here too, off the GUI thread.
class PredictWindow::PredictTask : public Task {
 public:
  PredictTask(QString checkpoint, QStringList images, DeviceId device, PredictOptions options,
              std::optional<DatasetLocation> training)
      : checkpoint_(std::move(checkpoint)),
        images_(std::move(images)),
        device_(device),
        options_(options),
        training_(std::move(training)) {}
  ~PredictTask() override { end_work(); }

  // Once it has ended (the images finished, also when it stopped or failed):
  std::vector<Result> results;
  QString unreadable;    // "not images: …", or empty
  QString masks_folder;  // default_masks_folder() of the first image, once there are results

 protected:
  void execute() override {
    const std::stop_token stop = stop_token();
    const auto total = static_cast<qint64>(images_.size());
    Predictor predictor(load_checkpoint(checkpoint_.toStdString()), device_);
    const InputRecipe recipe = input_recipe(predictor.config());
    const bool instances = predictor.config().task == ModelTask::instances;
    QStringList skipped;
    int through = 0;
    for (const QString& path : images_) {
      if (stop.stop_requested()) return ended_aborted();
      const QString name = QFileInfo(path).fileName();
      ModelImage input;
      try {
        input = read_model_image(path.toStdString(), recipe);
      } catch (const Error& e) {
        skipped << QString::fromUtf8(e.what());
        report_progress(++through, total,
                        PredictWindow::tr("%1 skipped: it cannot be read as the model's input").arg(name));
        continue;
      }
      PredictProgress how;
      const PredictControl control{.on_image = [&how](const PredictProgress& p) { how = p; }, .stop = stop};
      // Shown as the model sees it (its channels, normalised), in 8 bits.
      Image image{input.height, input.width, input.channels, display_pixels(input.values, recipe.normalize)};
      std::vector<Prediction> p =
          predictor.predict({std::move(input)}, {path.toStdString()}, options_, control);
      if (p.empty()) return ended_aborted();  // stopped in the middle of its tiles
      std::shared_ptr<const InstanceOutput> objects;
      if (instances)
        objects =
            std::make_shared<const InstanceOutput>(instance_output(p.front(), predictor.config().instances));
      results.push_back({path, std::move(image), std::move(p.front()), objects});
      QString way = how.mode == PredictMode::tiled   ? PredictWindow::tr("in %n tile(s)", "", int(how.tiles))
                    : how.mode == PredictMode::whole ? PredictWindow::tr("whole")
                                                     : PredictWindow::tr("resized");
      if (objects) way += PredictWindow::tr(", %n object(s)", "", int(objects->objects.size()));
      report_progress(++through, total,
                      PredictWindow::tr("%1 %2×%3 %4")
                          .arg(name)
                          .arg(results.back().image.width)
                          .arg(results.back().image.height)
                          .arg(way));
    }
    if (!skipped.isEmpty()) unreadable = PredictWindow::tr("skipped: %1").arg(skipped.join("; "));
    if (!results.empty())
      masks_folder = default_masks_folder(results.front().path, training_, instances ? "-labels" : "-masks");
  }

 private:
  const QString checkpoint_;
  const QStringList images_;
  const DeviceId device_;
  const PredictOptions options_;
  const std::optional<DatasetLocation> training_;
};

PredictWindow::PredictWindow(Prompter& prompter, QWidget* parent) : QDialog(parent), prompter_(prompter) {
  setObjectName("predict_window");
  setWindowTitle(tr("Predict"));
  checkpoint_ = new QLineEdit(this);
  checkpoint_->setPlaceholderText(tr("a checkpoint (.safetensors)"));
  auto* browse = new QPushButton(tr("…"), this);
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString file = QFileDialog::getOpenFileName(this, tr("Checkpoint"), checkpoint_->text(),
                                                      tr("Checkpoints (*.safetensors)"));
    if (!file.isEmpty()) checkpoint_->setText(file);
  });
  auto* images = new QPushButton(tr("Images…"), this);
  auto* folder = new QPushButton(tr("Folder…"), this);
  connect(images, &QPushButton::clicked, this, &PredictWindow::choose_images);
  connect(folder, &QPushButton::clicked, this, &PredictWindow::choose_folder);
  run_ = new QPushButton(tr("Predict"), this);
  connect(run_, &QPushButton::clicked, this, [this] { predict(checkpoint_->text(), inputs_, device_); });
  stop_ = new QPushButton(tr("Stop"), this);
  stop_->setObjectName("predict_stop");
  stop_->setEnabled(false);
  stop_->setToolTip(tr("Stop after the model's current pass; the images done so far are kept"));
  connect(stop_, &QPushButton::clicked, this, &PredictWindow::stop);

  mode_ = new QComboBox(this);
  mode_->setObjectName("predict_mode");
  mode_->addItem(tr("Auto"), static_cast<int>(PredictMode::automatic));
  mode_->addItem(tr("Resize to the training size"), static_cast<int>(PredictMode::resize));
  mode_->addItem(tr("Tiles at native scale"), static_cast<int>(PredictMode::tiled));
  mode_->addItem(tr("Whole image"), static_cast<int>(PredictMode::whole));
  mode_->setToolTip(
      tr("Auto: an image no larger than the training size is resized to it, as training did; a larger one "
         "is cut into overlapping tiles at its own scale.\nResize: every image resized to the training size "
         "and the masks back.\nTiles: overlapping tiles of the training size at the image's own scale, "
         "blended with Gaussian weights (for large microscopy or satellite images).\nWhole image: the image "
         "at its own scale in one pass of the model (memory grows with the image)."));
  overlap_ = new QDoubleSpinBox(this);
  overlap_->setObjectName("predict_overlap");
  overlap_->setRange(0.0, PredictOptions::max_overlap);
  overlap_->setSingleStep(0.05);
  overlap_->setDecimals(2);
  overlap_->setValue(PredictOptions{}.overlap);
  overlap_->setToolTip(
      tr("The share of a tile its neighbour covers: more overlap, smoother seams, more "
         "passes of the model"));
  flips_ = new QCheckBox(tr("Flip augmentation"), this);
  flips_->setObjectName("predict_flips");
  flips_->setToolTip(
      tr("Also run each input flipped left-right, top-bottom and both, and average the four "
         "answers (four times the work)"));
  connect(mode_, &QComboBox::currentIndexChanged, this, &PredictWindow::update_option_controls);
  progress_ = new QProgressBar(this);
  progress_->setObjectName("predict_progress");
  progress_->setFormat(tr("%v of %m images"));
  progress_->setVisible(false);
  masks_folder_ = new QLineEdit(this);
  masks_folder_->setObjectName("predict_masks_folder");
  masks_folder_->setPlaceholderText(tr("a new folder beside the images, once they are segmented"));
  masks_folder_->setToolTip(
      tr("Where Save masks writes <image>_mask.png files (the folder is made if need be). Never a training "
         "set's folder: masks among its images would be read as training data."));
  auto* masks_browse = new QPushButton(tr("…"), this);
  connect(masks_browse, &QPushButton::clicked, this, [this] {
    // The dialog opens where the folder named is, or would be made.
    QFileInfo named(masks_folder_->text());
    const QString start = named.isDir() ? named.filePath() : named.path();
    const QString out = QFileDialog::getExistingDirectory(this, tr("Save the masks into"), start);
    if (!out.isEmpty()) masks_folder_->setText(out);
  });
  label_format_ = new QComboBox(this);
  label_format_->setObjectName("predict_label_format");
  label_format_->addItem(tr("16-bit PNG"), static_cast<int>(LabelFormat::png));
  label_format_->addItem(tr("TIFF"), static_cast<int>(LabelFormat::tiff));
  label_format_->setToolTip(
      tr("The label images' format: a 16-bit PNG holds up to 65535 objects an image; a TIFF is 16-bit, or "
         "32-bit when an image has more. Fiji, napari, Cellpose and StarDist read both."));
  label_format_->setVisible(false);
  save_ = new QPushButton(tr("Save masks"), this);
  save_->setObjectName("predict_save");
  save_->setEnabled(false);
  connect(save_, &QPushButton::clicked, this, [this] {
    if (masks_folder_->text().isEmpty())
      status_->setText(tr("Name a folder for the masks first."));
    else
      save_masks(masks_folder_->text());
  });
  threshold_ = new QSlider(Qt::Horizontal, this);
  threshold_->setRange(1, 99);
  threshold_->setValue(50);
  threshold_->setToolTip(tr("A binary model's foreground: pixels whose probability is at least this"));
  auto* threshold_label = new QLabel(tr("threshold 0.50"), this);
  connect(threshold_, &QSlider::valueChanged, this, [this, threshold_label](int v) {
    threshold_label->setText(tr("threshold %1").arg(v / 100.0, 0, 'f', 2));
    show_selected();
  });
  list_ = new QListWidget(this);
  list_->setObjectName("predict_list");
  list_->setMaximumWidth(240);
  connect(list_, &QListWidget::currentRowChanged, this, &PredictWindow::show_selected);
  view_ = new ImageView(this);
  connect(view_, &ImageView::clicked, this, &PredictWindow::select_object_at);
  object_count_ = new QLabel(this);
  object_count_->setObjectName("predict_object_count");
  object_count_->setVisible(false);
  object_row_ = new QLabel(this);
  object_row_->setObjectName("predict_object_row");
  object_row_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  object_row_->setVisible(false);
  stale_ = new QLabel(this);
  stale_->setObjectName("predict_stale");
  stale_->setWordWrap(true);
  stale_->setStyleSheet("QLabel { background: #fff3cd; color: #6b4f00; padding: 4px; }");
  stale_->setVisible(false);
  connect(mode_, &QComboBox::currentIndexChanged, this, &PredictWindow::update_stale_mark);
  connect(overlap_, &QDoubleSpinBox::valueChanged, this, &PredictWindow::update_stale_mark);
  connect(flips_, &QCheckBox::toggled, this, &PredictWindow::update_stale_mark);
  connect(checkpoint_, &QLineEdit::textChanged, this, &PredictWindow::update_stale_mark);
  legend_ = new QLabel(this);
  status_ = new QLabel(tr("Choose a checkpoint and images, then Predict."), this);
  status_->setWordWrap(true);

  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Checkpoint"), this));
  top->addWidget(checkpoint_, 1);
  top->addWidget(browse);
  top->addWidget(images);
  top->addWidget(folder);
  top->addWidget(run_);
  auto* options = new QHBoxLayout;
  options->addWidget(new QLabel(tr("Mode"), this));
  options->addWidget(mode_);
  options->addWidget(new QLabel(tr("Overlap"), this));
  options->addWidget(overlap_);
  options->addWidget(flips_);
  options->addStretch(1);
  auto* middle = new QHBoxLayout;
  middle->addWidget(list_);
  middle->addWidget(view_, 1);
  auto* bottom = new QHBoxLayout;
  bottom->addWidget(legend_, 1);
  bottom->addWidget(threshold_label);
  bottom->addWidget(threshold_);
  auto* saving = new QHBoxLayout;
  masks_folder_label_ = new QLabel(tr("Masks folder"), this);
  masks_folder_label_->setObjectName("predict_masks_folder_label");
  saving->addWidget(masks_folder_label_);
  saving->addWidget(masks_folder_, 1);
  saving->addWidget(masks_browse);
  saving->addWidget(label_format_);
  saving->addWidget(save_);
  auto* layout = new QVBoxLayout(this);
  auto* progress = new QHBoxLayout;
  progress->addWidget(progress_, 1);
  progress->addWidget(stop_);
  layout->addLayout(top);
  layout->addLayout(options);
  layout->addWidget(stale_);
  layout->addLayout(middle, 1);
  auto* objects = new QHBoxLayout;
  objects->addWidget(object_count_);
  objects->addWidget(object_row_, 1);
  layout->addLayout(objects);
  layout->addLayout(bottom);
  layout->addLayout(saving);
  layout->addLayout(progress);
  layout->addWidget(status_);
  update_option_controls();
  resize(900, 640);
}

PredictWindow::~PredictWindow() {
  if (task_) task_->abort();  // a long folder is not waited for: the task ends at its next image
}

void PredictWindow::stop() {
  if (!busy()) return;
  task_->abort();
  stop_->setEnabled(false);
  status_->setText(tr("Stopping…"));
}

PredictOptions PredictWindow::options() const {
  PredictOptions o;
  o.mode = static_cast<PredictMode>(mode_->currentData().toInt());
  o.overlap = overlap_->value();
  o.augmentation = flips_->isChecked() ? PredictAugmentation::flips : PredictAugmentation::none;
  return o;
}

void PredictWindow::set_options(const PredictOptions& options) {
  mode_->setCurrentIndex(mode_->findData(static_cast<int>(options.mode)));
  overlap_->setValue(options.overlap);
  flips_->setChecked(options.augmentation == PredictAugmentation::flips);
}

void PredictWindow::update_option_controls() {
  // The overlap is that of tiles: resize and whole images make none.
  const auto mode = static_cast<PredictMode>(mode_->currentData().toInt());
  overlap_->setEnabled(mode == PredictMode::automatic || mode == PredictMode::tiled);
}

void PredictWindow::set_checkpoint(const QString& checkpoint) {
  checkpoint_->setText(checkpoint);
}

QString PredictWindow::checkpoint() const {
  return checkpoint_->text();
}

Task* PredictWindow::suggest_model_of_run(const std::filesystem::path& run_dir) {
  auto* task = new FindRunModelTask(run_dir);
  return start_owned(task, this, [this, task] {
    if (!task->found().isEmpty() && checkpoint().isEmpty()) set_checkpoint(task->found());
  });
}

void PredictWindow::set_threshold(double threshold) {
  threshold_->setValue(static_cast<int>(std::lround(threshold * 100)));
}

double PredictWindow::threshold() const {
  return threshold_->value() / 100.0;
}

void PredictWindow::choose_images() {
  const QStringList files = QFileDialog::getOpenFileNames(this, tr("Images to segment"), QString(),
                                                          tr("Images (%1)").arg(kImageFilters.join(' ')));
  if (files.isEmpty()) return;
  listing_ = nullptr;  // a folder being listed is no longer wanted
  inputs_ = files;
  status_->setText(files.size() == 1 ? tr("1 image chosen.") : tr("%1 images chosen.").arg(files.size()));
}

void PredictWindow::choose_folder() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("A folder of images"));
  if (folder.isEmpty()) return;
  list_images_in(folder);
}

Task* PredictWindow::list_images_in(const QString& folder) {
  inputs_.clear();
  status_->setText(tr("Listing the images in %1…").arg(folder));
  auto* task = new ListFilesTask(folder, kImageFilters);
  listing_ = task;
  return start_owned(task, this, [this, task, folder] {
    if (listing_ != task) return;  // other images were chosen meanwhile
    inputs_ = task->files();
    status_->setText(tr("%1 images in %2.").arg(inputs_.size()).arg(folder));
  });
}

bool PredictWindow::predict(const QString& checkpoint, const QStringList& images, const DeviceId& device) {
  if (busy()) return false;
  if (checkpoint.isEmpty() || images.isEmpty()) {
    status_->setText(checkpoint.isEmpty() ? tr("Choose a checkpoint first.") : tr("Choose images first."));
    return false;
  }
  checkpoint_->setText(checkpoint);
  inputs_ = images;
  sort_naturally(inputs_);
  device_ = device;
  run_->setEnabled(false);
  stop_->setEnabled(true);
  progress_->setRange(0, static_cast<int>(images.size()));
  progress_->setValue(0);
  progress_->setVisible(true);
  status_->setText(tr("Predicting %1 images…").arg(images.size()));
  auto* task = new PredictTask(checkpoint, inputs_, device, options(), training_set_());
  connect(task, &Task::progress, this, [this](qint64 through, qint64 total, const QString& what) {
    step(static_cast<int>(through), static_cast<int>(total), what);
  });
  task_ = start_owned(task, this, [this, task, settings = current_settings()] {
    results_settings_ = settings;
    offer_masks_folder(task->masks_folder);
    done(std::move(task->results), task->state() == Task::State::failed ? task->failure() : task->unreadable,
         task->state() == Task::State::aborted);
  });
  return true;
}

void PredictWindow::step(int done, int total, const QString& what) {
  progress_->setValue(done);
  if (!task_->abort_requested())
    status_->setText(tr("Predicting: %1 of %2 images; %3").arg(done).arg(total).arg(what));
  emit progressed(done, total);
}

void PredictWindow::done(std::vector<Result> results, const QString& error, bool stopped) {
  run_->setEnabled(true);
  stop_->setEnabled(false);
  results_ = std::move(results);
  classes_ = results_.empty() ? 1 : results_.front().prediction.channels;
  instances_ = !results_.empty() && results_.front().objects != nullptr;
  list_->clear();
  for (const Result& r : results_) list_->addItem(QFileInfo(r.path).fileName());
  save_->setEnabled(!results_.empty());
  save_->setText(instances_ ? tr("Save labels") : tr("Save masks"));
  masks_folder_label_->setText(instances_ ? tr("Labels folder") : tr("Masks folder"));
  save_->setToolTip(instances_ ? tr("Writes <image>_labels.png or .tif (each object's pixels its id) and "
                                    "<image>_objects.csv (a row per object) for each image, as unet-train "
                                    "predict does")
                               : QString());
  label_format_->setVisible(instances_);
  // Objects are found at the checkpoint's thresholds (instances.*), not the slider's.
  threshold_->setEnabled(classes_ == 1 && !instances_);
  object_count_->setVisible(instances_);
  object_row_->setVisible(instances_);
  QStringList legend;
  if (instances_) {
    legend << tr("Each object in a colour of its own; click one for its row");
  } else if (classes_ == 1) {
    legend << tr("<span style='color:%1'>■</span> foreground (probability ≥ threshold)")
                  .arg(class_colour(1).name());
  } else {
    for (std::int64_t k = 1; k < classes_; ++k)
      legend << tr("<span style='color:%1'>■</span> class %2").arg(class_colour(k).name()).arg(k);
  }
  legend_->setText(legend.join("  "));
  QString summary = stopped
                        ? tr("Stopped: %1 of %2 images segmented.").arg(results_.size()).arg(inputs_.size())
                        : tr("%1 images segmented.").arg(results_.size());
  if (!error.isEmpty()) summary = summary.chopped(1) + tr("; %1").arg(error);
  status_->setText(summary);
  if (!results_.empty()) list_->setCurrentRow(0);
  update_stale_mark();
  emit finished();
}

std::vector<std::uint8_t> PredictWindow::mask(int i) const {
  return class_mask(results_.at(static_cast<std::size_t>(i)).prediction, threshold());
}

const InstanceOutput* PredictWindow::objects(int i) const {
  return results_.at(static_cast<std::size_t>(i)).objects.get();
}

void PredictWindow::select_object_at(QPointF image_point) {
  const int row = list_->currentRow();
  if (row < 0 || row >= prediction_count() || !objects(row)) return;
  const InstanceOutput& found = *objects(row);
  const auto x = static_cast<std::int64_t>(std::floor(image_point.x()));
  const auto y = static_cast<std::int64_t>(std::floor(image_point.y()));
  if (x < 0 || y < 0 || x >= found.labels.width || y >= found.labels.height) return;
  const ObjectId id = found.labels.at(y, x);
  // The table is in ascending id.
  const auto at = std::lower_bound(found.objects.begin(), found.objects.end(), id,
                                   [](const ObjectDescription& o, ObjectId wanted) { return o.id < wanted; });
  if (id == 0 || at == found.objects.end() || at->id != id)
    object_row_->setText(tr("Background at (y %1, x %2)").arg(y).arg(x));
  else
    object_row_->setText(gui::object_row_text(*at));
}

void PredictWindow::show_selected() {
  const int row = list_->currentRow();
  if (row < 0 || row >= prediction_count()) {
    view_->clear();
    return;
  }
  const Result& result = results_[static_cast<std::size_t>(row)];
  const Image& image = result.image;
  const QImage base = rgb_image(image.pixels.data(), image.height, image.width, image.channels);
  if (result.objects) {
    const std::size_t count = result.objects->objects.size();
    view_->show_image(base, object_layer(result.objects->labels));
    object_count_->setText(count == 1 ? tr("1 object") : tr("%1 objects").arg(count));
    object_row_->setText(count == 0 ? QString() : tr("Click an object for its row."));
    return;
  }
  view_->show_image(base, class_layer(mask(row).data(), image.height, image.width));
}

void PredictWindow::set_training_set(std::function<std::optional<DatasetLocation>()> current) {
  training_set_ = std::move(current);
}

void PredictWindow::offer_masks_folder(const QString& folder) {
  if (folder.isEmpty()) return;
  if (masks_folder_->text().isEmpty() || masks_folder_->text() == offered_masks_folder_)
    masks_folder_->setText(folder);
  offered_masks_folder_ = folder;
}

PredictWindow::Settings PredictWindow::current_settings() const {
  return {checkpoint_->text(), options()};
}

QString PredictWindow::describe(const Settings& settings) const {
  const PredictOptions& o = settings.options;
  QStringList parts{mode_->itemText(mode_->findData(static_cast<int>(o.mode)))};
  if (o.mode == PredictMode::automatic || o.mode == PredictMode::tiled)
    parts << tr("overlap %1").arg(o.overlap, 0, 'f', 2);
  parts << (o.augmentation == PredictAugmentation::flips ? tr("flips") : tr("no flips"));
  return parts.join(", ");
}

void PredictWindow::update_stale_mark() {
  // Only settings that change the results: the threshold applies to them as they are.
  const Settings now = current_settings();
  const bool stale = results_settings_ && !results_.empty() &&
                     (results_settings_->checkpoint != now.checkpoint ||
                      !same_results(results_settings_->options, now.options));
  stale_->setVisible(stale);
  if (!stale) return;
  QString text = tr("Stale: these results were computed with %1; the settings now say %2.")
                     .arg(describe(*results_settings_), describe(now));
  if (results_settings_->checkpoint != now.checkpoint)
    text += tr(" They come from another checkpoint, %1.")
                .arg(QFileInfo(results_settings_->checkpoint).fileName());
  stale_->setText(text + tr(" Press Predict to recompute them."));
}

Task* PredictWindow::save_masks(const QString& folder) {
  return start_saving_masks(folder, false);
}

Task* PredictWindow::start_saving_masks(const QString& folder, bool replace) {
  if (results_.empty()) return nullptr;
  std::vector<PredictionFile> files;
  const std::filesystem::path into(folder.toStdString());
  const auto format = static_cast<LabelFormat>(label_format_->currentData().toInt());
  for (std::size_t i = 0; i < results_.size(); ++i) {
    const Prediction& p = results_[i].prediction;
    const std::filesystem::path source(results_[i].path.toStdString());
    const std::string stem = source.stem().string();
    if (const std::shared_ptr<const InstanceOutput> objects = results_[i].objects) {
      // As `unet-train predict --output-kind labels` writes them.
      files.push_back({into / (stem + label_file_suffix(format)),
                       [objects, source, format](const std::filesystem::path& target) {
                         write_label_image(target, objects->labels, source.string(), format);
                       }});
      files.push_back({into / (stem + "_objects.csv"), [objects](const std::filesystem::path& target) {
                         write_objects_csv(target, objects->objects);
                       }});
      continue;
    }
    std::vector<std::uint8_t> m = mask(static_cast<int>(i));
    if (classes_ == 1)
      for (auto& v : m) v = v ? 255 : 0;
    files.push_back({into / (stem + "_mask.png"),
                     [image = Image{p.height, p.width, 1, std::move(m)}](
                         const std::filesystem::path& target) { write_png(target, image); }});
  }
  const std::size_t count = results_.size();
  auto* task = new SavePredictionsTask(folder.toStdString(), std::move(files), training_set_(), replace);
  save_->setEnabled(false);
  const QString what = instances_ ? tr("label images and object tables") : tr("masks");
  status_->setText(tr("Saving %1 %2 in %3…").arg(count).arg(what, folder));
  return start_owned(task, this, [this, task, folder, count, what] {
    save_->setEnabled(!results_.empty());
    if (const std::optional<DatasetMembership>& dataset = task->dataset()) {
      const QString refusal =
          tr("%1 is %2: %3 saved there would be read as training data. Choose another folder.")
              .arg(folder, QString::fromStdString(dataset->role), what);
      status_->setText(tr("Not saved: %1").arg(refusal));
      prompter_.warn(this, tr("Not into a training set"), refusal);
    } else if (task->state() == Task::State::failed) {
      status_->setText(tr("Not all %1 were saved: %2").arg(what, task->failure()));
    } else if (task->state() == Task::State::succeeded) {
      status_->setText(tr("Saved %1 %2 in %3.").arg(count).arg(what, folder));
    } else {
      const QStringList& existing = task->existing();
      const QString question = tr("%1 of the files would replace files there: %2")
                                   .arg(existing.size())
                                   .arg(existing.mid(0, 4).join(", "));
      if (prompter_.confirm(this, tr("Replace the files?"), question, true))
        start_saving_masks(folder, true);
      else
        status_->setText(tr("Not saved: %1").arg(question));
    }
  });
}

}  // namespace unet::gui
