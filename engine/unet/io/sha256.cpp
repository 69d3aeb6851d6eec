// SHA-256 through OpenSSL 3's EVP digest API: one EVP_MD_CTX per object, initialised for EVP_sha256() by the
// constructor and again by every finish().
#include "unet/io/sha256.h"

#include <openssl/err.h>
#include <openssl/evp.h>

#include "unet/core/error.h"

namespace unet {
namespace {

// Throws unless an OpenSSL call succeeded (returned 1), with the reason OpenSSL queued, if any.
void check(int result, const char* call) {
  if (result == 1) return;
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  std::string message = std::string("SHA-256: ") + call + " failed";
  if (code != 0) {
    char reason[256];
    ERR_error_string_n(code, reason, sizeof reason);
    message += std::string(": ") + reason;
  }
  throw Error(ErrorKind::backend, message);
}

}  // namespace

void Sha256::FreeContext::operator()(evp_md_ctx_st* context) const noexcept {
  EVP_MD_CTX_free(context);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) check(0, "EVP_MD_CTX_new");
  reset();
}

void Sha256::reset() {
  check(EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

void Sha256::update(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  check(EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()), "EVP_DigestUpdate");
}

Sha256::Digest Sha256::finish() {
  Digest digest;
  unsigned int size = 0;
  check(EVP_DigestFinal_ex(context_.get(), digest.data(), &size), "EVP_DigestFinal_ex");
  if (size != digest.size())
    throw Error(ErrorKind::backend, "SHA-256: OpenSSL returned a digest of the wrong size");
  reset();
  return digest;
}

Sha256::Digest Sha256::hash(std::span<const std::byte> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

std::string to_hex(const Sha256::Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text(2 * digest.size(), '0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    text[2 * i] = kHex[digest[i] >> 4];
    text[2 * i + 1] = kHex[digest[i] & 0x0f];
  }
  return text;
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  return to_hex(Sha256::hash(bytes));
}

}  // namespace unet
