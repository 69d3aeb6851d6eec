// A thread that runs one job at a time for its owner: each replica of a data-parallel run has one, so that
// replicas compute side by side and the coordinating thread only hands out work and collects it.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace unet {

class Worker {
 public:
  explicit Worker(std::string name);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts `job` on the worker's thread; the previous job must have been waited for.
  void post(std::function<void()> job);
  // Queues `job` behind those not yet run (a replica's gradient buckets, summed in the order backward
  // finishes them). Once a job throws, the rest queued before the next wait() are dropped.
  void enqueue(std::function<void()> job);
  // Blocks until every posted and queued job is done; returns what the first failing one threw, if any.
  std::exception_ptr wait();

 private:
  void loop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool running_ = false;
  bool quit_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace unet
