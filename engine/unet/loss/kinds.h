// The loss kinds' lookups by name, over the kinds table (kLossKinds, at the end of loss/terms.h beside the
// terms it combines): the enum<->name mapping, and the config schema's choices and help text
// (config/schema.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unet/loss/terms.h"

namespace unet {

// The config's name of a kind, and the kind of a name (nullopt for none).
const char* to_string(LossKind k) noexcept;
std::optional<LossKind> parse_loss_kind(std::string_view text) noexcept;
// Every kind's name, in table order: the schema's choices.
std::vector<std::string> loss_kind_names();
// "name: description; ..." for every kind: the schema's help text for loss.kind.
std::string loss_kinds_help();

}  // namespace unet
