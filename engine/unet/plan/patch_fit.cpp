// Fit patch's search: see patch_fit.h.
#include "unet/plan/patch_fit.h"

#include <algorithm>
#include <map>

#include "unet/core/error.h"
#include "unet/plan/remedy_search.h"

namespace unet {
namespace {

std::string size_text(std::int64_t h, std::int64_t w) {
  return std::to_string(h) + "x" + std::to_string(w);
}

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The search at one batch: whether the patch at n multiples fits, each plan made once.
class PatchSearch {
 public:
  PatchSearch(const Config& config, const FitCheck& check, std::int64_t max_height, std::int64_t max_width)
      : config_(config), check_(check), max_height_(max_height), max_width_(max_width) {}

  std::pair<std::int64_t, std::int64_t> patch(std::int64_t n) const {
    return scaled_patch_size(config_, n, max_height_, max_width_);
  }

  // The fewest multiples at which the patch reaches both bounds: larger ones are the same patch.
  std::int64_t upper() const {
    std::int64_t n = 1;
    while (patch(n) != std::pair{max_height_, max_width_}) ++n;
    return n;
  }

  const FitCheck::Verdict& verdict(std::int64_t n, std::int64_t batch) {
    const auto key = std::pair{n, batch};
    if (auto found = verdicts_.find(key); found != verdicts_.end()) return found->second;
    Config trial = config_;
    std::tie(trial.data.patch_height, trial.data.patch_width) = patch(n);
    trial.train.batch_size = batch;
    return verdicts_.emplace(key, check_.check(std::move(trial))).first->second;
  }
  bool fits(std::int64_t n, std::int64_t batch) { return verdict(n, batch).fits; }

  // Why the patch at n multiples, with `batch`, does not fit.
  std::string over(std::int64_t n, std::int64_t batch) {
    const auto [h, w] = patch(n);
    return check_.limit_words(verdict(n, batch),
                              "a patch of " + size_text(h, w) + " with batch " + std::to_string(batch));
  }

 private:
  const Config& config_;
  const FitCheck& check_;
  std::int64_t max_height_, max_width_;
  std::map<std::pair<std::int64_t, std::int64_t>, FitCheck::Verdict> verdicts_;
};

}  // namespace

std::pair<std::int64_t, std::int64_t> scaled_patch_size(const Config& config, std::int64_t multiples,
                                                        std::int64_t max_height, std::int64_t max_width) {
  const auto [h, w] = scaled_image_size(config, multiples);
  return {std::min(h, max_height), std::min(w, max_width)};
}

PatchFit fit_patch(const Config& config, PatchBounds bounds) {
  if (config.data.mode != DataMode::patch)
    throw Error(ErrorKind::config, "Fit patch is for data.mode \"patch\"; data.mode is \"" +
                                       std::string(to_string(config.data.mode)) +
                                       "\": Fit batch fits its batch");
  const std::int64_t m = std::int64_t{1} << config.model.depth;
  const bool measured = bounds.image_height > 0 && bounds.image_width > 0;
  const std::int64_t limit = std::max(m, bounds.search_limit / m * m);
  const std::int64_t max_height = measured ? round_up(bounds.image_height, m) : limit;
  const std::int64_t max_width = measured ? round_up(bounds.image_width, m) : limit;

  const FitCheck check(config, std::move(bounds.memory));
  PatchSearch search(config, check, max_height, max_width);
  const std::int64_t upper = search.upper();
  const std::int64_t yours = config.train.batch_size;

  PatchFit result;
  // What bounds a patch that memory does not.
  const FitLimit bound = measured ? FitLimit::largest_image : FitLimit::search_limit;
  const std::string bound_words = measured ? "the patch covers the largest training image (" +
                                                 size_text(bounds.image_height, bounds.image_width) + ")"
                                           : "the largest patch this search tries (" + std::to_string(limit) +
                                                 " on a side); the training images' size was not measured (" +
                                                 bounds.not_measured + ")";
  std::string words;
  std::int64_t n = 0;
  if (search.fits(upper, yours)) {
    // Yours fits at the largest patch worth having.
    n = upper;
    result.batch = yours;
    result.batch_kept = true;
    result.limit = bound;
    words = bound_words;
  } else {
    // The largest patch for the minimum batch, then the largest batch up to yours at that patch.
    const std::int64_t least = std::min(yours, kMinimumPatchBatch);
    n = largest_fitting(upper, [&](std::int64_t k) { return search.fits(k, least); });
    if (n > 0) {
      const std::int64_t batch = largest_fitting(
          yours, [&](std::int64_t b) { return search.fits(n, b); }, least);
      const auto [h, w] = search.patch(n);
      result.batch = batch;
      result.batch_kept = batch == yours;
      if (n == upper) {
        // The images bound the patch; memory, the batch (yours does not fit at upper: batch < yours).
        result.limit = bound;
        words = bound_words + "; your batch of " + std::to_string(yours) + " does not fit at it: " +
                check.limit_words(search.verdict(n, batch + 1), "a batch of " + std::to_string(batch + 1));
      } else {
        result.limit = search.verdict(n + 1, least).limit;
        words = (result.batch_kept
                     ? std::string()
                     : "your batch of " + std::to_string(yours) + " does not fit at " + size_text(h, w) +
                           ", so the patch is the largest at which a batch of " + std::to_string(least) +
                           " fits (a U-Net learns poorly from smaller batches); ") +
                search.over(n + 1, least);
      }
    } else {
      result.limit = search.verdict(1, least).limit;
      const auto [h, w] = search.patch(1);
      result.reason = "not even a patch of " + size_text(h, w) + " with batch " + std::to_string(least) +
                      " fits: " + search.over(1, least);
    }
  }
  if (n > 0) {
    std::tie(result.patch_height, result.patch_width) = search.patch(n);
    result.reason = "patch " + size_text(result.patch_height, result.patch_width) + ", batch " +
                    std::to_string(result.batch) + (result.batch_kept ? " (yours)" : "") + ": " + words;
  }
  result.plans = check.plans();
  return result;
}

}  // namespace unet
