// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (plus an optional
// "__metadata__" object of strings), then the data section the offsets point into. Checkpoints and exported
// weights use it. The one non-obvious rule: the reader trusts nothing. A file is validated whole before
// anything is returned (every offset, every size, no overlaps, no gaps, no trailing bytes), so a caller never
// sees a half-valid file. Checksums of the data are a layer above this one: flipped bits in tensor data are
// valid safetensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace unet {

// Every element type of the format whose elements are whole bytes. The format's sub-byte types (F4, F6_*) and
// anything newer are refused as unknown.
enum class StDType : std::uint8_t {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

std::string_view to_string(StDType dtype) noexcept;  // "F32", as the file spells it

// Text taken from a file, for a message: quoted, control characters escaped, cut after 64 bytes (a hostile
// name can be megabytes long) on a UTF-8 character boundary.
std::string quote_name(std::string_view text);
// "[16, 3, 3, 3]"
std::string shape_text(const std::vector<std::int64_t>& shape);
std::optional<StDType> st_dtype_from_string(std::string_view text) noexcept;
std::size_t st_dtype_size(StDType dtype) noexcept;  // bytes per element

struct StTensorInfo {
  std::string name;
  StDType dtype = StDType::F32;
  std::vector<std::int64_t> shape;  // row-major, outermost first; [] is a scalar
  std::uint64_t begin = 0;          // byte offsets into the data section, [begin, end)
  std::uint64_t end = 0;

  friend bool operator==(const StTensorInfo&, const StTensorInfo&) = default;
};

struct ReadLimits {
  std::uint64_t max_header_bytes = std::uint64_t{100} << 20;  // the reference implementation's limit
};

// Collects tensors, then writes them as one file. The header is padded with spaces so that the data section
// starts at a multiple of 8 bytes; tensors are laid out in the order they were added, contiguous from offset
// 0.
class SafetensorsWriter {
 public:
  // Records the tensor and REFERENCES `data` (no copy: checkpoints are large): the bytes must stay alive and
  // unchanged until the last write()/serialize() call. Throws unet::Error(usage) for an empty, reserved
  // ("__metadata__"), duplicate or non-UTF-8 name, a negative dimension, or data whose size is not shape x
  // dtype.
  void add(std::string name, StDType dtype, std::vector<std::int64_t> shape, std::span<const std::byte> data);
  // Replaces the metadata; written only when not empty. Keys and values must be UTF-8 (unet::Error(usage)).
  void set_metadata(std::map<std::string, std::string> metadata);

  const std::vector<StTensorInfo>& tensors() const noexcept { return tensors_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  std::uint64_t data_section_size() const noexcept { return data_size_; }
  // SHA-256 of the data section as the file will hold it, without building the file.
  std::string data_section_sha256_hex() const;

  // Writes the file atomically (see atomic_file.h); unet::Error(io) on failure, the old file left untouched.
  void write(const std::filesystem::path& path) const;
  // The same bytes, in memory.
  std::vector<std::byte> serialize() const;
  // The length field and the padded JSON header: everything before the data section.
  std::vector<std::byte> header_bytes() const;

 private:
  std::vector<StTensorInfo> tensors_;
  std::vector<std::span<const std::byte>> data_;
  std::set<std::string, std::less<>> names_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t data_size_ = 0;
};

// A validated safetensors file, held in memory. Every refusal is unet::Error(ErrorKind::io) whose message
// reads
// "<source>: <what is wrong>".
class SafetensorsFile {
 public:
  static SafetensorsFile read(const std::filesystem::path& path, const ReadLimits& limits = {});
  static SafetensorsFile parse(std::vector<std::byte> bytes, std::string source_name,
                               const ReadLimits& limits = {});

  // In header order.
  const std::vector<StTensorInfo>& tensors() const noexcept { return tensors_; }
  const StTensorInfo* find(std::string_view name) const noexcept;
  // The tensor's bytes (little-endian elements, no alignment promised). unet::Error(usage) for an info whose
  // range does not lie in this file's data section.
  std::span<const std::byte> data(const StTensorInfo& tensor) const;
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  std::span<const std::byte> data_section() const noexcept;
  std::uint64_t header_size() const noexcept {
    return header_size_;
  }  // N, the JSON's length with its padding
  const std::string& source_name() const noexcept { return source_name_; }

 private:
  SafetensorsFile(std::string source_name, std::vector<std::byte> bytes, std::vector<StTensorInfo> tensors,
                  std::map<std::string, std::string> metadata, std::uint64_t header_size);

  std::string source_name_;
  std::vector<std::byte> bytes_;
  std::uint64_t header_size_ = 0;
  std::vector<StTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace unet
