// Core types: the allocator's accounting, caching and cap, and its expandable arena (checked against
// hand-counted pages, a device that runs out, and the counting allocator the planner runs); deterministic
// random streams.
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_support.h"
#include "unet/backend/cuda/virtual_memory.h"
#include "unet/backend/device_monitor.h"
#include "unet/backend/devices.h"
#include "unet/core/memory.h"
#include "unet/core/tensor.h"

using namespace unet;

namespace {

constexpr std::size_t kib = 1024;

// A device of `device_bytes` that maps pages into a fake address range and records every call: the
// arena's bookkeeping seen from the device's side. Its memory is never touched.
class RecordingPagedAllocator final : public Allocator {
 public:
  struct Call {
    char kind;  // 'm'ap or 'u'nmap
    std::size_t offset, bytes;
    bool operator==(const Call&) const = default;
  };
  explicit RecordingPagedAllocator(std::size_t device_bytes)
      : Allocator("gpu:test", static_cast<std::int64_t>(device_bytes)), device_bytes_(device_bytes) {}
  ~RecordingPagedAllocator() override { release_all_cached(); }

  std::vector<Call> calls;
  std::size_t mapped = 0;
  bool released = false;

 protected:
  void* device_malloc(std::size_t) noexcept override { return nullptr; }
  void device_free(void*, std::size_t) noexcept override {}
  void* device_reserve_address_space(std::size_t) noexcept override {
    return reinterpret_cast<void*>(std::uintptr_t{1} << 40);  // NOLINT(performance-no-int-to-ptr)
  }
  void device_release_address_space(void*, std::size_t) noexcept override { released = true; }
  bool device_map(char*, std::size_t offset, std::size_t bytes) noexcept override {
    if (mapped + bytes > device_bytes_) return false;
    mapped += bytes;
    calls.push_back({'m', offset, bytes});
    return true;
  }
  void device_unmap(char*, std::size_t offset, std::size_t bytes) noexcept override {
    mapped -= bytes;
    calls.push_back({'u', offset, bytes});
  }

 private:
  std::size_t device_bytes_;
};

using Call = RecordingPagedAllocator::Call;

// The driver's virtual memory calls over a fake device: keeps what is reserved, created and mapped (so that
// a test sees what a failure left behind), records each call by name, and answers `fail_status` to the
// `fail_at`-th call named `fail_call` (counting from 1).
class FakeVirtualMemoryDriver final : public cuda::VirtualMemoryDriver {
 public:
  static constexpr int not_permitted = 800, not_supported = 801, invalid_value = 1;

  std::size_t page = 64 * kib;
  std::vector<std::string> calls;
  std::string fail_call;
  int fail_at = 1;
  cuda::DriverStatus fail_status = cuda::driver_success;
  std::map<std::uint64_t, std::size_t> reserved;  // address -> bytes
  std::set<std::uint64_t> handles;                // created, not released
  std::map<std::uint64_t, std::uint64_t> mapped;  // address -> handle
  std::size_t accessible = 0;                     // bytes opened by set_access

  bool holds_nothing() const { return reserved.empty() && handles.empty() && mapped.empty(); }

  cuda::DriverStatus page_size(std::size_t& bytes) noexcept override {
    if (const auto s = answer("page_size")) return s;
    bytes = page;
    return cuda::driver_success;
  }
  cuda::DriverStatus reserve(std::uint64_t& address, std::size_t bytes, std::size_t) noexcept override {
    if (const auto s = answer("reserve")) return s;
    address = next_address_;
    next_address_ += std::uint64_t{1} << 40;
    reserved[address] = bytes;
    return cuda::driver_success;
  }
  cuda::DriverStatus free_address(std::uint64_t address, std::size_t) noexcept override {
    if (const auto s = answer("free_address")) return s;
    return reserved.erase(address) ? cuda::driver_success : invalid_value;
  }
  cuda::DriverStatus create(std::uint64_t& handle, std::size_t) noexcept override {
    if (const auto s = answer("create")) return s;
    handle = next_handle_++;
    handles.insert(handle);
    return cuda::driver_success;
  }
  cuda::DriverStatus release(std::uint64_t handle) noexcept override {
    if (const auto s = answer("release")) return s;
    return handles.erase(handle) ? cuda::driver_success : invalid_value;
  }
  cuda::DriverStatus map(std::uint64_t address, std::size_t, std::uint64_t handle) noexcept override {
    if (const auto s = answer("map")) return s;
    if (!handles.count(handle) || mapped.count(address)) return invalid_value;
    mapped[address] = handle;
    return cuda::driver_success;
  }
  cuda::DriverStatus unmap(std::uint64_t address, std::size_t) noexcept override {
    if (const auto s = answer("unmap")) return s;
    return mapped.erase(address) ? cuda::driver_success : invalid_value;
  }
  cuda::DriverStatus set_access(std::uint64_t, std::size_t bytes) noexcept override {
    if (const auto s = answer("set_access")) return s;
    accessible += bytes;
    return cuda::driver_success;
  }
  const char* status_name(cuda::DriverStatus status) const noexcept override {
    switch (status) {
      case invalid_value:
        return "CUDA_ERROR_INVALID_VALUE";
      case cuda::driver_out_of_memory:
        return "CUDA_ERROR_OUT_OF_MEMORY";
      case not_permitted:
        return "CUDA_ERROR_NOT_PERMITTED";
      case not_supported:
        return "CUDA_ERROR_NOT_SUPPORTED";
      default:
        return nullptr;
    }
  }

 private:
  cuda::DriverStatus answer(const char* call) noexcept {
    calls.emplace_back(call);
    if (fail_call == call && --fail_at == 0) return fail_status;
    return cuda::driver_success;
  }
  std::uint64_t next_address_ = std::uint64_t{1} << 40;
  std::uint64_t next_handle_ = 1;
};

// An allocator whose arena grows through the driver's calls as the CUDA allocator's does (map_pages and
// unmap_pages over a FakeVirtualMemoryDriver): the path from a driver status to what allocate() throws.
class DriverPagedAllocator final : public Allocator {
 public:
  explicit DriverPagedAllocator(FakeVirtualMemoryDriver& driver)
      : Allocator("cuda:7", 1 << 30), driver_(driver) {}
  ~DriverPagedAllocator() override { release_all_cached(); }

 protected:
  void* device_malloc(std::size_t) noexcept override { return nullptr; }
  void device_free(void*, std::size_t) noexcept override {}
  void* device_reserve_address_space(std::size_t bytes) noexcept override {
    std::uint64_t base = 0;
    if (driver_.reserve(base, bytes, driver_.page) != cuda::driver_success) return nullptr;
    handles_.assign(bytes / driver_.page, 0);
    return reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr)
  }
  void device_release_address_space(void* base, std::size_t bytes) noexcept override {
    driver_.free_address(reinterpret_cast<std::uint64_t>(base), bytes);
  }
  bool device_map(char* base, std::size_t offset, std::size_t bytes) override {
    return cuda::map_pages(driver_, reinterpret_cast<std::uint64_t>(base), driver_.page,
                           offset / driver_.page, (offset + bytes) / driver_.page, handles_, device());
  }
  void device_unmap(char* base, std::size_t offset, std::size_t bytes) noexcept override {
    cuda::unmap_pages(driver_, reinterpret_cast<std::uint64_t>(base), driver_.page, offset / driver_.page,
                      (offset + bytes) / driver_.page, handles_);
  }

 private:
  FakeVirtualMemoryDriver& driver_;
  std::vector<std::uint64_t> handles_;
};

}  // namespace

class TestCore : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // The device monitor (issue 12): the host comes first, with its memory from /proc/meminfo and its CPU load
  // known from the second reading on (a load between two readings), within 0..100 %; a GPU row for each GPU
  // the driver lists.
  void deviceMonitorReadsTheHost() {
    DeviceMonitor monitor;
    const std::vector<DeviceReading> first = monitor.read();
    QVERIFY(!first.empty());
    QCOMPARE(first[0].id, std::string("cpu"));
    QCOMPARE(first[0].kind, DeviceKind::cpu);
    QCOMPARE(first[0].sample.utilisation_percent, -1.0);
    const auto [total, available] = host_memory();
    QCOMPARE(first[0].sample.total_bytes, total);
    QVERIFY(available > 0 && available <= total);
    volatile double sink = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
    const std::vector<DeviceReading> second = monitor.read();
    QVERIFY(second[0].sample.utilisation_percent >= 0 && second[0].sample.utilisation_percent <= 100);
    QCOMPARE(second.size(), std::size_t{1} + list_devices().gpus.size());
  }

  // A shape of more than four dimensions is refused: the fixed array has four, and a fifth was written over
  // the rank.
  void aShapeOfMoreThanFourDimensionsIsRefused() {
    QVERIFY_THROWS_EXCEPTION(Error, (Shape{1, 2, 3, 4, 5}));
    const Shape four{1, 2, 3, 4};
    QCOMPARE(four.rank, 4);
    QCOMPARE(four.numel(), std::int64_t{24});
  }

  void accountsPerCategory() {
    HostAllocator alloc("cpu:0", 1LL << 30);
    {
      Buffer p = alloc.allocate(1000, MemoryCategory::parameters);  // rounds to 1024
      Buffer a = alloc.allocate(4096, MemoryCategory::activations);
      const MemoryStats s = alloc.stats();
      QCOMPARE(s.in_use, 1024 + 4096);
      QCOMPARE(s.in_use_by[static_cast<int>(MemoryCategory::parameters)], 1024);
      QCOMPARE(s.in_use_by[static_cast<int>(MemoryCategory::activations)], 4096);
      QCOMPARE(s.reserved, 1024 + 4096);
      QCOMPARE(s.peak_in_use, 1024 + 4096);
    }
    const MemoryStats s = alloc.stats();
    QCOMPARE(s.in_use, 0);
    QCOMPARE(s.reserved, 1024 + 4096);  // cached, not returned
    QCOMPARE(s.peak_in_use, 1024 + 4096);
    QCOMPARE(s.at_peak_by[static_cast<int>(MemoryCategory::activations)], 4096);
  }

  void reusesCachedBlocks() {
    HostAllocator alloc("cpu:0", 1LL << 30);
    void* first = nullptr;
    {
      Buffer b = alloc.allocate(1 << 20, MemoryCategory::activations);
      first = b.data();
    }
    Buffer again = alloc.allocate(1 << 20, MemoryCategory::workspace);
    QCOMPARE(again.data(), first);
    QCOMPARE(alloc.stats().device_allocations, 1);
    // A much smaller request does not take the big block.
    Buffer small = alloc.allocate(1024, MemoryCategory::workspace);
    QVERIFY(small.data() != first);
  }

  void capFailsLikeOutOfMemory() {
    HostAllocator alloc("cpu:3", 1LL << 30);
    alloc.set_cap(1 << 20);
    Buffer a = alloc.allocate(600 * 1024, MemoryCategory::parameters);
    try {
      Buffer b = alloc.allocate(600 * 1024, MemoryCategory::activations);
      QFAIL("allocation past the cap succeeded");
    } catch (const OutOfMemoryError& e) {
      QCOMPARE(e.kind(), ErrorKind::out_of_memory);
      QCOMPARE(e.requested(), 600 * 1024);
      QCOMPARE(e.category(), MemoryCategory::activations);
      QCOMPARE(e.stats().capacity, 1 << 20);
      const std::string what = e.what();
      QVERIFY2(what.find("cpu:3") != std::string::npos, what.c_str());
      QVERIFY2(what.find("activations") != std::string::npos, what.c_str());
      QVERIFY2(what.find("parameters 600.0 KiB") != std::string::npos, what.c_str());
    }
    // The failed request left the accounting as it was.
    QCOMPARE(alloc.stats().in_use, 600 * 1024);
  }

  void capReleasesCacheBeforeFailing() {
    HostAllocator alloc("cpu:0", 1LL << 30);
    alloc.set_cap(1 << 20);
    { Buffer a = alloc.allocate(700 * 1024, MemoryCategory::activations); }
    // 700 KiB are cached; a different size that only fits once they are given back must succeed.
    Buffer b = alloc.allocate(900 * 1024, MemoryCategory::activations);
    QVERIFY(b);
    QCOMPARE(alloc.stats().reserved, 900 * 1024);
  }

  void countingAllocatorTouchesNothing() {
    CountingAllocator alloc("plan", 0);
    Tensor t =
        Tensor::empty(alloc, Shape{1 << 28}, DType::f32, MemoryCategory::activations);  // 1 GiB, not real
    Tensor u = Tensor::empty(alloc, Shape{16}, DType::f32, MemoryCategory::activations);
    QVERIFY(t.data() != u.data());
    QCOMPARE(alloc.stats().in_use, (1LL << 30) + 512);
  }

  // Cache misses rise through one address range; the pages under its top are mapped as it grows and the
  // free tail is unmapped when the cache is released. Reserved = mapped pages.
  void expandableArenaMapsPagesAsItsTopMoves() {
    RecordingPagedAllocator alloc(1 << 20);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    QCOMPARE(alloc.layout(),
             (AllocatorLayout{.expandable = true, .page = 64 * kib, .address_space = 1 << 30}));
    {
      Buffer a = alloc.allocate(10 * kib, MemoryCategory::parameters);
      QCOMPARE(alloc.stats().reserved, std::int64_t{64 * kib});
      Buffer b = alloc.allocate(100 * kib, MemoryCategory::activations);  // top at 110 KiB: a second page
      QCOMPARE(static_cast<char*>(b.data()) - static_cast<char*>(a.data()), std::ptrdiff_t{10 * kib});
      QCOMPARE(alloc.calls, (std::vector<Call>{{'m', 0, 64 * kib}, {'m', 64 * kib, 64 * kib}}));
      Buffer c = alloc.allocate(4 * kib, MemoryCategory::workspace);  // fits under the mapped top
      QCOMPARE(alloc.calls.size(), std::size_t{2});
      const MemoryStats s = alloc.stats();
      QCOMPARE(s.in_use, std::int64_t{114 * kib});
      QCOMPARE(s.reserved, std::int64_t{128 * kib});
      QCOMPARE(s.peak_reserved, std::int64_t{128 * kib});
      QCOMPARE(s.device_allocations, 3);
    }
    // Freed blocks stay cached and mapped until the cache is released; then the free tail is unmapped.
    QCOMPARE(alloc.stats().reserved, std::int64_t{128 * kib});
    alloc.release_cached();
    QCOMPARE(alloc.calls.back(), (Call{'u', 0, 128 * kib}));
    QCOMPARE(alloc.stats().reserved, 0);
    QCOMPARE(alloc.mapped, std::size_t{0});
  }

  // A freed block below the top is reused (best fit) before the top moves; when the blocks at the top are
  // given back, the top falls past every free range that reaches it and those pages are unmapped.
  void expandableArenaReusesHolesBeforeGrowing() {
    RecordingPagedAllocator alloc(1 << 20);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    Buffer a = alloc.allocate(32 * kib, MemoryCategory::activations);
    Buffer b = alloc.allocate(32 * kib, MemoryCategory::activations);
    Buffer c = alloc.allocate(32 * kib, MemoryCategory::activations);
    char* const base = static_cast<char*>(a.data());
    b = Buffer();
    alloc.release_cached();  // b's range is a hole below c: nothing to unmap
    QCOMPARE(alloc.stats().reserved, std::int64_t{128 * kib});
    Buffer d = alloc.allocate(20 * kib, MemoryCategory::workspace);
    QCOMPARE(static_cast<char*>(d.data()) - base, std::ptrdiff_t{32 * kib});
    Buffer e =
        alloc.allocate(40 * kib, MemoryCategory::workspace);  // the 12 KiB left of the hole is too small
    QCOMPARE(static_cast<char*>(e.data()) - base, std::ptrdiff_t{96 * kib});
    QCOMPARE(alloc.stats().reserved, std::int64_t{192 * kib});
    c = Buffer();
    e = Buffer();
    alloc.release_cached();  // free from 52 KiB to the top: the top falls to d's end, pages above 64 KiB go
    QCOMPARE(alloc.calls.back(), (Call{'u', 64 * kib, 128 * kib}));
    QCOMPARE(alloc.stats().reserved, std::int64_t{64 * kib});
    Buffer f = alloc.allocate(12 * kib, MemoryCategory::workspace);
    QCOMPARE(static_cast<char*>(f.data()) - base, std::ptrdiff_t{52 * kib});
  }

  // The device running out makes the arena give its cache back (unmapping the tail) and try again; only
  // then does the request fail, as an OutOfMemoryError that leaves the accounting as it was.
  void expandableArenaSurvivesTheDeviceRunningOut() {
    RecordingPagedAllocator alloc(192 * kib);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    Buffer a = alloc.allocate(60 * kib, MemoryCategory::parameters);
    { Buffer cached = alloc.allocate(120 * kib, MemoryCategory::activations); }
    // 128 KiB more would need 256 KiB mapped; with the cached block given back, 64 + 128 KiB fit.
    Buffer b = alloc.allocate(128 * kib, MemoryCategory::activations);
    QCOMPARE(alloc.calls, (std::vector<Call>{{'m', 0, 64 * kib},
                                             {'m', 64 * kib, 128 * kib},
                                             {'u', 64 * kib, 128 * kib},
                                             {'m', 64 * kib, 128 * kib}}));
    try {
      Buffer c = alloc.allocate(8 * kib, MemoryCategory::workspace);
      QFAIL("an allocation past the device's memory succeeded");
    } catch (const OutOfMemoryError& e) {
      QCOMPARE(e.requested(), std::int64_t{8 * kib});
      QCOMPARE(e.category(), MemoryCategory::workspace);
    }
    const MemoryStats s = alloc.stats();
    QCOMPARE(s.in_use, std::int64_t{188 * kib});
    QCOMPARE(s.reserved, std::int64_t{192 * kib});
    a = Buffer();
    b = Buffer();
  }

  // A cap counts mapped pages, as the device does: a request that needs one page more than the cap fails
  // even though its bytes alone would fit.
  void expandableArenaCapCountsPages() {
    RecordingPagedAllocator alloc(1 << 20);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    alloc.set_cap(100 * kib);
    Buffer a = alloc.allocate(60 * kib, MemoryCategory::parameters);
    QVERIFY_THROWS_EXCEPTION(OutOfMemoryError, alloc.allocate(10 * kib, MemoryCategory::activations));
    Buffer b = alloc.allocate(4 * kib, MemoryCategory::activations);  // still inside the first page
    QCOMPARE(alloc.stats().reserved, std::int64_t{64 * kib});
  }

  // memory.growth false over an expandable arena: the reservation is mapped at once, whole pages, and
  // neither grows nor is unmapped while the allocator lives.
  void expandableArenaReservationIsMappedOnce() {
    RecordingPagedAllocator alloc(1 << 20);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    alloc.reserve(100 * kib);
    QCOMPARE(alloc.calls, (std::vector<Call>{{'m', 0, 128 * kib}}));
    QCOMPARE(alloc.arena_bytes(), std::int64_t{128 * kib});
    QCOMPARE(alloc.stats().capacity, std::int64_t{128 * kib});
    { Buffer a = alloc.allocate(120 * kib, MemoryCategory::activations); }
    alloc.release_cached();
    QVERIFY_THROWS_EXCEPTION(OutOfMemoryError, alloc.allocate(130 * kib, MemoryCategory::activations));
    QCOMPARE(alloc.calls.size(), std::size_t{1});
    QCOMPARE(alloc.stats().reserved, std::int64_t{128 * kib});
    QVERIFY_THROWS_EXCEPTION(Error, alloc.use_expandable_arena(1 << 30, 64 * kib));
  }

  // Over the host's pages (reserved with no access, opened page by page) every byte handed out is usable:
  // a block placed past the mapped top would fault here.
  void expandableArenaOnHostPagesIsUsable() {
    HostAllocator alloc("cpu:0", 1LL << 30);
    alloc.use_expandable_arena(std::size_t{1} << 32, 64 * kib);
    std::vector<Buffer> blocks;
    for (std::size_t bytes : {1000, 70000, 512, 300000, 4096, 131072}) {
      blocks.push_back(alloc.allocate(bytes, MemoryCategory::activations));
      std::memset(blocks.back().data(), 0x5a, bytes);
    }
    blocks.erase(blocks.begin() + 1);
    blocks.erase(blocks.begin() + 2);
    alloc.release_cached();
    Buffer again = alloc.allocate(200000, MemoryCategory::activations);
    std::memset(again.data(), 0xa5, 200000);
    QCOMPARE(static_cast<unsigned char*>(blocks.back().data())[131071], static_cast<unsigned char>(0x5a));
  }

  // The planner's counting allocator over the same layout holds the same pages at every moment of the
  // same allocation pattern (misses, reuse, cache release, a cap that makes some requests fail).
  void countingArenaReplaysTheDevicesArena() {
    RecordingPagedAllocator device(std::size_t{8} << 20);
    CountingAllocator planned("plan", 0);
    for (Allocator* a : std::initializer_list<Allocator*>{&device, &planned}) {
      a->use_expandable_arena(1 << 30, 64 * kib);
      a->set_cap(std::int64_t{6} << 20);
    }
    std::mt19937 rng(11);
    std::vector<Buffer> live_device, live_planned;
    int failures = 0;
    for (int i = 0; i < 2000; ++i) {
      const int action = static_cast<int>(rng() % 10);
      if (action < 6) {
        const std::size_t bytes = 1 + rng() % (rng() % 4 == 0 ? 900 * kib : 20 * kib);
        bool device_failed = false, planned_failed = false;
        try {
          live_device.push_back(device.allocate(bytes, MemoryCategory::activations));
        } catch (const OutOfMemoryError&) {
          device_failed = true;
        }
        try {
          live_planned.push_back(planned.allocate(bytes, MemoryCategory::activations));
        } catch (const OutOfMemoryError&) {
          planned_failed = true;
        }
        QCOMPARE(planned_failed, device_failed);
        failures += device_failed ? 1 : 0;
      } else if (action < 9 && !live_device.empty()) {
        const std::size_t k = rng() % live_device.size();
        live_device.erase(live_device.begin() + static_cast<std::ptrdiff_t>(k));
        live_planned.erase(live_planned.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        device.release_cached();
        planned.release_cached();
      }
      const MemoryStats d = device.stats(), p = planned.stats();
      QCOMPARE(p.reserved, d.reserved);
      QCOMPARE(p.in_use, d.in_use);
      QCOMPARE(p.peak_reserved, d.peak_reserved);
    }
    QVERIFY2(failures > 0, "the cap was never reached: the sequence does not test the failing path");
    QCOMPARE(static_cast<std::int64_t>(device.mapped), device.stats().reserved);
  }

  // The CUDA allocator's probe (issue: pre-flight M2) does, on one page, every call the arena will make, in
  // the arena's order, and gives everything back.
  void arenaProbeTriesEveryCallOnOnePage() {
    FakeVirtualMemoryDriver driver;
    const cuda::ArenaProbe probe = cuda::probe_arena(driver);
    QCOMPARE(probe.page, 64 * kib);
    QCOMPARE(probe.problem, std::string());
    QCOMPARE(driver.calls, (std::vector<std::string>{"page_size", "reserve", "create", "map", "set_access",
                                                     "unmap", "release", "free_address"}));
    QCOMPARE(driver.accessible, 64 * kib);
    QVERIFY(driver.holds_nothing());
  }

  // Any refusal, out-of-memory or not, keeps the allocator on cudaMalloc (page 0) with the call and its
  // status as the reason; what the probe took is given back except what the refused call itself kept.
  void arenaProbeFailureSaysWhy_data() {
    QTest::addColumn<QString>("call");
    QTest::addColumn<int>("status");
    QTest::addColumn<int>("page");
    QTest::addColumn<QString>("problem");
    QTest::addColumn<int>("left");  // ranges, handles and mappings still held
    const int page = 64 * kib;
    QTest::newRow("granularity") << "page_size" << 801 << page
                                 << "cuMemGetAllocationGranularity failed: CUDA_ERROR_NOT_SUPPORTED (801)"
                                 << 0;
    QTest::newRow("page not a multiple of 512")
        << "" << 0 << 1000 << "the driver's page of 1000 bytes is not a multiple of 512 bytes" << 0;
    QTest::newRow("reserve") << "reserve" << 800 << page
                             << "cuMemAddressReserve failed: CUDA_ERROR_NOT_PERMITTED (800)" << 0;
    QTest::newRow("create, out of memory")
        << "create" << 2 << page << "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)" << 0;
    QTest::newRow("map, not permitted")
        << "map" << 800 << page << "cuMemMap failed: CUDA_ERROR_NOT_PERMITTED (800)" << 0;
    QTest::newRow("map, a status without a name")
        << "map" << 999 << page << "cuMemMap failed: CUresult (999)" << 0;
    QTest::newRow("set_access, not supported")
        << "set_access" << 801 << page << "cuMemSetAccess failed: CUDA_ERROR_NOT_SUPPORTED (801)" << 0;
    QTest::newRow("unmap") << "unmap" << 1 << page << "cuMemUnmap failed: CUDA_ERROR_INVALID_VALUE (1)" << 1;
    QTest::newRow("release") << "release" << 1 << page << "cuMemRelease failed: CUDA_ERROR_INVALID_VALUE (1)"
                             << 1;
    QTest::newRow("free") << "free_address" << 1 << page
                          << "cuMemAddressFree failed: CUDA_ERROR_INVALID_VALUE (1)" << 1;
  }
  void arenaProbeFailureSaysWhy() {
    QFETCH(QString, call);
    QFETCH(int, status);
    QFETCH(int, page);
    QFETCH(QString, problem);
    QFETCH(int, left);
    FakeVirtualMemoryDriver driver;
    driver.page = static_cast<std::size_t>(page);
    driver.fail_call = call.toStdString();
    driver.fail_status = status;
    const cuda::ArenaProbe probe = cuda::probe_arena(driver);
    QCOMPARE(probe.page, std::size_t{0});
    QCOMPARE(QString::fromStdString(probe.problem), problem);
    QCOMPARE(static_cast<int>(driver.reserved.size() + driver.handles.size() + driver.mapped.size()), left);
  }

  // Growing the arena through the driver: only CUDA_ERROR_OUT_OF_MEMORY is an OutOfMemoryError; any other
  // status is an Error(backend) naming the call. Either way the pages of the failed growth are given back,
  // the accounting is as before, and the arena grows normally once the driver answers again.
  void arenaGrowthFailureKinds_data() {
    QTest::addColumn<QString>("call");
    QTest::addColumn<int>("at");  // the failing call's rank within the growth
    QTest::addColumn<int>("status");
    QTest::addColumn<QString>("message");  // empty: an OutOfMemoryError
    QTest::newRow("second page's cuMemCreate, out of memory") << "create" << 2 << 2 << "";
    QTest::newRow("cuMemSetAccess, out of memory") << "set_access" << 1 << 2 << "";
    QTest::newRow("second page's cuMemMap, not permitted")
        << "map" << 2 << 800
        << "cuMemMap failed: CUDA_ERROR_NOT_PERMITTED (800) while growing the memory arena";
    QTest::newRow("the growth's first cuMemCreate, not supported")
        << "create" << 1 << 801
        << "cuMemCreate failed: CUDA_ERROR_NOT_SUPPORTED (801) while growing the memory arena";
    QTest::newRow("cuMemSetAccess, invalid value")
        << "set_access" << 1 << 1
        << "cuMemSetAccess failed: CUDA_ERROR_INVALID_VALUE (1) while growing the memory arena";
  }
  void arenaGrowthFailureKinds() {
    QFETCH(QString, call);
    QFETCH(int, at);
    QFETCH(int, status);
    QFETCH(QString, message);
    FakeVirtualMemoryDriver driver;
    DriverPagedAllocator alloc(driver);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    Buffer a = alloc.allocate(10 * kib, MemoryCategory::parameters);  // page 0
    QCOMPARE(driver.mapped.size(), std::size_t{1});
    driver.fail_call = call.toStdString();
    driver.fail_at = at;
    driver.fail_status = status;
    // The top at 160 KiB: pages 1 and 2 more.
    try {
      Buffer b = alloc.allocate(150 * kib, MemoryCategory::activations);
      QFAIL("a growth the driver refused succeeded");
    } catch (const OutOfMemoryError& e) {
      QVERIFY2(message.isEmpty(), "a driver failure that is not an out-of-memory was reported as one");
      QCOMPARE(e.requested(), std::int64_t{150 * kib});
    } catch (const Error& e) {
      QVERIFY2(!message.isEmpty(), "an out-of-memory was reported as another failure");
      QCOMPARE(e.kind(), ErrorKind::backend);
      QCOMPARE(QString::fromStdString(e.message()), message);
      QCOMPARE(e.device(), std::string("cuda:7"));
    }
    QCOMPARE(driver.mapped.size(), std::size_t{1});
    QCOMPARE(driver.handles.size(), std::size_t{1});
    MemoryStats s = alloc.stats();
    QCOMPARE(s.in_use, std::int64_t{10 * kib});
    QCOMPARE(s.reserved, std::int64_t{64 * kib});
    driver.fail_call.clear();
    Buffer b = alloc.allocate(150 * kib, MemoryCategory::activations);
    QCOMPARE(static_cast<char*>(b.data()) - static_cast<char*>(a.data()), std::ptrdiff_t{10 * kib});
    QCOMPARE(driver.mapped.size(), std::size_t{3});
    QCOMPARE(alloc.stats().reserved, std::int64_t{192 * kib});
  }

  // memory.growth false maps the reservation through the same hook: a refusal is an Error(backend) too, and
  // the reservation can be made again.
  void arenaReservationReportsADriverFailure() {
    FakeVirtualMemoryDriver driver;
    DriverPagedAllocator alloc(driver);
    alloc.use_expandable_arena(1 << 30, 64 * kib);
    driver.fail_call = "map";
    driver.fail_status = FakeVirtualMemoryDriver::not_permitted;
    try {
      alloc.reserve(100 * kib);
      QFAIL("a reservation the driver refused succeeded");
    } catch (const OutOfMemoryError&) {
      QFAIL("a refused cuMemMap was reported as an out-of-memory");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::backend);
    }
    QVERIFY(driver.mapped.empty() && driver.handles.empty());
    QCOMPARE(alloc.stats().reserved, 0);
    alloc.reserve(100 * kib);
    QCOMPARE(alloc.arena_bytes(), std::int64_t{128 * kib});
    QCOMPARE(driver.mapped.size(), std::size_t{2});
  }

  void tensorViewsShareStorage() {
    HostAllocator alloc("cpu:0", 1LL << 30);
    Tensor slab = Tensor::empty(alloc, Shape{64}, DType::f32, MemoryCategory::parameters);
    Tensor view = Tensor::view(slab.storage(), 16 * sizeof(float), Shape{4, 4}, DType::f32);
    QCOMPARE(static_cast<char*>(view.data()) - static_cast<char*>(slab.data()), 64);
    QVERIFY_THROWS_EXCEPTION(Error, Tensor::view(slab.storage(), 60 * sizeof(float), Shape{8}, DType::f32));
    slab = Tensor();
    QCOMPARE(alloc.stats().in_use, 512);  // still held by the view
    view = Tensor();
    QCOMPARE(alloc.stats().in_use, 0);
  }

  void rngStreamsAreDeterministicAndIndependent() {
    Rng a(42, 1), b(42, 1), c(42, 2);
    bool differs = false;
    for (int i = 0; i < 100; ++i) {
      const auto x = a.next_u64();
      QCOMPARE(x, b.next_u64());
      differs = differs || x != c.next_u64();
    }
    QVERIFY(differs);
    // Normal draws have the right moments.
    Rng n(7);
    double sum = 0, sq = 0;
    const int count = 200000;
    for (int i = 0; i < count; ++i) {
      const double v = n.normal();
      sum += v;
      sq += v * v;
    }
    QVERIFY(std::fabs(sum / count) < 0.01);
    QVERIFY(std::fabs(sq / count - 1.0) < 0.01);
  }

  void formatsBytes() {
    QCOMPARE(format_bytes(512), std::string("512 B"));
    QCOMPARE(format_bytes(1536), std::string("1.5 KiB"));
    QCOMPARE(format_bytes(3LL << 30), std::string("3.00 GiB"));
  }
};

QTEST_GUILESS_MAIN(TestCore)
#include "test_core.moc"
