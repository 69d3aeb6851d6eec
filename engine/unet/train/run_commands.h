// The requests other threads make of a running trainer: pause, resume, stop and "save a checkpoint now".
// They are recorded here under a lock and act at the trainer's next step boundary (next()); stop also ends
// the preparation's long parts (the data scan, generating synthetic samples) at once, through
// preparation_stop(). A paused trainer waits in next() for the next request.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>

namespace unet {

class RunCommands {
 public:
  // Thread-safe.
  void pause();
  void resume();
  void stop();
  void request_checkpoint();

  std::stop_token preparation_stop() const noexcept { return preparation_stop_.get_token(); }
  bool stop_requested() const noexcept { return preparation_stop_.stop_requested(); }

  enum class Command : std::uint8_t {
    checkpoint,  // save one now (each request once), then ask again
    stop,
    pause,  // become paused, then ask again
    run,    // go on training
  };
  struct Next {
    Command command;
    bool pause_requested = false;  // with checkpoint: a pause is requested (no step will report the save)
  };
  // What the trainer does at a step boundary; `paused`: it is paused now, so that it waits here for the next
  // request instead of being told to pause again.
  Next next(bool paused);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool pause_ = false, stop_ = false, checkpoint_ = false;
  std::stop_source preparation_stop_;
};

}  // namespace unet
