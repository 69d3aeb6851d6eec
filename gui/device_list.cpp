// The devices editor. The rule the rows keep: CPU and CUDA devices never mix in one run, so checking one kind
// unchecks the other here rather than leaving the user to read a config problem about it.
#include "gui/device_list.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <exception>

#include "gui/wheel_guard.h"

namespace unet::gui {

namespace {

constexpr int kMaxCpuReplicas = 1024;

// "cpu" -> "cpu:0", "cuda:01" -> "cuda:1"; text that is no device stays as it is (the panel reports it).
std::string normalised(const std::string& device) {
  const std::optional<DeviceId> id = parse_device(device);
  return id ? id->str() : device;
}

bool is_cpu(const std::string& id) {
  return id.starts_with("cpu");
}

QString item_id(const QTreeWidgetItem* item) {
  return item->data(DeviceList::id_column, Qt::UserRole).toString();
}

}  // namespace

QString cuda_unavailable_text(const unet::DeviceListing& listing) {
  if (listing.cuda_unavailable_reason.empty()) return {};
  QString text =
      QObject::tr("CUDA is unavailable: %1").arg(QString::fromStdString(listing.cuda_unavailable_reason));
  if (const std::string_view what = cuda_requirement_text(listing.cuda_requirement); !what.empty())
    text += QLatin1Char('\n') + QObject::tr("To use a GPU: %1")
                                    .arg(QString::fromUtf8(what.data(), static_cast<qsizetype>(what.size())));
  return text;
}

QString format_bytes(std::int64_t bytes) {
  if (bytes < 0) return QStringLiteral("\u2014");
  constexpr double kMiB = 1024.0 * 1024.0, kGiB = kMiB * 1024.0;
  const auto b = static_cast<double>(bytes);
  if (b >= kGiB) return QString::number(b / kGiB, 'f', 1) + QStringLiteral(" GiB");
  if (b >= kMiB) return QString::number(b / kMiB, 'f', 0) + QStringLiteral(" MiB");
  return QString::number(bytes) + QStringLiteral(" B");
}

DeviceList::DeviceList(QWidget* parent) : QWidget(parent) {
  tree_ = new QTreeWidget(this);
  tree_->setObjectName(QStringLiteral("devices"));
  tree_->setRootIsDecorated(false);
  tree_->setUniformRowHeights(false);
  tree_->setSelectionMode(QAbstractItemView::NoSelection);
  tree_->setHeaderLabels(
      {tr("Device"), tr("Name"), tr("Total"), tr("Free"), tr("Other processes"), tr("Replicas")});
  tree_->headerItem()->setToolTip(others_column, tr("Memory that other processes hold on the device"));
  tree_->headerItem()->setToolTip(replicas_column,
                                  tr("CPU replicas: N trains data-parallel on the CPU as cpu:0 ... cpu:N-1"));
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->header()->setStretchLastSection(false);
  tree_->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);

  // The CPU row lives as long as the widget, so the replicas box in it does too.
  auto* cpu = new QTreeWidgetItem(tree_);
  cpu->setData(id_column, Qt::UserRole, QStringLiteral("cpu:0"));
  cpu->setText(id_column, QStringLiteral("cpu"));
  cpu->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
  cpu->setCheckState(id_column, Qt::Checked);
  replicas_ = new QSpinBox;
  replicas_->setObjectName(QStringLiteral("devices:replicas"));
  take_wheel_only_with_focus(replicas_);
  replicas_->setRange(1, kMaxCpuReplicas);
  replicas_->setToolTip(tree_->headerItem()->toolTip(replicas_column));
  tree_->setItemWidget(cpu, replicas_column, replicas_);

  note_ = new QLabel(this);
  note_->setObjectName(QStringLiteral("devices:note"));
  note_->setWordWrap(true);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  note_->hide();
  refresh_ = new QPushButton(tr("Refresh"), this);
  refresh_->setToolTip(tr("List the devices again"));

  auto* below = new QHBoxLayout;
  below->setContentsMargins(0, 0, 0, 0);
  below->addWidget(note_, 1);
  below->addWidget(refresh_, 0, Qt::AlignTop | Qt::AlignRight);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(tree_);
  layout->addLayout(below);

  connect(tree_, &QTreeWidget::itemChanged, this, &DeviceList::item_changed);
  connect(replicas_, &QSpinBox::valueChanged, this, &DeviceList::replicas_changed);
  connect(refresh_, &QPushButton::clicked, this, &DeviceList::refresh);

  refresh();
}

void DeviceList::refresh() {
  try {
    listing_ = list_devices();
    refresh_error_.clear();
  } catch (const std::exception& e) {
    // Keep the rows we had; the user sees why they did not change.
    refresh_error_ = tr("Could not list the devices: %1").arg(QString::fromStdString(e.what()));
  }
  rebuild();
}

void DeviceList::set_listing(const unet::DeviceListing& listing) {
  listing_ = listing;
  refresh_error_.clear();
  rebuild();
}

void DeviceList::set_values(const std::vector<std::string>& devices) {
  values_.clear();
  std::vector<std::string> cpus;
  for (const std::string& d : devices) {
    values_.push_back(normalised(d));
    if (is_cpu(values_.back())) cpus.push_back(values_.back());
  }
  // A config without the CPU keeps the replica count the user last chose, for when they switch back.
  if (!cpus.empty()) cpu_ids_ = std::move(cpus);
  rebuild();
}

QTreeWidgetItem* DeviceList::item(const QString& id) const {
  const QString wanted = id == QStringLiteral("cpu") ? QStringLiteral("cpu:0") : id;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* it = tree_->topLevelItem(i);
    if (item_id(it) == wanted) return it;
  }
  return nullptr;
}

void DeviceList::rebuild() {
  updating_ = true;
  QTreeWidgetItem* cpu = tree_->topLevelItem(0);
  while (tree_->topLevelItemCount() > 1) delete tree_->takeTopLevelItem(1);

  const auto set_memory = [](QTreeWidgetItem* it, const DeviceInfo& d) {
    it->setText(total_column, format_bytes(d.total_bytes > 0 ? d.total_bytes : -1));
    it->setText(free_column, format_bytes(d.total_bytes > 0 ? d.free_bytes : -1));
    it->setText(others_column, d.others_not_attributable ? DeviceList::tr("not attributable")
                                                         : format_bytes(d.used_by_others_bytes));
    for (int c : {total_column, free_column, others_column})
      it->setTextAlignment(c, Qt::AlignRight | Qt::AlignVCenter);
    it->setToolTip(id_column, QString::fromStdString(d.id + "  " + d.name));
    it->setToolTip(name_column, QString::fromStdString(d.name));
  };

  // The CPU: the listing's, or a plain row when a listing (a test's, say) has none; the CPU is always usable.
  const auto cpu_info = std::find_if(listing_.devices.begin(), listing_.devices.end(),
                                     [](const DeviceInfo& d) { return d.kind == DeviceKind::cpu; });
  DeviceInfo plain_cpu;
  plain_cpu.id = "cpu:0";
  plain_cpu.name = "CPU";
  plain_cpu.total_bytes = -1;
  plain_cpu.free_bytes = -1;
  const DeviceInfo& c = cpu_info != listing_.devices.end() ? *cpu_info : plain_cpu;
  cpu->setText(name_column, QString::fromStdString(c.name));
  set_memory(cpu, c);

  std::vector<std::string> listed{"cpu:0"};
  for (const DeviceInfo& d : listing_.devices) {
    if (d.kind == DeviceKind::cpu) continue;
    auto* it = new QTreeWidgetItem(tree_);
    it->setData(id_column, Qt::UserRole, QString::fromStdString(d.id));
    it->setText(id_column, QString::fromStdString(d.id));
    it->setText(name_column, QString::fromStdString(d.name));
    it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    it->setCheckState(id_column, Qt::Unchecked);
    set_memory(it, d);
    listed.push_back(d.id);
  }
  // Devices the config names that this machine does not offer.
  for (const std::string& v : values_) {
    if (is_cpu(v) || std::find(listed.begin(), listed.end(), v) != listed.end()) continue;
    auto* it = new QTreeWidgetItem(tree_);
    it->setData(id_column, Qt::UserRole, QString::fromStdString(v));
    it->setText(id_column, QString::fromStdString(v));
    it->setText(name_column, tr("not found on this machine"));
    for (int col : {total_column, free_column, others_column}) it->setText(col, format_bytes(-1));
    it->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    it->setCheckState(id_column, Qt::Unchecked);
    it->setForeground(name_column, palette().brush(QPalette::Disabled, QPalette::Text));
    it->setToolTip(id_column,
                   tr("The config names %1, but the engine does not list it here; a run would fail")
                       .arg(QString::fromStdString(v)));
    listed.push_back(v);
  }
  updating_ = false;
  sync_checks();
  show_note();
  fit_height();
}

void DeviceList::sync_checks() {
  updating_ = true;
  QTreeWidgetItem* cpu = tree_->topLevelItem(0);
  const bool cpu_on = std::any_of(values_.begin(), values_.end(), is_cpu);
  cpu->setCheckState(id_column, cpu_on ? Qt::Checked : Qt::Unchecked);
  for (int i = 1; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* it = tree_->topLevelItem(i);
    const std::string id = item_id(it).toStdString();
    const bool on = std::find(values_.begin(), values_.end(), id) != values_.end();
    it->setCheckState(id_column, on ? Qt::Checked : Qt::Unchecked);
  }
  {
    const QSignalBlocker block(replicas_);
    replicas_->setValue(static_cast<int>(std::min<std::size_t>(cpu_ids_.size(), kMaxCpuReplicas)));
  }
  replicas_->setEnabled(cpu_on);
  updating_ = false;
}

void DeviceList::item_changed(QTreeWidgetItem* changed_item, int column) {
  if (updating_ || column != id_column) return;
  updating_ = true;
  if (changed_item->checkState(id_column) == Qt::Checked) {
    const bool cpu_checked = changed_item == tree_->topLevelItem(0);
    for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
      QTreeWidgetItem* it = tree_->topLevelItem(i);
      const bool other_kind = cpu_checked ? i > 0 : i == 0;
      if (other_kind) it->setCheckState(id_column, Qt::Unchecked);
    }
  }
  replicas_->setEnabled(tree_->topLevelItem(0)->checkState(id_column) == Qt::Checked);
  updating_ = false;
  values_ = selection_from_rows();
  emit changed();
}

void DeviceList::replicas_changed(int count) {
  if (updating_) return;
  cpu_ids_.clear();
  for (int i = 0; i < count; ++i) cpu_ids_.push_back("cpu:" + std::to_string(i));
  values_ = selection_from_rows();
  emit changed();
}

std::vector<std::string> DeviceList::selection_from_rows() const {
  std::vector<std::string> out;
  if (tree_->topLevelItem(0)->checkState(id_column) == Qt::Checked) out = cpu_ids_;
  for (int i = 1; i < tree_->topLevelItemCount(); ++i) {
    const QTreeWidgetItem* it = tree_->topLevelItem(i);
    if (it->checkState(id_column) == Qt::Checked) out.push_back(item_id(it).toStdString());
  }
  return out;
}

void DeviceList::show_note() {
  QString text = refresh_error_;
  if (text.isEmpty() && !listing_.cuda_unavailable_reason.empty()) {
    text = cuda_unavailable_text(listing_);
    // The CUDA module's view of each GPU when it could list them, the driver's names otherwise.
    for (const GpuInfo& g : listing_.gpus) {
      const DeviceInfo& d = g.device;
      text +=
          QLatin1Char('\n') +
          tr("%1: %2, compute capability %3, %4 total, %5 free, %6 used by other processes")
              .arg(QString::fromStdString(d.id), QString::fromStdString(d.name),
                   QString::fromStdString(d.compute_capability), format_bytes(d.total_bytes),
                   format_bytes(d.free_bytes),
                   d.others_not_attributable ? tr("not attributable") : format_bytes(d.used_by_others_bytes));
      if (!g.unusable_reason.empty())
        text += QStringLiteral("; ") + tr("unusable: %1").arg(QString::fromStdString(g.unusable_reason));
    }
    if (listing_.gpus.empty() && !listing_.gpus_seen.empty()) {
      QStringList gpus;
      for (const std::string& g : listing_.gpus_seen) gpus << QString::fromStdString(g);
      text += QLatin1Char('\n') + tr("GPUs the driver reports: %1").arg(gpus.join(QStringLiteral(", ")));
    }
  }
  if (refresh_error_.isEmpty() && listing_.versions.any()) {
    const auto known = [this](const std::string& v) {
      return v.empty() ? tr("unknown") : QString::fromStdString(v);
    };
    const CudaVersions& v = listing_.versions;
    text += (text.isEmpty() ? QString() : QStringLiteral("\n")) +
            tr("CUDA versions: driver %1, runtime %2, cuDNN %3, NCCL %4")
                .arg(known(v.driver), known(v.runtime), known(v.cudnn), known(v.nccl));
    if (const std::string comm = gpu_communicator_text(v); !comm.empty())
      text +=
          QLatin1Char('\n') + tr("Several GPUs sum gradients through %1").arg(QString::fromStdString(comm));
  }
  note_->setText(text);
  note_->setVisible(!text.isEmpty());
}

// A list of a few devices should show them all without a scroll bar, and not take more room than that.
// Room is kept for the horizontal scroll bar, which a narrow dock shows under the columns: without it, the
// bar would cover half of the last row.
void DeviceList::fit_height() {
  const int rows = tree_->topLevelItemCount();
  int row = std::max(replicas_->sizeHint().height(), fontMetrics().height() + 8);
  for (int i = 0; i < rows; ++i) row = std::max(row, tree_->sizeHintForRow(i));
  const int visible = std::min(rows, 8);
  tree_->setFixedHeight(tree_->header()->sizeHint().height() + visible * row +
                        tree_->horizontalScrollBar()->sizeHint().height() + 2 * tree_->frameWidth() + 2);
}

}  // namespace unet::gui
