// How many decoded bytes the threads of a data scan may hold at once. Each thread leases what the file pair
// it decodes needs (known from the headers, before any pixel is decoded) and waits while the others hold too
// much, so a scan on 16 threads over 16 large images (or 16 forged headers that claim 16384x16384, which an
// arithmetic-coded JPEG can do in a few hundred bytes) holds what one pair of the largest size the config
// allows needs, not sixteen times that. A lease larger than the whole budget waits until it can run alone.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <string>
#include <utility>

#include "unet/core/error.h"

namespace unet {

// An upper bound of the bytes load_pair() holds while it decodes a pair of `pixels` pixels (image and mask,
// each at most 4 channels of 16 bits while decoding), with their conversions.
inline constexpr std::int64_t kDecodeBytesPerPixel = 24;

class DecodeBudget {
 public:
  // `stop`: a stop requested while a thread waits ends its wait with Error(cancelled).
  explicit DecodeBudget(std::int64_t capacity_bytes, std::stop_token stop = {})
      : capacity_(std::max<std::int64_t>(capacity_bytes, 1)), stop_(std::move(stop)) {}

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}
    Lease& operator=(Lease&& other) noexcept {
      if (this != &other) {
        release();
        budget_ = std::exchange(other.budget_, nullptr);
        bytes_ = other.bytes_;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }

   private:
    friend class DecodeBudget;
    Lease(DecodeBudget* budget, std::int64_t bytes) : budget_(budget), bytes_(bytes) {}
    void release() noexcept {
      if (budget_) budget_->give_back(bytes_);
      budget_ = nullptr;
    }
    DecodeBudget* budget_ = nullptr;
    std::int64_t bytes_ = 0;
  };

  // Waits until `bytes` (at most the capacity) fit beside what the other leases hold.
  Lease acquire(std::int64_t bytes) {
    bytes = std::clamp<std::int64_t>(bytes, 0, capacity_);
    std::unique_lock lock(mutex_);
    if (!freed_.wait(lock, stop_, [&] { return held_ + bytes <= capacity_; }))
      throw Error(ErrorKind::cancelled, "decoding was stopped");
    held_ += bytes;
    peak_ = std::max(peak_, held_);
    return Lease(this, bytes);
  }

  std::int64_t capacity() const { return capacity_; }
  // The most bytes held at once so far.
  std::int64_t peak() const {
    std::lock_guard lock(mutex_);
    return peak_;
  }

 private:
  void give_back(std::int64_t bytes) noexcept {
    {
      std::lock_guard lock(mutex_);
      held_ -= bytes;
    }
    freed_.notify_all();
  }

  const std::int64_t capacity_;
  std::stop_token stop_;
  mutable std::mutex mutex_;
  std::condition_variable_any freed_;
  std::int64_t held_ = 0, peak_ = 0;
};

}  // namespace unet
