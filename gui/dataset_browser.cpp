#include "gui/dataset_browser.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>
#include <optional>
#include <set>

#include "gui/config_panel.h"
#include "gui/config_panel_text.h"
#include "gui/object_overlay.h"
#include "gui/predictions_tab.h"
#include "gui/setting_labels.h"
#include "unet/config/config.h"
#include "unet/data/instance_target.h"
#include "unet/io/image.h"

namespace unet::gui {

namespace {

constexpr int kPreviewSide = 1024;  // the preview is decoded at full size, then kept at most this large

bool same_data(const DataSourceOptions& a, const DataSourceOptions& b) {
  const FileDatasetOptions &x = a.target, &y = b.target;
  return a.layout == b.layout && a.root == b.root && a.skip_bad == b.skip_bad && x.height == y.height &&
         x.width == y.width && x.channels == y.channels && x.classes == y.classes &&
         x.ignore_index == y.ignore_index && x.max_side == y.max_side &&
         x.instances.has_value() == y.instances.has_value() &&
         (!x.instances || (x.instances->target == y.instances->target &&
                           x.instances->boundary_width == y.instances->boundary_width));
}

bool same_data(const std::optional<DataSourceOptions>& a, const std::optional<DataSourceOptions>& b) {
  return a.has_value() == b.has_value() && (!a || same_data(*a, *b));
}

// What the settings ask to scan, or why there is nothing to.
struct WantedScan {
  std::optional<DataSourceOptions> options;
  QString why_not;
};

WantedScan wanted_scan(const ConfigPanel& panel) {
  const std::optional<Config> config = panel.config();
  if (!config)
    return {std::nullopt, QObject::tr("Fix the settings first: the dataset is scanned once they are valid.")};
  if (config->data.source == DataSource::synthetic)
    return {std::nullopt, with_setting_labels(
                              QObject::tr("The synthetic source (the demo) has no files to browse: set "
                                          "data.source to folder or dsb2018, and data.path to the dataset."))
                              .text};
  try {
    DataSourceOptions options = data_source_options(*config);
    options.target.cache_mib = 0;  // statuses only: no decoded sample is kept
    return {std::move(options), {}};
  } catch (const std::exception& e) {
    return {std::nullopt, with_setting_labels(QString::fromStdString(e.what())).text};
  }
}

QString shown_path(const std::filesystem::path& path, const std::filesystem::path& root) {
  const std::filesystem::path relative = path.lexically_relative(root);
  const bool inside = !relative.empty() && *relative.begin() != "..";
  return from_path(inside ? relative : path);
}

QString problem_text(const DataProblem& p, const std::filesystem::path& root) {
  return shown_path(p.path, root) + QStringLiteral(": ") + QString::fromStdString(p.problem);
}

// "0 (81 %), 1 (19 %)": each mask value found in the usable samples with its share of their pixels.
QString classes_text(const std::vector<std::int64_t>& pixels, const FileDatasetOptions& target) {
  std::int64_t total = 0;
  for (const std::int64_t n : pixels) total += n;
  // task instances: the masks hold objects, and the classes counted are the target's.
  QStringList names;
  QString objects;
  if (target.instances) {
    const bool boundary = target.instances->target == InstanceTarget::boundary;
    names = boundary
                ? QStringList{QObject::tr("background"), QObject::tr("interior"), QObject::tr("boundary")}
                : QStringList{QObject::tr("background"), QObject::tr("objects")};
    objects = QObject::tr("masks hold objects, trained as instances.target \"%1\"; ")
                  .arg(QLatin1String(to_string(target.instances->target)));
  }
  QStringList found;
  for (std::size_t v = 0; v < pixels.size(); ++v) {
    if (pixels[v] == 0) continue;
    const double share = 100.0 * static_cast<double>(pixels[v]) / static_cast<double>(total);
    QString value = static_cast<int>(v) == target.ignore_index ? QObject::tr("%1 (unlabelled)").arg(v)
                                                               : QString::number(static_cast<qulonglong>(v));
    if (target.instances && static_cast<qsizetype>(v) < names.size())
      value += QStringLiteral(" (%1)").arg(names[static_cast<qsizetype>(v)]);
    found << QObject::tr("%1: %2 % of the pixels").arg(value).arg(share, 0, 'g', 3);
  }
  QStringList absent;
  const int classes = target.classes == 1 ? 2 : target.classes;  // binary masks hold 0 and 1
  for (int k = 0; k < classes; ++k)
    if (static_cast<std::size_t>(k) >= pixels.size() || pixels[static_cast<std::size_t>(k)] == 0)
      absent << QString::number(k);
  QString text =
      objects +
      QObject::tr("classes found: %1").arg(found.isEmpty() ? QObject::tr("none") : found.join(", "));
  if (!absent.isEmpty()) text += QObject::tr("; in no mask: %1").arg(absent.join(", "));
  return text;
}

QImage as_qimage(const Image& image) {
  QImage out(static_cast<int>(image.width), static_cast<int>(image.height), QImage::Format_RGB32);
  for (std::int64_t y = 0; y < image.height; ++y) {
    auto* line = reinterpret_cast<QRgb*>(out.scanLine(static_cast<int>(y)));
    for (std::int64_t x = 0; x < image.width; ++x) {
      const std::uint8_t* p = image.pixels.data() + (y * image.width + x) * image.channels;
      line[x] = image.channels >= 3 ? qRgb(p[0], p[1], p[2]) : qRgb(p[0], p[0], p[0]);
    }
  }
  return out;
}

}  // namespace

ScanDatasetTask::ScanDatasetTask(DataSourceOptions options, QObject* parent)
    : Task(parent), options_(std::move(options)) {}

ScanDatasetTask::~ScanDatasetTask() {
  end_work();
}

void ScanDatasetTask::execute() {
  DataSourceOptions options = options_;
  options.stop = stop_token();
  result_ = scan_dataset(options);
}

PreviewPairTask::PreviewPairTask(FilePair pair, FileDatasetOptions target, int max_side, QObject* parent)
    : Task(parent), pair_(std::move(pair)), target_(std::move(target)), max_side_(max_side) {}

PreviewPairTask::~PreviewPairTask() {
  end_work();
}

void PreviewPairTask::execute() {
  const ImageLimits limits{target_.max_side, target_.max_side};
  const Image image = read_image(pair_.image, limits);
  QImage out = as_qimage(image);
  // The masks merged as training merges them: several (DSB 2018's instances) with OR into a binary mask, or
  // with task instances into objects (one per file, or a label image's ids).
  std::vector<std::uint16_t> mask;
  LabelImage objects;
  if (target_.instances) objects = LabelImage(image.height, image.width);
  QString problem;
  if (pair_.masks.empty()) problem = tr("No mask to lay over the image.");
  for (std::size_t file = 0; file < pair_.masks.size() && problem.isEmpty(); ++file) {
    const std::filesystem::path& path = pair_.masks[file];
    try {
      const MaskImage m = read_mask(path, limits);
      if (m.width != image.width || m.height != image.height) {
        problem = tr("The mask is %1x%2 and the image %3x%4 (width x height): the mask is not drawn.")
                      .arg(m.width)
                      .arg(m.height)
                      .arg(image.width)
                      .arg(image.height);
      } else if (target_.instances) {
        for (std::size_t i = 0; i < m.values.size(); ++i)
          if (m.values[i] != 0) objects.ids[i] = instance_id(m.values[i], file, pair_.masks.size());
      } else if (mask.empty()) {
        mask = m.values;
      } else {
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = (mask[i] != 0 || m.values[i] != 0) ? 1 : 0;
      }
    } catch (const std::exception& e) {
      problem = tr("The mask cannot be read: %1").arg(QString::fromStdString(e.what()));
    }
  }
  note_ = problem;
  if (problem.isEmpty()) {
    const auto colour_at = [&](std::size_t i) -> std::optional<QColor> {
      if (target_.instances) {
        if (objects.ids[i] == 0) return std::nullopt;
        return object_colour(objects.ids[i]);
      }
      const std::uint16_t v = mask[i];
      if (v == 0) return std::nullopt;
      // The ignore label grey; a binary model's any non-zero value the foreground, class 1.
      return static_cast<int>(v) == target_.ignore_index ? QColor(128, 128, 128)
                                                         : class_colour(target_.classes == 1 ? 1 : v);
    };
    for (int y = 0; y < out.height(); ++y) {
      auto* line = reinterpret_cast<QRgb*>(out.scanLine(y));
      for (int x = 0; x < out.width(); ++x) {
        const std::optional<QColor> c =
            colour_at(static_cast<std::size_t>(y) * static_cast<std::size_t>(out.width()) +
                      static_cast<std::size_t>(x));
        if (!c) continue;
        line[x] = qRgb((qRed(line[x]) + c->red()) / 2, (qGreen(line[x]) + c->green()) / 2,
                       (qBlue(line[x]) + c->blue()) / 2);
      }
    }
    if (target_.instances) {
      const std::set<ObjectId> ids(objects.ids.begin(), objects.ids.end());
      const auto count = static_cast<int>(ids.size()) - (ids.count(0) != 0 ? 1 : 0);
      note_ = count == 1 ? tr("1 object.") : tr("%1 objects, each in a colour of its own.").arg(count);
    }
  }
  if (std::max(out.width(), out.height()) > max_side_)
    out = out.scaled(max_side_, max_side_, Qt::KeepAspectRatio, Qt::SmoothTransformation);
  image_ = std::move(out);
}

DatasetBrowser::DatasetBrowser(const ConfigPanel& config, QWidget* parent)
    : QWidget(parent), config_(config) {
  auto* layout = new QVBoxLayout(this);
  auto* top = new QHBoxLayout;
  summary_ = new QLabel(this);
  summary_->setObjectName("dataset_summary");
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  rescan_button_ = new QPushButton(tr("Rescan"), this);
  rescan_button_->setToolTip(tr("Read the dataset's files again (after fixing them on disk)"));
  top->addWidget(summary_, 1);
  top->addWidget(rescan_button_, 0, Qt::AlignTop);
  layout->addLayout(top);

  auto* split = new QSplitter(Qt::Horizontal, this);
  pairs_ = new QTreeWidget(split);
  pairs_->setObjectName("dataset_pairs");
  pairs_->setRootIsDecorated(false);
  pairs_->setUniformRowHeights(true);
  pairs_->setHeaderLabels({tr("Image"), tr("Mask"), tr("Status"), tr("Problems")});
  pairs_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  pairs_->header()->setStretchLastSection(true);
  auto* right = new QWidget(split);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  preview_ = new QLabel(tr("Select a pair to see its image with the mask over it."), right);
  preview_->setAlignment(Qt::AlignCenter);
  preview_->setMinimumSize(200, 200);
  preview_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
  preview_note_ = new QLabel(right);
  preview_note_->setWordWrap(true);
  right_layout->addWidget(preview_, 1);
  right_layout->addWidget(preview_note_);
  split->addWidget(pairs_);
  split->addWidget(right);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  connect(rescan_button_, &QPushButton::clicked, this, [this] { rescan(); });
  connect(pairs_, &QTreeWidget::currentItemChanged, this, [this] { preview_selected(); });
  connect(&config_, &ConfigPanel::config_changed, this, &DatasetBrowser::settings_changed);
  summary_->setText(tr("The dataset is scanned when this tab is shown."));
}

void DatasetBrowser::settings_changed() {
  const WantedScan wanted = wanted_scan(config_);
  if (!stale_ && same_data(wanted.options, shown_)) return;
  stale_ = true;
  if (isVisible()) rescan();
}

void DatasetBrowser::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) rescan();
}

Task* DatasetBrowser::rescan() {
  if (scan_) scan_->abort();  // its answer is dropped
  stale_ = false;
  WantedScan wanted = wanted_scan(config_);
  shown_ = wanted.options;
  if (!wanted.options) {
    pairs_->clear();
    row_pairs_.clear();
    summary_->setText(wanted.why_not);
    emit scanned();
    return nullptr;
  }
  summary_->setText(tr("Scanning %1…").arg(from_path(wanted.options->root)));
  auto* task = new ScanDatasetTask(std::move(*wanted.options));
  scan_ = task;
  return start_owned(task, this, [this, task] {
    if (task != scan_) return;  // another scan has started since
    if (task->state() == Task::State::succeeded) {
      show_scan(*task);
    } else if (task->state() == Task::State::failed) {
      pairs_->clear();
      row_pairs_.clear();
      summary_->setText(with_setting_labels(tr("Cannot scan the dataset: %1").arg(task->failure())).text);
    }
    emit scanned();
  });
}

void DatasetBrowser::show_scan(const ScanDatasetTask& task) {
  const PreflightResult& result = task.result();
  const std::filesystem::path& root = result.report.root;
  pairs_->clear();
  row_pairs_.clear();
  std::vector<std::int64_t> pixels;
  std::set<std::pair<std::filesystem::path, std::string>> of_a_sample;
  std::size_t bad = 0;
  for (const SampleCheck& sample : result.samples) {
    QStringList masks, problems;
    for (const std::filesystem::path& m : sample.pair.masks) masks << shown_path(m, root);
    for (const DataProblem& p : sample.problems) {
      problems << problem_text(p, root);
      of_a_sample.insert({p.path, p.problem});
    }
    auto* row = new QTreeWidgetItem(
        pairs_, {shown_path(sample.pair.image, root), masks.isEmpty() ? tr("none") : masks.join(", "),
                 sample.usable ? tr("good") : tr("bad"), problems.join("; ")});
    row->setToolTip(problems_column, problems.join('\n'));
    row_pairs_.push_back(sample.pair);
    if (!sample.usable) {
      ++bad;
      for (int c = 0; c < pairs_->columnCount(); ++c) row->setForeground(c, QColor(0xc0, 0x2b, 0x2b));
    }
    if (pixels.size() < sample.mask_values.size()) pixels.resize(sample.mask_values.size());
    for (std::size_t v = 0; v < sample.mask_values.size(); ++v) pixels[v] += sample.mask_values[v];
  }
  std::size_t others = 0;
  for (const DataProblem& p : result.report.problems) {
    if (of_a_sample.count({p.path, p.problem})) continue;
    ++others;
    auto* row = new QTreeWidgetItem(
        pairs_, {shown_path(p.path, root), QString(), tr("not used"), problem_text(p, root)});
    row->setToolTip(problems_column, problem_text(p, root));
    row_pairs_.push_back(std::nullopt);
    for (int c = 0; c < pairs_->columnCount(); ++c) row->setForeground(c, QColor(0xb3, 0x6b, 0x00));
  }

  const PreflightReport& report = result.report;
  QStringList lines;
  lines << tr("%1: %2 pairs, %3 good, %4 bad")
               .arg(QString::fromStdString(report.origin()))
               .arg(report.found)
               .arg(report.usable)
               .arg(bad);
  if (others > 0) lines.last() += tr("; %1 more problems about no pair").arg(others);
  lines.last() += "; " + classes_text(pixels, report.target);
  if (report.usable == 0)
    lines << tr("Start refuses this dataset: no pair is usable.");
  else if (bad > 0 || others > 0)
    lines << with_setting_labels(
                 report.skip_bad
                     ? tr("Training leaves the bad pairs out (data.skip_bad is on).")
                     : tr("Start refuses this dataset until the problems are fixed, or data.skip_bad is on."))
                 .text;
  summary_->setText(lines.join('\n'));
}

void DatasetBrowser::preview_selected() {
  if (preview_task_) preview_task_->abort();
  const int row = pairs_->indexOfTopLevelItem(pairs_->currentItem());
  preview_image_ = {};
  preview_->setPixmap({});
  if (row < 0 || static_cast<std::size_t>(row) >= row_pairs_.size() || !row_pairs_[row] || !shown_) {
    preview_->setText(tr("Select a pair to see its image with the mask over it."));
    preview_note_->clear();
    emit previewed();
    return;
  }
  preview_->setText(tr("Reading…"));
  preview_note_->clear();
  auto* task = new PreviewPairTask(*row_pairs_[row], shown_->target, kPreviewSide);
  preview_task_ = task;
  start_owned(task, this, [this, task] {
    if (task != preview_task_) return;  // another row was selected since
    show_preview(*task);
  });
}

void DatasetBrowser::show_preview(const PreviewPairTask& task) {
  if (task.state() == Task::State::succeeded) {
    preview_image_ = task.image();
    preview_note_->setText(task.note());
    fit_preview();
  } else if (task.state() == Task::State::failed) {
    preview_->setText(tr("The image cannot be read: %1").arg(task.failure()));
  }
  emit previewed();
}

void DatasetBrowser::fit_preview() {
  if (preview_image_.isNull()) return;
  preview_->setPixmap(QPixmap::fromImage(
      preview_image_.scaled(preview_->size(), Qt::KeepAspectRatio, Qt::FastTransformation)));
}

void DatasetBrowser::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fit_preview();
}

}  // namespace unet::gui
