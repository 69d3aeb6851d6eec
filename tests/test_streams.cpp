// The asynchronous streams the CPU backend can run on (UNET_CPU_STREAMS=async), against CUDA's rules for
// streams and events, which they exist to enforce where there is no GPU:
// - queued work runs later, in order, on the stream's thread: the host sees its results only after a
//   synchronisation;
// - an event marks only what was queued before it was recorded, and a wait holds back only the waiting
//   stream;
// - a failure is sticky until the stream's synchronize() reports it, and the work queued behind it is
// dropped;
// - the asynchronous CPU backend computes bitwise what the immediate one does, and gives memory back to the
//   allocator when the host lets go of it, queued work or not, as a GPU's caching allocator does.
// Orders are made certain with gates (a queued task that waits until the test opens it), never with sleeps.
#include <atomic>
#include <future>

#include "test_support.h"
#include "unet/backend/cpu/async_cpu_backend.h"
#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/task_stream.h"

using namespace unet;

namespace {

// A queued task that blocks its stream until the test opens it.
class Gate {
 public:
  std::function<void()> task() {
    return [this] { opened_.wait(); };
  }
  void open() { promise_.set_value(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> opened_ = promise_.get_future().share();
};

}  // namespace

class TestStreams : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  void queuedWorkRunsLaterInOrderOnItsOwnThread() {
    TaskStream s("s");
    Gate gate;
    std::vector<int> order;
    std::thread::id ran_on;
    s.enqueue(gate.task());
    s.enqueue([&] {
      order.push_back(1);
      ran_on = std::this_thread::get_id();
    });
    s.enqueue([&] { order.push_back(2); });
    QVERIFY(order.empty());  // nothing behind the closed gate has run
    gate.open();
    s.synchronize();
    QCOMPARE(order, (std::vector<int>{1, 2}));
    QVERIFY(ran_on != std::this_thread::get_id());
  }

  // cudaEventRecord: the event marks the work queued so far, not what is queued after it.
  void anEventMarksOnlyWhatWasQueuedBeforeIt() {
    TaskStream s("s");
    Gate first, second;
    std::atomic<int> done{0};
    TaskEvent event;
    QVERIFY(event.ready());  // never recorded: complete, as a new CUDA event
    s.enqueue(first.task());
    s.enqueue([&] { done = 1; });
    s.record(event);
    s.enqueue(second.task());
    s.enqueue([&] { done = 2; });
    QVERIFY(!event.ready());
    first.open();
    event.synchronize();  // returns although the stream still holds work behind the second gate
    QCOMPARE(done.load(), 1);
    second.open();
    s.synchronize();
    QCOMPARE(done.load(), 2);
    QVERIFY(event.ready());
  }

  // cudaStreamWaitEvent: the waiting stream's later work starts after the event's work; the host goes on, and
  // recording the event again afterwards does not move what the wait waits for.
  void aWaitHoldsBackOnlyTheWaitingStream() {
    TaskStream producer("producer"), consumer("consumer");
    Gate gate, later;
    std::atomic<int> value{0};
    int seen = -1;
    TaskEvent written;
    producer.enqueue(gate.task());
    producer.enqueue([&] { value = 42; });
    producer.record(written);
    consumer.wait(written);
    consumer.enqueue([&] { seen = value.load(); });
    // Recorded again behind a closed gate: the consumer's wait still means the first mark.
    producer.enqueue(later.task());
    producer.record(written);
    gate.open();
    consumer.synchronize();
    QCOMPARE(seen, 42);
    QVERIFY(!written.ready());
    later.open();
    producer.synchronize();
  }

  void aFailureIsStickyUntilSynchronizeReportsIt() {
    TaskStream s("s");
    bool ran_after = false;
    s.enqueue([] { throw Error(ErrorKind::data, "class 7 of 3"); });
    s.enqueue([&] { ran_after = true; });
    TaskEvent event;
    s.record(event);
    QVERIFY_THROWS_EXCEPTION(Error, event.synchronize());  // reported, and still pending for the stream
    try {
      s.synchronize();
      QFAIL("the stream's failure was not reported");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::data);
      QVERIFY(std::string(e.what()).find("class 7 of 3") != std::string::npos);
    }
    QVERIFY(!ran_after);  // dropped: it came after the failure
    s.synchronize();      // reported once; the stream works again
    s.enqueue([&] { ran_after = true; });
    s.synchronize();
    QVERIFY(ran_after);
  }

  void eventsOfAnotherKindAreRefused() {
    TaskStream s("s");
    CpuBackend cpu(CpuBackendOptions{});
    const auto immediate_event = cpu.create_event();
    QVERIFY_THROWS_EXCEPTION(Error, s.record(*immediate_event));
    s.wait(*immediate_event);  // an immediate stream's work is done: nothing to wait for
    s.synchronize();
  }

  // A copy to the host is queued: the host buffer holds the value only after the stream is synchronised.
  void copiesToTheHostNeedTheSynchronisation() {
    AsyncCpuBackend backend(CpuBackendOptions{});
    const auto stream = backend.create_stream();
    Tensor t = Tensor::empty(backend.allocator(), Shape{4}, DType::f32, MemoryCategory::other);
    backend.fill(*stream, t, 3.0);
    float host[4] = {0, 0, 0, 0};
    // Held back behind a gate of the stream's own, so that the copy cannot have run when the host looks.
    Gate gate;
    dynamic_cast<TaskStream&>(*stream).enqueue(gate.task());
    backend.copy_to_host(*stream, t, host);
    QCOMPARE(host[0], 0.0f);
    gate.open();
    stream->synchronize();
    QCOMPARE(host[3], 3.0f);
  }

  // As a GPU's caching allocator: memory is back in the allocator's hands as soon as the host lets go of
  // the tensor, even while queued work still uses it (the next allocation on the same stream is ordered after
  // that work); the same computation allocates the same bytes in both modes, which keeps the planner exact.
  void memoryGoesBackWhenTheHostLetsGo() {
    AsyncCpuBackend backend(CpuBackendOptions{});
    const auto stream = backend.create_stream();
    Gate gate;
    dynamic_cast<TaskStream&>(*stream).enqueue(gate.task());
    {
      Tensor t = Tensor::empty(backend.allocator(), Shape{1024}, DType::f32, MemoryCategory::activations);
      backend.fill(*stream, t, 1.0);
      QCOMPARE(backend.allocator().stats().in_use, std::int64_t{4096});
    }
    QCOMPARE(backend.allocator().stats().in_use, std::int64_t{0});  // the fill is still queued
    gate.open();
    stream->synchronize();
  }

  // Before memory goes back to the system, queued work that may still use it finishes (as cudaFree waits).
  void releasingCachedMemoryWaitsForQueuedWork() {
    AsyncCpuBackend backend(CpuBackendOptions{});
    const auto stream = backend.create_stream();
    Gate gate;
    std::atomic<bool> finished{false};
    auto& queue = dynamic_cast<TaskStream&>(*stream);
    {
      Tensor t = Tensor::empty(backend.allocator(), Shape{1 << 16}, DType::f32, MemoryCategory::activations);
      queue.enqueue(gate.task());
      backend.fill(*stream, t, 2.0);
      queue.enqueue([&] { finished = true; });
    }
    auto release = std::async(std::launch::async, [&] { backend.allocator().release_cached(); });
    QVERIFY(release.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    QVERIFY(!finished);
    gate.open();
    release.get();
    QVERIFY(finished);
  }

  // The same operations on both CPU backends give bitwise the same values: a small conv, its backward and an
  // Adam step, read back after the documented synchronisation.
  void computesWhatTheImmediateBackendComputes() {
    auto run = [](Backend& be) {
      const auto s = be.create_stream();
      const ConvDesc d{.n = 2, .c_in = 3, .c_out = 4, .h = 6, .w = 5, .kernel = 3, .relu = true};
      Rng rng(5);
      auto make = [&](const Shape& shape, MemoryCategory c) {
        std::vector<float> host(static_cast<std::size_t>(shape.numel()));
        for (float& v : host) v = static_cast<float>(rng.normal());
        Tensor t = Tensor::empty(be.allocator(), shape, DType::f32, c);
        be.copy_from_host(*s, host.data(), t);
        s->synchronize();  // `host` goes out of scope: the queued copy must have read it
        return t;
      };
      const Tensor x = make(d.input().shape(), MemoryCategory::activations);
      Tensor w = make(d.weight_shape(), MemoryCategory::parameters);
      const Tensor b = make(Shape{d.c_out}, MemoryCategory::parameters);
      Tensor y = Tensor::empty(be.allocator(), d.output().shape(), DType::f32, MemoryCategory::activations);
      Tensor dw = Tensor::empty(be.allocator(), d.weight_shape(), DType::f32, MemoryCategory::gradients);
      Tensor db = Tensor::empty(be.allocator(), Shape{d.c_out}, DType::f32, MemoryCategory::gradients);
      const Buffer ws =
          be.allocator().allocate(std::max({be.conv_workspace_bytes(d, ConvPass::forward),
                                            be.conv_workspace_bytes(d, ConvPass::backward_weights)}),
                                  MemoryCategory::workspace);
      const Workspace workspace{ws.data(), ws.bytes()};
      be.conv_forward(*s, d, x, w, &b, y, workspace);
      be.conv_backward_weights(*s, d, x, y, dw, &db, false, workspace);
      Tensor m = Tensor::empty(be.allocator(), d.weight_shape(), DType::f32, MemoryCategory::optimizer_state);
      Tensor v = Tensor::empty(be.allocator(), d.weight_shape(), DType::f32, MemoryCategory::optimizer_state);
      be.fill(*s, m, 0.0);
      be.fill(*s, v, 0.0);
      be.adam_step(*s, AdamStep{}, w, dw, m, v);
      std::vector<float> out(static_cast<std::size_t>(w.numel() + db.numel()));
      be.copy_to_host(*s, w, out.data());
      be.copy_to_host(*s, db, out.data() + w.numel());
      s->synchronize();
      return out;
    };
    CpuBackend immediate(CpuBackendOptions{});
    AsyncCpuBackend queued(CpuBackendOptions{});
    const std::vector<float> a = run(immediate), b = run(queued);
    QVERIFY(a == b);
    QVERIFY(std::any_of(a.begin(), a.end(), [](float f) { return f != 0.0f; }));
  }

  void theEnvironmentChoosesTheStreams() {
    const QByteArray before = qgetenv("UNET_CPU_STREAMS");
    qputenv("UNET_CPU_STREAMS", "async");
    const auto queued = create_backend({DeviceKind::cpu, 0}, {});
    QVERIFY(dynamic_cast<AsyncCpuBackend*>(queued.get()) != nullptr);
    qputenv("UNET_CPU_STREAMS", "immediate");
    QVERIFY(dynamic_cast<CpuBackend*>(create_backend({DeviceKind::cpu, 0}, {}).get()) != nullptr);
    qputenv("UNET_CPU_STREAMS", "sometimes");
    try {
      create_backend({DeviceKind::cpu, 0}, {});
      QFAIL("UNET_CPU_STREAMS=sometimes was accepted");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::usage);
      QVERIFY(std::string(e.what()).find("sometimes") != std::string::npos);
    }
    if (before.isNull())
      qunsetenv("UNET_CPU_STREAMS");
    else
      qputenv("UNET_CPU_STREAMS", before);
  }
};

QTEST_GUILESS_MAIN(TestStreams)
#include "test_streams.moc"
