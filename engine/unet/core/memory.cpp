#include "unet/core/memory.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

namespace unet {

std::string_view to_string(MemoryCategory category) noexcept {
  switch (category) {
    case MemoryCategory::parameters:
      return "parameters";
    case MemoryCategory::gradients:
      return "gradients";
    case MemoryCategory::optimizer_state:
      return "optimizer_state";
    case MemoryCategory::activations:
      return "activations";
    case MemoryCategory::workspace:
      return "workspace";
    case MemoryCategory::input_batch:
      return "input_batch";
    case MemoryCategory::other:
      return "other";
  }
  return "other";
}

std::string format_bytes(std::int64_t bytes) {
  char text[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 0) return "-" + format_bytes(-bytes);
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof text, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(text, sizeof text, "%.1f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
  else
    std::snprintf(text, sizeof text, "%" PRId64 " B", bytes);
  return text;
}

OutOfMemoryError::OutOfMemoryError(std::string device, std::int64_t requested, MemoryCategory category,
                                   MemoryStats stats)
    : Error(ErrorKind::out_of_memory, describe(requested, category, stats), std::move(device),
            "lower the batch size, use mixed precision, turn on activation checkpointing or gradient "
            "accumulation; `unet-train estimate` ranks them"),
      requested_(requested),
      category_(category),
      stats_(stats) {}

OutOfMemoryError::OutOfMemoryError(std::string device, std::string message, std::int64_t requested,
                                   MemoryCategory category, MemoryStats stats)
    : Error(ErrorKind::out_of_memory, std::move(message), std::move(device),
            "lower the batch size, use mixed precision, turn on activation checkpointing or gradient "
            "accumulation; `unet-train estimate` ranks them"),
      requested_(requested),
      category_(category),
      stats_(stats) {}

std::string OutOfMemoryError::describe(std::int64_t requested, MemoryCategory category,
                                       const MemoryStats& s) {
  std::string text = "out of memory: tried to allocate " + format_bytes(requested) + " for " +
                     std::string(to_string(category)) + " with " + format_bytes(s.in_use) + " in use";
  text += s.cap > 0 ? " under a cap of " + format_bytes(s.cap) : " of " + format_bytes(s.capacity);
  text += " (";
  bool first = true;
  for (int i = 0; i < memory_category_count; ++i) {
    if (s.in_use_by[static_cast<std::size_t>(i)] == 0) continue;
    if (!first) text += ", ";
    first = false;
    text += std::string(to_string(static_cast<MemoryCategory>(i))) + " " +
            format_bytes(s.in_use_by[static_cast<std::size_t>(i)]);
  }
  return text + (first ? "nothing)" : ")");
}

Buffer::~Buffer() {
  if (owner_ && ptr_) owner_->release(ptr_, block_, category_);
}

Allocator::Allocator(std::string device, std::int64_t device_total_bytes)
    : device_(std::move(device)), device_total_(device_total_bytes) {
  stats_.capacity = device_total_bytes;
}

Allocator::~Allocator() {
  if (stats_.in_use != 0)
    log_noexcept("allocator", device_ + ": destroyed with " + format_bytes(stats_.in_use) + " still in use");
}

namespace {

std::size_t round_up_to(std::size_t bytes, std::size_t unit) noexcept {
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace

void* Allocator::take_locked(std::size_t bytes) {
  if (!arena_) return device_malloc(bytes);
  // Best fit among the free ranges; the rest of the range stays free.
  auto best = arena_->free.end();
  for (auto it = arena_->free.begin(); it != arena_->free.end(); ++it)
    if (it->second >= bytes && (best == arena_->free.end() || it->second < best->second)) best = it;
  if (best == arena_->free.end()) return arena_->expandable ? extend_top_locked(bytes) : nullptr;
  const std::size_t offset = best->first, length = best->second;
  arena_->free.erase(best);
  if (length > bytes) arena_->free.emplace(offset + bytes, length - bytes);
  return arena_->base + offset;
}

void* Allocator::extend_top_locked(std::size_t bytes) {
  Arena& a = *arena_;
  // A free range that ends at the top grows into the new block, so the top rises by as little as it can.
  std::size_t start = a.top;
  auto tail = a.free.end();
  if (!a.free.empty()) {
    auto last = std::prev(a.free.end());
    if (last->first + last->second == a.top) {
      tail = last;
      start = last->first;
    }
  }
  if (bytes > a.bytes - start) return nullptr;  // past the address range
  const std::size_t end = start + bytes;
  const std::size_t needed = round_up_to(end, a.page);
  if (needed > a.mapped) {
    if (!a.growable) return nullptr;
    const std::int64_t cap = cap_.load(std::memory_order_relaxed);
    if (cap > 0 && static_cast<std::int64_t>(needed) > cap) return nullptr;
    if (!device_map(a.base, a.mapped, needed - a.mapped)) return nullptr;
    a.mapped = needed;
  }
  if (tail != a.free.end()) a.free.erase(tail);
  a.top = end;
  return a.base + start;
}

void Allocator::trim_top_locked() noexcept {
  Arena& a = *arena_;
  if (!a.free.empty()) {
    auto last = std::prev(a.free.end());
    if (last->first + last->second == a.top) {
      a.top = last->first;
      a.free.erase(last);
    }
  }
  if (!a.growable) return;  // reserve(): the mapping is the run's for its life
  const std::size_t keep = round_up_to(a.top, a.page);
  if (keep < a.mapped) {
    device_unmap(a.base, keep, a.mapped - keep);
    a.mapped = keep;
  }
}

std::int64_t Allocator::arena_reserved_locked() const noexcept {
  return static_cast<std::int64_t>(arena_->expandable ? arena_->mapped : arena_->bytes);
}

void Allocator::give_locked(void* ptr, std::size_t bytes) noexcept {
  if (!arena_) {
    device_free(ptr, bytes);
    return;
  }
  std::size_t offset = static_cast<std::size_t>(static_cast<char*>(ptr) - arena_->base), length = bytes;
  auto next = arena_->free.lower_bound(offset);
  if (next != arena_->free.end() && offset + length == next->first) {
    length += next->second;
    next = arena_->free.erase(next);
  }
  if (next != arena_->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  arena_->free.emplace(offset, length);
}

void Allocator::use_expandable_arena(std::size_t address_space_bytes, std::size_t page_bytes) {
  std::lock_guard lock(mutex_);
  UNET_CHECK(!arena_ && stats_.reserved == 0, usage,
             device_ + ": the expandable arena must be chosen before any allocation");
  UNET_CHECK(page_bytes > 0 && page_bytes % granularity == 0 && address_space_bytes >= page_bytes, usage,
             device_ + ": an expandable arena needs a page that is a multiple of " +
                 std::to_string(granularity) + " bytes and an address range of at least one page");
  const std::size_t range = address_space_bytes / page_bytes * page_bytes;
  void* base = device_reserve_address_space(range);
  if (!base)
    throw OutOfMemoryError(device_, static_cast<std::int64_t>(range), MemoryCategory::other, stats_locked());
  arena_ = std::make_unique<Arena>();
  arena_->base = static_cast<char*>(base);
  arena_->bytes = range;
  arena_->expandable = true;
  arena_->page = page_bytes;
}

AllocatorLayout Allocator::layout() const {
  std::lock_guard lock(mutex_);
  if (!arena_ || !arena_->expandable) return {};
  return {.expandable = true, .page = arena_->page, .address_space = arena_->bytes};
}

void Allocator::reserve(std::int64_t bytes) {
  std::lock_guard lock(mutex_);
  UNET_CHECK(stats_.reserved == 0 && (!arena_ || (arena_->expandable && arena_->growable)), usage,
             device_ + ": reserve() must come before any allocation");
  const auto size = static_cast<std::int64_t>(round_up(static_cast<std::size_t>(bytes)));
  const std::int64_t cap = cap_.load(std::memory_order_relaxed);
  if (cap > 0 && size > cap) throw OutOfMemoryError(device_, size, MemoryCategory::other, stats_locked());
  if (arena_) {
    // Map it all now, whole pages (the cap counts them as the device does); the arena then never grows.
    Arena& a = *arena_;
    const std::size_t pages = round_up_to(static_cast<std::size_t>(size), a.page);
    if ((cap > 0 && static_cast<std::int64_t>(pages) > cap) || pages > a.bytes ||
        !device_map(a.base, 0, pages))
      throw OutOfMemoryError(device_, size, MemoryCategory::other, stats_locked());
    a.mapped = pages;
    a.growable = false;
    stats_.reserved = stats_.peak_reserved = arena_reserved_locked();
    return;
  }
  void* ptr = device_malloc(static_cast<std::size_t>(size));
  if (!ptr) throw OutOfMemoryError(device_, size, MemoryCategory::other, stats_locked());
  arena_ = std::make_unique<Arena>();
  arena_->base = static_cast<char*>(ptr);
  arena_->bytes = static_cast<std::size_t>(size);
  arena_->free.emplace(0, arena_->bytes);
  stats_.reserved = stats_.peak_reserved = size;
}

void Allocator::set_observer(AllocationObserver* observer) {
  std::lock_guard lock(mutex_);
  observer_ = observer;
}

std::int64_t Allocator::arena_bytes() const {
  std::lock_guard lock(mutex_);
  if (!arena_ || (arena_->expandable && arena_->growable)) return 0;
  return arena_reserved_locked();
}

void Allocator::free_cached_locked() noexcept {
  for (auto& [block, p] : cached_) {
    give_locked(p, block);
    if (!arena_) stats_.reserved -= static_cast<std::int64_t>(block);
  }
  cached_.clear();
  if (arena_ && arena_->expandable) {
    trim_top_locked();
    stats_.reserved = arena_reserved_locked();
  }
}

Buffer Allocator::allocate(std::size_t bytes, MemoryCategory category) {
  if (bytes == 0) return {};
  std::size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);

  // A cached block that fits, but never one much larger than asked (that would hide memory from other sizes);
  // the buffer keeps the block's real size so that it returns to the same place.
  void* ptr = nullptr;
  {
    auto it = cached_.lower_bound(size);
    if (it != cached_.end() && it->first <= size + size / 8 + granularity) {
      size = it->first;
      ptr = it->second;
      cached_.erase(it);
    }
  }
  if (!ptr) {
    const std::int64_t cap = cap_.load(std::memory_order_relaxed);
    const auto want = static_cast<std::int64_t>(size);
    // With an arena the cap was checked when it was reserved, or is checked as its top is mapped.
    const auto over_cap = [&] { return !arena_ && cap > 0 && stats_.reserved + want > cap; };
    if (over_cap()) {
      // Cached blocks of other sizes are what a caching allocator gives back before it gives up.
      free_cached_locked();
    }
    if (over_cap()) throw OutOfMemoryError(device_, want, category, stats_locked());
    ptr = take_locked(size);
    if (!ptr && !cached_.empty()) {
      free_cached_locked();
      ptr = take_locked(size);
    }
    if (!ptr) throw OutOfMemoryError(device_, want, category, stats_locked());
    stats_.reserved = arena_ ? arena_reserved_locked() : stats_.reserved + want;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    ++stats_.device_allocations;
  }

  const auto idx = static_cast<std::size_t>(category);
  const auto sz = static_cast<std::int64_t>(size);
  stats_.in_use += sz;
  stats_.in_use_by[idx] += sz;
  stats_.peak_by[idx] = std::max(stats_.peak_by[idx], stats_.in_use_by[idx]);
  if (stats_.in_use > stats_.peak_in_use) {
    stats_.peak_in_use = stats_.in_use;
    stats_.at_peak_by = stats_.in_use_by;
  }
  ++stats_.allocations;
  if (observer_) observer_->on_allocate(ptr, size, category);
  return Buffer(this, ptr, bytes, size, category);
}

void Allocator::release(void* ptr, std::size_t bytes, MemoryCategory category) noexcept {
  std::lock_guard lock(mutex_);
  if (observer_) observer_->on_release(ptr);
  const auto sz = static_cast<std::int64_t>(bytes);
  stats_.in_use -= sz;
  stats_.in_use_by[static_cast<std::size_t>(category)] -= sz;
  try {
    cached_.emplace(bytes, ptr);
  } catch (...) {  // no memory for the cache entry: give the block back instead
    give_locked(ptr, bytes);
    if (!arena_) stats_.reserved -= sz;
  }
}

MemoryStats Allocator::stats_locked() const {
  MemoryStats s = stats_;
  const std::int64_t cap = cap_.load(std::memory_order_relaxed);
  s.cap = cap;
  s.capacity = cap > 0 && (device_total_ <= 0 || cap < device_total_) ? cap : device_total_;
  if (arena_ && !(arena_->expandable && arena_->growable)) s.capacity = arena_reserved_locked();
  return s;
}

MemoryStats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_locked();
}

void Allocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_in_use = stats_.in_use;
  stats_.peak_reserved = stats_.reserved;
  stats_.peak_by = stats_.in_use_by;
  stats_.at_peak_by = stats_.in_use_by;
}

void Allocator::set_cap(std::int64_t bytes) {
  cap_.store(bytes > 0 ? bytes : 0, std::memory_order_relaxed);
}

void Allocator::release_cached() {
  std::lock_guard lock(mutex_);
  free_cached_locked();
}

void Allocator::release_all_cached() noexcept {
  std::lock_guard lock(mutex_);
  free_cached_locked();
  if (!arena_) return;
  if (arena_->expandable) {
    if (arena_->mapped > 0) device_unmap(arena_->base, 0, arena_->mapped);
    device_release_address_space(arena_->base, arena_->bytes);
  } else {
    device_free(arena_->base, arena_->bytes);
  }
  arena_.reset();
}

void* HostAllocator::device_malloc(std::size_t bytes) noexcept {
  // The raw primitive under the caching allocator, which owns every block it returns (as cudaMalloc is
  // under a GPU's); callers hold blocks through Tensor/Buffer, never this pointer.
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory,cppcoreguidelines-no-malloc)
  return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
}

void HostAllocator::fence() const noexcept {
  if (!release_fence_) return;
  try {
    release_fence_();
  } catch (const std::exception& e) {
    log_noexcept("allocator",
                 device() + ": waiting for queued work before freeing memory failed: " + e.what());
  }
}

void HostAllocator::device_free(void* ptr, std::size_t) noexcept {
  fence();
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory,cppcoreguidelines-no-malloc): see device_malloc
  std::free(ptr);
}

void* CountingAllocator::device_malloc(std::size_t bytes) noexcept {
  // Distinct, aligned, never dereferenced addresses.
  const std::uintptr_t address = next_;
  next_ += (bytes + 4095) / 4096 * 4096 + 4096;
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

void CountingAllocator::device_free(void*, std::size_t) noexcept {}

void* CountingAllocator::device_reserve_address_space(std::size_t) noexcept {
  // Far above the addresses device_malloc hands out (which climb from 4 KiB), so the two never meet.
  return reinterpret_cast<void*>(std::uintptr_t{1} << 56);  // NOLINT(performance-no-int-to-ptr)
}

void* HostAllocator::device_reserve_address_space(std::size_t bytes) noexcept {
  void* base = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return base == MAP_FAILED ? nullptr : base;
}

void HostAllocator::device_release_address_space(void* base, std::size_t bytes) noexcept {
  ::munmap(base, bytes);
}

bool HostAllocator::device_map(char* base, std::size_t offset, std::size_t bytes) {
  if (::mprotect(base + offset, bytes, PROT_READ | PROT_WRITE) == 0) return true;
  const int error = errno;
  if (error == ENOMEM) return false;
  throw Error(ErrorKind::backend, "mprotect failed: " + std::string(std::strerror(error)), device());
}

void HostAllocator::device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept {
  fence();
  // The pages go back to the kernel and the range faults again on use, as unmapped device memory would.
  ::madvise(base + offset, bytes, MADV_DONTNEED);
  ::mprotect(base + offset, bytes, PROT_NONE);
}

}  // namespace unet
