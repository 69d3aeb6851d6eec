// The configuration form's binding to a Config (its editors are built, read and shown in config_form.cpp).
// Validation never has rules of its own: after every edit the whole form becomes a config document and
// config_problems() judges it, so the form, a config file and `--set` agree on what is wrong and say it in
// the same words. Text that does not parse as the key's type goes into the document as a string, which
// config_problems() then reports against that key. Here too: the config files, the stored settings, the
// remedies' changes and the batch split's text.
#include "gui/config_panel.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPalette>
#include <QSettings>
#include <QSpinBox>
#include <QStatusTipEvent>

#include <algorithm>
#include <exception>

#include "gui/config_files.h"
#include "gui/config_panel_text.h"
#include "gui/device_list.h"
#include "unet/config/key_applies.h"
#include "unet/step/data_plan.h"

namespace unet::gui {

namespace {

using json = nlohmann::json;

const QString kDocumentSetting = QStringLiteral("config_panel/config");
const QString kBaseDirSetting = QStringLiteral("config_panel/base_dir");

// Above this many devices the batch split is written grouped: "100 = 4 × 13 + 4 × 12".
constexpr int kListedReplicas = 8;

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

void ConfigPanel::set_config(const unet::Config& c) {
  classes_chosen_.reset();
  loading_ = true;
  for (Field& f : fields_) show_value(f, f.key->get(c));
  base_dir_ = c.base_dir;
  loading_ = false;
  revalidate();
}

void ConfigPanel::show_document(const json& doc, const std::filesystem::path& base_dir) {
  classes_chosen_.reset();
  loading_ = true;
  for (Field& f : fields_) show_value(f, value_at(doc, f.key->path));
  base_dir_ = base_dir;
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
  show_applicability();
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

unet::Config ConfigPanel::lenient_config() const {
  Config c = config_from_json(json::object());
  for (const Field& f : fields_) {
    const json value = value_of(f);
    if (!validate_value(*f.key, value)) f.key->set(c, value);
  }
  return c;
}

void ConfigPanel::show_applicability() {
  const Config c = lenient_config();
  for (Field& f : fields_) {
    std::string why;
    const bool applies = key_applies(c, f.key->path, &why);
    f.unused = applies ? QString() : tr("Not used: %1.").arg(qstr(why));
    const bool has_problem = std::any_of(problems_.begin(), problems_.end(),
                                         [&](const ConfigProblem& p) { return p.key == f.key->path; });
    f.row->setEnabled(applies || has_problem);
    if (f.label) {
      f.label->setEnabled(applies || has_problem);
      f.label->setToolTip(applies ? f.tooltip : f.unused + QStringLiteral("\n\n") + f.tooltip);
    }
  }
}

void ConfigPanel::mark(Field& f, const QStringList& problems) {
  const bool invalid = !problems.isEmpty();
  QString tip = f.unused.isEmpty() ? f.tooltip : f.unused + QStringLiteral("\n\n") + f.tooltip;
  if (invalid) tip = problems.join(QLatin1Char('\n')) + QStringLiteral("\n\n") + tip;
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
  try {
    return show_loaded(path, read_config_file(path), error);
  } catch (const std::exception& e) {
    if (error) *error = qstr(e.what());
    return false;
  }
}

bool ConfigPanel::show_loaded(const QString& path, const unet::Config& c, QString* error) {
  if (auto why = cannot_hold(c)) {
    if (error) *error = path + QStringLiteral(": ") + qstr(*why);
    return false;
  }
  set_config(c);
  return true;
}

std::optional<std::string> ConfigPanel::text_to_save(const QString& path, QString* error) const {
  const auto fail = [error](const QString& why) -> std::optional<std::string> {
    if (error) *error = why;
    return std::nullopt;
  };
  const std::optional<Config> c = config();
  if (!c)
    return fail(tr("%1: not saved, the configuration has problems: %2")
                    .arg(path, problems().join(QStringLiteral("; "))));
  try {
    return config_to_string(*c);
  } catch (const std::exception& e) {
    return fail(path + QStringLiteral(": ") + qstr(e.what()));
  }
}

bool ConfigPanel::save_file(const QString& path, QString* error) const {
  const std::optional<std::string> text = text_to_save(path, error);
  if (!text) return false;
  try {
    write_file_atomically(path, QByteArray::fromStdString(*text));
    return true;
  } catch (const std::exception& e) {
    if (error) *error = qstr(e.what());
    return false;
  }
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

}  // namespace unet::gui
