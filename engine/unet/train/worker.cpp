#include "unet/train/worker.h"

#include <pthread.h>

#include "unet/core/error.h"

namespace unet {

Worker::Worker(std::string name) : name_(std::move(name)), thread_([this] { loop(); }) {
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

Worker::~Worker() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Worker::post(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  UNET_CHECK(done_, usage, name_ + ": a job was posted before the previous one was waited for");
  job_ = std::move(job);
  has_job_ = true;
  done_ = false;
  error_ = nullptr;
  changed_.notify_all();
}

std::exception_ptr Worker::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return done_; });
  return error_;
}

void Worker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return has_job_ || quit_; });
    if (quit_) return;
    std::function<void()> job = std::move(job_);
    has_job_ = false;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    done_ = true;
    changed_.notify_all();
  }
}

}  // namespace unet
