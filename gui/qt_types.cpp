#include "gui/qt_types.h"

namespace unet::gui {

void register_engine_types() {
  qRegisterMetaType<unet::RunInfo>();
  qRegisterMetaType<unet::StepReport>();
  qRegisterMetaType<unet::EpochReport>();
  qRegisterMetaType<unet::MemoryReport>();
  qRegisterMetaType<unet::CheckpointReport>();
  qRegisterMetaType<unet::ErrorReport>();
  qRegisterMetaType<unet::PredictionsReport>();
  qRegisterMetaType<unet::TrainerState>();
  qRegisterMetaType<unet::LogLevel>();
  qRegisterMetaType<unet::Config>();
  qRegisterMetaType<unet::MemoryPlan>();
}

}  // namespace unet::gui
