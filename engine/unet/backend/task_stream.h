// A stream that really is asynchronous, on the host: work is queued and runs in order on the stream's own
// thread, as a GPU runs a CUDA stream. The CPU backend's asynchronous mode (cpu/async_cpu_backend.h) runs its
// operations on these, so that the ordering rules a GPU imposes can be tested where there is no GPU:
// - an event captures only the work queued before it was recorded (cudaEventRecord), so recording it before
//   another thread has queued its part leaves that part out;
// - a stream that waits for an event holds back the work queued after the wait, not the host (as
//   cudaStreamWaitEvent);
// - host memory a queued copy writes is only valid after the stream (or an event behind the copy) is
//   synchronised;
// - a failure inside queued work is sticky: the rest of the stream's queue is dropped and synchronize() (of
//   the stream or of an event on it) throws it, as a CUDA error surfaces at the next synchronisation.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "unet/backend/backend.h"

namespace unet {

class TaskStream;

// An event recorded on a TaskStream: the position in that stream's queue it marks.
class TaskEvent final : public Event {
 public:
  bool ready() override;
  void synchronize() override;

 private:
  friend class TaskStream;
  struct Queue;
  std::shared_ptr<Queue> queue_;  // of the stream it was last recorded on; none: never recorded
  std::uint64_t ticket_ = 0;      // done once that stream has finished this many tasks
};

class TaskStream : public Stream {
 public:
  explicit TaskStream(std::string name);
  ~TaskStream() override;  // finishes what is queued, then stops the thread
  TaskStream(const TaskStream&) = delete;
  TaskStream& operator=(const TaskStream&) = delete;

  // Queues `task` behind everything queued so far (cudaLaunchHostFunc). A task must not wait for work queued
  // on this stream after it.
  void enqueue(std::function<void()> task);

  // Waits for everything queued so far; throws what a task threw since the last synchronize(), once.
  void synchronize() override;
  // `event` must be a TaskEvent; it then marks what is queued on this stream now.
  void record(Event& event) override;
  // Work queued after this call starts once what `event` marks has finished. A TaskEvent of another stream
  // holds back this stream's thread; an event of a stream that runs work at once is complete already.
  void wait(Event& event) override;
  // Waits for everything queued so far, leaving a failure for synchronize() to report.
  void drain() noexcept;

  const std::string& name() const noexcept { return name_; }

 private:
  void loop();

  std::string name_;
  std::shared_ptr<TaskEvent::Queue> queue_;
  std::thread thread_;  // last: started once everything above exists
};

// The TaskStream `s` is, or nullptr (a stream of another kind).
TaskStream* as_task_stream(Stream& s) noexcept;

}  // namespace unet
