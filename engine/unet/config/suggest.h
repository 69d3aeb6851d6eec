// Suggestions for unknown config keys: a typo ("trian.lr", "batch_size" at the top level) is answered with
// the known key it most likely meant. Used wherever a key is read: config_problems() and --set.
#pragma once

#include <string>
#include <string_view>

namespace unet::config_detail {

// "unknown key", with " (did you mean train.batch_size?)" when a known key or section is close enough.
std::string unknown_key_problem(std::string_view path);

}  // namespace unet::config_detail
