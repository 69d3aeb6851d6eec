#include "unet/backend/cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <thread>

#include "unet/backend/cpu/cpu_kernels.h"
#include "unet/backend/device_monitor.h"
#include "unet/backend/immediate_stream.h"
#include "unet/core/parallel.h"

namespace unet {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class CpuStream final : public ImmediateStream {
 public:
  explicit CpuStream(const dnnl::engine& engine) : stream(engine) {}
  void synchronize() override { stream.wait(); }
  dnnl::stream stream;
};

dnnl::stream& native(Stream& s) {
  return static_cast<CpuStream&>(s).stream;
}

dt to_dnnl(DType t) {
  switch (t) {
    case DType::f32:
      return dt::f32;
    case DType::bf16:
      return dt::bf16;
    case DType::f16:
      return dt::f16;
    case DType::u8:
      return dt::u8;
    case DType::i32:
      return dt::s32;
    default:
      throw Error(ErrorKind::unsupported, "oneDNN has no " + std::string(to_string(t)) + " tensors");
  }
}

memory::desc act_md(const ActShape& s, DType t, Layout l) {
  return memory::desc({s.n, s.c, s.h, s.w}, to_dnnl(t), l == Layout::nhwc ? tag::nhwc : tag::nchw);
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

constexpr std::size_t align64(std::size_t b) {
  return (b + 63) / 64 * 64;
}

// A pass's workspace: the packed weights (or packed weight gradients), then an optional small extra region,
// then the scratchpad shared by the primitive and the weight reorder (they run one after the other).
struct PassWorkspace {
  void* packed = nullptr;
  void* extra = nullptr;
  void* scratch = nullptr;

  static std::size_t bytes(std::size_t packed, std::size_t extra, std::size_t scratch) {
    return align64(packed) + align64(extra) + align64(scratch);
  }
  PassWorkspace(Workspace ws, std::size_t packed_bytes, std::size_t extra_bytes, std::size_t scratch_bytes) {
    // A workspace without memory is too small as soon as the pass needs any: no null pointer reaches oneDNN.
    UNET_CHECK(ws.bytes >= bytes(packed_bytes, extra_bytes, scratch_bytes) &&
                   (ws.data || bytes(packed_bytes, extra_bytes, scratch_bytes) == 0),
               usage,
               "workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                   std::to_string(bytes(packed_bytes, extra_bytes, scratch_bytes)) + " needed");
    char* base = static_cast<char*>(ws.data);
    if (packed_bytes) packed = base;
    if (extra_bytes) extra = base + align64(packed_bytes);
    if (scratch_bytes) scratch = base + align64(packed_bytes) + align64(extra_bytes);
  }
};

// A reorder between a canonical f32 weight layout and the layout a primitive wants, in either direction.
struct WeightReorder {
  bool needed = false;
  memory::desc packed;
  std::optional<dnnl::reorder> plain, accumulate;  // accumulate: dst += src, by the reorder's sum post-op
  memory::desc scratch;

  std::size_t scratch_bytes() const { return scratch.get_size(); }
};

WeightReorder make_reorder(const dnnl::engine& eng, const memory::desc& from, const memory::desc& to,
                           bool packed_is_dst, bool with_accumulate) {
  WeightReorder r;
  r.packed = packed_is_dst ? to : from;
  r.needed = from != to;
  if (!r.needed && !with_accumulate) return r;
  dnnl::reorder::primitive_desc pd(eng, from, eng, to, user_scratchpad());
  r.plain.emplace(pd);
  r.scratch = pd.scratchpad_desc();
  if (with_accumulate) {
    auto attr = user_scratchpad();
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
    dnnl::reorder::primitive_desc acc_pd(eng, from, eng, to, attr);
    r.accumulate.emplace(acc_pd);
    if (acc_pd.scratchpad_desc().get_size() > r.scratch.get_size()) r.scratch = acc_pd.scratchpad_desc();
  }
  return r;
}

// The three passes of a convolution-like op (convolution or deconvolution), each created on first use.
template <class Fwd, class BwdData, class BwdWeights>
struct ConvLike {
  ConvLike(memory::desc src_md, memory::desc dst_md, memory::desc canonical_w_md, memory::desc bias_md,
           typename Fwd::primitive_desc forward_pd)
      : src(src_md), dst(dst_md), canonical_w(canonical_w_md), bias(bias_md), fwd_pd(std::move(forward_pd)) {}

  memory::desc src, dst, canonical_w, bias;
  typename Fwd::primitive_desc fwd_pd;
  std::optional<Fwd> fwd;
  WeightReorder fwd_w;

  std::optional<typename BwdData::primitive_desc> bwd_data_pd;
  std::optional<BwdData> bwd_data;
  WeightReorder bwd_data_w;

  std::optional<typename BwdWeights::primitive_desc> bwd_weights_pd;
  std::optional<BwdWeights> bwd_weights;
  WeightReorder bwd_weights_w;  // packed diff weights -> canonical gradient
};

using ConvPrims =
    ConvLike<dnnl::convolution_forward, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>;
using UpConvPrims = ConvLike<dnnl::deconvolution_forward, dnnl::deconvolution_backward_data,
                             dnnl::deconvolution_backward_weights>;

struct PoolPrims {
  explicit PoolPrims(dnnl::pooling_forward::primitive_desc pd) : fwd_pd(std::move(pd)) {}
  dnnl::pooling_forward::primitive_desc fwd_pd;
  std::optional<dnnl::pooling_forward> fwd;
  std::optional<dnnl::pooling_backward::primitive_desc> bwd_pd;
  std::optional<dnnl::pooling_backward> bwd;
};

struct ReluKey {
  std::int64_t numel;
  DType dtype;
  auto operator<=>(const ReluKey&) const = default;
};

std::string describe(const ConvDesc& d) {
  return "conv" + std::to_string(d.kernel) + "x" + std::to_string(d.kernel) +
         (d.depthwise ? " depthwise" : "") + " " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}
std::string describe(const UpConvDesc& d) {
  return "upconv2x2 " + d.input().str() + "->" + std::to_string(d.c_out) + " " +
         std::string(to_string(d.dtype));
}

std::string read_cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(" \t"));
        return name;
      }
    }
  }
  return "CPU";
}

}  // namespace

bool cpu_has_native_bf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

DeviceInfo cpu_device_info(int index, int threads) {
  DeviceInfo info;
  info.id = "cpu:" + std::to_string(index);
  info.kind = DeviceKind::cpu;
  info.index = index;
  const int t = threads > 0 ? threads : hardware_threads();
  info.name = read_cpu_model_name() + " (" + std::to_string(t) + (t == 1 ? " thread)" : " threads)");
  const auto [total, available] = host_memory();
  info.total_bytes = total;
  info.free_bytes = available;
  return info;
}

struct CpuBackend::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<ConvDesc, std::unique_ptr<ConvPrims>> convs;
  std::map<UpConvDesc, std::unique_ptr<UpConvPrims>> upconvs;
  std::map<PoolDesc, std::unique_ptr<PoolPrims>> pools;
  std::map<ReluKey, std::unique_ptr<dnnl::eltwise_backward>> relus;

  ConvPrims& conv(const ConvDesc& d) {
    auto& slot = convs[d];
    if (!slot) {
      const memory::dims strides{1, 1};
      const memory::dims pad{d.kernel / 2, d.kernel / 2};
      const memory::desc src = act_md(d.input(), d.dtype, d.layout);
      const memory::desc dst = act_md(d.output(), d.dtype, d.layout);
      const memory::dims wdims = d.depthwise ? memory::dims{d.c_in, 1, 1, d.kernel, d.kernel}
                                             : memory::dims{d.c_out, d.c_in, d.kernel, d.kernel};
      const memory::desc any_w(wdims, to_dnnl(d.dtype), tag::any);
      const memory::desc canonical_w(wdims, dt::f32, d.depthwise ? tag::goihw : tag::oihw);
      const memory::desc bias = d.bias ? memory::desc({d.c_out}, dt::f32, tag::a) : memory::desc();
      auto attr = user_scratchpad();
      if (d.relu) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(ops);
      }
      auto desc = d.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                           dnnl::algorithm::convolution_direct, src, any_w,
                                                           bias, dst, strides, pad, pad)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                           dnnl::algorithm::convolution_direct, src, any_w,
                                                           dst, strides, pad, pad);
      slot = std::make_unique<ConvPrims>(src, dst, canonical_w, bias,
                                         dnnl::convolution_forward::primitive_desc(desc, attr, engine));
      slot->fwd_w = make_reorder(engine, canonical_w, slot->fwd_pd.weights_desc(), true, false);
    }
    return *slot;
  }

  void ensure_backward(ConvPrims& p, const ConvDesc& d, ConvPass pass) {
    const memory::dims strides{1, 1};
    const memory::dims pad{d.kernel / 2, d.kernel / 2};
    const memory::dims wdims = p.canonical_w.dims();
    if (pass == ConvPass::backward_data && !p.bwd_data_pd) {
      const memory::desc any_w(wdims, to_dnnl(d.dtype), tag::any);
      dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, p.src, any_w, p.dst,
                                                 strides, pad, pad);
      p.bwd_data_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
      p.bwd_data_w = make_reorder(engine, p.canonical_w, p.bwd_data_pd->weights_desc(), true, false);
    }
    if (pass == ConvPass::backward_weights && !p.bwd_weights_pd) {
      const memory::desc any_w(wdims, dt::f32, tag::any);
      auto desc = d.bias
                      ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.src,
                                                                 any_w, p.bias, p.dst, strides, pad, pad)
                      : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.src,
                                                                 any_w, p.dst, strides, pad, pad);
      p.bwd_weights_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
      p.bwd_weights_w =
          make_reorder(engine, p.bwd_weights_pd->diff_weights_desc(), p.canonical_w, false, true);
    }
  }

  UpConvPrims& upconv(const UpConvDesc& d) {
    auto& slot = upconvs[d];
    if (!slot) {
      const memory::dims strides{2, 2};
      const memory::dims pad{0, 0};
      const memory::desc src = act_md(d.input(), d.dtype, d.layout);
      const memory::desc dst = act_md(d.output(), d.dtype, d.layout);
      // oneDNN's deconvolution weights are {out, in, kh, kw}; PyTorch's ConvTranspose2d stores [in, out, kh,
      // kw], which is oneDNN's "iohw" order of the same dims.
      const memory::dims wdims{d.c_out, d.c_in, 2, 2};
      const memory::desc any_w(wdims, to_dnnl(d.dtype), tag::any);
      const memory::desc canonical_w(wdims, dt::f32, tag::iohw);
      const memory::desc bias({d.c_out}, dt::f32, tag::a);
      dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_training,
                                             dnnl::algorithm::deconvolution_direct, src, any_w, bias, dst,
                                             strides, pad, pad);
      slot = std::make_unique<UpConvPrims>(
          src, dst, canonical_w, bias,
          dnnl::deconvolution_forward::primitive_desc(desc, user_scratchpad(), engine));
      slot->fwd_w = make_reorder(engine, canonical_w, slot->fwd_pd.weights_desc(), true, false);
    }
    return *slot;
  }

  void ensure_backward(UpConvPrims& p, const UpConvDesc& d, ConvPass pass) {
    const memory::dims strides{2, 2};
    const memory::dims pad{0, 0};
    const memory::dims wdims = p.canonical_w.dims();
    if (pass == ConvPass::backward_data && !p.bwd_data_pd) {
      const memory::desc any_w(wdims, to_dnnl(d.dtype), tag::any);
      dnnl::deconvolution_backward_data::desc desc(dnnl::algorithm::deconvolution_direct, p.src, any_w, p.dst,
                                                   strides, pad, pad);
      p.bwd_data_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
      p.bwd_data_w = make_reorder(engine, p.canonical_w, p.bwd_data_pd->weights_desc(), true, false);
    }
    if (pass == ConvPass::backward_weights && !p.bwd_weights_pd) {
      const memory::desc any_w(wdims, dt::f32, tag::any);
      dnnl::deconvolution_backward_weights::desc desc(dnnl::algorithm::deconvolution_direct, p.src, any_w,
                                                      p.bias, p.dst, strides, pad, pad);
      p.bwd_weights_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
      p.bwd_weights_w =
          make_reorder(engine, p.bwd_weights_pd->diff_weights_desc(), p.canonical_w, false, true);
    }
  }

  PoolPrims& pool(const PoolDesc& d) {
    auto& slot = pools[d];
    if (!slot) {
      dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max,
                                       act_md(d.input(), d.dtype, d.layout),
                                       act_md(d.output(), d.dtype, d.layout), {2, 2}, {2, 2}, {0, 0}, {0, 0});
      slot =
          std::make_unique<PoolPrims>(dnnl::pooling_forward::primitive_desc(desc, user_scratchpad(), engine));
    }
    return *slot;
  }

  void ensure_backward(PoolPrims& p, const PoolDesc& d) {
    if (p.bwd_pd) return;
    dnnl::pooling_backward::desc desc(dnnl::algorithm::pooling_max, act_md(d.input(), d.dtype, d.layout),
                                      act_md(d.output(), d.dtype, d.layout), {2, 2}, {2, 2}, {0, 0}, {0, 0});
    p.bwd_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
  }

  dnnl::eltwise_backward& relu(const ReluKey& key) {
    auto& slot = relus[key];
    if (!slot) {
      const memory::desc md({key.numel}, to_dnnl(key.dtype), tag::a);
      dnnl::eltwise_forward::desc fdesc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, 0.0f, 0.0f);
      dnnl::eltwise_forward::primitive_desc fpd(fdesc, engine);
      dnnl::eltwise_backward::desc bdesc(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, md, md, 0.0f, 0.0f);
      dnnl::eltwise_backward::primitive_desc bpd(bdesc, engine, fpd);
      slot = std::make_unique<dnnl::eltwise_backward>(bpd);
    }
    return *slot;
  }

  memory mem(const memory::desc& md, const void* ptr) const {
    return memory(md, engine,
                  const_cast<void*>(ptr));  // NOLINT: oneDNN takes non-const handles for inputs too
  }
};

// Sets this thread's OpenMP team size to the backend's share of the cores for the duration of a call, and
// gives the thread back the size it had: a caller's own parallel regions (the data pipeline, a test) are not
// left at a replica's share. (guarded() below turns oneDNN's exceptions into the engine's.)
struct CpuBackend::ThreadsGuard {
  explicit ThreadsGuard(const CpuBackend& b) : previous(omp_get_max_threads()) {
    omp_set_num_threads(b.threads_);
  }
  ~ThreadsGuard() { omp_set_num_threads(previous); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;
  int previous;
};

namespace {
template <class Fn>
decltype(auto) guarded(const DeviceInfo& info, const std::string& what, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::backend, what + ": oneDNN: " + e.what(), info.id,
                "this shape or data type may be unsupported by oneDNN on this CPU");
  }
}

void check_act(const Tensor& t, const ActShape& want, DType dtype, const char* what) {
  UNET_CHECK(t.defined() && t.shape().rank == 4 && t.act() == want && t.dtype() == dtype, usage,
             std::string(what) + ": expected " + want.str() + " " + std::string(to_string(dtype)) + ", got " +
                 (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

void check_param(const Tensor& t, const Shape& want, const char* what) {
  UNET_CHECK(t.defined() && t.shape().numel() == want.numel() && t.dtype() == DType::f32, usage,
             std::string(what) + ": expected f32 " + want.str() + ", got " +
                 (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}
}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : info_(cpu_device_info(options.index, options.threads)),
      threads_(options.threads > 0 ? options.threads : hardware_threads()),
      allocator_(info_.id, info_.total_bytes),
      impl_(std::make_unique<Impl>()) {
  allocator_.set_cap(options.cap_bytes);
  if (options.reserve_bytes > 0) allocator_.reserve(options.reserve_bytes);
}

CpuBackend::~CpuBackend() = default;

std::unique_ptr<Stream> CpuBackend::create_stream() {
  return std::make_unique<CpuStream>(impl_->engine);
}

bool CpuBackend::supports(DType compute) const {
  return compute == DType::f32 || (compute == DType::bf16 && cpu_has_native_bf16());
}

std::unique_ptr<Event> CpuBackend::create_event() {
  return std::make_unique<CompletedEvent>();
}

DeviceSample CpuBackend::sample_device() const {
  const auto [total, available] = host_memory();
  return {.total_bytes = total, .free_bytes = available};
}

namespace {

std::size_t scratch_size(const memory::desc& a, const WeightReorder& r) {
  return std::max(a.get_size(), r.scratch_bytes());
}

void add_scratchpad(std::unordered_map<int, memory>& args, const dnnl::engine& eng, const memory::desc& md,
                    void* scratch) {
  if (md.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(md, eng, scratch));
}

void run_reorder(const dnnl::engine& eng, dnnl::stream& stream, const WeightReorder& r, bool accumulate,
                 const memory::desc& from_md, const void* from, const memory::desc& to_md, void* to,
                 void* scratch) {
  std::unordered_map<int, memory> args{{DNNL_ARG_FROM, memory(from_md, eng, const_cast<void*>(from))},
                                       {DNNL_ARG_TO, memory(to_md, eng, to)}};
  add_scratchpad(args, eng, r.scratch, scratch);
  (accumulate ? *r.accumulate : *r.plain).execute(stream, args);
}

// The three passes, shared by convolution and deconvolution.
template <class P>
std::size_t forward_workspace(const P& p) {
  return PassWorkspace::bytes(p.fwd_w.needed ? p.fwd_w.packed.get_size() : 0, 0,
                              scratch_size(p.fwd_pd.scratchpad_desc(), p.fwd_w));
}
template <class P>
std::size_t backward_data_workspace(const P& p) {
  return PassWorkspace::bytes(p.bwd_data_w.needed ? p.bwd_data_w.packed.get_size() : 0, 0,
                              scratch_size(p.bwd_data_pd->scratchpad_desc(), p.bwd_data_w));
}
template <class P>
std::size_t backward_weights_workspace(const P& p, std::int64_t bias_channels) {
  return PassWorkspace::bytes(p.bwd_weights_w.packed.get_size(),
                              static_cast<std::size_t>(bias_channels) * sizeof(float),
                              scratch_size(p.bwd_weights_pd->scratchpad_desc(), p.bwd_weights_w));
}

template <class P>
void run_forward(const dnnl::engine& eng, dnnl::stream& stream, P& p, const void* x, const void* w,
                 const void* b, void* y, Workspace ws) {
  if (!p.fwd) p.fwd.emplace(p.fwd_pd);
  PassWorkspace pw(ws, p.fwd_w.needed ? p.fwd_w.packed.get_size() : 0, 0,
                   scratch_size(p.fwd_pd.scratchpad_desc(), p.fwd_w));
  memory weights(p.canonical_w, eng, const_cast<void*>(w));
  if (p.fwd_w.needed) {
    run_reorder(eng, stream, p.fwd_w, false, p.canonical_w, w, p.fwd_w.packed, pw.packed, pw.scratch);
    weights = memory(p.fwd_w.packed, eng, pw.packed);
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(p.src, eng, const_cast<void*>(x))},
                                       {DNNL_ARG_WEIGHTS, weights},
                                       {DNNL_ARG_DST, memory(p.dst, eng, y)}};
  if (b) args.emplace(DNNL_ARG_BIAS, memory(p.bias, eng, const_cast<void*>(b)));
  add_scratchpad(args, eng, p.fwd_pd.scratchpad_desc(), pw.scratch);
  p.fwd->execute(stream, args);
}

template <class P>
void run_backward_data(const dnnl::engine& eng, dnnl::stream& stream, P& p, const void* dy, const void* w,
                       void* dx, Workspace ws) {
  if (!p.bwd_data) p.bwd_data.emplace(*p.bwd_data_pd);
  PassWorkspace pw(ws, p.bwd_data_w.needed ? p.bwd_data_w.packed.get_size() : 0, 0,
                   scratch_size(p.bwd_data_pd->scratchpad_desc(), p.bwd_data_w));
  memory weights(p.canonical_w, eng, const_cast<void*>(w));
  if (p.bwd_data_w.needed) {
    run_reorder(eng, stream, p.bwd_data_w, false, p.canonical_w, w, p.bwd_data_w.packed, pw.packed,
                pw.scratch);
    weights = memory(p.bwd_data_w.packed, eng, pw.packed);
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, memory(p.dst, eng, const_cast<void*>(dy))},
                                       {DNNL_ARG_WEIGHTS, weights},
                                       {DNNL_ARG_DIFF_SRC, memory(p.src, eng, dx)}};
  add_scratchpad(args, eng, p.bwd_data_pd->scratchpad_desc(), pw.scratch);
  p.bwd_data->execute(stream, args);
}

template <class P>
void run_backward_weights(const dnnl::engine& eng, dnnl::stream& stream, P& p, const void* x, const void* dy,
                          void* dw, void* db, std::int64_t bias_channels, bool accumulate, Workspace ws) {
  if (!p.bwd_weights) p.bwd_weights.emplace(*p.bwd_weights_pd);
  const WeightReorder& r = p.bwd_weights_w;
  PassWorkspace pw(ws, r.packed.get_size(), static_cast<std::size_t>(bias_channels) * sizeof(float),
                   scratch_size(p.bwd_weights_pd->scratchpad_desc(), r));
  // Straight into the gradient when its layout is already canonical and nothing is to be added.
  const bool direct = !r.needed && !accumulate;
  void* packed = direct ? dw : pw.packed;
  void* bias_out = accumulate ? pw.extra : db;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(p.src, eng, const_cast<void*>(x))},
                                       {DNNL_ARG_DIFF_DST, memory(p.dst, eng, const_cast<void*>(dy))},
                                       {DNNL_ARG_DIFF_WEIGHTS, memory(r.packed, eng, packed)}};
  if (db) args.emplace(DNNL_ARG_DIFF_BIAS, memory(p.bias, eng, bias_out));
  add_scratchpad(args, eng, p.bwd_weights_pd->scratchpad_desc(), pw.scratch);
  p.bwd_weights->execute(stream, args);
  if (!direct) run_reorder(eng, stream, r, accumulate, r.packed, packed, p.canonical_w, dw, pw.scratch);
  if (db && accumulate) cpu::add(pw.extra, db, bias_channels, DType::f32);
}

}  // namespace

// --- convolution
// ----------------------------------------------------------------------------------------------

std::size_t CpuBackend::conv_workspace_bytes(const ConvDesc& d, ConvPass pass) {
  ThreadsGuard threads(*this);
  return guarded(info_, describe(d), [&]() -> std::size_t {
    ConvPrims& p = impl_->conv(d);
    if (pass == ConvPass::forward) return forward_workspace(p);
    impl_->ensure_backward(p, d, pass);
    return pass == ConvPass::backward_data ? backward_data_workspace(p)
                                           : backward_weights_workspace(p, d.bias ? d.c_out : 0);
  });
}

void CpuBackend::conv_forward(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                              Tensor& y, Workspace ws) {
  check_act(x, d.input(), d.dtype, "conv_forward x");
  check_act(y, d.output(), d.dtype, "conv_forward y");
  check_param(w, d.weight_shape(), "conv_forward w");
  UNET_CHECK(d.bias == (b != nullptr), usage,
             "conv_forward: a bias must be given exactly when the desc has one");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    run_forward(impl_->engine, native(s), impl_->conv(d), x.data(), w.data(), b ? b->data() : nullptr,
                y.data(), ws);
  });
}

void CpuBackend::conv_backward_data(Stream& s, const ConvDesc& d, const Tensor& dz, const Tensor& w,
                                    Tensor& dx, Workspace ws) {
  check_act(dz, d.output(), d.dtype, "conv_backward_data dz");
  check_act(dx, d.input(), d.dtype, "conv_backward_data dx");
  check_param(w, d.weight_shape(), "conv_backward_data w");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    ConvPrims& p = impl_->conv(d);
    impl_->ensure_backward(p, d, ConvPass::backward_data);
    run_backward_data(impl_->engine, native(s), p, dz.data(), w.data(), dx.data(), ws);
  });
}

void CpuBackend::conv_backward_weights(Stream& s, const ConvDesc& d, const Tensor& x, const Tensor& dz,
                                       Tensor& dw, Tensor* db, bool accumulate, Workspace ws) {
  check_act(x, d.input(), d.dtype, "conv_backward_weights x");
  check_act(dz, d.output(), d.dtype, "conv_backward_weights dz");
  check_param(dw, d.weight_shape(), "conv_backward_weights dw");
  UNET_CHECK(d.bias == (db != nullptr), usage,
             "conv_backward_weights: a bias gradient must be given exactly when the desc has a bias");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    ConvPrims& p = impl_->conv(d);
    impl_->ensure_backward(p, d, ConvPass::backward_weights);
    run_backward_weights(impl_->engine, native(s), p, x.data(), dz.data(), dw.data(),
                         db ? db->data() : nullptr, d.bias ? d.c_out : 0, accumulate, ws);
  });
}

// --- transposed convolution
// -----------------------------------------------------------------------------------

std::size_t CpuBackend::upconv_workspace_bytes(const UpConvDesc& d, ConvPass pass) {
  ThreadsGuard threads(*this);
  return guarded(info_, describe(d), [&]() -> std::size_t {
    UpConvPrims& p = impl_->upconv(d);
    if (pass == ConvPass::forward) return forward_workspace(p);
    impl_->ensure_backward(p, d, pass);
    return pass == ConvPass::backward_data ? backward_data_workspace(p)
                                           : backward_weights_workspace(p, d.c_out);
  });
}

void CpuBackend::upconv_forward(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& w,
                                const Tensor& b, Tensor& y, Workspace ws) {
  check_act(x, d.input(), d.dtype, "upconv_forward x");
  check_act(y, d.output(), d.dtype, "upconv_forward y");
  check_param(w, d.weight_shape(), "upconv_forward w");
  check_param(b, Shape{d.c_out}, "upconv_forward b");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    run_forward(impl_->engine, native(s), impl_->upconv(d), x.data(), w.data(), b.data(), y.data(), ws);
  });
}

void CpuBackend::upconv_backward_data(Stream& s, const UpConvDesc& d, const Tensor& dy, const Tensor& w,
                                      Tensor& dx, Workspace ws) {
  check_act(dy, d.output(), d.dtype, "upconv_backward_data dy");
  check_act(dx, d.input(), d.dtype, "upconv_backward_data dx");
  check_param(w, d.weight_shape(), "upconv_backward_data w");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    UpConvPrims& p = impl_->upconv(d);
    impl_->ensure_backward(p, d, ConvPass::backward_data);
    run_backward_data(impl_->engine, native(s), p, dy.data(), w.data(), dx.data(), ws);
  });
}

void CpuBackend::upconv_backward_weights(Stream& s, const UpConvDesc& d, const Tensor& x, const Tensor& dy,
                                         Tensor& dw, Tensor& db, bool accumulate, Workspace ws) {
  check_act(x, d.input(), d.dtype, "upconv_backward_weights x");
  check_act(dy, d.output(), d.dtype, "upconv_backward_weights dy");
  check_param(dw, d.weight_shape(), "upconv_backward_weights dw");
  check_param(db, Shape{d.c_out}, "upconv_backward_weights db");
  ThreadsGuard threads(*this);
  guarded(info_, describe(d), [&] {
    UpConvPrims& p = impl_->upconv(d);
    impl_->ensure_backward(p, d, ConvPass::backward_weights);
    run_backward_weights(impl_->engine, native(s), p, x.data(), dy.data(), dw.data(), db.data(), d.c_out,
                         accumulate, ws);
  });
}

// --- ReLU, pooling, concatenation
// -----------------------------------------------------------------------------

void CpuBackend::relu_backward(Stream& s, const Tensor& y, const Tensor& dy, Tensor& dz) {
  UNET_CHECK(y.numel() == dy.numel() && dy.numel() == dz.numel() && y.dtype() == dy.dtype() &&
                 dy.dtype() == dz.dtype(),
             usage,
             "relu_backward: y, dy and dz must match, got " + y.shape().str() + ", " + dy.shape().str() +
                 ", " + dz.shape().str());
  ThreadsGuard threads(*this);
  guarded(info_, "relu_backward " + y.shape().str(), [&] {
    const ReluKey key{y.numel(), y.dtype()};
    auto& prim = impl_->relu(key);
    const memory::desc md({key.numel}, to_dnnl(key.dtype), tag::a);
    prim.execute(native(s), {{DNNL_ARG_DST, impl_->mem(md, y.data())},
                             {DNNL_ARG_DIFF_DST, impl_->mem(md, dy.data())},
                             {DNNL_ARG_DIFF_SRC, impl_->mem(md, dz.data())}});
  });
}

std::size_t CpuBackend::maxpool_saved_bytes(const PoolDesc& d) {
  ThreadsGuard threads(*this);
  return guarded(info_, "maxpool " + d.input().str(),
                 [&] { return impl_->pool(d).fwd_pd.workspace_desc().get_size(); });
}

std::size_t CpuBackend::maxpool_workspace_bytes(const PoolDesc& d, ConvPass pass) {
  ThreadsGuard threads(*this);
  return guarded(info_, "maxpool " + d.input().str(), [&]() -> std::size_t {
    PoolPrims& p = impl_->pool(d);
    if (pass == ConvPass::forward) return align64(p.fwd_pd.scratchpad_desc().get_size());
    impl_->ensure_backward(p, d);
    // room for the routed gradient when it is to be added to what dx holds
    return align64(p.bwd_pd->scratchpad_desc().get_size()) +
           align64(static_cast<std::size_t>(d.input().numel()) * dtype_size(d.dtype));
  });
}

void CpuBackend::maxpool_forward(Stream& s, const PoolDesc& d, const Tensor& x, Tensor& y, void* saved,
                                 Workspace ws) {
  check_act(x, d.input(), d.dtype, "maxpool_forward x");
  check_act(y, d.output(), d.dtype, "maxpool_forward y");
  ThreadsGuard threads(*this);
  guarded(info_, "maxpool_forward " + d.input().str(), [&] {
    PoolPrims& p = impl_->pool(d);
    if (!p.fwd) p.fwd.emplace(p.fwd_pd);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, impl_->mem(p.fwd_pd.src_desc(), x.data())},
                                         {DNNL_ARG_DST, impl_->mem(p.fwd_pd.dst_desc(), y.data())},
                                         {DNNL_ARG_WORKSPACE, impl_->mem(p.fwd_pd.workspace_desc(), saved)}};
    add_scratchpad(args, impl_->engine, p.fwd_pd.scratchpad_desc(), ws.data);
    p.fwd->execute(native(s), args);
  });
}

void CpuBackend::maxpool_backward(Stream& s, const PoolDesc& d, const Tensor& dy, const Tensor&,
                                  const Tensor&, const void* saved, Tensor& dx, bool accumulate,
                                  Workspace ws) {
  check_act(dy, d.output(), d.dtype, "maxpool_backward dy");
  check_act(dx, d.input(), d.dtype, "maxpool_backward dx");
  ThreadsGuard threads(*this);
  guarded(info_, "maxpool_backward " + d.input().str(), [&] {
    PoolPrims& p = impl_->pool(d);
    impl_->ensure_backward(p, d);
    if (!p.bwd) p.bwd.emplace(*p.bwd_pd);
    const std::size_t scratch = align64(p.bwd_pd->scratchpad_desc().get_size());
    UNET_CHECK(ws.bytes >= scratch + (accumulate ? dx.bytes() : 0), usage,
               "maxpool_backward: workspace too small");
    void* routed = accumulate ? static_cast<char*>(ws.data) + scratch : dx.data();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_DIFF_DST, impl_->mem(p.bwd_pd->diff_dst_desc(), dy.data())},
        {DNNL_ARG_DIFF_SRC, impl_->mem(p.bwd_pd->diff_src_desc(), routed)},
        {DNNL_ARG_WORKSPACE, impl_->mem(p.fwd_pd.workspace_desc(), saved)}};
    add_scratchpad(args, impl_->engine, p.bwd_pd->scratchpad_desc(), ws.data);
    p.bwd->execute(native(s), args);
    if (accumulate) cpu::add(routed, dx.data(), dx.numel(), dx.dtype());
  });
}

// oneDNN has a concat primitive but no split; both are plain copies per pixel, done here with one indexing
// rule.
void CpuBackend::concat_channels(Stream&, const Tensor& a, const Tensor& b, Tensor& out) {
  const ActShape sa = a.act(), sb = b.act(), so = out.act();
  UNET_CHECK(sa.n == so.n && sb.n == so.n && sa.h == so.h && sb.h == so.h && sa.w == so.w && sb.w == so.w &&
                 sa.c + sb.c == so.c && a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
                 a.layout() == out.layout() && b.layout() == out.layout(),
             usage, "concat_channels: " + sa.str() + " + " + sb.str() + " -> " + so.str());
  ThreadsGuard threads(*this);
  cpu::concat_channels(a.data(), sa.c, b.data(), sb.c, out.data(), so, out.dtype(), out.layout());
}

void CpuBackend::split_channels(Stream&, const Tensor& dout, Tensor& da, Tensor& db, bool accumulate_b) {
  const ActShape sa = da.act(), sb = db.act(), so = dout.act();
  UNET_CHECK(sa.n == so.n && sb.n == so.n && sa.h == so.h && sb.h == so.h && sa.w == so.w && sb.w == so.w &&
                 sa.c + sb.c == so.c && da.dtype() == dout.dtype() && db.dtype() == dout.dtype(),
             usage, "split_channels: " + so.str() + " -> " + sa.str() + " + " + sb.str());
  ThreadsGuard threads(*this);
  cpu::split_channels(dout.data(), so, da.data(), sa.c, db.data(), sb.c, accumulate_b, dout.dtype(),
                      dout.layout());
}

// --- input, loss, metrics
// -------------------------------------------------------------------------------------

void CpuBackend::input_from_u8(Stream&, const Tensor& pixels, Tensor& x, float scale) {
  const ActShape s = x.act();
  UNET_CHECK(pixels.dtype() == DType::u8 && pixels.numel() == s.numel(), usage,
             "input_from_u8: " + pixels.shape().str() + " u8 pixels for a " + s.str() + " input");
  ThreadsGuard threads(*this);
  cpu::input_from_u8(pixels.data_as<std::uint8_t>(), s, x.data(), x.dtype(), x.layout(), scale);
}

std::size_t CpuBackend::loss_workspace_bytes(const LossDesc& d, const ActShape& logits) {
  return cpu::loss_scratch_bytes(d, logits);
}

void CpuBackend::loss(Stream&, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                      Tensor* dlogits, LossGradScales grad_scales, Tensor& loss_sums, Workspace ws) {
  const ActShape s = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == s.n * s.h * s.w, usage,
             "loss: targets must be u8 [n, h, w] for logits " + s.str());
  check_loss_desc(d, s);
  UNET_CHECK(loss_sums.dtype() == DType::f64 && loss_sums.numel() == kLossSums, usage,
             "loss: loss_sums must be f64 [2]");
  if (dlogits) check_act(*dlogits, s, logits.dtype(), "loss dlogits");
  const std::size_t needed = cpu::loss_scratch_bytes(d, s);
  UNET_CHECK(ws.bytes >= needed && (ws.data || needed == 0), usage,
             "loss: workspace too small: " + std::to_string(ws.bytes) + " bytes given, " +
                 std::to_string(needed) + " needed");
  ThreadsGuard threads(*this);
  cpu::loss(d, logits.data(), s, logits.dtype(), logits.layout(), targets.data_as<std::uint8_t>(),
            dlogits ? dlogits->data() : nullptr, grad_scales, loss_sums.data_as<double>(),
            static_cast<double*>(ws.data));
}

void CpuBackend::segmentation_counts(Stream&, const Tensor& logits, const Tensor& targets, Tensor& counts,
                                     int ignore_index) {
  const ActShape s = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == s.n * s.h * s.w, usage,
             "segmentation_counts: targets must be u8 [n, h, w] for logits " + s.str());
  UNET_CHECK(
      counts.dtype() == DType::i64 && counts.numel() == segmentation_counts_size(static_cast<int>(s.c)),
      usage, "segmentation_counts: counts must be i64 of segmentation_counts_size(classes)");
  ThreadsGuard threads(*this);
  cpu::segmentation_counts(logits.data(), s, logits.dtype(), logits.layout(), targets.data_as<std::uint8_t>(),
                           counts.data_as<std::int64_t>(), ignore_index);
}

void CpuBackend::probabilities(Stream&, const Tensor& logits, Tensor& probs) {
  const ActShape s = logits.act();
  UNET_CHECK(probs.dtype() == DType::f32 && probs.numel() == s.numel(), usage,
             "probabilities: probs must be f32 with as many values as the logits " + s.str());
  ThreadsGuard threads(*this);
  cpu::probabilities(logits.data(), s, logits.dtype(), logits.layout(), probs.data_as<float>());
}

// --- vectors
// ----------------------------------------------------------------------------------------------------

void CpuBackend::fill(Stream&, Tensor& t, double value) {
  cpu::fill(t.data(), t.numel(), t.dtype(), value);
}

void CpuBackend::scale(Stream&, Tensor& t, float factor) {
  UNET_CHECK(t.dtype() == DType::f32, usage, "scale: f32 only");
  ThreadsGuard threads(*this);
  cpu::scale(t.data_as<float>(), t.numel(), factor);
}

void CpuBackend::add(Stream&, const Tensor& x, Tensor& y) {
  UNET_CHECK(x.numel() == y.numel() && x.dtype() == y.dtype(), usage,
             "add: " + x.shape().str() + " into " + y.shape().str());
  ThreadsGuard threads(*this);
  cpu::add(x.data(), y.data(), y.numel(), y.dtype());
}

void CpuBackend::adam_step(Stream&, const AdamStep& step, Tensor& params, const Tensor& grads, Tensor& m,
                           Tensor& v) {
  UNET_CHECK(params.dtype() == DType::f32 && grads.dtype() == DType::f32 && m.dtype() == DType::f32 &&
                 v.dtype() == DType::f32 && grads.numel() == params.numel() && m.numel() == params.numel() &&
                 v.numel() == params.numel(),
             usage, "adam_step: params, grads, m and v must be f32 of one size");
  ThreadsGuard threads(*this);
  cpu::adam_step(step, params.data_as<float>(), grads.data_as<float>(), m.data_as<float>(),
                 v.data_as<float>(), params.numel());
}

void CpuBackend::sgd_step(Stream&, const SgdStep& step, Tensor& params, const Tensor& grads,
                          Tensor& momentum) {
  UNET_CHECK(
      params.dtype() == DType::f32 && grads.dtype() == DType::f32 && grads.numel() == params.numel() &&
          (step.momentum == 0.0f || (momentum.dtype() == DType::f32 && momentum.numel() == params.numel())),
      usage, "sgd_step: params, grads and the momentum buffer must be f32 of one size");
  ThreadsGuard threads(*this);
  cpu::sgd_step(step, params.data_as<float>(), grads.data_as<float>(),
                step.momentum != 0.0f ? momentum.data_as<float>() : nullptr, params.numel());
}

void CpuBackend::sum_of_squares(Stream&, const Tensor& t, Tensor& sum) {
  UNET_CHECK(t.dtype() == DType::f32 && sum.dtype() == DType::f64 && sum.numel() == 1, usage,
             "sum_of_squares: an f32 vector into f64 [1]");
  ThreadsGuard threads(*this);
  *sum.data_as<double>() = cpu::sum_of_squares(t.data_as<float>(), t.numel());
}

void CpuBackend::count_non_finite(Stream&, const Tensor& t, Tensor& count) {
  UNET_CHECK(count.dtype() == DType::i64 && count.numel() == 1, usage,
             "count_non_finite: count must be i64 [1]");
  ThreadsGuard threads(*this);
  *count.data_as<std::int64_t>() = cpu::count_non_finite(t.data(), t.numel(), t.dtype());
}

void CpuBackend::copy_from_host(Stream&, const void* host, Tensor& dst) {
  if (dst.bytes()) std::memcpy(dst.data(), host, dst.bytes());
}

void CpuBackend::copy_to_host(Stream&, const Tensor& src, void* host) {
  if (src.bytes()) std::memcpy(host, src.data(), src.bytes());
}

void CpuBackend::copy(Stream&, const Tensor& src, Tensor& dst) {
  UNET_CHECK(src.bytes() == dst.bytes(), usage, "copy: " + src.shape().str() + " into " + dst.shape().str());
  if (src.bytes()) std::memcpy(dst.data(), src.data(), src.bytes());
}

}  // namespace unet
