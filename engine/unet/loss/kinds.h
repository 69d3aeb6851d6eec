// The loss kinds a config may name (loss.kind), as one table: each kind's name, its description and the terms
// it adds up (loss/terms.h). The enum<->name mapping, the config schema's choices and help text
// (config/schema.cpp), LossDesc's predicates (loss/desc.h) and the backends' LossParams all come from it.
//
// A new kind built from existing terms is one enumerator and one row here (and its docs and PyTorch reference
// cases: docs/ARCHITECTURE.md, "Where new code goes: a new loss"). Enumerators are only ever appended: a
// kind's number is not stored, but test rows and the GUI list the kinds in this order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unet/loss/terms.h"

namespace unet {

enum class LossKind : std::uint8_t { cross_entropy, dice, cross_entropy_dice, focal, focal_dice };

struct LossKindInfo {
  LossKind kind;
  const char* name;         // as the config spells it
  const char* description;  // one clause of loss.kind's help text
  PixelTerm pixel_term;     // weighted by loss.cross_entropy_weight
  ImageTerm image_term;     // weighted by loss.dice_weight
};

// In enumerator order (checked below).
inline constexpr LossKindInfo kLossKinds[] = {
    {LossKind::cross_entropy, "cross_entropy", "binary (sigmoid) or softmax cross-entropy by model.classes",
     PixelTerm::cross_entropy, ImageTerm::none},
    {LossKind::dice, "dice", "soft Dice per image", PixelTerm::none, ImageTerm::dice},
    {LossKind::cross_entropy_dice, "cross_entropy_dice", "both, weighted (nnU-Net's default)",
     PixelTerm::cross_entropy, ImageTerm::dice},
    {LossKind::focal, "focal", "focal loss", PixelTerm::focal, ImageTerm::none},
    {LossKind::focal_dice, "focal_dice", "focal and Dice", PixelTerm::focal, ImageTerm::dice},
};

constexpr bool loss_kinds_in_order() {
  for (std::size_t i = 0; i < std::size(kLossKinds); ++i)
    if (static_cast<std::size_t>(kLossKinds[i].kind) != i) return false;
  return true;
}
static_assert(loss_kinds_in_order(), "kLossKinds: one row per LossKind, in enumerator order");

constexpr const LossKindInfo& loss_kind_info(LossKind k) {
  return kLossKinds[static_cast<std::size_t>(k)];
}

// The config's name of a kind, and the kind of a name (nullopt for none).
const char* to_string(LossKind k) noexcept;
std::optional<LossKind> parse_loss_kind(std::string_view text) noexcept;
// Every kind's name, in table order: the schema's choices.
std::vector<std::string> loss_kind_names();
// "name: description; ..." for every kind: the schema's help text for loss.kind.
std::string loss_kinds_help();

}  // namespace unet
