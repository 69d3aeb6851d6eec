#include "unet/train/run_commands.h"

namespace unet {

void RunCommands::pause() {
  std::lock_guard lock(mutex_);
  pause_ = true;
  changed_.notify_all();
}

void RunCommands::resume() {
  std::lock_guard lock(mutex_);
  pause_ = false;
  changed_.notify_all();
}

void RunCommands::stop() {
  std::lock_guard lock(mutex_);
  stop_ = true;
  preparation_stop_.request_stop();
  changed_.notify_all();
}

void RunCommands::request_checkpoint() {
  std::lock_guard lock(mutex_);
  checkpoint_ = true;
  changed_.notify_all();
}

RunCommands::Next RunCommands::next(bool paused) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (checkpoint_) {
      checkpoint_ = false;
      return {Command::checkpoint, pause_};
    }
    if (stop_) return {Command::stop};
    if (!pause_) return {Command::run};
    if (!paused) return {Command::pause};
    changed_.wait(lock, [&] { return !pause_ || stop_ || checkpoint_; });
  }
}

}  // namespace unet
