#include "unet/train/checkpoint_writer.h"

#include <pthread.h>

#include <algorithm>

#include "unet/core/error.h"
#include "unet/train/run_folder.h"

namespace unet {

CheckpointWriter::CheckpointWriter(std::int64_t keep_last,
                                   std::vector<std::filesystem::path> earlier_periodic)
    : keep_last_(keep_last), periodic_(std::move(earlier_periodic)), thread_([this] { loop(); }) {
  pthread_setname_np(thread_.native_handle(), "checkpoints");
}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void CheckpointWriter::submit(Checkpoint checkpoint, std::vector<Target> targets) {
  std::lock_guard lock(mutex_);
  queue_.push_back({std::move(checkpoint), std::move(targets)});
  changed_.notify_all();
}

std::vector<CheckpointWriter::Result> CheckpointWriter::collect() {
  std::lock_guard lock(mutex_);
  return std::exchange(results_, {});
}

void CheckpointWriter::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty() && !working_; });
}

bool CheckpointWriter::busy() const {
  std::lock_guard lock(mutex_);
  return working_ || !queue_.empty();
}

void CheckpointWriter::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || quit_; });
    if (queue_.empty()) return;  // quit, and nothing left to write
    Job job = std::move(queue_.front());
    queue_.pop_front();
    working_ = true;
    lock.unlock();

    std::vector<Result> done;
    for (const Target& target : job.targets) {
      Result r{target.path,
               target.reason,
               job.checkpoint.position.step,
               job.checkpoint.position.epoch,
               job.checkpoint.position.metrics,
               nullptr,
               {}};
      try {
        // A periodic name this run did not write before (a template without {epoch}/{step} rewrites its own
        // file) may be the user's file that the template happens to render: it is not replaced.
        std::error_code ec;
        if (target.periodic &&
            std::find(periodic_.begin(), periodic_.end(), target.path) == periodic_.end() &&
            std::filesystem::exists(std::filesystem::symlink_status(target.path, ec)))
          throw Error(ErrorKind::io,
                      target.path.string() +
                          ": not saved: the file exists and the run's log does not record it as "
                          "this run's, so it is not replaced",
                      {}, "move that file away, or change checkpoint.template");
        save_checkpoint(target.path, job.checkpoint, CheckpointKind::full);
        if (target.periodic) {
          std::erase(periodic_, target.path);
          periodic_.push_back(target.path);
          while (keep_last_ > 0 && static_cast<std::int64_t>(periodic_.size()) > keep_last_) {
            const std::filesystem::path old = periodic_.front();
            periodic_.erase(periodic_.begin());
            // The run's own record of it is what allows this (run_folder.h); a failure is not the save's.
            try {
              if (remove_run_file(old.parent_path(), old.filename().string())) r.pruned.push_back(old);
            } catch (const Error& e) {
              log_noexcept("checkpoint.keep_last", e.what());
            }
          }
        }
      } catch (...) {
        r.error = std::current_exception();
      }
      done.push_back(std::move(r));
    }

    lock.lock();
    for (auto& r : done) results_.push_back(std::move(r));
    working_ = false;
    changed_.notify_all();
  }
}

}  // namespace unet
