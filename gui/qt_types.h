// The engine's report types as Qt metatypes, so that the training worker's signals can carry them across
// threads by value (queued connections copy them).
#pragma once

#include <QMetaType>

#include "unet/config/config.h"
#include "unet/plan/memory_planner.h"
#include "unet/train/observer.h"

Q_DECLARE_METATYPE(unet::RunInfo)
Q_DECLARE_METATYPE(unet::StepReport)
Q_DECLARE_METATYPE(unet::EpochReport)
Q_DECLARE_METATYPE(unet::MemoryReport)
Q_DECLARE_METATYPE(unet::CheckpointReport)
Q_DECLARE_METATYPE(unet::ErrorReport)
Q_DECLARE_METATYPE(unet::PredictionsReport)
Q_DECLARE_METATYPE(unet::TrainerState)
Q_DECLARE_METATYPE(unet::LogLevel)
Q_DECLARE_METATYPE(unet::Config)
Q_DECLARE_METATYPE(unet::MemoryPlan)

namespace unet::gui {

// Registers the types above for queued connections; call once before any connection carries them.
void register_engine_types();

}  // namespace unet::gui
