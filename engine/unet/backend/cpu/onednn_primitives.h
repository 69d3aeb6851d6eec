// The CPU backend's oneDNN side, shared by its files (cpu_backend.cpp: device, streams and the engine's own
// loops; cpu_convolution.cpp: the operations that run oneDNN primitives): the type mapping, the workspace a
// pass carves, the weight reorders, and CpuBackend::Impl, the cache of primitives built once per shape.
// Private to backend/cpu/.
#pragma once

#include <omp.h>

#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

#include "unet/backend/cpu/cpu_backend.h"
#include "unet/backend/immediate_stream.h"
#include "unet/backend/op_checks.h"
#include "unet/core/error.h"

namespace unet::onednn {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

class CpuStream final : public ImmediateStream {
 public:
  explicit CpuStream(const dnnl::engine& engine) : stream(engine) {}
  void synchronize() override { stream.wait(); }
  dnnl::stream stream;
};

inline dnnl::stream& native(Stream& s) {
  return static_cast<CpuStream&>(s).stream;
}

inline dt to_dnnl(DType t) {
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

inline memory::desc act_md(const ActShape& s, DType t, Layout l) {
  return memory::desc({s.n, s.c, s.h, s.w}, to_dnnl(t), l == Layout::nhwc ? tag::nhwc : tag::nchw);
}

inline dnnl::primitive_attr user_scratchpad() {
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
                           bool packed_is_dst, bool with_accumulate);

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

template <class Fn>
decltype(auto) guarded(const DeviceInfo& info, const std::string& what, Fn&& fn) {
  try {
    return fn();
  } catch (const dnnl::error& e) {
    throw Error(ErrorKind::backend, what + ": oneDNN: " + e.what(), info.id,
                "this shape or data type may be unsupported by oneDNN on this CPU");
  }
}

inline void check_act(const Tensor& t, const ActShape& want, DType dtype, const char* what) {
  UNET_CHECK(t.defined() && t.shape().rank == 4 && t.act() == want && t.dtype() == dtype, usage,
             std::string(what) + ": expected " + want.str() + " " + std::string(to_string(dtype)) + ", got " +
                 (t.defined() ? t.shape().str() + " " + std::string(to_string(t.dtype())) : "nothing"));
}

}  // namespace unet::onednn

namespace unet {

// The primitives of every shape this backend has run, created on first use and kept (oneDNN's primitive
// creation is the slow part).
struct CpuBackend::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<ConvDesc, std::unique_ptr<onednn::ConvPrims>> convs;
  std::map<UpConvDesc, std::unique_ptr<onednn::UpConvPrims>> upconvs;
  std::map<PoolDesc, std::unique_ptr<onednn::PoolPrims>> pools;
  std::map<onednn::ReluKey, std::unique_ptr<dnnl::eltwise_backward>> relus;

  onednn::ConvPrims& conv(const ConvDesc& d);
  void ensure_backward(onednn::ConvPrims& p, const ConvDesc& d, ConvPass pass);
  onednn::UpConvPrims& upconv(const UpConvDesc& d);
  void ensure_backward(onednn::UpConvPrims& p, const UpConvDesc& d, ConvPass pass);
  onednn::PoolPrims& pool(const PoolDesc& d);
  void ensure_backward(onednn::PoolPrims& p, const PoolDesc& d);
  dnnl::eltwise_backward& relu(const onednn::ReluKey& key);
  dnnl::memory mem(const dnnl::memory::desc& md, const void* ptr) const;
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

}  // namespace unet
