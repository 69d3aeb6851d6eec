// The CPU backend's operations that run oneDNN primitives: convolution and transposed convolution (their
// three passes, with the weights reordered in the caller's workspace), ReLU's backward and max-pooling.
#include <unordered_map>

#include "unet/backend/cpu/cpu_kernels.h"
#include "unet/backend/cpu/onednn_primitives.h"

namespace unet {
namespace {

using namespace onednn;

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

using namespace onednn;

// --- convolution -------------------------------------------------------------------------------------------

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

// --- transposed convolution --------------------------------------------------------------------------------

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

// --- ReLU, pooling, concatenation --------------------------------------------------------------------------

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

}  // namespace unet
