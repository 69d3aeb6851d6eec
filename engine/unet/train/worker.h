// A thread that runs one job at a time for its owner: each replica of a data-parallel run has one, so that
// replicas compute side by side and the coordinating thread only hands out work and collects it.
#pragma once

#include <condition_variable>
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
  // Blocks until the posted job is done; returns what it threw, if anything.
  std::exception_ptr wait();

 private:
  void loop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> job_;
  bool has_job_ = false;
  bool done_ = true;
  bool quit_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace unet
