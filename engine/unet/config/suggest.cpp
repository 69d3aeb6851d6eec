// Suggestions for unknown keys (suggest.h): an edit distance that counts a swap of neighbours as one edit,
// asked of every known key and section, and cut off early because it runs once per unknown key per key.
#include "unet/config/suggest.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "unet/config/config.h"
#include "unet/config/schema_rules.h"

namespace unet::config_detail {

namespace {

// Edit distance where swapping two neighbours counts as one edit ("trian" -> "train"), or `bound` when it is
// at least that: the distance is asked for every unknown key against every known one, so it keeps three rows
// of the table, not all of it, and stops as soon as no path through the table can come in under the bound.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t bound) {
  const std::size_t m = b.size();
  if ((a.size() > m ? a.size() - m : m - a.size()) >= bound) return bound;
  thread_local std::vector<std::size_t> before, previous, row;
  before.assign(m + 1, 0);
  previous.resize(m + 1);
  row.assign(m + 1, 0);
  for (std::size_t j = 0; j <= m; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    std::size_t smallest = row[0];
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
      smallest = std::min(smallest, row[j]);
    }
    // A swap reaches back two rows: stop only when both are past the bound.
    if (smallest >= bound && *std::min_element(previous.begin(), previous.end()) >= bound) return bound;
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return std::min(previous[m], bound);
}

// The known key or section closest to `unknown`, if it is close enough to be a typo. A key whose last part
// matches in another section also counts ("batch_size" at the top level -> train.batch_size).
std::optional<std::string> suggest_key(std::string_view unknown) {
  static const std::vector<std::string> candidates = [] {
    std::vector<std::string> out = section_names();
    for (const ConfigKey& k : config_schema()) out.push_back(k.path);
    return out;
  }();
  const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, leaf_of(unknown).size() / 3));
  std::optional<std::string> best;
  std::size_t best_score = limit + 1;
  for (const std::string& c : candidates) {
    std::size_t score = edit_distance(unknown, c, best_score);
    if (section_of(unknown) != section_of(c) && best_score > 1)
      score = std::min(score, edit_distance(leaf_of(unknown), leaf_of(c), best_score - 1) + 1);
    if (score < best_score) {
      best_score = score;
      best = c;
    }
  }
  return best;
}

}  // namespace

std::string unknown_key_problem(std::string_view path) {
  std::string problem = "unknown key";
  if (auto s = suggest_key(path)) problem += " (did you mean " + *s + "?)";
  return problem;
}

}  // namespace unet::config_detail
