// CpuBackend::Impl's primitive cache (onednn_primitives.h): the descriptors of each shape's forward and
// backward primitives, and the weight reorders between the canonical layouts and the ones oneDNN picks.
#include "unet/backend/cpu/onednn_primitives.h"

namespace unet {
namespace onednn {

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

}  // namespace onednn

using namespace onednn;

ConvPrims& CpuBackend::Impl::conv(const ConvDesc& d) {
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
                                                         dnnl::algorithm::convolution_direct, src, any_w, dst,
                                                         strides, pad, pad);
    slot = std::make_unique<ConvPrims>(src, dst, canonical_w, bias,
                                       dnnl::convolution_forward::primitive_desc(desc, attr, engine));
    slot->fwd_w = make_reorder(engine, canonical_w, slot->fwd_pd.weights_desc(), true, false);
  }
  return *slot;
}

void CpuBackend::Impl::ensure_backward(ConvPrims& p, const ConvDesc& d, ConvPass pass) {
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
    auto desc = d.bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.src,
                                                                  any_w, p.bias, p.dst, strides, pad, pad)
                       : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, p.src,
                                                                  any_w, p.dst, strides, pad, pad);
    p.bwd_weights_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
    p.bwd_weights_w = make_reorder(engine, p.bwd_weights_pd->diff_weights_desc(), p.canonical_w, false, true);
  }
}

UpConvPrims& CpuBackend::Impl::upconv(const UpConvDesc& d) {
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

void CpuBackend::Impl::ensure_backward(UpConvPrims& p, const UpConvDesc& d, ConvPass pass) {
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
    p.bwd_weights_w = make_reorder(engine, p.bwd_weights_pd->diff_weights_desc(), p.canonical_w, false, true);
  }
}

PoolPrims& CpuBackend::Impl::pool(const PoolDesc& d) {
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

void CpuBackend::Impl::ensure_backward(PoolPrims& p, const PoolDesc& d) {
  if (p.bwd_pd) return;
  dnnl::pooling_backward::desc desc(dnnl::algorithm::pooling_max, act_md(d.input(), d.dtype, d.layout),
                                    act_md(d.output(), d.dtype, d.layout), {2, 2}, {2, 2}, {0, 0}, {0, 0});
  p.bwd_pd.emplace(desc, user_scratchpad(), engine, p.fwd_pd);
}

dnnl::eltwise_backward& CpuBackend::Impl::relu(const ReluKey& key) {
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

memory CpuBackend::Impl::mem(const memory::desc& md, const void* ptr) const {
  return memory(md, engine,
                const_cast<void*>(ptr));  // NOLINT: oneDNN takes non-const handles for inputs too
}

}  // namespace unet
