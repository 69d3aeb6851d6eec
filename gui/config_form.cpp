// The configuration form's editors, built from config_schema(): one per key, in the schema's groups, chosen
// by the key's type (a spin box, a checked line, a combo box, a pair of spin boxes, a folder with Browse…)
// and only for devices by key; and each editor's value read as JSON and shown from it. Text that does not
// parse as the key's type reads as a JSON string, which config_problems() then reports against that key. What
// the form's values mean as a Config (validation, files, settings) is config_panel.cpp's.
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QFrame>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPalette>
#include <QScrollArea>
#include <QSpinBox>
#include <QToolButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <charconv>
#include <climits>
#include <cmath>

#include "gui/config_panel.h"
#include "gui/config_panel_text.h"
#include "gui/device_list.h"
#include "gui/wheel_guard.h"

namespace unet::gui {

namespace {

using json = nlohmann::json;

std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// The number a user typed, as JSON: an integer when it is one (up to uint64 for seeds), else a finite double.
// ".5", "5." and "1e-3" are accepted; nullopt for anything else, which then goes into the document as text.
std::optional<json> parse_number(const QString& typed) {
  std::string t = typed.trimmed().toStdString();
  if (t.size() > 1 && t[0] == '+' && t[1] != '-') t.erase(0, 1);
  if (t.empty()) return std::nullopt;
  const char* first = t.data();
  const char* last = t.data() + t.size();
  if (t[0] != '-') {
    std::uint64_t u = 0;
    if (auto r = std::from_chars(first, last, u); r.ec == std::errc{} && r.ptr == last) return json(u);
  } else {
    std::int64_t i = 0;
    if (auto r = std::from_chars(first, last, i); r.ec == std::errc{} && r.ptr == last) return json(i);
  }
  double d = 0;
  if (auto r = std::from_chars(first, last, d); r.ec == std::errc{} && r.ptr == last && std::isfinite(d))
    return json(d);
  return std::nullopt;
}

// The values a spin box can take for an integer key: its bounds, within int.
std::pair<int, int> spin_range(const ConfigKey& k) {
  double lo = INT_MIN, hi = INT_MAX;
  if (k.min) lo = std::ceil(*k.min) + (k.min_exclusive && std::ceil(*k.min) == *k.min ? 1 : 0);
  if (k.max) hi = std::floor(*k.max) - (k.max_exclusive && std::floor(*k.max) == *k.max ? 1 : 0);
  lo = std::clamp<double>(lo, INT_MIN, INT_MAX);
  hi = std::clamp<double>(hi, lo, INT_MAX);
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

QString bound_text(const ConfigKey& k, double b) {
  if (k.type == ConfigType::number) return qstr(shortest(b));
  return QString::number(static_cast<long long>(b));
}

// "≥ 1", "> 0", "≥ 0 and < 1": the key's bounds for a tooltip; empty when it has none.
QString bounds_text(const ConfigKey& k) {
  QStringList parts;
  if (k.min)
    parts << (k.min_exclusive ? QStringLiteral("> ") : QStringLiteral("\u2265 ")) + bound_text(k, *k.min);
  if (k.max)
    parts << (k.max_exclusive ? QStringLiteral("< ") : QStringLiteral("\u2264 ")) + bound_text(k, *k.max);
  return parts.join(QStringLiteral(" and "));
}

QString tooltip_for(const ConfigKey& k) {
  QStringList lines;
  lines << qstr(k.path) << qstr(k.help);
  if (k.type == ConfigType::integer || k.type == ConfigType::number || k.type == ConfigType::integer_pair ||
      k.type == ConfigType::number_list) {
    const QString b = bounds_text(k);
    if (!b.isEmpty()) lines << QObject::tr("Range: %1").arg(b);
  }
  if (k.type == ConfigType::enumeration) {
    QStringList choices;
    for (const std::string& c : k.choices) choices << qstr(c);
    lines << QObject::tr("Choices: %1").arg(choices.join(QStringLiteral(", ")));
  }
  lines << QObject::tr("Default: %1").arg(qstr(k.default_value.dump()));
  return lines.join(QLatin1Char('\n'));
}

}  // namespace

void ConfigPanel::build() {
  auto* inner = new QWidget;
  auto* column = new QVBoxLayout(inner);
  std::vector<std::pair<std::string, QFormLayout*>> forms;

  const auto& schema = config_schema();
  fields_.reserve(schema.size());  // editors' slots refer to fields by index; no reallocation after this
  for (const ConfigKey& key : schema) {
    auto group =
        std::find_if(forms.begin(), forms.end(), [&](const auto& g) { return g.first == key.group; });
    if (group == forms.end()) {
      auto* box = new QGroupBox(qstr(key.group), inner);
      box->setObjectName(qstr(key.group));
      auto* form = new QFormLayout(box);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      column->addWidget(box);
      groups_.push_back(box);
      forms.emplace_back(key.group, form);
      group = forms.end() - 1;
    }
    QFormLayout* form = group->second;

    Field& f = fields_.emplace_back();
    f.key = &key;
    f.tooltip = tooltip_for(key);
    QWidget* row = make_editor(f);
    f.row = row;
    if (f.kind == EditorKind::devices) {
      form->addRow(row);  // the list is as wide as the group; its title already says what it is
    } else {
      auto* label = new QLabel(qstr(key.label), group->second->parentWidget());
      label->setToolTip(f.tooltip);
      label->setBuddy(f.editor);
      form->addRow(label, row);
      f.label = label;
    }
    f.editor->setToolTip(f.tooltip);
    for (QWidget* w : f.marked) w->setToolTip(f.tooltip);
  }
  column->addStretch(1);

  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  // The form follows the dock's width (long texts wrap); it scrolls only up and down.
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setWidget(inner);

  summary_ = new QLabel(this);
  summary_->setObjectName(QStringLiteral("problems"));
  QPalette red;
  red.setColor(QPalette::WindowText, QColor(0xb7, 0x1c, 0x1c));
  summary_->setPalette(red);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::PlainText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(scroll, 1);
  layout->addWidget(summary_);
}

QWidget* ConfigPanel::make_editor(Field& f) {
  const ConfigKey& k = *f.key;
  const QString name = qstr(k.path);
  const auto index = fields_.size() - 1;

  if (k.type == ConfigType::string_list && k.path == "devices") {
    f.kind = EditorKind::devices;
    devices_ = new DeviceList(this);
    devices_->setObjectName(name);
    f.editor = devices_;
    f.marked = {devices_->tree()};
    connect(devices_, &DeviceList::changed, this, &ConfigPanel::edited);
    return devices_;
  }

  switch (k.type) {
    case ConfigType::integer:
      if (!k.unsigned64) {
        f.kind = EditorKind::spin;
        auto* spin = new QSpinBox(this);
        const auto [lo, hi] = spin_range(k);
        spin->setRange(lo, hi);
        spin->setAccelerated(true);
        spin->setObjectName(name);
        take_wheel_only_with_focus(spin);
        if (k.path == "model.classes")
          connect(spin, &QSpinBox::valueChanged, this, &ConfigPanel::classes_edited);
        connect(spin, &QSpinBox::valueChanged, this, &ConfigPanel::edited);
        f.spins[0] = spin;
        f.editor = spin;
        f.marked = {spin};
        if (k.path == "train.batch_size") {
          // The global batch means little without its split over the devices; show both together.
          batch_label_ = new QLabel(this);
          batch_label_->setObjectName(QStringLiteral("batch_split"));
          batch_label_->setWordWrap(true);
          batch_label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
          batch_label_->setToolTip(
              tr("How the global batch is split over the selected devices, and the "
                 "samples per optimizer step with gradient accumulation"));
          auto* row = new QWidget(this);
          auto* h = new QHBoxLayout(row);
          h->setContentsMargins(0, 0, 0, 0);
          h->addWidget(spin);
          h->addWidget(batch_label_, 1);
          return row;
        }
        return spin;
      }
      [[fallthrough]];  // 64-bit seeds do not fit a spin box: typed, like numbers
    case ConfigType::number: {
      // A line edit, not a spin box: 1e-3 and 0.0005 are typed as written, and checked as typed.
      f.kind = EditorKind::parsed_line;
      f.line = new QLineEdit(this);
      f.line->setObjectName(name);
      connect(f.line, &QLineEdit::textChanged, this, &ConfigPanel::edited);
      f.editor = f.line;
      f.marked = {f.line};
      return f.line;
    }
    case ConfigType::boolean:
      f.kind = EditorKind::check;
      f.check = new QCheckBox(this);
      f.check->setObjectName(name);
      connect(f.check, &QCheckBox::toggled, this, &ConfigPanel::edited);
      f.editor = f.check;
      f.marked = {f.check};
      return f.check;
    case ConfigType::enumeration:
      f.kind = EditorKind::combo;
      f.combo = new QComboBox(this);
      f.combo->setObjectName(name);
      take_wheel_only_with_focus(f.combo);
      for (const std::string& c : k.choices) f.combo->addItem(qstr(c));
      // Before edited(), so that the form is judged with the classes the rule gives.
      if (k.path == "task" || k.path == "instances.target" || k.path == "data.source")
        connect(f.combo, &QComboBox::currentIndexChanged, this, &ConfigPanel::follow_class_rule);
      connect(f.combo, &QComboBox::currentIndexChanged, this, &ConfigPanel::edited);
      f.editor = f.combo;
      f.marked = {f.combo};
      return f.combo;
    case ConfigType::string:
    case ConfigType::path:
      f.kind = EditorKind::text_line;
      f.line = new QLineEdit(this);
      f.line->setObjectName(name);
      connect(f.line, &QLineEdit::textChanged, this, &ConfigPanel::edited);
      f.editor = f.line;
      f.marked = {f.line};
      if (k.type == ConfigType::path) {
        auto* row = new QWidget(this);
        auto* h = new QHBoxLayout(row);
        h->setContentsMargins(0, 0, 0, 0);
        auto* browse_button = new QToolButton(row);
        browse_button->setText(QStringLiteral("\u2026"));
        browse_button->setObjectName(name + QStringLiteral(":browse"));
        browse_button->setToolTip(tr("Choose a folder"));
        connect(browse_button, &QToolButton::clicked, this, [this, index] { browse(fields_[index]); });
        h->addWidget(f.line, 1);
        h->addWidget(browse_button);
        return row;
      }
      return f.line;
    case ConfigType::integer_pair: {
      // "H × W": the pair's two values side by side, named by the schema (choices hold their names).
      f.kind = EditorKind::pair;
      auto* row = new QWidget(this);
      row->setObjectName(name);
      auto* h = new QHBoxLayout(row);
      h->setContentsMargins(0, 0, 0, 0);
      const auto [lo, hi] = spin_range(k);
      for (int i = 0; i < 2; ++i) {
        auto* spin = new QSpinBox(row);
        spin->setRange(lo, hi);
        spin->setAccelerated(true);
        const QString part =
            k.choices.size() == 2 ? qstr(k.choices[static_cast<std::size_t>(i)]) : QString::number(i);
        spin->setObjectName(name + QLatin1Char(':') + part);
        take_wheel_only_with_focus(spin);
        spin->setAccessibleName(part);
        connect(spin, &QSpinBox::valueChanged, this, &ConfigPanel::edited);
        f.spins[i] = spin;
        f.marked.push_back(spin);
        if (i == 1) h->addWidget(new QLabel(QStringLiteral("\u00d7"), row));
        h->addWidget(spin, 1);
      }
      f.editor = row;
      return row;
    }
    case ConfigType::string_list:
      // A list without an editor of its own: comma-separated text.
      f.kind = EditorKind::list_line;
      f.line = new QLineEdit(this);
      f.line->setObjectName(name);
      f.line->setPlaceholderText(tr("comma-separated"));
      connect(f.line, &QLineEdit::textChanged, this, &ConfigPanel::edited);
      f.editor = f.line;
      f.marked = {f.line};
      return f.line;
    case ConfigType::number_list:
      // Comma-separated numbers, each checked as typed (a part that is no number is shown to the schema as
      // text, which names it).
      f.kind = EditorKind::number_list_line;
      f.line = new QLineEdit(this);
      f.line->setObjectName(name);
      f.line->setPlaceholderText(tr("comma-separated numbers; empty: none"));
      connect(f.line, &QLineEdit::textChanged, this, &ConfigPanel::edited);
      f.editor = f.line;
      f.marked = {f.line};
      return f.line;
  }
  return nullptr;  // unreachable: every ConfigType is handled above
}

json ConfigPanel::value_of(const Field& f) const {
  switch (f.kind) {
    case EditorKind::spin:
      return json(static_cast<std::int64_t>(f.spins[0]->value()));
    case EditorKind::parsed_line:
      if (auto v = parse_number(f.line->text())) return *v;
      return json(f.line->text().toStdString());
    case EditorKind::text_line:
      return json(f.line->text().toStdString());
    case EditorKind::check:
      return json(f.check->isChecked());
    case EditorKind::combo:
      return json(f.combo->currentText().toStdString());
    case EditorKind::pair:
      return json::array(
          {static_cast<std::int64_t>(f.spins[0]->value()), static_cast<std::int64_t>(f.spins[1]->value())});
    case EditorKind::list_line: {
      json list = json::array();
      for (const QString& part : f.line->text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        if (!part.trimmed().isEmpty()) list.push_back(part.trimmed().toStdString());
      return list;
    }
    case EditorKind::number_list_line: {
      json list = json::array();
      for (const QString& part : f.line->text().split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        if (part.trimmed().isEmpty()) continue;
        if (auto number = parse_number(part.trimmed()))
          list.push_back(*number);
        else
          list.push_back(part.trimmed().toStdString());
      }
      return list;
    }
    case EditorKind::devices:
      return json(devices_->values());
  }
  return json();
}

void ConfigPanel::show_value(Field& f, const json& v) {
  const auto as_int = [](const json& x, const QSpinBox* spin) {
    if (!x.is_number()) return spin->value();
    const double d = x.get<double>();
    return static_cast<int>(std::clamp<double>(d, spin->minimum(), spin->maximum()));
  };
  const auto as_text = [](const json& x) {
    return x.is_string() ? qstr(x.get<std::string>()) : qstr(x.dump());
  };
  switch (f.kind) {
    case EditorKind::spin:
      f.spins[0]->setValue(as_int(v, f.spins[0]));
      break;
    case EditorKind::parsed_line:
    case EditorKind::text_line:
      f.line->setText(as_text(v));
      break;
    case EditorKind::check:
      f.check->setChecked(v.is_boolean() && v.get<bool>());
      break;
    case EditorKind::combo:
      f.combo->setCurrentIndex(f.combo->findText(as_text(v)));
      break;
    case EditorKind::pair:
      if (v.is_array() && v.size() == 2)
        for (std::size_t i = 0; i < 2; ++i) f.spins[i]->setValue(as_int(v[i], f.spins[i]));
      break;
    case EditorKind::list_line:
    case EditorKind::number_list_line: {
      QStringList parts;
      if (v.is_array())
        for (const json& e : v) parts << as_text(e);
      f.line->setText(parts.join(QStringLiteral(", ")));
      break;
    }
    case EditorKind::devices: {
      std::vector<std::string> ids;
      if (v.is_array())
        for (const json& e : v)
          if (e.is_string()) ids.push_back(e.get<std::string>());
      devices_->set_values(ids);
      break;
    }
  }
}

void ConfigPanel::browse(Field& f) {
  const QString typed = f.line->text().trimmed();
  QString start = from_path(base_dir_);
  if (!typed.isEmpty()) {
    Config where;
    where.base_dir = base_dir_;
    start = from_path(where.resolve(typed.toStdString()));
  }
  QString dir = QFileDialog::getExistingDirectory(
      this, tr("Choose the folder for \u201c%1\u201d").arg(qstr(f.key->label)), start);
  if (dir.isEmpty()) return;
  // Paths in a config are relative to its file; keep them so when the folder is inside the config's folder.
  if (!base_dir_.empty()) {
    const QString relative = QDir(from_path(base_dir_)).relativeFilePath(dir);
    if (relative != QStringLiteral("..") && !relative.startsWith(QStringLiteral("../")) &&
        !QDir::isAbsolutePath(relative))
      dir = relative;
  }
  f.line->setText(dir);
}

}  // namespace unet::gui
