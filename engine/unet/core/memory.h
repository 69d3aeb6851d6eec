// Device memory: every engine allocation goes through a per-device Allocator and is tagged with a category,
// so that in-use, reserved and peak bytes are known per device and per category at any time, from any thread.
//
// The Allocator caches freed blocks by size (as a GPU caching allocator does): a training step repeats the
// same allocation pattern, so after the first step nothing reaches the device allocator. "Reserved" is what
// the device holds (cached + in use); a cap limits reserved bytes and an allocation past it fails exactly
// like a real out-of-memory. Subclasses supply device_malloc/device_free, and where the device can map memory
// page by page into a reserved address range, the four hooks of the expandable arena.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "unet/core/error.h"

namespace unet {

enum class MemoryCategory : std::uint8_t {
  parameters,
  gradients,
  optimizer_state,
  activations,
  workspace,
  input_batch,
  other,
};
inline constexpr int memory_category_count = 7;
std::string_view to_string(MemoryCategory category) noexcept;

using CategoryBytes = std::array<std::int64_t, memory_category_count>;

struct MemoryStats {
  std::int64_t in_use = 0;       // bytes in live buffers
  std::int64_t reserved = 0;     // bytes held from the device (in use + cached)
  std::int64_t peak_in_use = 0;  // since creation or reset_peak()
  std::int64_t peak_reserved = 0;
  CategoryBytes in_use_by{};            // per category, now
  CategoryBytes peak_by{};              // per category, each its own maximum
  CategoryBytes at_peak_by{};           // per category, at the moment of peak_in_use
  std::int64_t capacity = 0;            // what the device offers this process: its total, or the cap when set
  std::int64_t cap = 0;                 // 0: no cap
  std::int64_t allocations = 0;         // allocate() calls that succeeded
  std::int64_t device_allocations = 0;  // of them, those that reached the device (cache misses)
};

// Thrown when an allocation does not fit: names the device, the request and what is in use.
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(std::string device, std::int64_t requested, MemoryCategory category, MemoryStats stats);
  // With a message of its own: a run the memory planner refuses before anything is allocated.
  OutOfMemoryError(std::string device, std::string message, std::int64_t requested, MemoryCategory category,
                   MemoryStats stats);
  std::int64_t requested() const noexcept { return requested_; }
  MemoryCategory category() const noexcept { return category_; }
  const MemoryStats& stats() const noexcept { return stats_; }

 private:
  static std::string describe(std::int64_t requested, MemoryCategory category, const MemoryStats& stats);
  std::int64_t requested_;
  MemoryCategory category_;
  MemoryStats stats_;
};

class Allocator;

// Where an allocator's cache misses come from, so that the memory planner can run an identical one.
struct AllocatorLayout {
  bool expandable =
      false;             // one address range, mapped page by page as it grows (else one device call a miss)
  std::size_t page = 0;  // the mapping unit, bytes
  std::size_t address_space = 0;  // the range reserved, bytes
  friend bool operator==(const AllocatorLayout&, const AllocatorLayout&) = default;
};

// Sees every allocation and release of an allocator (the memory planner attributes them to layers). Called
// with the allocator's lock held: it must not allocate from that allocator.
class AllocationObserver {
 public:
  virtual ~AllocationObserver() = default;
  virtual void on_allocate(const void* ptr, std::size_t bytes, MemoryCategory category) = 0;
  virtual void on_release(const void* ptr) = 0;
};

// A block of device memory, returned to its allocator when destroyed. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  ~Buffer();

  // A Buffer that does not own `ptr`: destroying it gives nothing back. For work queued on an asynchronous
  // stream, which, as on a GPU, does not keep the memory it uses alive (the caller's buffers do).
  static Buffer borrowed(void* ptr, std::size_t bytes) noexcept {
    return Buffer(nullptr, ptr, bytes, 0, MemoryCategory::other);
  }

  void* data() const noexcept { return ptr_; }
  // What was asked for; the block behind it may be larger.
  std::size_t bytes() const noexcept { return bytes_; }
  MemoryCategory category() const noexcept { return category_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

 private:
  friend class Allocator;
  Buffer(Allocator* owner, void* ptr, std::size_t bytes, std::size_t block, MemoryCategory category)
      : owner_(owner), ptr_(ptr), bytes_(bytes), block_(block), category_(category) {}
  void swap(Buffer& o) noexcept {
    std::swap(owner_, o.owner_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(block_, o.block_);
    std::swap(category_, o.category_);
  }

  Allocator* owner_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t block_ = 0;
  MemoryCategory category_ = MemoryCategory::other;
};

class Allocator {
 public:
  // Block sizes are rounded up to this many bytes (and so is every figure in MemoryStats).
  static constexpr std::size_t granularity = 512;

  Allocator(std::string device, std::int64_t device_total_bytes);
  virtual ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Throws OutOfMemoryError when the request does not fit, Error(backend) when the device fails for another
  // reason (see device_map). A zero-byte request gives an empty Buffer.
  Buffer allocate(std::size_t bytes, MemoryCategory category);

  MemoryStats stats() const;
  void reset_peak();
  // 0 removes the cap. A cap only limits future allocations.
  void set_cap(std::int64_t bytes);
  std::int64_t cap() const noexcept { return cap_.load(std::memory_order_relaxed); }
  const std::string& device() const noexcept { return device_; }
  // Returns every cached (free) block to the device (or to the arena).
  void release_cached();

  // Preallocation (TensorFlow's allow_growth = false): takes `bytes` from the device now, as one arena, and
  // carves every later block from it; nothing more is taken, and what does not fit the arena fails like an
  // out-of-memory. Call before anything is allocated. Throws OutOfMemoryError when the device (or the cap)
  // cannot give that much.
  void reserve(std::int64_t bytes);
  std::int64_t arena_bytes() const;

  // The expandable arena (PyTorch's expandable_segments): cache misses are carved from one reserved address
  // range whose top is mapped page by page as it grows and unmapped as it shrinks (release_cached, or the
  // retry before an out-of-memory). Reserved bytes are the mapped pages, a figure the planner reproduces
  // exactly by running the same arena over a device that maps nothing. Call before anything is allocated
  // (and before reserve(), which then maps its bytes at once and never grows). Throws OutOfMemoryError when
  // the address range cannot be reserved, Error(usage) when the device has no such hooks or after
  // allocations.
  void use_expandable_arena(std::size_t address_space_bytes, std::size_t page_bytes);
  AllocatorLayout layout() const;

  // nullptr to stop observing.
  void set_observer(AllocationObserver* observer);

  static std::size_t round_up(std::size_t bytes) noexcept {
    return (bytes + granularity - 1) / granularity * granularity;
  }

 protected:
  // nullptr when the device has no room; must not throw.
  virtual void* device_malloc(std::size_t bytes) noexcept = 0;
  virtual void device_free(void* ptr, std::size_t bytes) noexcept = 0;
  // The expandable arena's hooks; offsets and lengths are whole pages. device_map makes
  // [base + offset, + bytes) usable. It returns false when the device has no room, which the caller turns
  // into the cache-release-and-retry and then an OutOfMemoryError; it throws Error(backend), naming the call
  // that failed, for any other failure (a driver that refuses, a bad argument), which is no out-of-memory
  // and must not look like one. Either way it then holds nothing of that range, so the arena is as it was
  // before the call. device_unmap is only called on ranges device_map mapped, highest pages first.
  virtual void* device_reserve_address_space(std::size_t /*bytes*/) noexcept { return nullptr; }
  virtual void device_release_address_space(void* /*base*/, std::size_t /*bytes*/) noexcept {}
  virtual bool device_map(char* /*base*/, std::size_t /*offset*/, std::size_t /*bytes*/) { return false; }
  virtual void device_unmap(char* /*base*/, std::size_t /*offset*/, std::size_t /*bytes*/) noexcept {}
  // Subclasses call this from their destructor, while device_free is still theirs to call.
  void release_all_cached() noexcept;

 private:
  friend class Buffer;
  void release(void* ptr, std::size_t bytes, MemoryCategory category) noexcept;
  void free_cached_locked() noexcept;
  // From the arena, or the device; null when it has no room. Throws what device_map throws, with the
  // arena and the statistics as they were.
  void* take_locked(std::size_t bytes);
  void* extend_top_locked(std::size_t bytes);
  void give_locked(void* ptr, std::size_t bytes) noexcept;
  void trim_top_locked() noexcept;
  std::int64_t arena_reserved_locked() const noexcept;

  // An arena: free ranges by offset, merged with their neighbours when freed. Either one device block
  // (reserve()), or an expandable address range whose pages below `mapped` are backed by the device; there
  // the free ranges all lie below `top`, the end of the highest range handed out.
  struct Arena {
    char* base = nullptr;
    std::size_t bytes = 0;                    // the block, or the address range
    std::map<std::size_t, std::size_t> free;  // offset -> length
    bool expandable = false;
    bool growable = true;  // false once reserve() mapped what the run may use
    std::size_t page = 0;
    std::size_t top = 0;
    std::size_t mapped = 0;
  };
  MemoryStats stats_locked() const;

  std::string device_;
  std::int64_t device_total_;
  std::atomic<std::int64_t> cap_{0};

  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;  // free blocks by size
  std::unique_ptr<Arena> arena_;
  AllocationObserver* observer_ = nullptr;
  MemoryStats stats_;
};

// Host memory behind the Allocator interface: the CPU backend's device memory, 64-byte aligned.
// With an expandable arena its pages are the kernel's: an address range reserved with no access, made
// readable and writable page by page, and given back to the kernel when unmapped.
class HostAllocator final : public Allocator {
 public:
  HostAllocator(std::string device, std::int64_t total_bytes) : Allocator(std::move(device), total_bytes) {}
  ~HostAllocator() override { release_all_cached(); }

  // Called before memory goes back to the system (freed, or pages unmapped), with the allocator's lock held:
  // a backend whose streams run queued work waits for it here, as cudaFree waits for the device. It must not
  // allocate from this allocator.
  void set_release_fence(std::function<void()> fence) { release_fence_ = std::move(fence); }

 protected:
  void* device_malloc(std::size_t bytes) noexcept override;
  void device_free(void* ptr, std::size_t bytes) noexcept override;
  void* device_reserve_address_space(std::size_t bytes) noexcept override;
  void device_release_address_space(void* base, std::size_t bytes) noexcept override;
  // false when the kernel has no memory for the pages (ENOMEM); Error(backend) for any other errno.
  bool device_map(char* base, std::size_t offset, std::size_t bytes) override;
  void device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept override;

 private:
  void fence() const noexcept;
  std::function<void()> release_fence_;
};

// Hands out distinct addresses and never touches memory: the memory planner runs the real schedule against
// it. Its expandable arena maps nothing and never fails, so that only the cap (or the plan's capacity) limits
// it, as the planner needs.
class CountingAllocator final : public Allocator {
 public:
  CountingAllocator(std::string device, std::int64_t total_bytes)
      : Allocator(std::move(device), total_bytes) {}
  ~CountingAllocator() override { release_all_cached(); }

 protected:
  void* device_malloc(std::size_t bytes) noexcept override;
  void device_free(void* ptr, std::size_t bytes) noexcept override;
  void* device_reserve_address_space(std::size_t bytes) noexcept override;
  bool device_map(char*, std::size_t, std::size_t) noexcept override { return true; }

 private:
  std::uintptr_t next_ = 4096;
};

// "12.3 MiB"
std::string format_bytes(std::int64_t bytes);

}  // namespace unet
