// Reading a choice by its name, as predict's options take them (--mode, --padding, --tta, --labels-format):
// the one of `choices` whose to_string() is `text`, else a ConfigError(key) that lists every name.
#pragma once

#include <cstddef>
#include <string>

#include "unet/core/error.h"

namespace unet {

template <typename Enum, std::size_t N>
Enum choice_from_name(const std::string& text, const std::string& key, const Enum (&choices)[N]) {
  std::string names;
  for (const Enum choice : choices) {
    if (text == to_string(choice)) return choice;
    names += (names.empty() ? "" : ", ") + std::string(to_string(choice));
  }
  throw ConfigError(key, "must be one of " + names + ", got '" + text + "'");
}

}  // namespace unet
