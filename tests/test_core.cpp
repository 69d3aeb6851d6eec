// Core types: the allocator's accounting, caching and cap, and its expandable arena (checked against
// hand-counted pages, a device that runs out, and the counting allocator the planner runs); deterministic
// random streams.
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "test_support.h"
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
