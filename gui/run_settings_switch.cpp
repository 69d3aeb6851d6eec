#include "gui/run_settings_switch.h"

#include <algorithm>

#include "gui/config_panel.h"
#include "gui/log_view.h"
#include "gui/prompter.h"

namespace unet::gui {

namespace {

using json = nlohmann::json;

// A value as the form shows it: a string without quotes, anything else as JSON.
QString shown(const json& v) {
  return QString::fromStdString(v.is_string() ? v.get<std::string>() : v.dump());
}

}  // namespace

std::vector<SettingDifference> setting_differences(const json& form,
                                                   const std::filesystem::path& form_base_dir,
                                                   const Config& run) {
  Config form_paths;  // resolves the form's relative paths as the form does
  form_paths.base_dir = form_base_dir;
  std::vector<SettingDifference> out;
  for (const ConfigKey& k : config_schema()) {
    if (k.path == "devices") continue;
    std::string pointer = "/" + k.path;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const json form_value = form.value(json::json_pointer(pointer), json());
    const json run_value = k.get(run);
    if (form_value == run_value) continue;
    if (k.type == ConfigType::path && form_value.is_string() && run_value.is_string() &&
        form_paths.resolve(form_value.get<std::string>()).lexically_normal() ==
            run.resolve(run_value.get<std::string>()).lexically_normal())
      continue;
    out.push_back({QString::fromStdString(k.path), QString::fromStdString(k.label), shown(form_value),
                   shown(run_value)});
  }
  return out;
}

RunSettingsSwitch::RunSettingsSwitch(QWidget* window, ConfigPanel* panel, LogView* log, Prompter* prompter)
    : QObject(window), window_(window), panel_(panel), log_(log), prompter_(prompter) {
  restore_ = new QAction(tr("Restore the form's settings"), this);
  restore_->setToolTip(
      tr("Put back the settings the form held before a run's (resumed, or opened) replaced them"));
  restore_->setEnabled(false);
  connect(restore_, &QAction::triggered, this, &RunSettingsSwitch::restore);
}

bool RunSettingsSwitch::agree(const Config& run, const QString& run_folder) {
  const std::vector<SettingDifference> differences =
      setting_differences(panel_->document(), panel_->base_dir(), run);
  if (differences.empty() || prompter_->confirm_run_settings(window_, run_folder, differences)) return true;
  log_->add(
      LogLevel::info,
      tr("did not continue the run in %1: the form keeps its settings, %n of which differ from the run's",
         nullptr, static_cast<int>(differences.size()))
          .arg(run_folder));
  return false;
}

void RunSettingsSwitch::show_run(const Config& run) {
  const json document = panel_->document();
  const std::optional<Config> now = panel_->config();
  if (now && now->devices == run.devices && setting_differences(document, panel_->base_dir(), run).empty())
    return;
  replaced_ = Form{document, panel_->base_dir()};
  panel_->set_config(run);
  log_->add(LogLevel::info, tr("the form shows the run's settings; File → Restore the form's settings brings "
                               "back the ones it held"));
  set_running(running_);
}

void RunSettingsSwitch::restore() {
  if (!replaced_) return;
  panel_->show_document(replaced_->document, replaced_->base_dir);
  replaced_.reset();
  log_->add(LogLevel::info, tr("restored the form's settings from before the run's replaced them"));
  set_running(running_);
}

void RunSettingsSwitch::set_running(bool running) {
  running_ = running;
  restore_->setEnabled(replaced_ && !running);
}

}  // namespace unet::gui
