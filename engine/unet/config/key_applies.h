// Which keys a config's other values leave unread: schedule options the chosen schedule never reads,
// the other optimizer's keys, the focal and Dice keys of a loss without that term, the GPU settings without
// a GPU among the devices, and the like. One table, so that the config's own rules (training_problems()
// refuses an optimizer key the optimizer never reads) and the workbench's form (which greys such a key out,
// saying why) cannot disagree.
#pragma once

#include <string>
#include <string_view>

#include "unet/config/config.h"

namespace unet {

// Whether the run that `c` describes reads `key` (a dotted path, "schedule.gamma"). When it does not and
// `why` is given, *why is set to a clause naming the value that rules it out, in the config's words:
// `schedule.kind "constant" does not use it (step or plateau does)`. Keys that every run reads, and
// unknown keys, apply.
bool key_applies(const Config& c, std::string_view key, std::string* why = nullptr);

}  // namespace unet
