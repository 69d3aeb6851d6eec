#include "unet/backend/task_stream.h"

#include <utility>

#include "unet/backend/immediate_stream.h"
#include "unet/core/error.h"

namespace unet {

// What a stream's thread and its events share. `finished` counts tasks run (or dropped after a failure) in
// queue order, so an event's ticket is done once `finished` reaches it.
struct TaskEvent::Queue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> tasks;
  std::uint64_t queued = 0;
  std::uint64_t finished = 0;
  std::exception_ptr error;  // the first failure since the last synchronize(); the rest are dropped
  bool quit = false;

  void wait_for(std::unique_lock<std::mutex>& lock, std::uint64_t ticket) {
    changed.wait(lock, [&] { return finished >= ticket; });
  }
};

bool TaskEvent::ready() {
  if (!queue_) return true;
  std::lock_guard lock(queue_->mutex);
  return queue_->finished >= ticket_;
}

void TaskEvent::synchronize() {
  if (!queue_) return;
  std::unique_lock lock(queue_->mutex);
  queue_->wait_for(lock, ticket_);
  // As cudaEventSynchronize, the stream's failure is reported here too (and again by the stream's own
  // synchronize(), which clears it).
  if (queue_->error) std::rethrow_exception(queue_->error);
}

TaskStream::TaskStream(std::string name)
    : name_(std::move(name)), queue_(std::make_shared<TaskEvent::Queue>()), thread_([this] { loop(); }) {}

TaskStream::~TaskStream() {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->quit = true;
  }
  queue_->changed.notify_all();
  thread_.join();
  if (queue_->error) {
    try {
      std::rethrow_exception(queue_->error);
    } catch (const std::exception& e) {
      log_noexcept("stream", name_ + ": destroyed with an unreported failure: " + e.what());
    } catch (...) {
      log_noexcept("stream", name_ + ": destroyed with an unreported failure");
    }
  }
}

void TaskStream::loop() {
  TaskEvent::Queue& q = *queue_;
  std::unique_lock lock(q.mutex);
  for (;;) {
    q.changed.wait(lock, [&] { return q.quit || !q.tasks.empty(); });
    if (q.tasks.empty()) return;  // quit, and everything queued has run
    std::function<void()> task = std::move(q.tasks.front());
    q.tasks.pop_front();
    if (!q.error) {
      lock.unlock();
      std::exception_ptr failure;
      try {
        task();
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      if (failure && !q.error) q.error = failure;
    }
    ++q.finished;
    q.changed.notify_all();
    // The task (and what it captured) goes outside the lock: releasing a captured buffer takes its
    // allocator's lock, which a host thread may hold while it waits for this stream.
    lock.unlock();
    task = nullptr;
    lock.lock();
  }
}

void TaskStream::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(queue_->mutex);
    queue_->tasks.push_back(std::move(task));
    ++queue_->queued;
  }
  queue_->changed.notify_all();
}

void TaskStream::synchronize() {
  std::unique_lock lock(queue_->mutex);
  queue_->wait_for(lock, queue_->queued);
  if (std::exception_ptr e = std::exchange(queue_->error, nullptr)) std::rethrow_exception(e);
}

void TaskStream::drain() noexcept {
  std::unique_lock lock(queue_->mutex);
  queue_->wait_for(lock, queue_->queued);
}

void TaskStream::record(Event& event) {
  auto* e = dynamic_cast<TaskEvent*>(&event);
  UNET_CHECK(e != nullptr, usage,
             name_ + ": an event of another kind of backend is recorded on a task stream");
  std::lock_guard lock(queue_->mutex);
  e->queue_ = queue_;
  e->ticket_ = queue_->queued;
}

void TaskStream::wait(Event& event) {
  if (dynamic_cast<CompletedEvent*>(&event)) return;  // its work ran when it was queued
  auto* e = dynamic_cast<TaskEvent*>(&event);
  UNET_CHECK(e != nullptr, usage, name_ + ": a task stream waits for an event of another kind of backend");
  // Waiting for an event of this stream, or one never recorded, holds nothing back: the queue runs in order.
  if (!e->queue_ || e->queue_ == queue_) return;
  // The mark is copied now: recording the event again later must not move what this wait waits for.
  enqueue([other = e->queue_, ticket = e->ticket_] {
    std::unique_lock lock(other->mutex);
    other->wait_for(lock, ticket);
  });
}

TaskStream* as_task_stream(Stream& s) noexcept {
  return dynamic_cast<TaskStream*>(&s);
}

}  // namespace unet
