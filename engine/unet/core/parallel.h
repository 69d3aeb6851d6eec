// Work spread over host threads: decoding a dataset's files, generating samples. (Device work runs through
// the backends and their own thread pools, not this.)
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace unet {

// The host's hardware threads (at least 1).
inline int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

// Runs task(i) for every i in [0, count) on `threads` threads (0: one per hardware thread), each taking the
// next index when it is free; rethrows the first exception once all threads have stopped.
template <class Task>
void parallel_for(std::size_t count, int threads, Task task) {
  const std::size_t workers =
      std::min<std::size_t>(static_cast<std::size_t>(threads > 0 ? threads : hardware_threads()), count);
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < workers; ++t) {
    pool.emplace_back([&, t] {
      try {
        for (std::size_t i = next++; i < count; i = next++) task(i);
      } catch (...) {
        errors[t] = std::current_exception();
        next = count;
      }
    });
  }
  for (auto& thread : pool) thread.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace unet
