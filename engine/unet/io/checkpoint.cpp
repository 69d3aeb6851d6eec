// Checkpoint files over the safetensors layer. Load is a pipeline that only moves on when a step passes:
// the safetensors rules, the format, the checksum, the metadata, the tensor set the config implies, then the
// values; inspect runs the same checks on a header read without the data. The one non-obvious rule: every
// name, value and key in a message that comes from the file is quoted and cut short, since the file may be
// hostile.
#include "unet/io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <system_error>
#include <utility>

#include "unet/core/error.h"
#include "unet/core/json_limits.h"
#include "unet/core/memory.h"
#include "unet/core/number_text.h"
#include "unet/core/unique_fd.h"
#include "unet/io/checkpoint_metadata.h"
#include "unet/io/safetensors.h"
#include "unet/io/sha256.h"
#include "unet/model/unet.h"

namespace unet {
namespace {

using namespace checkpoint_metadata;

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4);

using json = nlohmann::json;

constexpr std::string_view kOptimizerM = "optimizer.m.";
constexpr std::string_view kOptimizerV = "optimizer.v.";
constexpr std::string_view kOptimizerMomentum = "optimizer.momentum.";

// The state tensors' name prefixes a full checkpoint of this optimizer holds: Adam's two moments, SGD's
// momentum buffer, or none (plain SGD).
std::vector<std::string_view> state_prefixes(const OptimizerConfig& o) {
  switch (optimizer_slabs(o)) {
    case OptimizerSlabs::adam_moments:
      return {kOptimizerM, kOptimizerV};
    case OptimizerSlabs::sgd_momentum:
      return {kOptimizerMomentum};
    case OptimizerSlabs::none:
      break;
  }
  return {};
}

// The metadata keys docs/MODEL.md requires, in the order they are checked.
constexpr std::string_view kFormatKey = "format", kConfigKey = "config", kStepKey = "step",
                           kEpochKey = "epoch", kLossScaleKey = "loss_scale", kMetricsKey = "metrics",
                           kCreatedKey = "created", kSha256Key = "sha256", kPositionKey = "position",
                           kTrainingStateKey = "training_state", kTrainingSecondsKey = "training_seconds";

// The tensors a model's checkpoint holds, with where each sits in the slab.
struct Slot {
  std::string name;
  std::vector<std::int64_t> shape;  // canonical (docs/MODEL.md)
  std::int64_t offset = 0;          // elements into the slab
  std::int64_t numel = 0;
};

struct ModelLayout {
  std::vector<Slot> slots;  // module order
  std::int64_t slab_elements = 0;
  std::int64_t parameter_count = 0;
};

ModelLayout layout_of(const UNetSpec& spec) {
  CountingAllocator shapes_only("checkpoint", 0);  // names, shapes and offsets; no memory is touched
  const UNet model(spec, shapes_only);
  ModelLayout layout;
  layout.slab_elements = model.slab_elements();
  layout.parameter_count = model.parameter_count();
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    const ParamSpec& ps = model.params()[i].spec;
    Slot s{ps.name, {}, model.offsets()[i], ps.shape.numel()};
    for (int d = 0; d < ps.shape.rank; ++d) s.shape.push_back(ps.shape[d]);
    layout.slots.push_back(std::move(s));
  }
  return layout;
}

std::string with_prefix(std::string_view prefix, const std::string& name) {
  return std::string(prefix) + name;
}

// ---- reading: the pieces every check works on ----

struct Header {
  std::vector<StTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : source_(path.string()) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
    folder_ = (ec ? path : absolute).parent_path();
  }

  [[noreturn]] void refuse(ErrorKind kind, const std::string& why) const {
    throw Error(kind, source_ + ": " + why);
  }

  void check_format(const Header& h) const {
    const auto it = h.metadata.find(std::string(kFormatKey));
    if (it == h.metadata.end()) {
      refuse(ErrorKind::io, std::string("not a UNet Workbench checkpoint: the metadata has no '") +
                                std::string(kFormatKey) + "' key");
    }
    if (it->second != kCheckpointFormat) {
      refuse(ErrorKind::io, "written by a newer or other program: format " + quote_name(it->second) +
                                " (this program reads " + std::string(kCheckpointFormat) + ")");
    }
  }

  const std::string& required(const Header& h, std::string_view key) const {
    const auto it = h.metadata.find(std::string(key));
    if (it == h.metadata.end()) refuse(ErrorKind::io, "metadata key '" + std::string(key) + "' is missing");
    return it->second;
  }

  [[noreturn]] void refuse_value(std::string_view key, const std::string& what,
                                 const std::string& got) const {
    refuse(ErrorKind::io, "metadata " + std::string(key) + ": " + what + ", got " + quote_name(got));
  }

  // A metadata value's JSON, discarded when it is not JSON; nesting past kMaxJsonDepth is refused here,
  // before anything reads or prints the value.
  json metadata_json(std::string_view key, const std::string& text) const {
    try {
      return parse_json_bounded(text, /*allow_exceptions=*/false);
    } catch (const JsonTooDeep& e) {
      refuse(ErrorKind::io, "metadata " + std::string(key) + ": " + e.what() + " (at most " +
                                std::to_string(kMaxJsonDepth) + ")");
    }
  }

  std::string digest(const Header& h) const {
    const std::string& text = required(h, kSha256Key);
    if (!is_hex_digest(text)) refuse_value(kSha256Key, "not a SHA-256 digest (64 hexadecimal digits)", text);
    return lower(text);
  }

  void check_checksum(const std::string& expected, std::span<const std::byte> data_section) const {
    const std::string actual = sha256_hex(data_section);
    if (actual != expected) {
      refuse(ErrorKind::io, "checksum mismatch: the file is corrupt (the data section's SHA-256 is " +
                                actual + ", the metadata says " + expected + ")");
    }
  }

  // The run's time up to the state (RunState::training_seconds); 0 when absent (saved before it was
  // recorded).
  double read_training_seconds(const Header& h) const {
    const auto it = h.metadata.find(std::string(kTrainingSecondsKey));
    if (it == h.metadata.end()) return 0;
    const auto seconds = parse_number(it->second);
    if (!seconds || !std::isfinite(*seconds) || *seconds < 0)
      refuse_value(kTrainingSecondsKey, "must be a finite number >= 0", it->second);
    return *seconds;
  }

  // Everything in the metadata but the format and the checksum.
  void read_metadata(const Header& h, Config& config, TrainingPosition& position,
                     std::string& created) const {
    const auto count = [&](std::string_view key) {
      const std::string& text = required(h, key);
      const auto v = parse_count(text);
      if (!v) refuse_value(key, "must be a whole number >= 0", text);
      return *v;
    };
    position.step = count(kStepKey);
    position.epoch = count(kEpochKey);

    const std::string& scale_text = required(h, kLossScaleKey);
    const auto scale = parse_number(scale_text);
    if (!scale || !valid_loss_scale(*scale))
      refuse_value(kLossScaleKey, "must be a positive finite number", scale_text);
    position.loss_scale = *scale;

    const std::string& metrics_text = required(h, kMetricsKey);
    position.metrics = metadata_json(kMetricsKey, metrics_text);
    if (!position.metrics.is_object()) refuse_value(kMetricsKey, "must be a JSON object", metrics_text);

    created = required(h, kCreatedKey);
    if (!is_iso8601_timestamp(created))
      refuse_value(kCreatedKey, "must be an ISO 8601 date and time such as 2026-11-29T23:07:22Z", created);

    if (const auto it = h.metadata.find(std::string(kPositionKey)); it != h.metadata.end())
      read_position(it->second, position);
    if (const auto it = h.metadata.find(std::string(kTrainingStateKey)); it != h.metadata.end()) {
      position.training_state = metadata_json(kTrainingStateKey, it->second);
      if (!position.training_state.is_object())
        refuse_value(kTrainingStateKey, "must be a JSON object", it->second);
    }

    const std::string& config_text = required(h, kConfigKey);
    // A stored config nested 100000 deep is refused while parsing, before config_from_json() prints any of
    // it.
    const json config_json = metadata_json(kConfigKey, config_text);
    if (config_json.is_discarded()) refuse_value(kConfigKey, "not valid JSON", config_text);
    try {
      config = config_from_json(config_json, folder_);
    } catch (const ConfigError& e) {
      refuse(ErrorKind::data, "metadata config: " + std::string(e.what()));
    }
  }

  // Tensor names, dtypes and shapes against what the config's model implies; whether the moments are there.
  bool check_tensors(const Header& h, const ModelLayout& layout, const OptimizerConfig& optimizer) const {
    std::map<std::string_view, const StTensorInfo*> present;
    for (const auto& t : h.tensors) present.emplace(t.name, &t);

    for (const Slot& s : layout.slots)
      if (!present.contains(s.name)) refuse(ErrorKind::data, "missing tensor " + s.name);

    std::set<std::string, std::less<>> expected;
    std::vector<std::pair<std::string, const Slot*>> moments;  // every state tensor's name, in save order
    std::size_t moments_present = 0;
    for (const Slot& s : layout.slots) expected.insert(s.name);
    for (const auto prefix : state_prefixes(optimizer)) {
      for (const Slot& s : layout.slots) {
        moments.emplace_back(with_prefix(prefix, s.name), &s);
        expected.insert(moments.back().first);
        moments_present += present.contains(moments.back().first) ? 1 : 0;
      }
    }
    if (moments_present != 0 && moments_present != moments.size()) {
      for (const auto& [name, slot] : moments) {
        if (!present.contains(name)) {
          refuse(ErrorKind::data, "optimizer state is incomplete: missing tensor " + name + " (" +
                                      std::to_string(moments_present) + " of " +
                                      std::to_string(moments.size()) +
                                      " state tensors present; a checkpoint "
                                      "holds all of its optimizer's state or none)");
        }
      }
    }
    for (const auto& t : h.tensors)
      if (!expected.contains(t.name)) refuse(ErrorKind::data, "unexpected tensor " + quote_name(t.name));

    const auto check = [&](const std::string& name, const Slot& s) {
      const StTensorInfo& t = *present.at(name);
      if (t.shape != s.shape) {
        refuse(ErrorKind::data,
               name + ": shape " + shape_text(s.shape) + " expected, got " + shape_text(t.shape));
      }
      if (t.dtype != StDType::F32)
        refuse(ErrorKind::data, name + ": dtype F32 expected, got " + std::string(to_string(t.dtype)));
    };
    for (const Slot& s : layout.slots) check(s.name, s);
    if (moments_present == 0 || moments.empty()) return false;
    for (const auto& [name, slot] : moments) check(name, *slot);
    return true;
  }

 private:
  void read_position(const std::string& text, TrainingPosition& p) const {
    const json j = metadata_json(kPositionKey, text);
    if (!j.is_object()) refuse_value(kPositionKey, "must be a JSON object", text);
    for (const auto& [key, value] : j.items()) {
      static constexpr std::string_view kFields[] = {
          "step", "epoch", "epoch_step", "loss_scale", "clean_steps", "effective_batch", "skipped_steps"};
      if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields))
        refuse(ErrorKind::io, "metadata position: unknown field " + quote_name(key));
    }
    const auto field = [&](const char* name) -> const json& {
      const auto it = j.find(name);
      if (it == j.end())
        refuse(ErrorKind::io, std::string("metadata position: missing field '") + name + "'");
      return *it;
    };
    const auto count = [&](const char* name) {
      // JSON reads every non-negative integer as unsigned; a negative one, a fraction or text is refused.
      const json& v = field(name);
      if (!v.is_number_unsigned() ||
          v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        refuse(ErrorKind::io,
               std::string("metadata position: ") + name + " must be a whole number >= 0, got " + v.dump());
      }
      return v.get<std::int64_t>();
    };
    const auto disagree = [&](const char* name, const std::string& shown) {
      refuse(ErrorKind::io, std::string("metadata position: ") + name + " " + shown +
                                " disagrees with the metadata key " + name);
    };
    if (const auto step = count("step"); step != p.step) disagree("step", std::to_string(step));
    if (const auto epoch = count("epoch"); epoch != p.epoch) disagree("epoch", std::to_string(epoch));
    const json& scale = field("loss_scale");
    if (!scale.is_number() || !valid_loss_scale(scale.get<double>())) {
      refuse(ErrorKind::io,
             "metadata position: loss_scale must be a positive finite number, got " + scale.dump());
    }
    if (scale.get<double>() != p.loss_scale) disagree("loss_scale", scale.dump());
    p.epoch_step = count("epoch_step");
    p.clean_steps = count("clean_steps");
    if (j.contains("effective_batch")) p.effective_batch = count("effective_batch");
    if (j.contains("skipped_steps")) p.skipped_steps = count("skipped_steps");
    if (p.skipped_steps > p.step)
      refuse(ErrorKind::io, "metadata position: skipped_steps " + std::to_string(p.skipped_steps) +
                                " is more than step " + std::to_string(p.step));
    // The rules a save applies (epoch_step within step, effective_batch in range) hold on load too.
    if (const auto problem = position_problem(p)) refuse(ErrorKind::io, "metadata position: " + *problem);
  }

  std::string source_;
  std::filesystem::path folder_;
};

// ---- inspect: the header without the data ----

std::string system_reason(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// Reads exactly `n` bytes at `offset`; false at the end of the file.
bool read_at(int fd, std::uint64_t offset, std::size_t n, char* out, const Reader& r) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      r.refuse(ErrorKind::io, "cannot read: " + system_reason(errno));
    }
    if (got == 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

// The safetensors layer's structural rules, applied to the header and the file's size: SafetensorsFile
// validates the same, but only with the whole file in memory, which a header-only look cannot afford.
Header read_header_only(const std::filesystem::path& path, const Reader& r) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO must not block the open
  if (!fd) r.refuse(ErrorKind::io, "cannot open: " + system_reason(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) r.refuse(ErrorKind::io, "cannot stat: " + system_reason(errno));
  if (!S_ISREG(st.st_mode)) r.refuse(ErrorKind::io, "not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);

  unsigned char length_field[8];
  if (!read_at(fd.get(), 0, 8, reinterpret_cast<char*>(length_field), r))
    r.refuse(ErrorKind::io, "file is too short to be safetensors (" + std::to_string(size) + " bytes)");
  std::uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= std::uint64_t{length_field[i]} << (8 * i);
  const std::uint64_t limit = ReadLimits{}.max_header_bytes;
  if (header_size == 0) r.refuse(ErrorKind::io, "header length is 0");
  if (header_size > limit) {
    r.refuse(ErrorKind::io, "header length " + std::to_string(header_size) + " exceeds the limit of " +
                                std::to_string(limit) + " bytes");
  }
  if (header_size > size - 8) {
    r.refuse(ErrorKind::io, "header length " + std::to_string(header_size) +
                                " runs past the end of the file (" + std::to_string(size - 8) +
                                " bytes follow the length field)");
  }
  std::string text(header_size, '\0');
  if (!read_at(fd.get(), 8, text.size(), text.data(), r))
    r.refuse(ErrorKind::io, "the file shrank while it was read");
  if (text.find('\0') != std::string::npos) r.refuse(ErrorKind::io, "header contains a NUL byte");

  // Duplicate keys and deep nesting are refused while parsing: a DOM would silently keep one duplicate.
  std::vector<std::set<std::string>> keys;
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 3) r.refuse(ErrorKind::io, "header has an unexpected structure (nested too deeply)");
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
      r.refuse(ErrorKind::io, "header has a duplicate key " + quote_name(parsed.get<std::string>()));
    return true;
  };
  const json root = json::parse(text, callback, /*allow_exceptions=*/false);
  if (!root.is_object()) r.refuse(ErrorKind::io, "header is not a JSON object");

  Header h;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) r.refuse(ErrorKind::io, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          r.refuse(ErrorKind::io, "__metadata__ value of " + quote_name(key) + " is not a string");
        h.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    const std::string what = "tensor " + quote_name(name) + ": ";
    if (!entry.is_object() || entry.size() != 3 || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      r.refuse(ErrorKind::io, what + "must be an object of dtype, shape and data_offsets");
    }
    StTensorInfo t;
    t.name = name;
    const json& dtype = entry["dtype"];
    const auto parsed = dtype.is_string() ? st_dtype_from_string(dtype.get<std::string>()) : std::nullopt;
    if (!parsed) r.refuse(ErrorKind::io, what + "unknown dtype " + quote_name(dtype.dump()));
    t.dtype = *parsed;
    // nlohmann reads every integer from 0 up as unsigned, so this refuses negatives, fractions and the rest.
    const auto whole = [](const json& v) { return v.is_number_unsigned(); };
    const json& shape = entry["shape"];
    if (!shape.is_array() || !std::all_of(shape.begin(), shape.end(), whole))
      r.refuse(ErrorKind::io, what + "shape must be an array of non-negative integers");
    std::uint64_t bytes = st_dtype_size(t.dtype);
    bool overflow = false;
    for (const json& d : shape) {
      const auto v = d.get<std::uint64_t>();
      overflow |= v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
                  __builtin_mul_overflow(bytes, v, &bytes);
      t.shape.push_back(static_cast<std::int64_t>(v));
    }
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) {  // no elements, whatever the rest
      bytes = 0;
      overflow = false;
    }
    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !whole(offsets[0]) || !whole(offsets[1]))
      r.refuse(ErrorKind::io, what + "data_offsets must be two non-negative integers [begin, end]");
    t.begin = offsets[0].get<std::uint64_t>();
    t.end = offsets[1].get<std::uint64_t>();
    if (overflow || t.begin > t.end || t.end - t.begin != bytes)
      r.refuse(ErrorKind::io, what + "data_offsets do not match the shape and dtype");
    h.tensors.push_back(std::move(t));
  }

  // Sorted by offset, the tensors must tile the data section exactly.
  std::vector<const StTensorInfo*> order;
  order.reserve(h.tensors.size());
  for (const auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const StTensorInfo* a, const StTensorInfo* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t covered = 0;
  for (const StTensorInfo* t : order) {
    if (t->begin != covered)
      r.refuse(ErrorKind::io, "tensor " + quote_name(t->name) + ": data_offsets overlap or leave a gap");
    covered = t->end;
  }
  if (const std::uint64_t data_size = size - 8 - header_size; covered < data_size) {
    r.refuse(ErrorKind::io, std::to_string(data_size - covered) +
                                " trailing bytes after the last tensor (the data section holds " +
                                std::to_string(data_size) + " bytes, the tensors cover " +
                                std::to_string(covered) + ")");
  } else if (covered != data_size) {
    r.refuse(ErrorKind::io, "the tensors cover " + std::to_string(covered) +
                                " bytes but the data section holds " + std::to_string(data_size));
  }
  return h;
}

// ---- values ----

// The first non-finite element (or, for a second moment, negative one) of `values`, as a problem.
std::optional<std::string> value_problem(std::span<const float> values, bool second_moment) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) return "non-finite value " + number_text(v) + " at element " + std::to_string(i);
    if (second_moment && v < 0.0f) {
      return "negative value " + number_text(v) + " at element " + std::to_string(i) +
             " (a second moment is never negative)";
    }
  }
  return std::nullopt;
}

std::span<const float> slot_values(const std::vector<float>& slab, const Slot& s) {
  return std::span<const float>(slab).subspan(static_cast<std::size_t>(s.offset),
                                              static_cast<std::size_t>(s.numel));
}

std::span<const std::byte> slot_bytes(const std::vector<float>& slab, const Slot& s) {
  return std::as_bytes(slot_values(slab, s));
}

}  // namespace

// ---- save ----

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& c, CheckpointKind kind) {
  const std::string where = "save_checkpoint " + path.string() + ": ";
  // A config built in code is not checked yet: load would refuse one the config rules refuse.
  const std::string config_text = config_to_string(c.config);
  try {
    config_from_json(json::parse(config_text));
  } catch (const ConfigError& e) {
    throw Error(ErrorKind::usage, where + "invalid config: " + e.what());
  }
  if (const auto problem = position_problem(c.position))
    throw Error(ErrorKind::usage, where + "invalid position: " + *problem);
  if (!(std::isfinite(c.training_seconds) && c.training_seconds >= 0))
    throw Error(ErrorKind::usage, where + "training_seconds must be a finite number >= 0, got " +
                                      number_text(c.training_seconds));
  const std::string created = c.created.empty() ? utc_now_iso8601() : c.created;
  if (!is_iso8601_timestamp(created))
    throw Error(ErrorKind::usage,
                where + "created must be an ISO 8601 date and time, got " + quote_name(created));

  const ModelLayout layout = layout_of(c.config.model);
  const auto check_size = [&](const std::vector<float>& slab, const char* what) {
    if (static_cast<std::int64_t>(slab.size()) != layout.slab_elements) {
      throw Error(ErrorKind::usage, where + what + " holds " + std::to_string(slab.size()) +
                                        " floats, the config's model needs " +
                                        std::to_string(layout.slab_elements));
    }
  };
  check_size(c.parameters, "parameters");
  const bool full = kind == CheckpointKind::full;
  const std::vector<std::string_view> prefixes = state_prefixes(c.config.optimizer);
  const bool sgd = c.config.optimizer.kind == OptimizerKind::sgd;
  if (full && !prefixes.empty()) {
    if (sgd) {
      check_size(c.sgd_momentum, "sgd_momentum");
    } else {
      check_size(c.adam_m, "adam_m");
      check_size(c.adam_v, "adam_v");
    }
  }

  SafetensorsWriter writer;
  const auto add = [&](std::string name, const std::vector<float>& slab, const Slot& s, bool second_moment) {
    if (const auto problem = value_problem(slot_values(slab, s), second_moment))
      throw Error(ErrorKind::data, where + name + ": " + *problem);
    writer.add(std::move(name), StDType::F32, s.shape, slot_bytes(slab, s));
  };
  for (const Slot& s : layout.slots) add(s.name, c.parameters, s, false);
  if (full && sgd && !prefixes.empty()) {
    for (const Slot& s : layout.slots) add(with_prefix(kOptimizerMomentum, s.name), c.sgd_momentum, s, false);
  } else if (full && !sgd) {
    for (const Slot& s : layout.slots) add(with_prefix(kOptimizerM, s.name), c.adam_m, s, false);
    for (const Slot& s : layout.slots) add(with_prefix(kOptimizerV, s.name), c.adam_v, s, true);
  }

  std::map<std::string, std::string> metadata{
      {std::string(kFormatKey), std::string(kCheckpointFormat)},
      {std::string(kConfigKey), config_text},
      {std::string(kStepKey), std::to_string(c.position.step)},
      {std::string(kEpochKey), std::to_string(c.position.epoch)},
      {std::string(kLossScaleKey), number_text(c.position.loss_scale)},
      {std::string(kMetricsKey), c.position.metrics.dump()},
      {std::string(kCreatedKey), created},
      {std::string(kSha256Key), writer.data_section_sha256_hex()},
      {std::string(kPositionKey), position_json(c.position).dump()},
      {std::string(kTrainingStateKey), c.position.training_state.dump()},
  };
  if (c.training_seconds > 0) metadata[std::string(kTrainingSecondsKey)] = number_text(c.training_seconds);
  writer.set_metadata(std::move(metadata));
  writer.write(path);
}

// ---- load and inspect ----

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const Reader r(path);
  // The header alone first: a foreign or damaged file (another model's weights, gigabytes of trailing bytes)
  // is refused before its data is read into memory.
  inspect_checkpoint(path);
  const SafetensorsFile file = SafetensorsFile::read(path);
  const Header h{file.tensors(), file.metadata()};
  r.check_format(h);
  r.check_checksum(r.digest(h), file.data_section());

  Checkpoint c;
  r.read_metadata(h, c.config, c.position, c.created);
  c.training_seconds = r.read_training_seconds(h);
  const ModelLayout layout = layout_of(c.config.model);
  const bool has_optimizer = r.check_tensors(h, layout, c.config.optimizer);

  const auto fill = [&](std::vector<float>& slab, std::string_view prefix, bool second_moment) {
    slab.assign(static_cast<std::size_t>(layout.slab_elements), 0.0f);
    for (const Slot& s : layout.slots) {
      const std::string name = with_prefix(prefix, s.name);
      const auto bytes = file.data(*file.find(name));
      std::memcpy(slab.data() + s.offset, bytes.data(), bytes.size());  // the file promises no alignment
      if (const auto problem = value_problem(slot_values(slab, s), second_moment))
        r.refuse(ErrorKind::data, name + ": " + *problem);
    }
  };
  fill(c.parameters, {}, false);
  if (has_optimizer && c.config.optimizer.kind == OptimizerKind::sgd) {
    fill(c.sgd_momentum, kOptimizerMomentum, false);
  } else if (has_optimizer) {
    fill(c.adam_m, kOptimizerM, false);
    fill(c.adam_v, kOptimizerV, true);
  }
  return c;
}

CheckpointInfo inspect_checkpoint(const std::filesystem::path& path) {
  const Reader r(path);
  const Header h = read_header_only(path, r);
  r.check_format(h);
  r.digest(h);  // present and well-formed; comparing it needs the data

  CheckpointInfo info;
  r.read_metadata(h, info.config, info.position, info.created);
  const ModelLayout layout = layout_of(info.config.model);
  info.has_optimizer = r.check_tensors(h, layout, info.config.optimizer);
  info.parameter_count = layout.parameter_count;
  return info;
}

}  // namespace unet
