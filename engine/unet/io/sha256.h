// SHA-256 (FIPS 180-4), for the checksum a checkpoint keeps of its data section. Incremental, so that a
// checkpoint's tensors can be hashed in place, one after the other, without first being copied into one
// buffer. The one non-obvious rule: finish() returns the digest and resets the object, ready for a new
// message.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace unet {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256() noexcept { reset(); }

  void update(std::span<const std::byte> bytes) noexcept;
  void update(std::string_view text) noexcept { update(std::as_bytes(std::span(text.data(), text.size()))); }
  Digest finish() noexcept;
  void reset() noexcept;

  static Digest hash(std::span<const std::byte> bytes) noexcept;

 private:
  void compress(const std::uint8_t* block) noexcept;

  std::array<std::uint32_t, 8> state_{};
  std::array<std::uint8_t, 64> block_{};
  std::size_t block_used_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// Lower-case hexadecimal, 64 characters.
std::string to_hex(const Sha256::Digest& digest);
std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace unet
