#include "unet/step/worker.h"

#include <pthread.h>

#include <utility>

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
  UNET_CHECK(jobs_.empty() && !running_, usage,
             name_ + ": a job was posted before the previous one was waited for");
  error_ = nullptr;
  jobs_.push_back(std::move(job));
  changed_.notify_all();
}

void Worker::enqueue(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  jobs_.push_back(std::move(job));
  changed_.notify_all();
}

std::exception_ptr Worker::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return jobs_.empty() && !running_; });
  return std::exchange(error_, nullptr);
}

void Worker::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !jobs_.empty() || quit_; });
    if (quit_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    running_ = false;
    if (error) {
      if (!error_) error_ = error;
      jobs_.clear();  // what was queued behind a failed job would fail or wait in vain
    }
    changed_.notify_all();
  }
}

}  // namespace unet
