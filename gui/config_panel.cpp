// The configuration form. Validation never has rules of its own: after every edit the whole form becomes a
// config document and config_problems() judges it, so the form, a config file and `--set` agree on what is
// wrong and say it in the same words. Text that does not parse as the key's type goes into the document as a
// string, which config_problems() then reports against that key.
#include "gui/config_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPalette>
#include <QSaveFile>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QStatusTipEvent>
#include <QToolButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <exception>

#include "gui/device_list.h"
#include "gui/wheel_guard.h"
#include "unet/step/data_plan.h"

namespace unet::gui {

namespace {

using json = nlohmann::json;

const QString kDocumentSetting = QStringLiteral("config_panel/config");
const QString kBaseDirSetting = QStringLiteral("config_panel/base_dir");

// Above this many devices the batch split is written grouped: "100 = 4 × 13 + 4 × 12".
constexpr int kListedReplicas = 8;

std::filesystem::path to_path(const QString& s) {
  return std::filesystem::path(QFile::encodeName(s).toStdString());
}

QString from_path(const std::filesystem::path& p) {
  return QFile::decodeName(QByteArray::fromStdString(p.string()));
}

QString qstr(const std::string& s) {
  return QString::fromStdString(s);
}

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

void set_at(json& doc, const std::string& path, json value) {
  const auto dot = path.find('.');
  if (dot == std::string::npos)
    doc[path] = std::move(value);
  else
    doc[path.substr(0, dot)][path.substr(dot + 1)] = std::move(value);
}

json value_at(const json& doc, const std::string& path) {
  // json::value() throws type_error.306 on anything but an object: a document of `null` or `[]` has no keys.
  if (!doc.is_object()) return json();
  const auto dot = path.find('.');
  if (dot == std::string::npos) return doc.value(path, json());
  const auto section = doc.find(path.substr(0, dot));
  if (section == doc.end() || !section->is_object()) return json();
  return section->value(path.substr(dot + 1), json());
}

// config_problems(), and then what config_from_json() alone may still refuse, so that "no problems" means
// config() will succeed.
std::vector<ConfigProblem> find_problems(const json& doc, const std::filesystem::path& base_dir) {
  std::vector<ConfigProblem> found;
  try {
    found = config_problems(doc);
    if (found.empty()) (void)config_from_json(doc, base_dir);
  } catch (const ConfigError& e) {
    std::string problem = e.message();
    if (!e.key().empty() && problem.starts_with(e.key() + ": ")) problem.erase(0, e.key().size() + 2);
    found.push_back({e.key(), problem});
  } catch (const std::exception& e) {
    found.push_back({"", e.what()});
  }
  return found;
}

// A problem tints the editor. Through the palette, not a style sheet: a style sheet takes spin boxes' and
// combo boxes' native look away, and does not reach a spin box's text field. An empty palette inherits again.
void set_invalid(QWidget* w, bool invalid) {
  if (w->property("invalid").toBool() == invalid) return;
  w->setProperty("invalid", invalid);
  QPalette tint;
  if (invalid) {
    tint.setColor(QPalette::Base, QColor(0xfd, 0xe2, 0xe0));
    tint.setColor(QPalette::Button, QColor(0xfd, 0xe2, 0xe0));
  }
  w->setPalette(tint);
}

}  // namespace

ConfigPanel::ConfigPanel(QWidget* parent) : QWidget(parent) {
  build();
  set_config(config_from_json(json::object()));
}

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
    if (f.kind == EditorKind::devices) {
      form->addRow(row);  // the list is as wide as the group; its title already says what it is
    } else {
      auto* label = new QLabel(qstr(key.label), group->second->parentWidget());
      label->setToolTip(f.tooltip);
      label->setBuddy(f.editor);
      form->addRow(label, row);
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

void ConfigPanel::set_config(const unet::Config& c) {
  loading_ = true;
  for (Field& f : fields_) show_value(f, f.key->get(c));
  base_dir_ = c.base_dir;
  loading_ = false;
  revalidate();
}

void ConfigPanel::set_base_dir(const std::filesystem::path& dir) {
  base_dir_ = dir;
  revalidate();
}

json ConfigPanel::document() const {
  json doc = json::object();
  for (const Field& f : fields_) set_at(doc, f.key->path, value_of(f));
  return doc;
}

std::optional<unet::Config> ConfigPanel::config() const {
  const json doc = document();
  if (!find_problems(doc, base_dir_).empty()) return std::nullopt;
  try {
    return config_from_json(doc, base_dir_);
  } catch (const std::exception&) {
    return std::nullopt;  // find_problems() ran the same call; kept for safety
  }
}

QStringList ConfigPanel::problems() const {
  QStringList out;
  for (const ConfigProblem& p : find_problems(document(), base_dir_))
    out << (p.key.empty() ? qstr(p.problem) : qstr(p.key + ": " + p.problem));
  return out;
}

void ConfigPanel::edited() {
  if (!loading_) revalidate();
}

void ConfigPanel::revalidate() {
  problems_ = find_problems(document(), base_dir_);
  QStringList lines;
  for (const ConfigProblem& p : problems_)
    lines << (p.key.empty() ? qstr(p.problem) : qstr(p.key + ": " + p.problem));
  for (Field& f : fields_) {
    QStringList mine;
    for (const ConfigProblem& p : problems_)
      if (p.key == f.key->path) mine << qstr(p.problem);
    mark(f, mine);
  }
  summary_->setText(lines.join(QLatin1Char('\n')));
  summary_->setVisible(!lines.isEmpty());
  if (batch_label_) batch_label_->setText(batch_text());

  const bool valid = problems_.empty();
  const bool flipped = valid != valid_;
  valid_ = valid;
  if (flipped) emit validity_changed(valid);
  if (valid) emit config_changed();
}

void ConfigPanel::mark(Field& f, const QStringList& problems) {
  const bool invalid = !problems.isEmpty();
  const QString tip =
      invalid ? problems.join(QLatin1Char('\n')) + QStringLiteral("\n\n") + f.tooltip : f.tooltip;
  const QString status = invalid ? qstr(f.key->path) + QStringLiteral(": ") + problems.front() : QString();
  // A status tip shows in the status bar while the pointer is over the field, and stays there: when the
  // problem changes (fixed, or another), the bar is told at once, not at the next hover.
  const QString was = f.editor->statusTip();
  for (QWidget* w : f.marked) {
    set_invalid(w, invalid);
    w->setToolTip(tip);
    w->setStatusTip(status);
  }
  f.editor->setToolTip(tip);
  f.editor->setStatusTip(status);
  const bool in_use = f.editor->underMouse() || f.editor->hasFocus() ||
                      std::any_of(f.marked.begin(), f.marked.end(),
                                  [](const QWidget* w) { return w->underMouse() || w->hasFocus(); });
  if (was != status && (!was.isEmpty() || in_use)) {
    QStatusTipEvent event(status);
    QCoreApplication::sendEvent(f.editor, &event);
  }
}

QString ConfigPanel::batch_text() const {
  const Field* batch_field = find_field(QStringLiteral("train.batch_size"));
  const Field* accumulation_field = find_field(QStringLiteral("train.accumulation"));
  if (!batch_field || !devices_) return {};
  const json b = value_of(*batch_field);
  if (!b.is_number_integer()) return {};
  const std::int64_t batch = b.get<std::int64_t>();
  const auto replicas = static_cast<int>(devices_->values().size());

  QString text;
  if (replicas == 0) {
    text = tr("%1 (no device selected)").arg(batch);
  } else if (replicas == 1) {
    text = tr("%1 on one device").arg(batch);
  } else {
    const std::vector<std::int64_t> split = replica_split(batch, replicas);
    QStringList parts;
    if (replicas <= kListedReplicas) {
      for (std::int64_t n : split) parts << QString::number(n);
    } else {
      // replica_split gives the first batch % R replicas one sample more than the rest.
      const auto more = static_cast<int>(batch % replicas);
      if (more > 0) parts << QStringLiteral("%1 \u00d7 %2").arg(more).arg(split.front());
      parts << QStringLiteral("%1 \u00d7 %2").arg(replicas - more).arg(split.back());
    }
    text = tr("%1 = %2 per device").arg(batch).arg(parts.join(QStringLiteral(" + ")));
    if (batch < replicas) text += tr(" (fewer samples than devices)");
  }
  if (accumulation_field) {
    const json a = value_of(*accumulation_field);
    if (a.is_number_integer() && a.get<std::int64_t>() > 1) {
      const std::int64_t acc = a.get<std::int64_t>();
      text += tr("; %1 per step with accumulation %2").arg(batch * acc).arg(acc);
    }
  }
  return text;
}

QWidget* ConfigPanel::field(const QString& key) const {
  const Field* f = find_field(key);
  return f ? f->editor : nullptr;
}

const ConfigPanel::Field* ConfigPanel::find_field(const QString& key) const {
  const std::string k = key.toStdString();
  for (const Field& f : fields_)
    if (f.key->path == k) return &f;
  return nullptr;
}

std::optional<std::string> ConfigPanel::cannot_hold(const Field& f, const json& value) const {
  const auto outside = [](const json& v, const QSpinBox* spin) -> std::optional<std::string> {
    if (!v.is_number_integer()) return std::nullopt;
    const bool above = v.is_number_unsigned()
                           ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(spin->maximum())
                           : v.get<std::int64_t>() > spin->maximum();
    const bool below = !v.is_number_unsigned() && v.get<std::int64_t>() < spin->minimum();
    if (!above && !below) return std::nullopt;
    return v.dump() + " is beyond what this form can edit (" + std::to_string(spin->minimum()) + ".." +
           std::to_string(spin->maximum()) + ")";
  };
  if (f.kind == EditorKind::spin) return outside(value, f.spins[0]);
  if (f.kind == EditorKind::pair && value.is_array() && value.size() == 2) {
    for (std::size_t i = 0; i < 2; ++i)
      if (auto why = outside(value[i], f.spins[i])) return why;
  }
  return std::nullopt;
}

std::optional<std::string> ConfigPanel::cannot_hold(const unet::Config& c) const {
  for (const Field& f : fields_)
    if (auto why = cannot_hold(f, f.key->get(c))) return f.key->path + ": " + *why;
  return std::nullopt;
}

bool ConfigPanel::load_file(const QString& path, QString* error) {
  const auto fail = [error](const QString& why) {
    if (error) *error = why;
    return false;
  };
  const std::filesystem::path file = to_path(path);
  json doc;
  try {
    doc = read_config_document(file);  // its errors name the file already
  } catch (const std::exception& e) {
    return fail(qstr(e.what()));
  }
  try {
    std::error_code ec;
    std::filesystem::path folder = std::filesystem::absolute(file, ec).parent_path();
    if (ec) folder = file.parent_path();
    const Config c = config_from_json(doc, folder);
    if (auto why = cannot_hold(c)) return fail(path + QStringLiteral(": ") + qstr(*why));
    set_config(c);
    return true;
  } catch (const std::exception& e) {
    return fail(path + QStringLiteral(": ") + qstr(e.what()));
  }
}

bool ConfigPanel::save_file(const QString& path, QString* error) const {
  const auto fail = [error](const QString& why) {
    if (error) *error = why;
    return false;
  };
  const std::optional<Config> c = config();
  if (!c)
    return fail(tr("%1: not saved, the configuration has problems: %2")
                    .arg(path, problems().join(QStringLiteral("; "))));
  std::string text;
  try {
    text = config_to_string(*c);
  } catch (const std::exception& e) {
    return fail(path + QStringLiteral(": ") + qstr(e.what()));
  }
  QSaveFile out(path);
  if (!out.open(QIODevice::WriteOnly)) return fail(path + QStringLiteral(": ") + out.errorString());
  if (out.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()))
    return fail(path + QStringLiteral(": ") + out.errorString());
  if (!out.commit()) return fail(path + QStringLiteral(": ") + out.errorString());
  return true;
}

bool ConfigPanel::apply_changes(const nlohmann::json& changes, QString* error) {
  const auto fail = [error](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (!changes.is_object())
    return fail(tr("changes must be an object of dotted keys, got %1").arg(qstr(changes.dump())));
  // apply_override() reads each change exactly as `--set` and the planner's apply_changes() do.
  json scratch = json::object();
  // Every change is checked before any is shown, so a refused one leaves the form as it was.
  std::vector<std::pair<Field*, json>> checked;
  for (const auto& [key, value] : changes.items()) {
    try {
      apply_override(scratch, key + "=" + value.dump());
    } catch (const std::exception& e) {
      return fail(qstr(e.what()));
    }
    Field* f = find_field(qstr(key));
    if (!f) return fail(qstr(key) + tr(": the form has no editor for this key"));
    const json v = value_at(scratch, key);
    if (auto why = cannot_hold(*f, v)) return fail(qstr(key + ": " + *why));
    checked.emplace_back(f, v);
  }
  loading_ = true;
  for (auto& [f, v] : checked) show_value(*f, v);
  loading_ = false;
  revalidate();
  return true;
}

void ConfigPanel::set_devices(const unet::DeviceListing& listing) {
  devices_->set_listing(listing);
}

void ConfigPanel::save_settings(QSettings& s) const {
  const std::optional<Config> c = config();
  s.setValue(kDocumentSetting, qstr(c ? config_to_string(*c) : document().dump(2)));
  s.setValue(kBaseDirSetting, from_path(base_dir_));
}

QString ConfigPanel::restore_settings(const QSettings& s) {
  if (!s.contains(kDocumentSetting)) return {};
  const std::string text = s.value(kDocumentSetting).toString().toStdString();
  const std::filesystem::path base = to_path(s.value(kBaseDirSetting).toString());
  QString why;
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    why = tr("it is not valid JSON");
  } else {
    try {
      const Config c = config_from_json(doc, base);
      if (auto problem = cannot_hold(c)) {
        why = qstr(*problem);
      } else {
        set_config(c);
        return {};
      }
    } catch (const std::exception& e) {
      why = qstr(e.what());
    }
  }
  set_config(config_from_json(json::object()));
  return tr("The last configuration could not be restored (%1); the demo configuration is shown instead.")
      .arg(why);
}

void ConfigPanel::set_read_only(bool read_only) {
  read_only_ = read_only;
  for (QWidget* g : groups_) g->setEnabled(!read_only);
}

void ConfigPanel::browse(Field& f) {
  const QString typed = f.line->text().trimmed();
  QString start = from_path(base_dir_);
  if (!typed.isEmpty()) {
    Config where;
    where.base_dir = base_dir_;
    start = from_path(where.resolve(typed.toStdString()));
  }
  QString dir = QFileDialog::getExistingDirectory(this, tr("Choose: %1").arg(qstr(f.key->label)), start);
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
