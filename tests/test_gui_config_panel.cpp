// The configuration panel, driven through its real widgets offscreen: spin boxes set, text typed key by key,
// checks toggled. Each test says what the resulting config (or problem list) must be, so a form that drifts
// from config_schema() or from config_problems() fails here.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QToolButton>
#include <QTreeWidget>
#include <QWheelEvent>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "gui/config_panel.h"
#include "gui/device_list.h"
#include "test_support.h"
#include "unet/backend/cuda_module.h"
#include "unet/config/config.h"
#include "unet/config/key_applies.h"
#include "unet/plan/memory_planner.h"

using unet::Config;
using unet::gui::ConfigPanel;
using unet::gui::DeviceList;
using json = nlohmann::json;

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

Config demo() {
  return unet::config_from_json(json::object());
}

QString text_of(const Config& c) {
  return QString::fromStdString(config_to_string(c));
}

QStringList strings(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v) out << QString::fromStdString(s);
  return out;
}

template <class T>
T* editor(const ConfigPanel& p, const char* key) {
  T* w = qobject_cast<T*>(p.field(QString::fromLatin1(key)));
  if (!w)
    QTest::qFail(qPrintable(QStringLiteral("no editor of the expected type for ") + key), __FILE__, __LINE__);
  return w;
}

// What a user does to replace a field's text: select all, delete, type.
void retype(QLineEdit* line, const QString& text) {
  line->setFocus();
  line->selectAll();
  QTest::keyClick(line, Qt::Key_Delete);
  QTest::keyClicks(line, text);
}

void write_file(const QString& path, const std::string& text) {
  std::ofstream out(std::filesystem::path(path.toStdString()), std::ios::binary);
  out << text;
}

QString read_file(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

unet::DeviceInfo device(const char* id, const char* name, unet::DeviceKind kind, int index,
                        std::int64_t total, std::int64_t free_bytes, std::int64_t others) {
  unet::DeviceInfo d;
  d.id = id;
  d.name = name;
  d.kind = kind;
  d.index = index;
  d.total_bytes = total;
  d.free_bytes = free_bytes;
  d.used_by_others_bytes = others;
  return d;
}

// A CPU and two CUDA devices; the first GPU knows what other processes hold on it.
unet::DeviceListing two_gpus() {
  unet::DeviceListing l;
  l.devices.push_back(device("cpu:0", "Test CPU", unet::DeviceKind::cpu, 0, 64 * kGiB, 32 * kGiB, -1));
  l.devices.push_back(
      device("cuda:0", "Test GPU A", unet::DeviceKind::cuda, 0, 80 * kGiB, 70 * kGiB, 2 * kGiB));
  l.devices.push_back(device("cuda:1", "Test GPU B", unet::DeviceKind::cuda, 1, 24 * kGiB, 20 * kGiB, -1));
  return l;
}

unet::DeviceListing cpu_only(const std::string& reason) {
  unet::DeviceListing l;
  l.devices.push_back(device("cpu:0", "Test CPU", unet::DeviceKind::cpu, 0, 16 * kGiB, 8 * kGiB, -1));
  l.cuda_unavailable_reason = reason;
  return l;
}

}  // namespace

class TestConfigPanel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { unet::test::fail_on_warnings(); }

  void starts_with_the_demo() {
    ConfigPanel p;
    const auto c = p.config();
    QVERIFY(c);
    QCOMPARE(text_of(*c), text_of(demo()));
    QVERIFY(*c == demo());
    QVERIFY(p.document() == unet::config_to_json(demo()));
    QVERIFY(p.is_valid());
    QVERIFY(p.problems().isEmpty());
    QVERIFY(p.findChild<QLabel*>(QStringLiteral("problems"))->isHidden());
    QCOMPARE(p.batch_text(), QStringLiteral("8 on one device"));
  }

  // loss.class_weights, a list of numbers, is typed comma-separated: numbers become numbers, anything else
  // stays text for the schema to name; it round-trips through set_config().
  void class_weights_are_typed_as_numbers() {
    ConfigPanel p;
    auto* line = qobject_cast<QLineEdit*>(p.field(QStringLiteral("loss.class_weights")));
    QVERIFY(line);
    QCOMPARE(line->text(), QString());
    line->setText(QStringLiteral("0.5, 2"));
    QCOMPARE(p.document()["loss"]["class_weights"].dump(), std::string("[0.5,2]"));
    QVERIFY(p.is_valid());
    QCOMPARE(p.config()->loss.class_weights, (std::vector<double>{0.5, 2}));
    line->setText(QStringLiteral("1, heavy"));
    QVERIFY(!p.is_valid());
    QVERIFY2(p.problems().join("\n").contains(
                 R"(loss.class_weights: entry 1 must be a finite number, got "heavy")"),
             qPrintable(p.problems().join("\n")));
    unet::Config c;
    c.loss.class_weights = {0.25, 3};
    p.set_config(c);
    QCOMPARE(line->text(), QStringLiteral("0.25, 3.0"));
    QVERIFY(p.config() && p.config()->loss == c.loss);
  }

  void every_key_has_an_editor_in_its_group() {
    ConfigPanel p;
    QStringList groups;
    for (const auto& k : unet::config_schema())
      if (!groups.contains(QString::fromStdString(k.group))) groups << QString::fromStdString(k.group);
    QCOMPARE(groups,
             (QStringList{"Model", "Loss", "Data", "Augment", "Task", "Training", "Optimizer", "Schedule",
                          "Early stopping", "Precision", "Memory", "Devices", "Checkpoints"}));

    QStringList shown;
    for (const QGroupBox* box : p.findChildren<QGroupBox*>()) shown << box->title();
    QCOMPARE(shown, groups);

    for (const auto& k : unet::config_schema()) {
      const QString key = QString::fromStdString(k.path);
      QWidget* w = p.field(key);
      QVERIFY2(w, qPrintable(key));
      QWidget* box = w;
      while (box && !qobject_cast<QGroupBox*>(box)) box = box->parentWidget();
      QVERIFY2(box, qPrintable(key + " is in no group"));
      QCOMPARE(static_cast<QGroupBox*>(box)->title(), QString::fromStdString(k.group));
      QVERIFY2(w->toolTip().contains(QString::fromStdString(k.help)), qPrintable(key));
      QVERIFY2(w->toolTip().contains(key), qPrintable(key));
    }
    QCOMPARE(p.field(QStringLiteral("train.no_such_key")), nullptr);
  }

  void editors_follow_the_key_types() {
    ConfigPanel p;
    for (const auto& k : unet::config_schema()) {
      const QString key = QString::fromStdString(k.path);
      QWidget* w = p.field(key);
      switch (k.type) {
        case unet::ConfigType::integer:
          if (k.unsigned64) {
            QVERIFY2(qobject_cast<QLineEdit*>(w), qPrintable(key));
          } else {
            auto* spin = qobject_cast<QSpinBox*>(w);
            QVERIFY2(spin, qPrintable(key));
            QCOMPARE(spin->minimum(), static_cast<int>(*k.min));
            QCOMPARE(spin->maximum(), k.max && *k.max < INT_MAX ? static_cast<int>(*k.max) : INT_MAX);
          }
          break;
        case unet::ConfigType::number:
        case unet::ConfigType::string:
          QVERIFY2(qobject_cast<QLineEdit*>(w), qPrintable(key));
          break;
        case unet::ConfigType::path:
          QVERIFY2(qobject_cast<QLineEdit*>(w), qPrintable(key));
          QVERIFY2(p.findChild<QToolButton*>(key + QStringLiteral(":browse")), qPrintable(key));
          break;
        case unet::ConfigType::boolean:
          QVERIFY2(qobject_cast<QCheckBox*>(w), qPrintable(key));
          break;
        case unet::ConfigType::enumeration: {
          auto* combo = qobject_cast<QComboBox*>(w);
          QVERIFY2(combo, qPrintable(key));
          QStringList items;
          for (int i = 0; i < combo->count(); ++i) items << combo->itemText(i);
          QCOMPARE(items, strings(k.choices));
          break;
        }
        case unet::ConfigType::integer_pair:
          QCOMPARE(w->findChildren<QSpinBox*>().size(), 2);
          break;
        case unet::ConfigType::string_list:
          if (k.path == "devices")
            QVERIFY(qobject_cast<DeviceList*>(w));
          else
            QVERIFY2(qobject_cast<QLineEdit*>(w), qPrintable(key));
          break;
        case unet::ConfigType::number_list:
          QVERIFY2(qobject_cast<QLineEdit*>(w), qPrintable(key));
          break;
      }
    }
  }

  void edits_change_the_config() {
    // Not shown: the offscreen platform warns about size hints of shown windows, and events reach the
    // editors all the same.
    ConfigPanel p;
    QSignalSpy changed(&p, &ConfigPanel::config_changed);

    editor<QSpinBox>(p, "model.width")->setValue(32);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(p.config()->model.width, 32);

    auto* batch = editor<QSpinBox>(p, "train.batch_size");
    batch->setFocus();
    batch->selectAll();
    QTest::keyClicks(batch, QStringLiteral("16"));
    QCOMPARE(batch->value(), 16);
    QCOMPARE(p.config()->train.batch_size, 16);

    auto* precision = editor<QComboBox>(p, "precision");
    precision->setCurrentIndex(precision->findText(QStringLiteral("mixed-bf16")));
    QCOMPARE(p.config()->precision, unet::Precision::mixed_bf16);

    changed.clear();
    auto* checkpointing = editor<QCheckBox>(p, "memory.checkpointing");
    checkpointing->setFocus();
    QTest::keyClick(checkpointing, Qt::Key_Space);
    QVERIFY(checkpointing->isChecked());
    QCOMPARE(p.config()->memory.checkpointing, true);
    QCOMPARE(changed.count(), 1);

    retype(editor<QLineEdit>(p, "train.lr"), QStringLiteral("5e-4"));
    QCOMPARE(p.config()->train.lr, 5e-4);
    // A 64-bit seed that no spin box could hold.
    retype(editor<QLineEdit>(p, "train.seed"), QStringLiteral("18446744073709551615"));
    QCOMPARE(p.config()->train.seed, UINT64_MAX);

    auto* size = p.field(QStringLiteral("data.image_size"));
    size->findChild<QSpinBox*>(QStringLiteral("data.image_size:height"))->setValue(256);
    size->findChild<QSpinBox*>(QStringLiteral("data.image_size:width"))->setValue(192);
    QCOMPARE(p.config()->data.image_height, 256);
    QCOMPARE(p.config()->data.image_width, 192);

    auto* source = editor<QComboBox>(p, "data.source");
    source->setCurrentIndex(source->findText(QStringLiteral("folder")));
    QVERIFY(p.problems().contains(QStringLiteral("data.path: required when data.source is \"folder\"")));
    retype(editor<QLineEdit>(p, "data.path"), QStringLiteral("images/cells"));
    QCOMPARE(p.config()->data.path, std::string("images/cells"));

    retype(editor<QLineEdit>(p, "checkpoint.template"), QStringLiteral("m-{step}.safetensors"));
    QCOMPARE(p.config()->checkpoint.filename_template, std::string("m-{step}.safetensors"));

    // Everything else is still the demo's.
    Config expected = demo();
    expected.model.width = 32;
    expected.train.batch_size = 16;
    expected.precision = unet::Precision::mixed_bf16;
    expected.memory.checkpointing = true;
    expected.train.lr = 5e-4;
    expected.train.seed = UINT64_MAX;
    expected.data.image_height = 256;
    expected.data.image_width = 192;
    expected.data.source = unet::DataSource::folder;
    expected.data.path = "images/cells";
    expected.checkpoint.filename_template = "m-{step}.safetensors";
    QCOMPARE(text_of(*p.config()), text_of(expected));
  }

  void invalid_lr_is_reported_as_typed() {
    ConfigPanel p;
    QSignalSpy validity(&p, &ConfigPanel::validity_changed);
    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    auto* lr = editor<QLineEdit>(p, "train.lr");
    auto* summary = p.findChild<QLabel*>(QStringLiteral("problems"));

    retype(lr, QStringLiteral("abc"));
    QVERIFY(!p.config());
    QVERIFY(!p.is_valid());
    QCOMPARE(validity.count(), 1);
    QCOMPARE(validity.at(0).at(0).toBool(), false);
    QCOMPARE(changed.count(), 0);
    QCOMPARE(p.problems(), QStringList{QStringLiteral("train.lr: must be a number, got \"abc\"")});
    QVERIFY(lr->property("invalid").toBool());
    QVERIFY(lr->toolTip().startsWith(QStringLiteral("must be a number")));
    QVERIFY(!summary->isHidden());
    QVERIFY(summary->text().contains(QStringLiteral("train.lr")));
    QVERIFY(!editor<QLineEdit>(p, "train.weight_decay")->property("invalid").toBool());

    retype(lr, QStringLiteral("-1"));
    QCOMPARE(p.problems(), QStringList{QStringLiteral("train.lr: must be > 0, got -1")});
    QCOMPARE(validity.count(), 1);  // still invalid: no new signal
    QCOMPARE(changed.count(), 0);

    retype(lr, QStringLiteral("0.01"));
    QVERIFY(p.is_valid());
    QCOMPARE(validity.count(), 2);
    QCOMPARE(validity.at(1).at(0).toBool(), true);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(p.config()->train.lr, 0.01);
    QVERIFY(!lr->property("invalid").toBool());
    QVERIFY(!lr->toolTip().contains(QStringLiteral("must be")));
    QVERIFY(summary->isHidden());
  }

  void cross_key_problem_names_image_size() {
    ConfigPanel p;
    QCOMPARE(editor<QSpinBox>(p, "model.depth")->value(), 4);
    auto* height = p.field(QStringLiteral("data.image_size"))
                       ->findChild<QSpinBox*>(QStringLiteral("data.image_size:height"));
    height->setValue(100);
    QVERIFY(!p.config());
    const QStringList problems = p.problems();
    QCOMPARE(problems.size(), 1);
    QVERIFY2(problems[0].startsWith(
                 QStringLiteral("data.image_size: height 100 is not a multiple of 2^depth = 16")),
             qPrintable(problems[0]));
    QVERIFY(height->property("invalid").toBool());
    QVERIFY(!editor<QSpinBox>(p, "model.depth")->property("invalid").toBool());

    editor<QSpinBox>(p, "model.depth")->setValue(2);  // 100 is a multiple of 4
    QVERIFY(p.problems().isEmpty());
    QCOMPARE(p.config()->data.image_height, 100);
    QVERIFY(!height->property("invalid").toBool());
  }

  void batch_label_shows_the_split() {
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    auto* label = p.findChild<QLabel*>(QStringLiteral("batch_split"));
    p.device_list()->replicas()->setValue(3);
    QCOMPARE(strings(unet::device_names(p.config()->devices)), (QStringList{"cpu:0", "cpu:1", "cpu:2"}));
    editor<QSpinBox>(p, "train.batch_size")->setValue(16);
    QCOMPARE(p.batch_text(), QStringLiteral("16 = 6 + 5 + 5 per device"));
    QCOMPARE(label->text(), p.batch_text());

    editor<QSpinBox>(p, "train.accumulation")->setValue(2);
    QCOMPARE(p.batch_text(), QStringLiteral("16 = 6 + 5 + 5 per device; 32 per step with accumulation 2"));
    QCOMPARE(label->text(), p.batch_text());

    p.device_list()->replicas()->setValue(1);
    QCOMPARE(label->text(), QStringLiteral("16 on one device; 32 per step with accumulation 2"));
    p.device_list()->replicas()->setValue(20);
    QCOMPARE(label->text(),
             QStringLiteral("16 = 16 \u00d7 1 + 4 \u00d7 0 per device (fewer samples than devices); "
                            "32 per step with accumulation 2"));
  }

  void apply_changes_changes_exactly_those_keys() {
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    const Config before = *p.config();
    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    QString error;

    QVERIFY2(p.apply_changes({{"train.batch_size", 4}, {"train.accumulation", 2}}, &error),
             qPrintable(error));
    Config expected = before;
    expected.train.batch_size = 4;
    expected.train.accumulation = 2;
    QCOMPARE(text_of(*p.config()), text_of(expected));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(editor<QSpinBox>(p, "train.batch_size")->value(), 4);
    QCOMPARE(editor<QSpinBox>(p, "train.accumulation")->value(), 2);

    QVERIFY2(p.apply_changes({{"devices", json::array({"cpu:0", "cpu:1"})}}, &error), qPrintable(error));
    expected.devices = {{unet::DeviceKind::cpu, 0}, {unet::DeviceKind::cpu, 1}};
    QCOMPARE(text_of(*p.config()), text_of(expected));
    QCOMPARE(p.device_list()->replicas()->value(), 2);
    QCOMPARE(changed.count(), 2);

    // A remedy as the planner ranks it: the form ends where the engine's own apply_changes() does.
    const Config now = *p.config();
    const std::vector<unet::Remedy> remedies = unet::rank_remedies(now);
    QVERIFY(!remedies.empty());
    for (const unet::Remedy& r : remedies) {
      QVERIFY2(p.apply_changes(r.changes, &error), qPrintable(error));
      QCOMPARE(text_of(*p.config()), text_of(unet::apply_changes(now, r.changes)));
      p.set_config(now);
    }
  }

  void apply_changes_refuses_bad_values() {
    ConfigPanel p;
    const Config before = *p.config();
    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    QString error;
    // Keys are applied all or nothing: the good accumulation is not applied either.
    QVERIFY(!p.apply_changes({{"train.accumulation", 4}, {"train.batch_size", 0}}, &error));
    QCOMPARE(error, QStringLiteral("train.batch_size: must be in 1..65536, got 0"));
    QVERIFY(!p.apply_changes({{"train.batch_sise", 4}}, &error));
    QVERIFY2(error.startsWith(QStringLiteral("train.batch_sise: unknown key")), qPrintable(error));
    QVERIFY(!p.apply_changes({{"devices", json::array({"cpu:0", "cuda:0"})}}, &error));
    QVERIFY2(error.contains(QStringLiteral("cannot mix")), qPrintable(error));
    QCOMPARE(text_of(*p.config()), text_of(before));
    QCOMPARE(changed.count(), 0);
  }

  void save_and_load_round_trip() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    editor<QSpinBox>(p, "model.width")->setValue(24);
    auto* source = editor<QComboBox>(p, "data.source");
    source->setCurrentIndex(source->findText(QStringLiteral("folder")));
    retype(editor<QLineEdit>(p, "data.path"), QStringLiteral("images/cells"));
    retype(editor<QLineEdit>(p, "train.lr"), QStringLiteral("0.0005"));
    retype(editor<QLineEdit>(p, "data.seed"), QStringLiteral("12345678901234567890"));
    retype(editor<QLineEdit>(p, "checkpoint.dir"), QStringLiteral("runs/cells"));
    p.device_list()->replicas()->setValue(2);
    const Config edited = *p.config();

    const QString file = dir.filePath(QStringLiteral("cells.json"));
    QString error;
    QVERIFY2(p.save_file(file, &error), qPrintable(error));
    QCOMPARE(read_file(file), text_of(edited));

    ConfigPanel q;
    QSignalSpy changed(&q, &ConfigPanel::config_changed);
    QVERIFY2(q.load_file(file, &error), qPrintable(error));
    QCOMPARE(changed.count(), 1);
    Config expected = edited;
    expected.base_dir = std::filesystem::path(dir.path().toStdString());
    QVERIFY(*q.config() == expected);
    QVERIFY(*q.config() == unet::load_config_file(file.toStdString()));
    // Relative paths stay as typed; they resolve against the file's folder.
    QCOMPARE(editor<QLineEdit>(q, "data.path")->text(), QStringLiteral("images/cells"));
    QCOMPARE(QString::fromStdString(q.config()->resolve(q.config()->data.path).string()),
             dir.filePath(QStringLiteral("images/cells")));
  }

  void save_refuses_an_invalid_form() {
    QTemporaryDir dir;
    ConfigPanel p;
    retype(editor<QLineEdit>(p, "train.weight_decay"), QStringLiteral("x"));
    const QString file = dir.filePath(QStringLiteral("bad.json"));
    QString error;
    QVERIFY(!p.save_file(file, &error));
    QVERIFY2(error.contains(file) && error.contains(QStringLiteral("train.weight_decay")), qPrintable(error));
    QVERIFY(!QFile::exists(file));
  }

  void bad_file_keeps_the_form() {
    QTemporaryDir dir;
    ConfigPanel p;
    editor<QSpinBox>(p, "model.width")->setValue(24);
    const Config before = *p.config();
    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    QString error;

    const QString bad_value = dir.filePath(QStringLiteral("bad_value.json"));
    write_file(bad_value, "{\"train\": {\"batch_size\": 0}}");
    QVERIFY(!p.load_file(bad_value, &error));
    QCOMPARE(error, bad_value + QStringLiteral(": train.batch_size: must be in 1..65536, got 0"));

    const QString broken = dir.filePath(QStringLiteral("broken.json"));
    write_file(broken, "{\n  \"train\": \n");
    QVERIFY(!p.load_file(broken, &error));
    QVERIFY2(error.startsWith(broken) && error.contains(QStringLiteral("line 3")), qPrintable(error));

    const QString typo = dir.filePath(QStringLiteral("typo.json"));
    write_file(typo, "{\"trian\": {\"epochs\": 2}}");
    QVERIFY(!p.load_file(typo, &error));
    QVERIFY2(error.startsWith(typo) && error.contains(QStringLiteral("did you mean train?")),
             qPrintable(error));

    const QString missing = dir.filePath(QStringLiteral("missing.json"));
    QVERIFY(!p.load_file(missing, &error));
    QVERIFY2(error.startsWith(missing), qPrintable(error));

    QCOMPARE(text_of(*p.config()), text_of(before));
    QCOMPARE(editor<QSpinBox>(p, "model.width")->value(), 24);
    QCOMPARE(changed.count(), 0);
  }

  void settings_round_trip() {
    QTemporaryDir dir;
    const QString ini = dir.filePath(QStringLiteral("workbench.ini"));
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    p.set_base_dir(std::filesystem::path(dir.path().toStdString()));
    editor<QSpinBox>(p, "model.depth")->setValue(3);
    editor<QSpinBox>(p, "train.epochs")->setValue(42);
    retype(editor<QLineEdit>(p, "train.lr"), QStringLiteral("2e-4"));
    p.device_list()->replicas()->setValue(4);
    const Config saved = *p.config();
    {
      QSettings s(ini, QSettings::IniFormat);
      p.save_settings(s);
      s.sync();
      QCOMPARE(s.status(), QSettings::NoError);
    }
    const QSettings s(ini, QSettings::IniFormat);
    ConfigPanel q;
    QCOMPARE(q.restore_settings(s), QString());
    QVERIFY(*q.config() == saved);
    QCOMPARE(q.base_dir(), saved.base_dir);

    // Nothing stored: nothing changes, nothing to say.
    const QSettings empty(dir.filePath(QStringLiteral("empty.ini")), QSettings::IniFormat);
    QCOMPARE(q.restore_settings(empty), QString());
    QVERIFY(*q.config() == saved);
  }

  void stale_settings_fall_back_to_the_demo() {
    QTemporaryDir dir;
    const QString ini = dir.filePath(QStringLiteral("workbench.ini"));
    {
      QSettings s(ini, QSettings::IniFormat);
      s.setValue(QStringLiteral("config_panel/config"), QStringLiteral("{\"train\": {\"lr\": -1}}"));
    }
    ConfigPanel p;
    editor<QSpinBox>(p, "model.width")->setValue(48);
    QString message = p.restore_settings(QSettings(ini, QSettings::IniFormat));
    QVERIFY2(message.contains(QStringLiteral("train.lr: must be > 0, got -1")), qPrintable(message));
    QVERIFY(message.contains(QStringLiteral("demo")));
    QVERIFY(*p.config() == demo());

    {
      QSettings s(ini, QSettings::IniFormat);
      s.setValue(QStringLiteral("config_panel/config"), QStringLiteral("{ not json"));
    }
    editor<QSpinBox>(p, "model.width")->setValue(48);
    message = p.restore_settings(QSettings(ini, QSettings::IniFormat));
    QVERIFY2(message.contains(QStringLiteral("not valid JSON")), qPrintable(message));
    QVERIFY(*p.config() == demo());
  }

  // NVML could not tell this process's memory from others' on cuda:1 (a container's PID namespace): the
  // column says so instead of a number.
  void devices_say_when_others_are_not_attributable() {
    ConfigPanel p;
    unet::DeviceListing listing = two_gpus();
    listing.devices[2].others_not_attributable = true;
    p.set_devices(listing);
    DeviceList* list = p.device_list();
    QCOMPARE(list->item(QStringLiteral("cuda:1"))->text(DeviceList::others_column),
             QStringLiteral("not attributable"));
    QCOMPARE(list->item(QStringLiteral("cuda:0"))->text(DeviceList::others_column),
             QStringLiteral("2.0 GiB"));
  }

  void devices_show_the_listing() {
    ConfigPanel p;
    p.set_devices(two_gpus());
    DeviceList* list = p.device_list();
    QCOMPARE(p.field(QStringLiteral("devices")), list);
    QCOMPARE(list->tree()->topLevelItemCount(), 3);

    QTreeWidgetItem* cpu = list->item(QStringLiteral("cpu:0"));
    QTreeWidgetItem* a = list->item(QStringLiteral("cuda:0"));
    QTreeWidgetItem* b = list->item(QStringLiteral("cuda:1"));
    QVERIFY(cpu && a && b);
    QCOMPARE(cpu->text(DeviceList::name_column), QStringLiteral("Test CPU"));
    QCOMPARE(cpu->text(DeviceList::total_column), QStringLiteral("64.0 GiB"));
    QCOMPARE(a->text(DeviceList::name_column), QStringLiteral("Test GPU A"));
    QCOMPARE(a->text(DeviceList::total_column), QStringLiteral("80.0 GiB"));
    QCOMPARE(a->text(DeviceList::free_column), QStringLiteral("70.0 GiB"));
    QCOMPARE(a->text(DeviceList::others_column), QStringLiteral("2.0 GiB"));
    QCOMPARE(b->text(DeviceList::total_column), QStringLiteral("24.0 GiB"));
    QCOMPARE(b->text(DeviceList::others_column), QStringLiteral("\u2014"));
    QCOMPARE(cpu->checkState(0), Qt::Checked);  // the demo trains on the CPU
    QVERIFY(list->note()->isHidden());

    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    a->setCheckState(0, Qt::Checked);
    QCOMPARE(cpu->checkState(0), Qt::Unchecked);  // checking a GPU leaves the CPU
    QVERIFY(!list->replicas()->isEnabled());
    b->setCheckState(0, Qt::Checked);
    QCOMPARE(strings(unet::device_names(p.config()->devices)), (QStringList{"cuda:0", "cuda:1"}));
    QCOMPARE(changed.count(), 2);
    QCOMPARE(p.batch_text(), QStringLiteral("8 = 4 + 4 per device"));

    // A refreshed listing keeps the selection.
    p.set_devices(two_gpus());
    QCOMPARE(strings(unet::device_names(p.config()->devices)), (QStringList{"cuda:0", "cuda:1"}));
  }

  void devices_do_not_mix_kinds() {
    ConfigPanel p;
    p.set_devices(two_gpus());
    DeviceList* list = p.device_list();
    list->item(QStringLiteral("cuda:1"))->setCheckState(0, Qt::Checked);
    QCOMPARE(strings(unet::device_names(p.config()->devices)), QStringList{"cuda:1"});

    list->item(QStringLiteral("cpu:0"))->setCheckState(0, Qt::Checked);
    QCOMPARE(list->item(QStringLiteral("cuda:1"))->checkState(0), Qt::Unchecked);
    QCOMPARE(strings(unet::device_names(p.config()->devices)), QStringList{"cpu:0"});

    QSignalSpy validity(&p, &ConfigPanel::validity_changed);
    list->item(QStringLiteral("cpu:0"))->setCheckState(0, Qt::Unchecked);
    QVERIFY(!p.config());
    QCOMPARE(p.problems(), QStringList{QStringLiteral("devices: must not be empty")});
    QVERIFY(list->tree()->property("invalid").toBool());
    QCOMPARE(validity.count(), 1);
    QCOMPARE(p.batch_text(), QStringLiteral("8 (no device selected)"));

    // A device the config names but this machine lacks stays listed, so saving does not drop it.
    QString error;
    QVERIFY2(p.apply_changes({{"devices", json::array({"cuda:3"})}}, &error), qPrintable(error));
    QTreeWidgetItem* missing = list->item(QStringLiteral("cuda:3"));
    QVERIFY(missing);
    QCOMPARE(missing->checkState(0), Qt::Checked);
    QVERIFY(missing->text(DeviceList::name_column).contains(QStringLiteral("not found")));
    QCOMPARE(strings(unet::device_names(p.config()->devices)), QStringList{"cuda:3"});
  }

  void cuda_unavailable_reason_is_shown() {
    ConfigPanel p;
    p.set_devices(cpu_only("no NVIDIA driver: libcuda.so.1 not found"));
    QLabel* note = p.device_list()->note();
    QVERIFY(!note->isHidden());
    QVERIFY2(note->text().contains(QStringLiteral("no NVIDIA driver: libcuda.so.1 not found")),
             qPrintable(note->text()));
    QCOMPARE(p.device_list()->tree()->topLevelItemCount(), 1);

    p.set_devices(two_gpus());
    QVERIFY(note->isHidden());
  }

  // The CUDA module's view reaches the note as the CLI prints it: each GPU with why it cannot be used, and
  // the versions of the CUDA stack.
  void cuda_gpus_and_versions_are_shown() {
    const char* kSampleReason = "no GPU here can be used by this build";
    ConfigPanel p;
    unet::DeviceListing l = cpu_only(kSampleReason);
    unet::GpuInfo old_gpu;
    old_gpu.device = device("cuda:0", "Test GPU P", unet::DeviceKind::cuda, 0, 16 * kGiB, 15 * kGiB, kGiB);
    old_gpu.device.compute_capability = "6.1";
    old_gpu.unusable_reason = unet::compute_capability_problem(6, 1);
    l.gpus.push_back(old_gpu);
    l.gpus_seen.push_back("Test GPU P");
    l.versions = {.driver = "13.0 (580.65.06)", .runtime = "13.0", .cudnn = "9.19.0", .nccl = "not found"};
    p.set_devices(l);
    const QString text = p.device_list()->note()->text();
    QVERIFY2(text.contains(QStringLiteral("CUDA is unavailable: ") + QString::fromUtf8(kSampleReason)),
             qPrintable(text));
    QVERIFY2(text.contains(
                 QStringLiteral("cuda:0: Test GPU P, compute capability 6.1, 16.0 GiB total, 15.0 GiB "
                                "free, 1.0 GiB used by other processes; unusable: compute capability 6.1: "
                                "CUDA 13 supports 7.5 and newer")),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral(
                 "CUDA versions: driver 13.0 (580.65.06), runtime 13.0, cuDNN 9.19.0, NCCL not found")),
             qPrintable(text));
    QVERIFY2(
        text.contains(QStringLiteral(
            "Several GPUs sum gradients through NCCL not found: GPUs sum through the device communicator")),
        qPrintable(text));
    // The module's GPUs are not devices to train on: no row for them.
    QCOMPARE(p.device_list()->tree()->topLevelItemCount(), 1);
  }

  // Issue 12, defect 3: the wheel over a spin box or combo box that does not have the focus scrolls the
  // panel, not the setting (six notches once turned the memory cap from 0 to 6 MiB); once clicked or tabbed
  // into, it takes the wheel. The CPU replicas of the device list too.
  void the_wheel_changes_a_setting_only_with_focus() {
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    p.show();
    QVERIFY(QTest::qWaitForWindowExposed(&p));
    const auto wheel_over = [](QWidget* w) {
      const QPointF at(w->width() / 2.0, w->height() / 2.0);
      QWheelEvent up(at, w->mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                     Qt::NoScrollPhase, false);
      QApplication::sendEvent(w, &up);
    };
    auto* cap = qobject_cast<QSpinBox*>(p.field("memory.cap_mib"));
    auto* precision = qobject_cast<QComboBox*>(p.field("precision"));
    auto* replicas = p.findChild<QSpinBox*>(QStringLiteral("devices:replicas"));
    QVERIFY(cap && precision && replicas);
    precision->setCurrentIndex(precision->count() - 1);
    const Config before = *p.config();
    for (QWidget* w : std::initializer_list<QWidget*>{cap, precision, replicas})
      for (int notch = 0; notch < 6; ++notch) wheel_over(w);
    QVERIFY(*p.config() == before);
    QCOMPARE(replicas->value(), 1);

    cap->setFocus();
    QTRY_VERIFY(cap->hasFocus());
    wheel_over(cap);
    QCOMPARE(p.config()->memory.cap_mib, before.memory.cap_mib + 1);
  }

  void read_only_disables_every_field() {
    ConfigPanel p;
    p.set_read_only(true);
    for (const auto& k : unet::config_schema()) {
      QVERIFY2(!p.field(QString::fromStdString(k.path))->isEnabled(), k.path.c_str());
    }
    QVERIFY(!p.device_list()->refresh_button()->isEnabled());
    p.set_read_only(false);
    // Editable again, but for the keys the other values leave unread (issue 25: greyed out).
    const Config shown = *p.config();
    for (const auto& k : unet::config_schema()) {
      QVERIFY2(p.field(QString::fromStdString(k.path))->isEnabled() == unet::key_applies(shown, k.path),
               k.path.c_str());
    }
  }

  // model.classes follows the task, the instance target and the data source where they fix it
  // (unet/config/class_rule.h), saying so; the value the user chose comes back once nothing fixes it, unless
  // the user changed the classes in between; loading a config never adjusts it.
  void classes_follow_the_task_and_target() {
    ConfigPanel p;
    QSignalSpy adjusted(&p, &ConfigPanel::classes_adjusted);
    auto* classes = editor<QSpinBox>(p, "model.classes");
    auto* task = editor<QComboBox>(p, "task");
    auto* target = editor<QComboBox>(p, "instances.target");
    auto* source = editor<QComboBox>(p, "data.source");
    const auto pick = [](QComboBox* combo, const char* text) {
      combo->setCurrentIndex(combo->findText(QString::fromLatin1(text)));
    };
    classes->setValue(4);  // the demo's cells in three kinds, and the background
    QCOMPARE(p.config()->model.classes, 4);

    pick(task, "instances");  // the boundary target: three classes
    QCOMPARE(classes->value(), 3);
    QVERIFY2(p.is_valid(), qPrintable(p.problems().join('\n')));
    QCOMPARE(adjusted.count(), 1);
    QCOMPARE(
        adjusted.at(0).at(0).toString(),
        QString("model.classes set to 3: instances.target \"boundary\" trains three classes (background, "
                "interior, boundary)."));
    pick(target, "weight_map");
    QCOMPARE(classes->value(), 1);
    QCOMPARE(adjusted.at(1).at(0).toString(),
             QString("model.classes set to 1: instances.target \"weight_map\" trains a binary mask."));
    QVERIFY2(p.is_valid(), qPrintable(p.problems().join('\n')));
    pick(task, "semantic");  // nothing fixes the classes: the user's 4 again
    QCOMPARE(classes->value(), 4);
    QCOMPARE(adjusted.at(2).at(0).toString(),
             QString("model.classes back to 4, the value chosen before: nothing fixes it now."));
    QCOMPARE(p.config()->model.classes, 4);

    pick(source, "dsb2018");  // its masks are binary
    QCOMPARE(classes->value(), 1);
    QCOMPARE(adjusted.at(3).at(0).toString(),
             QString("model.classes set to 1: data.source \"dsb2018\" has binary nucleus masks."));
    pick(task, "instances");  // weight_map still: 1 already, nothing said
    QCOMPARE(classes->value(), 1);
    QCOMPARE(adjusted.count(), 4);
    pick(target, "boundary");
    QCOMPARE(classes->value(), 3);
    // The user sets the classes: the 4 from before is forgotten.
    pick(task, "semantic");
    QCOMPARE(classes->value(), 1);
    classes->setValue(2);  // refused on dsb2018, by the rule's message
    QVERIFY(p.problems().contains(QStringLiteral(
        "model.classes: must be 1 with data.source \"dsb2018\" (its nucleus masks are binary), got 2")));
    pick(source, "folder");
    QCOMPARE(classes->value(), 2);
    const int said = static_cast<int>(adjusted.count());

    // Loading a config shows it as it is, and does not adjust it.
    Config wrong = demo();
    wrong.task = unet::ModelTask::instances;
    wrong.model.classes = 2;
    p.set_config(wrong);
    QCOMPARE(classes->value(), 2);
    QCOMPARE(static_cast<int>(adjusted.count()), said);
    QVERIFY(!p.is_valid());
  }

  void set_config_emits_once() {
    ConfigPanel p;
    p.set_devices(cpu_only(""));
    QSignalSpy changed(&p, &ConfigPanel::config_changed);
    QSignalSpy validity(&p, &ConfigPanel::validity_changed);
    Config c = demo();
    c.model.width = 8;
    c.model.separable = true;
    c.train.batch_size = 4;
    c.train.weight_decay = 0.01;
    c.devices = {{unet::DeviceKind::cpu, 0}, {unet::DeviceKind::cpu, 1}};
    c.precision = unet::Precision::mixed_fp16;
    c.checkpoint.monitor = "val_iou";
    p.set_config(c);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(validity.count(), 0);
    QVERIFY(*p.config() == c);
    QCOMPARE(editor<QLineEdit>(p, "train.weight_decay")->text(), QStringLiteral("0.01"));
    QCOMPARE(editor<QComboBox>(p, "checkpoint.monitor")->currentText(), QStringLiteral("val_iou"));

    if (qEnvironmentVariableIsSet("UNET_PANEL_PNG")) {
      p.resize(520, 1500);
      p.grab().save(qEnvironmentVariable("UNET_PANEL_PNG"));
    }
  }
};

QTEST_MAIN(TestConfigPanel)
#include "test_gui_config_panel.moc"
