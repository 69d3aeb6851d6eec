// The CUDA backend's host-side convolution rules (engine/unet/backend/cuda/conv_rules.h) on plain data, so
// they are checked on any machine: which of cuDNN's algorithms a pass may use and how it falls back when
// cuDNN refuses one (fake heuristic lists and a fake runner), the fixed workspace figure the memory planner
// relies on, tensor-core channel padding and the workspace layout (hand-computed byte counts), and the
// 32-bit limits of cuDNN's legacy descriptors.
#include <QtTest>

#include <climits>
#include <string>
#include <vector>

#include "test_support.h"
#include "unet/backend/cuda/conv_rules.h"

using namespace unet;
using namespace unet::cuda;

namespace {

// cuDNN's enum values are only labels here; these mirror a forward pass's (IMPLICIT_GEMM = 0,
// IMPLICIT_PRECOMP_GEMM = 1, GEMM = 2, FFT = 4, WINOGRAD = 6) and its math types (DEFAULT = 0,
// TENSOR_OP = 1, FMA = 3), so a failure message reads like cuDNN's.
constexpr int kDefaultMath = 0, kTensorOp = 1, kFma = 3;
constexpr int kPrecompGemm = 1;

AlgoCandidate entry(int algo, std::size_t bytes, bool deterministic = true, int math = kDefaultMath,
                    bool usable = true) {
  return AlgoCandidate{.algo = algo,
                       .math = math,
                       .bytes = bytes,
                       .deterministic = deterministic,
                       .fma_math = math == kFma,
                       .usable = usable};
}

std::vector<int> algos(const AlgoChoice& c) {
  std::vector<int> out;
  for (const AlgoCandidate& a : c.candidates()) out.push_back(a.algo);
  return out;
}

// Runs a choice with a fake cuDNN that refuses the algorithms in `refused`; records what was tried.
struct FakeRunner {
  std::vector<int> refused{};
  std::vector<int> tried{};
  std::string operator()(const AlgoCandidate& c) {
    tried.push_back(c.algo);
    for (int r : refused)
      if (r == c.algo) return "CUDNN_STATUS_NOT_SUPPORTED";
    return {};
  }
};

}  // namespace

class TestConvRules : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { test::fail_on_warnings(); }

  // --- which algorithms a pass may use -------------------------------------------------------------------

  void filtersKeepHeuristicOrder_data() {
    QTest::addColumn<bool>("deterministic");
    QTest::addColumn<bool>("fma_only");
    QTest::addColumn<std::vector<int>>("want");
    // the list below: 6 fails the heuristic, 4 is over the limit, 0 is not deterministic, 2 uses TF32
    QTest::newRow("any") << false << false << std::vector<int>{0, 2, 5, kPrecompGemm};
    // (5 needs 80 bytes, more than the first admissible entry's 50 raised to the default's 60: dropped)
    QTest::newRow("deterministic") << true << false << std::vector<int>{2, kPrecompGemm};
    QTest::newRow("fma only") << false << true << std::vector<int>{0, 5, kPrecompGemm};
    QTest::newRow("deterministic fma") << true << true << std::vector<int>{5, kPrecompGemm};
  }
  void filtersKeepHeuristicOrder() {
    QFETCH(bool, deterministic);
    QFETCH(bool, fma_only);
    QFETCH(std::vector<int>, want);
    const AlgoRules rules{.deterministic = deterministic, .fma_only = fma_only, .workspace_limit = 1000};
    const std::vector<AlgoCandidate> offered{
        entry(6, 10, true, kFma, false),   // heuristic status not SUCCESS
        entry(4, 1001, true, kFma),        // over the workspace limit
        entry(0, 100, false, kFma),        // not deterministic
        entry(2, 50, true, kDefaultMath),  // TF32 allowed
        entry(5, 80, true, kFma),
    };
    const AlgoChoice choice(offered, entry(kPrecompGemm, 60, true, fma_only ? kFma : kDefaultMath), rules);
    QCOMPARE(algos(choice), want);
    // the workspace: the first admissible entry's, raised to the default's so the last resort fits; an
    // entry needing more than that (none here) is dropped
    const std::size_t first = want.front() == 0 ? 100 : want.front() == 2 ? 50 : 80;
    QCOMPARE(choice.workspace_bytes(), std::max<std::size_t>(first, 60));
  }

  // Entries needing more workspace than the first (and the default) are dropped: a fallback never asks
  // the caller for more than was planned.
  void dropsEntriesLargerThanTheBudget() {
    const AlgoRules rules{};
    const AlgoChoice choice({entry(6, 300), entry(4, 5000), entry(2, 200), entry(0, 301)},
                            entry(kPrecompGemm, 100), rules);
    QCOMPARE(algos(choice), (std::vector<int>{6, 2, kPrecompGemm}));
    QCOMPARE(choice.workspace_bytes(), std::size_t{300});
    // a default larger than the first entry raises the budget to fit it, and what fits then stays
    const AlgoChoice big_default({entry(6, 300), entry(4, 5000), entry(2, 700)}, entry(kPrecompGemm, 800),
                                 rules);
    QCOMPARE(algos(big_default), (std::vector<int>{6, 2, kPrecompGemm}));
    QCOMPARE(big_default.workspace_bytes(), std::size_t{800});
  }

  // cuda.deterministic with no deterministic entry: the pass's default algorithm alone (PyTorch's choice).
  void deterministicWithoutDeterministicEntriesUsesTheDefault() {
    const AlgoRules rules{.deterministic = true};
    const AlgoChoice choice({entry(0, 10, false), entry(3, 20, false)}, entry(kPrecompGemm, 4096), rules);
    QCOMPARE(algos(choice), std::vector<int>{kPrecompGemm});
    QCOMPARE(choice.workspace_bytes(), std::size_t{4096});
    // the default is not appended twice when the heuristic lists it (same algorithm and math)
    const AlgoChoice listed({entry(kPrecompGemm, 64), entry(2, 32)}, entry(kPrecompGemm, 64), rules);
    QCOMPARE(algos(listed), (std::vector<int>{kPrecompGemm, 2}));
    // the same algorithm with another math type is another candidate
    const AlgoChoice other_math({entry(kPrecompGemm, 64, true, kTensorOp)}, entry(kPrecompGemm, 64), rules);
    QCOMPARE(other_math.candidates().size(), std::size_t{2});
  }

  // Nothing admissible and no default: empty (the backend then says which pass has no algorithm).
  void nothingAdmissibleIsEmpty() {
    const AlgoRules rules{.deterministic = true, .fma_only = true};
    const AlgoChoice none({entry(0, 10, false, kFma), entry(2, 10, true, kTensorOp)}, std::nullopt, rules);
    QVERIFY(none.empty());
    QCOMPARE(none.workspace_bytes(), std::size_t{0});
    // a default with TF32 math is not admissible when only FMA math is
    const AlgoChoice tf32_default({}, entry(kPrecompGemm, 10, true, kDefaultMath), rules);
    QVERIFY(tf32_default.empty());
  }

  // --- falling back at run time ---------------------------------------------------------------------------

  void fallsBackAndKeepsTheFirstThatRan() {
    AlgoChoice choice({entry(6, 300), entry(2, 200), entry(5, 100)}, entry(kPrecompGemm, 50), AlgoRules{});
    const std::size_t planned = choice.workspace_bytes();
    FakeRunner cudnn{.refused = {6, 2}};
    const AlgoCandidate& ran = choice.run(planned, cudnn, "conv");
    QCOMPARE(ran.algo, 5);
    QCOMPARE(cudnn.tried, (std::vector<int>{6, 2, 5}));
    QVERIFY(choice.kept().has_value());
    QCOMPARE(choice.kept()->algo, 5);
    // the planner's figure does not move when the run falls back
    QCOMPARE(choice.workspace_bytes(), planned);
    // later runs use the kept algorithm only
    cudnn.tried.clear();
    cudnn.refused.clear();
    QCOMPARE(choice.run(planned, cudnn, "conv").algo, 5);
    QCOMPARE(cudnn.tried, std::vector<int>{5});
  }

  // The default, last in line, runs when cuDNN refuses every heuristic entry.
  void theDefaultIsTheLastResort() {
    AlgoChoice choice({entry(6, 300), entry(2, 200)}, entry(kPrecompGemm, 50), AlgoRules{});
    FakeRunner cudnn{.refused = {6, 2}};
    QCOMPARE(choice.run(choice.workspace_bytes(), cudnn, "conv").algo, kPrecompGemm);
    QCOMPARE(cudnn.tried, (std::vector<int>{6, 2, kPrecompGemm}));
  }

  // With less workspace than planned, the entries that need more are skipped, not run.
  void skipsEntriesThatDoNotFitTheGivenWorkspace() {
    AlgoChoice choice({entry(6, 300), entry(2, 200), entry(5, 100)}, std::nullopt, AlgoRules{});
    FakeRunner cudnn;
    QCOMPARE(choice.run(150, cudnn, "conv").algo, 5);
    QCOMPARE(cudnn.tried, std::vector<int>{5});
  }

  void noAlgorithmRanNamesEveryAttempt() {
    AlgoChoice choice({entry(6, 300), entry(2, 200)}, entry(kPrecompGemm, 50), AlgoRules{});
    FakeRunner cudnn{.refused = {6, 2, kPrecompGemm}};
    try {
      choice.run(200, cudnn, "conv3x3 [2,3,8,8]->16 bf16 forward");
      QFAIL("no algorithm ran, yet run() returned");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      const QString what = QString::fromStdString(e.message());
      QVERIFY2(what.startsWith("conv3x3 [2,3,8,8]->16 bf16 forward: "), qPrintable(what));
      QVERIFY2(what.contains("algorithm 6: needs 300 bytes of workspace, 200 given"), qPrintable(what));
      QVERIFY2(what.contains("algorithm 2: CUDNN_STATUS_NOT_SUPPORTED"), qPrintable(what));
      QVERIFY2(what.contains("algorithm 1: CUDNN_STATUS_NOT_SUPPORTED"), qPrintable(what));
    }
    QCOMPARE(cudnn.tried, (std::vector<int>{2, kPrecompGemm}));
    QVERIFY(!choice.kept());
  }

  // Once an algorithm has run, its later failure is an error, not a silent switch to another algorithm.
  void theKeptAlgorithmFailingIsAnError() {
    AlgoChoice choice({entry(6, 300), entry(2, 200)}, std::nullopt, AlgoRules{});
    FakeRunner cudnn;
    QCOMPARE(choice.run(300, cudnn, "conv").algo, 6);
    cudnn.refused = {6};
    cudnn.tried.clear();
    try {
      choice.run(300, cudnn, "conv");
      QFAIL("the kept algorithm failed, yet run() returned");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::backend);
      QVERIFY2(QString::fromStdString(e.message()).contains("algorithm 6, which ran before"), e.what());
    }
    QCOMPARE(cudnn.tried, std::vector<int>{6});
  }

  // --- cuDNN's 32-bit descriptor limits --------------------------------------------------------------------

  void descriptorLimits() {
    QCOMPARE(cudnn_int(INT_MAX, "n", "conv"), INT_MAX);
    QVERIFY_THROWS_EXCEPTION(Error, cudnn_int(std::int64_t{INT_MAX} + 1, "n", "conv"));
    QVERIFY_THROWS_EXCEPTION(Error, cudnn_int(-1, "n", "conv"));
    // 2^31 - 1 elements fit, 2^31 do not; each dimension may fit while the product does not
    check_cudnn_tensor(1, 1, 1, INT_MAX, "input", "conv");
    check_cudnn_tensor(0, 1 << 20, 1 << 20, 1 << 20, "input", "conv");  // empty
    // batch 32, 512x512, 256 channels: 2^31 elements exactly (the review's example)
    try {
      check_cudnn_tensor(32, 256, 512, 512, "output", "conv3x3 [32,256,512,512]->256 bf16");
      QFAIL("a 2^31-element tensor passed");
    } catch (const Error& e) {
      QCOMPARE(e.kind(), ErrorKind::unsupported);
      QVERIFY2(QString::fromStdString(e.message()).contains("conv3x3 [32,256,512,512]->256 bf16: its output"),
               e.what());
      QVERIFY2(QString::fromStdString(e.hint()).contains("train.batch_size"), e.what());
    }
    check_cudnn_tensor(31, 256, 512, 512, "output", "conv");  // 31 * 2^26 < 2^31
    // a product that would overflow int64 is refused, not wrapped
    QVERIFY_THROWS_EXCEPTION(Error, check_cudnn_tensor(INT_MAX, INT_MAX, INT_MAX, INT_MAX, "input", "conv"));
  }

  // --- tensor-core padding and the workspace ---------------------------------------------------------------

  void paddingApplies_data() {
    QTest::addColumn<DType>("dtype");
    QTest::addColumn<Layout>("layout");
    QTest::addColumn<bool>("depthwise");
    QTest::addColumn<bool>("pads");
    QTest::newRow("bf16 nhwc") << DType::bf16 << Layout::nhwc << false << true;
    QTest::newRow("f16 nhwc") << DType::f16 << Layout::nhwc << false << true;
    QTest::newRow("f32 nhwc") << DType::f32 << Layout::nhwc << false << false;
    QTest::newRow("bf16 nchw") << DType::bf16 << Layout::nchw << false << false;
    QTest::newRow("bf16 nhwc depthwise") << DType::bf16 << Layout::nhwc << true << false;
  }
  void paddingApplies() {
    QFETCH(DType, dtype);
    QFETCH(Layout, layout);
    QFETCH(bool, depthwise);
    QFETCH(bool, pads);
    QCOMPARE(pads_channels(dtype, layout, depthwise), pads);
    ConvDesc d{.n = 2,
               .c_in = 3,
               .c_out = 3,
               .h = 5,
               .w = 7,
               .kernel = 3,
               .depthwise = depthwise,
               .dtype = dtype,
               .layout = layout};
    if (depthwise) d.c_in = d.c_out = 3;
    const ConvShape s = conv_shape(d);
    QCOMPARE(s.c_pad, pads ? std::int64_t{8} : std::int64_t{3});
    QCOMPARE(s.k_pad, pads ? std::int64_t{8} : std::int64_t{3});
    QCOMPARE(s.filter_c, depthwise ? std::int64_t{1} : std::int64_t{3});
  }

  // The first convolution (3 input channels) in bf16: X padded to 8 channels, 16 filters already a multiple
  // of 8. Hand-computed bytes; every region 256-byte aligned and none overlapping.
  void firstConvLayout() {
    const ConvDesc d{.n = 2,
                     .c_in = 3,
                     .c_out = 16,
                     .h = 4,
                     .w = 4,
                     .kernel = 3,
                     .bias = true,
                     .dtype = DType::bf16,
                     .layout = Layout::nhwc};
    const ConvShape s = conv_shape(d);
    QVERIFY(s.pads_x());
    QVERIFY(!s.pads_y());
    QCOMPARE(s.packed_bytes(), std::size_t{16 * 9 * 8 * 2});  // 2304 = 9 x 256
    const WorkspaceLayout fwd = workspace_layout(s, ConvPass::forward, 1000);
    QCOMPARE(fwd.filter.offset, std::size_t{0});
    QCOMPARE(fwd.x_pad.offset, std::size_t{2304});
    QCOMPARE(fwd.x_pad.bytes, std::size_t{2 * 16 * 8 * 2});  // 512
    QCOMPARE(fwd.y_pad.bytes, std::size_t{0});
    QCOMPARE(fwd.algo.offset, std::size_t{2304 + 512});
    QCOMPARE(fwd.algo.bytes, std::size_t{1000});
    QCOMPARE(fwd.bias.bytes, std::size_t{0});
    QCOMPARE(fwd.total, std::size_t{2304 + 512 + 1024});
    // backward filter: X padded again, and the bias gradient in bf16 (16 x 2 bytes, one aligned block)
    const WorkspaceLayout bwf = workspace_layout(s, ConvPass::backward_weights, 0);
    QCOMPARE(bwf.algo.bytes, std::size_t{0});
    QCOMPARE(bwf.bias.offset, std::size_t{2304 + 512});
    QCOMPARE(bwf.bias.bytes, std::size_t{32});
    QCOMPARE(bwf.total, std::size_t{2304 + 512 + 256});
  }

  // The head (1x1, 16 -> 1 class) in f16: the output padded to 8 channels, its filter to 8 filters.
  void headLayout() {
    const ConvDesc d{.n = 3,
                     .c_in = 16,
                     .c_out = 1,
                     .h = 10,
                     .w = 10,
                     .kernel = 1,
                     .bias = true,
                     .dtype = DType::f16,
                     .layout = Layout::nhwc};
    const ConvShape s = conv_shape(d);
    QVERIFY(!s.pads_x());
    QVERIFY(s.pads_y());
    QCOMPARE(s.k_pad, std::int64_t{8});
    QCOMPARE(s.packed_bytes(), std::size_t{8 * 16 * 2});  // 256
    const WorkspaceLayout bwd = workspace_layout(s, ConvPass::backward_data, 300);
    QCOMPARE(bwd.y_pad.offset, std::size_t{256});
    QCOMPARE(bwd.y_pad.bytes, std::size_t{3 * 100 * 8 * 2});  // 4800 -> 4864 aligned
    QCOMPARE(bwd.algo.offset, std::size_t{256 + 4864});
    QCOMPARE(bwd.total, std::size_t{256 + 4864 + 512});
  }

  // f32 and upconvs are never padded: the layout is the packed filter, then cuDNN's workspace (then the
  // bias gradient's bf16/f16 staging, absent in f32).
  void unpaddedLayouts() {
    const ConvDesc f32{.n = 1, .c_in = 3, .c_out = 5, .h = 8, .w = 8, .kernel = 3, .bias = true};
    const ConvShape s = conv_shape(f32);
    QVERIFY(!s.pads_x() && !s.pads_y());
    const WorkspaceLayout l = workspace_layout(s, ConvPass::backward_weights, 10);
    QCOMPARE(l.total, align256(5 * 3 * 9 * 4) + align256(10));
    QCOMPARE(l.bias.bytes, std::size_t{0});  // straight into the f32 db

    const UpConvDesc up{.n = 2, .c_in = 32, .c_out = 16, .h = 4, .w = 6, .dtype = DType::bf16};
    const ConvShape u = conv_shape(up);
    QCOMPARE(u.k, std::int64_t{32});  // the matching convolution: K = c_in, C = c_out
    QCOMPARE(u.c, std::int64_t{16});
    QCOMPARE(u.x_pixels, std::int64_t{2 * 8 * 12});
    QCOMPARE(u.y_pixels, std::int64_t{2 * 4 * 6});
    QVERIFY(!u.pads_x() && !u.pads_y());
    const WorkspaceLayout ul = workspace_layout(u, ConvPass::backward_weights, 0);
    QCOMPARE(ul.bias.bytes, std::size_t{16 * 2});
    QCOMPARE(ul.total, align256(32 * 16 * 4 * 2) + 256);
    QCOMPARE(workspace_layout(u, ConvPass::forward, 0).total, align256(32 * 16 * 4 * 2));
  }
};

QTEST_GUILESS_MAIN(TestConvRules)
#include "test_conv_rules.moc"
