// The loss-kind table's lookups by name and the text the config schema shows (loss/kinds.h).
#include "unet/loss/kinds.h"

namespace unet {

const char* to_string(LossKind k) noexcept {
  const auto index = static_cast<std::size_t>(k);
  return index < std::size(kLossKinds) ? kLossKinds[index].name : kLossKinds[0].name;
}

std::optional<LossKind> parse_loss_kind(std::string_view text) noexcept {
  for (const LossKindInfo& row : kLossKinds)
    if (text == row.name) return row.kind;
  return std::nullopt;
}

std::vector<std::string> loss_kind_names() {
  std::vector<std::string> names;
  for (const LossKindInfo& row : kLossKinds) names.emplace_back(row.name);
  return names;
}

std::string loss_kinds_help() {
  std::string help;
  for (const LossKindInfo& row : kLossKinds)
    help += (help.empty() ? "" : "; ") + std::string(row.name) + ": " + row.description;
  return help + ".";
}

}  // namespace unet
