// The workbench's configuration form: one editor per key of config_schema(), in the schema's groups, checked
// as the user types with the same rules unet-train applies to a config file. The form is built from the
// schema, so a key added there appears here without code changes; only editors that need more than a type
// are chosen by key (devices) or by type (image size, paths).
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "unet/backend/devices.h"
#include "unet/config/config.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSettings;
class QSpinBox;

namespace unet::gui {

class DeviceList;

class ConfigPanel : public QWidget {
  Q_OBJECT

 public:
  // Filled with the built-in demo config ({}), with the devices list_devices() finds.
  explicit ConfigPanel(QWidget* parent = nullptr);

  // Every field from `c` (and its base_dir); config_changed() once at the end, when valid. Integers beyond
  // what a spin box holds (2^31 - 1) are shown at that limit.
  void set_config(const unet::Config& c);
  // Every field from `doc` (what document() gave, problems included) and `base_dir`: the form as it was.
  void show_document(const nlohmann::json& doc, const std::filesystem::path& base_dir);
  // The form as a Config; nullopt while any field has a problem.
  std::optional<unet::Config> config() const;
  // The form as a config document. An entry that does not parse (lr "abc") is its text, a JSON string, so
  // that config_problems() names it.
  nlohmann::json document() const;
  // "key: problem", every current one, in config_problems() order.
  QStringList problems() const;
  bool is_valid() const { return valid_; }

  // Reads and validates a config file; on success the form shows it and base_dir becomes the file's folder.
  // On failure the form keeps what it had and `error` names the file (and the key). On the calling thread:
  // the window opens a file through a ReadConfigTask (gui/config_files.h) and show_loaded().
  bool load_file(const QString& path, QString* error);
  // `c`, read from `path` (read_config_file), shown; false, the form as it was and `error` naming the file
  // and the key, when the form cannot hold one of its values.
  bool show_loaded(const QString& path, const unet::Config& c, QString* error);
  // Writes the form's config atomically (QSaveFile), every key in schema order; relative paths are written as
  // typed. Fails, saying why, while the form has problems. On the calling thread: the window writes through
  // a WriteFileTask (gui/file_tasks.h) the text_to_save().
  bool save_file(const QString& path, QString* error) const;
  // What save_file() writes to `path`; nullopt, `error` saying why, while the form has problems.
  std::optional<std::string> text_to_save(const QString& path, QString* error) const;

  // Dotted key -> value, as the memory planner's remedies give them: {"train.batch_size": 4,
  // "train.accumulation": 2}. All or nothing: an unknown key or a bad value changes nothing, returns false
  // and says why in `error`.
  bool apply_changes(const nlohmann::json& changes, QString* error = nullptr);

  // Shows another device listing (tests pass their own); the selected devices stay selected.
  void set_devices(const unet::DeviceListing& listing);

  // The last config (its JSON text) and its base dir.
  void save_settings(QSettings& s) const;
  // Shows the stored config. When there is one that no longer validates the form shows the demo and the
  // returned message says why; empty when restored or when nothing was stored.
  QString restore_settings(const QSettings& s);

  // The folder relative paths resolve against (the config file's); empty: the working directory.
  std::filesystem::path base_dir() const { return base_dir_; }
  void set_base_dir(const std::filesystem::path& dir);

  // While training runs: every field disabled.
  void set_read_only(bool read_only);
  bool is_read_only() const { return read_only_; }

  // The editor of a key ("train.batch_size"); for data.image_size the widget holding both spin boxes, for
  // devices the DeviceList. nullptr for an unknown key.
  QWidget* field(const QString& key) const;
  DeviceList* device_list() const { return devices_; }
  // "16 = 6 + 5 + 5 per device; 32 per step with accumulation 2"
  QString batch_text() const;

 signals:
  // After any edit that leaves the form valid (the caller debounces expensive work such as the estimate).
  void config_changed();
  void validity_changed(bool valid);
  // The form changed model.classes itself, because the task, instance target or data source the user picked
  // fixes it (unet/config/class_rule.h): `message` says to what and why, for the status bar.
  void classes_adjusted(const QString& message);

 private:
  enum class EditorKind {
    spin,
    parsed_line,
    text_line,
    check,
    combo,
    pair,
    list_line,
    number_list_line,
    devices
  };

  struct Field {
    const unet::ConfigKey* key = nullptr;
    EditorKind kind = EditorKind::text_line;
    QWidget* editor = nullptr;     // what field() returns
    std::vector<QWidget*> marked;  // the widgets tinted while the key has a problem
    QSpinBox* spins[2] = {nullptr, nullptr};
    QLineEdit* line = nullptr;
    QCheckBox* check = nullptr;
    QComboBox* combo = nullptr;
    QString tooltip;          // help, bounds and default: what the tooltip says while the key has no problem
    QWidget* row = nullptr;   // the editor with its buttons (Browse…), disabled while the key is unused
    QLabel* label = nullptr;  // the row's label; nullptr for the devices list, which has none
    QString unused;  // why the other values leave the key unread (key_applies()); empty if they don't
  };

  void build();
  QWidget* make_editor(Field& f);
  QWidget* make_path_row(Field& f);
  nlohmann::json value_of(const Field& f) const;
  void show_value(Field& f, const nlohmann::json& value);
  void edited();
  // After the user picks a task, instance target or data source: model.classes follows the class rule
  // (gui/config_class_rule.cpp).
  void follow_class_rule();
  // After the user edits model.classes: the rule no longer restores an earlier choice.
  void classes_edited();
  void revalidate();
  void mark(Field& f, const QStringList& problems);
  // Greys out the keys the other values leave unread (key_applies(), the engine's rule), saying why in
  // their tooltips; a key with a problem stays editable, so that it can be fixed.
  void show_applicability();
  // The form as a Config, each value that is wrong on its own left at its default: what decides which keys
  // apply while some field has a problem.
  unet::Config lenient_config() const;
  void browse(Field& f);
  const Field* find_field(const QString& key) const;
  Field* find_field(const QString& key) {
    return const_cast<Field*>(static_cast<const ConfigPanel*>(this)->find_field(key));
  }
  // Why the form cannot show `value` exactly (an integer beyond a spin box's range); nullopt when it can.
  std::optional<std::string> cannot_hold(const Field& f, const nlohmann::json& value) const;
  std::optional<std::string> cannot_hold(const unet::Config& c) const;

  std::vector<Field> fields_;
  std::vector<QWidget*> groups_;
  DeviceList* devices_ = nullptr;
  QLabel* batch_label_ = nullptr;
  QLabel* summary_ = nullptr;
  std::filesystem::path base_dir_;
  std::vector<unet::ConfigProblem> problems_;
  bool valid_ = true;
  bool loading_ = false;  // set while fields are filled programmatically: their signals are not edits
  bool read_only_ = false;
  // The model.classes the user had before follow_class_rule() changed it; restored when no rule fixes the
  // classes any more.
  std::optional<int> classes_chosen_;
};

}  // namespace unet::gui
