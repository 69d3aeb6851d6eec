// The safetensors reader and writer. The header is parsed by a SAX handler, not into a JSON DOM: it sees
// every key as it comes (a DOM silently keeps one of two duplicate keys), it refuses a wrong structure at its
// first token (so a hostile header cannot nest deeply or build a huge tree), and it says exactly what is
// wrong.
#include "unet/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <numeric>
#include <system_error>
#include <utility>

#include "unet/core/error.h"
#include "unet/core/unique_fd.h"
#include "unet/core/utf8.h"
#include "unet/io/atomic_file.h"
#include "unet/io/sha256.h"

namespace unet {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr std::size_t kLengthFieldBytes = 8;

struct DTypeEntry {
  StDType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeEntry, 16> kDTypes = {{
    {StDType::BOOL, "BOOL", 1},
    {StDType::U8, "U8", 1},
    {StDType::I8, "I8", 1},
    {StDType::F8_E5M2, "F8_E5M2", 1},
    {StDType::F8_E4M3, "F8_E4M3", 1},
    {StDType::F8_E8M0, "F8_E8M0", 1},
    {StDType::I16, "I16", 2},
    {StDType::U16, "U16", 2},
    {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2},
    {StDType::I32, "I32", 4},
    {StDType::U32, "U32", 4},
    {StDType::F32, "F32", 4},
    {StDType::F64, "F64", 8},
    {StDType::I64, "I64", 8},
    {StDType::U64, "U64", 8},
}};

const DTypeEntry& entry_of(StDType dtype) noexcept {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  return kDTypes[0];  // unreachable for a valid enumerator
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// shape x dtype size in bytes, or nullopt when it does not fit in 64 bits. A zero dimension makes the true
// product 0 whatever the other dimensions are, so it is not an overflow.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, StDType dtype) noexcept {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::uint64_t count = 1;
  for (const std::int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count)) return std::nullopt;
  }
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, std::uint64_t{st_dtype_size(dtype)}, &bytes)) return std::nullopt;
  return bytes;
}

// Builds the tensor list and metadata from the header's SAX events, in one pass, refusing at the first event
// that does not fit the format. A refusal stores its message in `error` and returns false, which stops the
// parser.
class HeaderHandler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<StTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::string error;

  bool null() override { return wrong_type("null"); }
  bool boolean(bool) override { return wrong_type("a boolean"); }
  bool number_float(number_float_t, const string_t&) override {
    return wrong_type("a fraction or an out-of-range number");
  }
  bool binary(binary_t&) override { return wrong_type("binary data"); }
  bool number_integer(number_integer_t value) override {
    if (value >= 0) return number_unsigned(static_cast<number_unsigned_t>(value));  // "-0"
    return negative_integer(value);
  }
  bool number_unsigned(number_unsigned_t value) override;
  bool string(string_t& value) override;
  bool start_object(std::size_t) override;
  bool key(string_t& value) override;
  bool end_object() override;
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& ex) override {
    std::string reason = ex.what();
    if (reason.size() > 200) reason = reason.substr(0, 200) + "...";
    return fail("header is not valid JSON (at byte " + std::to_string(position) + "): " + reason);
  }

 private:
  enum class State {
    top,             // before the root object
    root,            // in the root object, expecting a key
    root_value,      // after a root key: a tensor entry or the metadata object
    metadata,        // in __metadata__, expecting a key
    metadata_value,  // after a metadata key
    tensor,          // in a tensor entry, expecting a field name
    dtype_value,
    shape_open,  // expecting the shape's '['
    shape_items,
    offsets_open,  // expecting the data_offsets' '['
    offsets_items,
    done,  // after the root object
  };
  enum Field : unsigned { kDType = 1, kShape = 2, kOffsets = 4 };

  bool fail(std::string message) {
    error = std::move(message);
    return false;
  }
  std::string tensor_name() const { return "tensor " + quote_name(current_.name); }
  bool wrong_type(const char* what);
  bool negative_integer(number_integer_t value);

  State state_ = State::top;
  std::set<std::string, std::less<>> root_keys_;
  std::string root_key_;
  std::string metadata_key_;
  StTensorInfo current_;
  unsigned fields_seen_ = 0;
  std::vector<std::uint64_t> offsets_;
};

bool HeaderHandler::wrong_type(const char* what) {
  const std::string got = std::string(", got ") + what;
  switch (state_) {
    case State::top:
      return fail("header is not a JSON object");
    case State::root_value:
      if (root_key_ == kMetadataKey) return fail("__metadata__ is not an object" + got);
      return fail("tensor " + quote_name(root_key_) + ": entry is not an object" + got);
    case State::metadata_value:
      if (metadata_key_ == "dtype" || metadata_key_ == "shape" || metadata_key_ == "data_offsets") {
        return fail(
            "a tensor may not be named '__metadata__': that name is reserved for the metadata object");
      }
      return fail("__metadata__ value of " + quote_name(metadata_key_) + " is not a string" + got);
    case State::dtype_value:
      return fail(tensor_name() + ": dtype is not a string" + got);
    case State::shape_open:
      return fail(tensor_name() + ": shape is not an array" + got);
    case State::shape_items:
      return fail(tensor_name() + ": shape must be an array of non-negative integers" + got);
    case State::offsets_open:
      return fail(tensor_name() + ": data_offsets is not an array" + got);
    case State::offsets_items:
      return fail(tensor_name() + ": data_offsets must be two non-negative integers [begin, end]" + got);
    case State::root:
    case State::metadata:
    case State::tensor:
    case State::done:
      break;  // the JSON grammar only allows keys or the end here
  }
  return fail("header has an unexpected structure");
}

bool HeaderHandler::negative_integer(number_integer_t value) {
  if (state_ == State::shape_items) {
    return fail(tensor_name() + ": shape has a negative dimension " + std::to_string(value));
  }
  if (state_ == State::offsets_items) {
    return fail(tensor_name() + ": data_offsets must be non-negative, got " + std::to_string(value));
  }
  return wrong_type("a negative number");
}

bool HeaderHandler::number_unsigned(number_unsigned_t value) {
  if (state_ == State::shape_items) {
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return fail(tensor_name() + ": dimension " + std::to_string(value) + " is too large");
    }
    current_.shape.push_back(static_cast<std::int64_t>(value));
    return true;
  }
  if (state_ == State::offsets_items) {
    if (offsets_.size() == 2)
      return fail(tensor_name() + ": data_offsets must be exactly two integers [begin, end]");
    offsets_.push_back(value);
    return true;
  }
  return wrong_type("a number");
}

bool HeaderHandler::string(string_t& value) {
  if (state_ == State::metadata_value) {
    metadata.emplace(std::move(metadata_key_), std::move(value));
    state_ = State::metadata;
    return true;
  }
  if (state_ == State::dtype_value) {
    const auto dtype = st_dtype_from_string(value);
    if (!dtype) return fail(tensor_name() + ": unknown dtype " + quote_name(value));
    current_.dtype = *dtype;
    state_ = State::tensor;
    return true;
  }
  return wrong_type("a string");
}

bool HeaderHandler::start_object(std::size_t) {
  if (state_ == State::top) {
    state_ = State::root;
    return true;
  }
  if (state_ == State::root_value) {
    if (root_key_ == kMetadataKey) {
      state_ = State::metadata;
    } else {
      current_ = StTensorInfo{};
      current_.name = std::move(root_key_);
      fields_seen_ = 0;
      offsets_.clear();
      state_ = State::tensor;
    }
    return true;
  }
  return wrong_type("an object");
}

bool HeaderHandler::key(string_t& value) {
  switch (state_) {
    case State::root:
      if (value.empty()) return fail("a tensor has an empty name");
      if (!root_keys_.insert(value).second) {
        if (value == kMetadataKey) return fail("__metadata__ appears twice");
        return fail("duplicate tensor name " + quote_name(value));
      }
      root_key_ = value;
      state_ = State::root_value;
      return true;
    case State::metadata:
      if (metadata.contains(value)) return fail("__metadata__ has a duplicate key " + quote_name(value));
      metadata_key_ = value;
      state_ = State::metadata_value;
      return true;
    case State::tensor: {
      unsigned field = 0;
      State next = State::tensor;
      if (value == "dtype") {
        field = kDType;
        next = State::dtype_value;
      } else if (value == "shape") {
        field = kShape;
        next = State::shape_open;
      } else if (value == "data_offsets") {
        field = kOffsets;
        next = State::offsets_open;
      } else {
        return fail(tensor_name() + ": unknown field " + quote_name(value));
      }
      if (fields_seen_ & field) return fail(tensor_name() + ": duplicate field " + quote_name(value));
      fields_seen_ |= field;
      state_ = next;
      return true;
    }
    default:
      return fail("header has an unexpected structure");
  }
}

bool HeaderHandler::start_array(std::size_t) {
  if (state_ == State::shape_open) {
    state_ = State::shape_items;
    return true;
  }
  if (state_ == State::offsets_open) {
    state_ = State::offsets_items;
    return true;
  }
  return wrong_type("an array");
}

bool HeaderHandler::end_array() {
  if (state_ == State::shape_items) {
    state_ = State::tensor;
    return true;
  }
  if (state_ == State::offsets_items) {
    if (offsets_.size() != 2)
      return fail(tensor_name() + ": data_offsets must be exactly two integers [begin, end]");
    current_.begin = offsets_[0];
    current_.end = offsets_[1];
    if (current_.begin > current_.end) {
      return fail(tensor_name() + ": data_offsets begin " + std::to_string(current_.begin) +
                  " is greater than end " + std::to_string(current_.end));
    }
    state_ = State::tensor;
    return true;
  }
  return fail("header has an unexpected structure");
}

bool HeaderHandler::end_object() {
  switch (state_) {
    case State::metadata:
      state_ = State::root;
      return true;
    case State::root:
      state_ = State::done;
      return true;
    case State::tensor: {
      static constexpr std::pair<unsigned, const char*> kRequired[] = {
          {kDType, "dtype"}, {kShape, "shape"}, {kOffsets, "data_offsets"}};
      for (const auto& [field, name] : kRequired) {
        if (!(fields_seen_ & field)) return fail(tensor_name() + ": missing field '" + name + "'");
      }
      const auto bytes = byte_size(current_.shape, current_.dtype);
      const std::string what =
          "shape " + shape_text(current_.shape) + " of " + std::string(to_string(current_.dtype));
      if (!bytes)
        return fail(tensor_name() + ": " + what + " overflows: its byte size does not fit in 64 bits");
      if (*bytes != current_.end - current_.begin) {
        return fail(tensor_name() + ": " + what + " needs " + std::to_string(*bytes) +
                    " bytes but data_offsets " + range_text(current_.begin, current_.end) + " hold " +
                    std::to_string(current_.end - current_.begin));
      }
      tensors.push_back(std::move(current_));
      state_ = State::root;
      return true;
    }
    default:
      return fail("header has an unexpected structure");
  }
}

std::string system_reason(int err) {
  return std::error_code(err, std::generic_category()).message();
}

[[noreturn]] void refuse_file(const std::string& source, const std::string& why) {
  throw Error(ErrorKind::io, source + ": " + why);
}

[[noreturn]] void refuse_tensor(const std::string& name, const std::string& why) {
  throw Error(ErrorKind::usage, "safetensors: cannot add tensor " + quote_name(name) + ": " + why);
}

}  // namespace

// A name as it appears in a message: quoted, control characters escaped, cut after 64 bytes (a hostile name
// can be megabytes long). `text` is valid UTF-8, so the cut backs off to a character boundary.
std::string quote_name(std::string_view text) {
  constexpr std::size_t kMax = 64;
  std::size_t keep = text.size();
  if (keep > kMax) {
    keep = kMax;
    while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80) --keep;
  }
  std::string out = "'";
  for (const char ch : text.substr(0, keep)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  out += '\'';
  if (keep < text.size()) out += "...";
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string_view to_string(StDType dtype) noexcept {
  return entry_of(dtype).name;
}

std::size_t st_dtype_size(StDType dtype) noexcept {
  return entry_of(dtype).size;
}

std::optional<StDType> st_dtype_from_string(std::string_view text) noexcept {
  for (const auto& e : kDTypes) {
    if (e.name == text) return e.dtype;
  }
  return std::nullopt;
}

// ---- writer ----

void SafetensorsWriter::add(std::string name, StDType dtype, std::vector<std::int64_t> shape,
                            std::span<const std::byte> data) {
  if (name.empty()) throw Error(ErrorKind::usage, "safetensors: cannot add a tensor with an empty name");
  if (invalid_utf8_at(name) != std::string_view::npos) {
    throw Error(ErrorKind::usage, "safetensors: cannot add a tensor whose name is not valid UTF-8");
  }
  if (name == kMetadataKey) refuse_tensor(name, "the name is reserved for the metadata");
  if (names_.contains(name)) refuse_tensor(name, "a tensor of that name was already added");
  for (const std::int64_t d : shape) {
    if (d < 0) refuse_tensor(name, "shape " + shape_text(shape) + " has a negative dimension");
  }
  const auto bytes = byte_size(shape, dtype);
  if (!bytes) refuse_tensor(name, "shape " + shape_text(shape) + " is too large");
  if (*bytes != data.size()) {
    refuse_tensor(name, "shape " + shape_text(shape) + " of " + std::string(to_string(dtype)) + " needs " +
                            std::to_string(*bytes) + " bytes, got " + std::to_string(data.size()));
  }
  if (data_size_ > std::numeric_limits<std::uint64_t>::max() - *bytes)
    refuse_tensor(name, "the file would be too large");

  names_.insert(name);
  tensors_.push_back(StTensorInfo{std::move(name), dtype, std::move(shape), data_size_, data_size_ + *bytes});
  data_.push_back(data);
  data_size_ += *bytes;
}

void SafetensorsWriter::set_metadata(std::map<std::string, std::string> metadata) {
  for (const auto& [key, value] : metadata) {
    if (invalid_utf8_at(key) != std::string_view::npos || invalid_utf8_at(value) != std::string_view::npos) {
      throw Error(ErrorKind::usage, "safetensors: metadata keys and values must be valid UTF-8");
    }
  }
  metadata_ = std::move(metadata);
}

std::vector<std::byte> SafetensorsWriter::header_bytes() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata_) meta[key] = value;
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  for (const auto& t : tensors_) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = std::string(to_string(t.dtype));
    entry["shape"] = t.shape;
    entry["data_offsets"] = nlohmann::ordered_json::array({t.begin, t.end});
    header[t.name] = std::move(entry);
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // so that the data section starts 8-byte aligned

  std::vector<std::byte> out(kLengthFieldBytes + json.size());
  const std::uint64_t length = json.size();
  for (std::size_t i = 0; i < kLengthFieldBytes; ++i)
    out[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  std::memcpy(out.data() + kLengthFieldBytes, json.data(), json.size());
  return out;
}

std::vector<std::byte> SafetensorsWriter::serialize() const {
  std::vector<std::byte> out = header_bytes();
  out.reserve(out.size() + data_size_);
  for (const auto& d : data_) out.insert(out.end(), d.begin(), d.end());
  return out;
}

std::string SafetensorsWriter::data_section_sha256_hex() const {
  Sha256 hash;
  for (const auto& d : data_) hash.update(d);
  return to_hex(hash.finish());
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  const std::vector<std::byte> header = header_bytes();
  write_file_atomically(
      path,
      [&](const ByteSink& sink) {
        sink(header);
        for (const auto& d : data_) sink(d);
      },
      header.size() + data_size_);
}

// ---- reader ----

namespace {

struct ValidatedHeader {
  std::uint64_t header_size = 0;
  std::vector<StTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};

// Everything the format requires that the header and the file's size can tell: `prefix` holds the file's
// first bytes, at least the length field and the header when the file has them (the data section is not
// needed), and `size` is the whole file's. A file is refused here before any of its data is read.
ValidatedHeader validate_header(std::span<const std::byte> prefix, std::uint64_t size,
                                const std::string& source, const ReadLimits& limits) {
  if (size < kLengthFieldBytes) {
    refuse_file(source, "file is too short to be safetensors (" + std::to_string(size) +
                            " bytes; the header length alone is 8)");
  }
  std::uint64_t header_size = 0;
  for (std::size_t i = 0; i < kLengthFieldBytes; ++i)
    header_size |= std::to_integer<std::uint64_t>(prefix[i]) << (8 * i);
  if (header_size == 0) refuse_file(source, "header length is 0");
  if (header_size > limits.max_header_bytes) {
    refuse_file(source, "header length " + std::to_string(header_size) + " exceeds the limit of " +
                            std::to_string(limits.max_header_bytes) + " bytes");
  }
  if (header_size > size - kLengthFieldBytes) {
    refuse_file(source, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                            std::to_string(size - kLengthFieldBytes) + " bytes follow the length field)");
  }

  const std::string_view header(reinterpret_cast<const char*>(prefix.data()) + kLengthFieldBytes,
                                header_size);
  if (const std::size_t bad = invalid_utf8_at(header); bad != std::string_view::npos) {
    refuse_file(source, "header is not valid UTF-8 (byte " + std::to_string(bad) + " of the header)");
  }
  // JSON never holds a raw NUL, and nlohmann's lexer would take one for the end of the input and ignore the
  // rest.
  if (const std::size_t nul = header.find('\0'); nul != std::string_view::npos) {
    refuse_file(source, "header contains a NUL byte (byte " + std::to_string(nul) + " of the header)");
  }
  if (header.front() != '{') refuse_file(source, "header is not a JSON object (it must start with '{')");

  HeaderHandler handler;
  // Strict: the object must be followed by nothing but whitespace (the format's padding is spaces).
  const bool ok =
      nlohmann::json::sax_parse(header.begin(), header.end(), &handler, nlohmann::json::input_format_t::json,
                                /*strict=*/true, /*ignore_comments=*/false);
  if (!ok)
    refuse_file(source, handler.error.empty() ? std::string("header is not valid JSON") : handler.error);

  const std::uint64_t data_size = size - kLengthFieldBytes - header_size;
  for (const auto& t : handler.tensors) {
    if (t.end > data_size) {
      refuse_file(source, "tensor " + quote_name(t.name) + ": data_offsets " + range_text(t.begin, t.end) +
                              " are out of bounds: the data section holds " + std::to_string(data_size) +
                              " bytes");
    }
  }
  // Sorted by offset, the tensors must tile the data section exactly: each starts where the previous ended.
  std::vector<std::size_t> order(handler.tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& ta = handler.tensors[a];
    const auto& tb = handler.tensors[b];
    return std::pair(ta.begin, ta.end) < std::pair(tb.begin, tb.end);
  });
  std::uint64_t covered = 0;
  const StTensorInfo* previous = nullptr;
  for (const std::size_t i : order) {
    const auto& t = handler.tensors[i];
    if (t.begin < covered) {
      refuse_file(source, "tensors " + quote_name(previous->name) + " " +
                              range_text(previous->begin, previous->end) + " and " + quote_name(t.name) +
                              " " + range_text(t.begin, t.end) + " overlap");
    }
    if (t.begin > covered) {
      refuse_file(source, "gap of " + std::to_string(t.begin - covered) +
                              " bytes in the data section before tensor " + quote_name(t.name) + " " +
                              range_text(t.begin, t.end) + "; tensors must be contiguous from offset 0");
    }
    covered = t.end;
    previous = &t;
  }
  if (covered < data_size) {
    refuse_file(source, std::to_string(data_size - covered) +
                            " trailing bytes after the last tensor (the data section holds " +
                            std::to_string(data_size) + " bytes, the tensors cover " +
                            std::to_string(covered) + ")");
  }

  return {header_size, std::move(handler.tensors), std::move(handler.metadata)};
}

// Reads exactly out.size() bytes at `offset`; refuses a file that ends sooner.
void read_exactly(int fd, std::uint64_t offset, std::span<std::byte> out, const std::string& source) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, std::min(out.size() - done, std::size_t{1} << 30),
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::io, source + ": cannot read: " + system_reason(errno));
    }
    if (n == 0) throw Error(ErrorKind::io, source + ": the file shrank while it was read");
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path, const ReadLimits& limits) {
  const std::string source = path.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below as not a regular file.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw Error(ErrorKind::io, source + ": cannot open: " + system_reason(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw Error(ErrorKind::io, source + ": cannot stat: " + system_reason(errno));
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::io, source + ": is a folder, not a regular file");
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::io, source +
                                   ": not a regular file (a pipe, device or socket cannot be read as "
                                   "safetensors)");
  const auto size = static_cast<std::uint64_t>(st.st_size);

  // The length field and the header first: a file whose header does not describe exactly its size (a foreign
  // or damaged file, trailing bytes) is refused before its data is read.
  std::vector<std::byte> prefix(std::min<std::uint64_t>(size, kLengthFieldBytes));
  read_exactly(fd.get(), 0, prefix, source);
  if (prefix.size() == kLengthFieldBytes) {
    std::uint64_t header_size = 0;
    for (std::size_t i = 0; i < kLengthFieldBytes; ++i)
      header_size |= std::to_integer<std::uint64_t>(prefix[i]) << (8 * i);
    if (header_size > 0 && header_size <= limits.max_header_bytes &&
        header_size <= size - kLengthFieldBytes) {
      prefix.resize(kLengthFieldBytes + header_size);
      read_exactly(fd.get(), kLengthFieldBytes, std::span(prefix).subspan(kLengthFieldBytes), source);
    }
  }
  ValidatedHeader header = validate_header(prefix, size, source, limits);

  std::vector<std::byte> bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::io,
                source + ": cannot hold the file in memory (" + std::to_string(size) + " bytes)");
  }
  std::copy(prefix.begin(), prefix.end(), bytes.begin());
  read_exactly(fd.get(), prefix.size(), std::span(bytes).subspan(prefix.size()), source);
  return SafetensorsFile(source, std::move(bytes), std::move(header.tensors), std::move(header.metadata),
                         header.header_size);
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::byte> bytes, std::string source_name,
                                       const ReadLimits& limits) {
  ValidatedHeader header = validate_header(bytes, bytes.size(), source_name, limits);
  return SafetensorsFile(std::move(source_name), std::move(bytes), std::move(header.tensors),
                         std::move(header.metadata), header.header_size);
}

SafetensorsFile::SafetensorsFile(std::string source_name, std::vector<std::byte> bytes,
                                 std::vector<StTensorInfo> tensors,
                                 std::map<std::string, std::string> metadata, std::uint64_t header_size)
    : source_name_(std::move(source_name)),
      bytes_(std::move(bytes)),
      header_size_(header_size),
      tensors_(std::move(tensors)),
      metadata_(std::move(metadata)) {
  for (std::size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
}

const StTensorInfo* SafetensorsFile::find(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const std::byte> SafetensorsFile::data_section() const noexcept {
  return std::span<const std::byte>(bytes_).subspan(kLengthFieldBytes + header_size_);
}

std::span<const std::byte> SafetensorsFile::data(const StTensorInfo& tensor) const {
  const auto section = data_section();
  if (tensor.begin > tensor.end || tensor.end > section.size()) {
    throw Error(ErrorKind::usage, source_name_ + ": tensor " + quote_name(tensor.name) + " range " +
                                      range_text(tensor.begin, tensor.end) +
                                      " is not in this file's data section");
  }
  return section.subspan(tensor.begin, tensor.end - tensor.begin);
}

}  // namespace unet
