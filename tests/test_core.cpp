// Core types: the allocator's accounting, caching and cap; deterministic random streams.
#include "test_support.h"
#include "unet/core/memory.h"
#include "unet/core/tensor.h"

using namespace unet;

class TestCore : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

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
