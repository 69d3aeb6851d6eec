#include "unet/backend/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "unet/backend/cpu/cpu_kernels.h"
#include "unet/backend/cpu/onednn_primitives.h"
#include "unet/backend/device_monitor.h"
#include "unet/core/parallel.h"

namespace unet {
namespace {

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

using namespace onednn;

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

// --- input, loss, metrics ----------------------------------------------------------------------------------

void CpuBackend::input_from_pixels(Stream&, const Tensor& pixels, Tensor& x, float scale) {
  const ActShape s = x.act();
  UNET_CHECK((pixels.dtype() == DType::u8 || pixels.dtype() == DType::f32) && pixels.numel() == s.numel(),
             usage,
             "input_from_pixels: " + pixels.shape().str() + " " + std::string(to_string(pixels.dtype())) +
                 " pixels for a " + s.str() + " input");
  ThreadsGuard threads(*this);
  cpu::input_from_pixels(pixels.data(), pixels.dtype(), s, x.data(), x.dtype(), x.layout(), scale);
}

std::size_t CpuBackend::loss_workspace_bytes(const LossDesc& d, const ActShape& logits) {
  return cpu::loss_scratch_bytes(d, logits);
}

void CpuBackend::loss(Stream&, const LossDesc& d, const Tensor& logits, const Tensor& targets,
                      const Tensor* pixel_weights, Tensor* dlogits, LossGradScales grad_scales,
                      Tensor& loss_sums, Workspace ws) {
  const ActShape s = logits.act();
  UNET_CHECK(targets.dtype() == DType::u8 && targets.numel() == s.n * s.h * s.w, usage,
             "loss: targets must be u8 [n, h, w] for logits " + s.str());
  check_pixel_weights(pixel_weights, s);
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
            pixel_weights ? pixel_weights->data_as<float>() : nullptr, dlogits ? dlogits->data() : nullptr,
            grad_scales, loss_sums.data_as<double>(), static_cast<double*>(ws.data));
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

// --- vectors -----------------------------------------------------------------------------------------------

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
