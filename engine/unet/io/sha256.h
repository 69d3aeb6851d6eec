// SHA-256 (FIPS 180-4), for the checksum a checkpoint keeps of its data section, computed by OpenSSL's
// libcrypto (the EVP digest API). Incremental, so that a checkpoint's tensors can be hashed in place, one
// after the other, without first being copied into one buffer. The one non-obvious rule: finish() returns the
// digest and resets the object, ready for a new message. A failed OpenSSL call throws unet::Error (backend).
// Move-only; a moved-from object may only be assigned to or destroyed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

// OpenSSL's EVP_MD_CTX, declared here so that this header does not pull in OpenSSL's.
struct evp_md_ctx_st;

namespace unet {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256();

  void update(std::span<const std::byte> bytes);
  void update(std::string_view text) { update(std::as_bytes(std::span(text.data(), text.size()))); }
  Digest finish();
  void reset();

  static Digest hash(std::span<const std::byte> bytes);

 private:
  struct FreeContext {
    void operator()(evp_md_ctx_st* context) const noexcept;  // EVP_MD_CTX_free
  };
  std::unique_ptr<evp_md_ctx_st, FreeContext> context_;
};

// Lower-case hexadecimal, 64 characters.
std::string to_hex(const Sha256::Digest& digest);
std::string sha256_hex(std::span<const std::byte> bytes);

}  // namespace unet
