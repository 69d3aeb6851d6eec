// Conversions shared by the configuration panel's two files (config_panel.cpp: the config <-> form binding;
// config_form.cpp: the form's editors): engine strings and paths to and from QString. Paths go through the
// file system's encoding, as QFile names them, not through UTF-8.
#pragma once

#include <QFile>
#include <QString>

#include <filesystem>
#include <string>

namespace unet::gui {

inline std::filesystem::path to_path(const QString& s) {
  return std::filesystem::path(QFile::encodeName(s).toStdString());
}

inline QString from_path(const std::filesystem::path& p) {
  return QFile::decodeName(QByteArray::fromStdString(p.string()));
}

inline QString qstr(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace unet::gui
