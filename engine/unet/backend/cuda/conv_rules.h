// The host-side rules of the CUDA backend's cuDNN convolutions, in plain terms and without CUDA headers, so
// that tests/test_conv_rules.cpp checks them on any machine: which of cuDNN's algorithms a pass may use and
// in what order it falls back, how channels are padded for tensor cores, where each piece lies in the
// caller's workspace, and the 32-bit limits of cuDNN's legacy descriptors. cuda_backend.cpp turns cuDNN's
// answers into these types and back.
//
// The one non-obvious rule: the memory planner asks a real backend for workspace sizes but never runs a
// convolution, so a pass's workspace size is fixed when its algorithms are chosen and never changes, not
// even when the run falls back to another algorithm (AlgoChoice::workspace_bytes).
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "unet/backend/backend.h"
#include "unet/core/error.h"

namespace unet::cuda {

// --- algorithm choice --------------------------------------------------------------------------------------

// One algorithm of one pass as cuDNN's heuristic (cudnnGet*Algorithm_v7) reports it.
struct AlgoCandidate {
  int algo = 0;           // the pass's cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int math = 0;           // the cudnnMathType_t to set before running it
  std::size_t bytes = 0;  // its workspace: the larger of perf.memory and cudnnGet*WorkspaceSize's answer
  bool deterministic = false;
  bool fma_math = false;  // math is CUDNN_FMA_MATH (no TF32 tensor cores)
  bool usable = true;     // perf.status was SUCCESS and cudnnGet*WorkspaceSize accepted it
  bool operator==(const AlgoCandidate&) const = default;
};

struct AlgoRules {
  bool deterministic = false;  // cuda.deterministic
  bool fma_only = false;       // f32 with cuda.tf32 false
  std::size_t workspace_limit = std::size_t{1} << 30;
};

inline bool admissible(const AlgoCandidate& c, const AlgoRules& rules) {
  return c.usable && c.bytes <= rules.workspace_limit && (!rules.deterministic || c.deterministic) &&
         (!rules.fma_only || c.fma_math);
}

// The algorithms one pass of one convolution may run, in the order it tries them, and the one that ran.
//
// Candidates: the heuristic's admissible entries in its order, then the pass's default algorithm (PyTorch's
// choice in deterministic mode: forward IMPLICIT_PRECOMP_GEMM, backward data and backward filter ALGO_1) as
// the last resort when it is not listed already. With cuda.deterministic and no deterministic entry, the
// default is the only candidate.
//
// Workspace: the caller sizes it from workspace_bytes() before anything runs (the planner asks a backend
// that never runs), so that figure is set here once: the first candidate's need, raised to the default's
// so that the last resort always fits. Candidates that need more than that are dropped rather than asked of
// the caller: a fallback never needs more workspace than was planned.
class AlgoChoice {
 public:
  AlgoChoice(const std::vector<AlgoCandidate>& offered, std::optional<AlgoCandidate> fallback,
             const AlgoRules& rules) {
    for (const AlgoCandidate& c : offered)
      if (admissible(c, rules) && !listed(c)) candidates_.push_back(c);
    const bool add_fallback = fallback && admissible(*fallback, rules) && !listed(*fallback);
    budget_ = candidates_.empty() ? 0 : candidates_.front().bytes;
    if (add_fallback) budget_ = std::max(budget_, fallback->bytes);
    std::erase_if(candidates_, [&](const AlgoCandidate& c) { return c.bytes > budget_; });
    if (add_fallback) candidates_.push_back(*fallback);
  }

  bool empty() const noexcept { return candidates_.empty(); }
  const std::vector<AlgoCandidate>& candidates() const noexcept { return candidates_; }
  // Bytes of cuDNN workspace the caller provides for this pass: fixed from construction on.
  std::size_t workspace_bytes() const noexcept { return budget_; }
  // The candidate that ran first, once one has.
  const std::optional<AlgoCandidate>& kept() const noexcept { return kept_; }

  // Runs the pass: `attempt(candidate)` runs it with one candidate and returns "" when it ran, or why it
  // could not (cuDNN refused that algorithm for this convolution: try the next); it throws for errors no
  // other algorithm can cure. Tries the candidates that fit `available` bytes in order, keeps the first that
  // runs and from then on runs only that one. Throws Error(unsupported) naming every attempt when none ran,
  // and Error(backend) when the kept algorithm stops running.
  template <class Attempt>
  const AlgoCandidate& run(std::size_t available, Attempt&& attempt, const std::string& what) {
    if (kept_) {
      const std::string why = attempt(*kept_);
      if (!why.empty())
        throw Error(ErrorKind::backend, what + ": cuDNN algorithm " + std::to_string(kept_->algo) +
                                            ", which ran before, failed: " + why);
      return *kept_;
    }
    std::string tried;
    for (const AlgoCandidate& c : candidates_) {
      if (!tried.empty()) tried += "; ";
      tried += "algorithm " + std::to_string(c.algo);
      if (c.bytes > available) {
        tried += ": needs " + std::to_string(c.bytes) + " bytes of workspace, " + std::to_string(available) +
                 " given";
        continue;
      }
      const std::string why = attempt(c);
      if (why.empty()) {
        kept_ = c;
        return *kept_;
      }
      tried += ": " + why;
    }
    throw Error(
        ErrorKind::unsupported,
        what + ": cuDNN ran none of its algorithms for it (" + (tried.empty() ? "none offered" : tried) + ")",
        "", "try another precision, or cuda.deterministic false");
  }

 private:
  bool listed(const AlgoCandidate& c) const {
    return std::ranges::any_of(candidates_,
                               [&](const AlgoCandidate& o) { return o.algo == c.algo && o.math == c.math; });
  }

  std::vector<AlgoCandidate> candidates_;
  std::size_t budget_ = 0;
  std::optional<AlgoCandidate> kept_;
};

// --- cuDNN's descriptor limits -----------------------------------------------------------------------------

// cuDNN's legacy descriptors take int dimensions and address tensors with 32-bit element counts: a value
// for one of them, or Error(unsupported) naming the convolution (`what`) and the remedy.
inline int cudnn_int(std::int64_t value, const char* field, const std::string& what) {
  if (value < 0 || value > INT_MAX)
    throw Error(ErrorKind::unsupported,
                what + ": its " + field + " (" + std::to_string(value) +
                    ") exceeds cuDNN's limit of 2^31 - 1 for a tensor dimension",
                "", "use a smaller train.batch_size or data.image_size");
  return static_cast<int>(value);
}

// A tensor of n x c x h x w elements for a legacy descriptor: each dimension and the element count below
// 2^31 (its strides, at most the count, then fit too).
inline void check_cudnn_tensor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                               const char* name, const std::string& what) {
  for (const std::int64_t v : {n, c, h, w}) (void)cudnn_int(v, name, what);
  std::int64_t count = 1;
  bool fits = true;
  for (const std::int64_t v : {n, c, h, w}) {
    if (v == 0) return;  // no elements
    fits = fits && count <= INT_MAX / v;
    if (fits) count *= v;
  }
  if (!fits)
    throw Error(ErrorKind::unsupported,
                what + ": its " + name + " has " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                    std::to_string(h) + "x" + std::to_string(w) +
                    " elements, more than cuDNN's 2^31 - 1 per tensor",
                "", "use a smaller train.batch_size or data.image_size");
}

// --- tensor-core padding and the workspace layout ----------------------------------------------------------

// bf16/f16 tensor-core kernels want channel counts that are multiples of 8 (NHWC).
inline constexpr std::int64_t kTensorCoreChannels = 8;

inline std::int64_t round_up_channels(std::int64_t c) {
  return (c + kTensorCoreChannels - 1) / kTensorCoreChannels * kTensorCoreChannels;
}

// Whether a convolution of this kind runs on channel-padded copies: bf16/f16 NHWC, not depthwise (grouped
// convolutions keep their channel count), upconvs neither (their channels are the model's widths).
inline bool pads_channels(DType dtype, Layout layout, bool depthwise) {
  return (dtype == DType::bf16 || dtype == DType::f16) && layout == Layout::nhwc && !depthwise;
}

// A convolution as cuDNN runs it: X [n, c, .] -> Y [n, k, .], filter [k, filter_c, rs]; with padding X has
// c_pad channels and Y k_pad, of which the ones past c and k are zero.
struct ConvShape {
  std::int64_t n = 0;
  std::int64_t c = 0, k = 0;                // real channels of X and Y
  std::int64_t c_pad = 0, k_pad = 0;        // as cuDNN sees them (c and k when not padded)
  std::int64_t filter_c = 0;                // filter channels: c, or 1 for depthwise
  std::int64_t filter_c_pad = 0;            // the packed filter's channel count: c_pad, or 1 for depthwise
  std::int64_t rs = 0;                      // filter taps
  std::int64_t x_pixels = 0, y_pixels = 0;  // n * h * w of X and of Y
  std::int64_t bias_channels = 0;           // of the op's bias gradient (0: none)
  std::size_t elem_bytes = 4;               // of activations and the packed filter
  bool krsc = true;                         // the packed filter's order (NHWC: KRSC)
  bool f32 = true;                          // the bias gradient goes straight into the f32 db

  bool pads_x() const { return c_pad != c; }
  bool pads_y() const { return k_pad != k; }
  std::size_t packed_bytes() const {
    return static_cast<std::size_t>(k_pad * filter_c_pad * rs) * elem_bytes;
  }
};

inline ConvShape conv_shape(const ConvDesc& d) {
  ConvShape s;
  s.n = d.n;
  s.c = d.c_in;
  s.k = d.c_out;
  const bool pad = pads_channels(d.dtype, d.layout, d.depthwise);
  s.c_pad = pad ? round_up_channels(d.c_in) : d.c_in;
  s.k_pad = pad ? round_up_channels(d.c_out) : d.c_out;
  s.filter_c = d.depthwise ? 1 : d.c_in;
  s.filter_c_pad = d.depthwise ? 1 : s.c_pad;
  s.rs = std::int64_t{d.kernel} * d.kernel;
  s.x_pixels = s.y_pixels = d.n * d.h * d.w;
  s.bias_channels = d.bias ? d.c_out : 0;
  s.elem_bytes = dtype_size(d.dtype);
  s.krsc = d.layout == Layout::nhwc;
  s.f32 = d.dtype == DType::f32;
  return s;
}

// The transposed convolution's matching convolution: X [n, c_out, 2h, 2w] -> Y [n, c_in, h, w], filter
// [c_in, c_out, 2, 2] (the canonical upconv weights, as they are); its bias gradient sums dY of the upconv,
// i.e. X of the matching convolution.
inline ConvShape conv_shape(const UpConvDesc& d) {
  ConvShape s;
  s.n = d.n;
  s.c = s.c_pad = s.filter_c = s.filter_c_pad = d.c_out;
  s.k = s.k_pad = d.c_in;
  s.rs = 4;
  s.x_pixels = d.n * 2 * d.h * 2 * d.w;
  s.y_pixels = d.n * d.h * d.w;
  s.bias_channels = d.c_out;
  s.elem_bytes = dtype_size(d.dtype);
  s.krsc = d.layout == Layout::nhwc;
  s.f32 = d.dtype == DType::f32;
  return s;
}

inline constexpr std::size_t align256(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

struct WorkspaceRegion {
  std::size_t offset = 0, bytes = 0;
};

// Where one cuDNN pass's pieces lie in the caller's workspace, each 256-byte aligned, in this order:
//   filter  the packed filter (forward, backward data) or the filter gradient cuDNN writes (backward filter)
//   x_pad   X (or dX) with c_pad channels, when X is padded
//   y_pad   Y (or dY) with k_pad channels, when Y is padded
//   algo    cuDNN's own workspace
//   bias    the bias gradient in bf16/f16 (backward filter with a bias, not f32), cast into the f32 db
struct WorkspaceLayout {
  WorkspaceRegion filter, x_pad, y_pad, algo, bias;
  std::size_t total = 0;
};

// `cudnn_pass` in cuDNN's terms: forward, backward data, backward filter of the shape's convolution.
inline WorkspaceLayout workspace_layout(const ConvShape& s, ConvPass cudnn_pass, std::size_t algo_bytes) {
  WorkspaceLayout l;
  std::size_t at = 0;
  const auto take = [&](WorkspaceRegion& r, std::size_t bytes) {
    r = {at, bytes};
    at += align256(bytes);
  };
  take(l.filter, s.packed_bytes());
  if (s.pads_x()) take(l.x_pad, static_cast<std::size_t>(s.x_pixels * s.c_pad) * s.elem_bytes);
  if (s.pads_y()) take(l.y_pad, static_cast<std::size_t>(s.y_pixels * s.k_pad) * s.elem_bytes);
  take(l.algo, algo_bytes);
  if (cudnn_pass == ConvPass::backward_weights && s.bias_channels > 0 && !s.f32)
    take(l.bias, static_cast<std::size_t>(s.bias_channels) * s.elem_bytes);
  l.total = at;
  return l;
}

}  // namespace unet::cuda
