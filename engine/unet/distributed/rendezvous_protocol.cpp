#include "unet/distributed/rendezvous_protocol.h"

#include <algorithm>
#include <cstring>

#include "unet/core/error.h"
#include "unet/io/sha256.h"

namespace unet::rendezvous {
namespace {

// Little-endian fields, whatever the host's order.
class Writer {
 public:
  void u16(std::uint32_t v) { bytes(v, 2); }
  void u32(std::uint32_t v) { bytes(v, 4); }
  void u64(std::uint64_t v) { bytes(v, 8); }
  void raw(std::span<const std::uint8_t> data) {
    for (std::uint8_t b : data) out_.push_back(static_cast<std::byte>(b));
  }
  void text(std::string_view s) {
    u16(static_cast<std::uint32_t>(s.size()));
    for (char c : s) out_.push_back(static_cast<std::byte>(c));
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  void bytes(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  std::vector<std::byte> out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  std::uint64_t u(int n, const char* field) {
    need(static_cast<std::size_t>(n), field);
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(bytes_[at_ + static_cast<std::size_t>(i)]) << (8 * i);
    at_ += static_cast<std::size_t>(n);
    return v;
  }
  std::uint32_t u32(const char* field) { return static_cast<std::uint32_t>(u(4, field)); }
  std::int32_t i32(const char* field) { return static_cast<std::int32_t>(u32(field)); }
  Proof proof() {
    need(kProofSize, "proof");
    Proof p{};
    for (std::size_t i = 0; i < kProofSize; ++i) p[i] = static_cast<std::uint8_t>(bytes_[at_ + i]);
    at_ += kProofSize;
    return p;
  }
  // A 2-byte length, then that many bytes, at most `max`.
  std::string text(const char* field, std::size_t max) {
    const auto n = static_cast<std::size_t>(u(2, field));
    if (n > max)
      throw Error(ErrorKind::usage, what_ + ": its " + field + " is " + std::to_string(n) +
                                        " bytes, more than the " + std::to_string(max) + " allowed");
    need(n, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
    return s;
  }
  void finish() const {
    if (at_ != bytes_.size())
      throw Error(ErrorKind::usage, what_ + ": " + std::to_string(bytes_.size() - at_) +
                                        " bytes after its last field (a malformed message)");
  }
  const std::string& what() const { return what_; }

 private:
  void need(std::size_t n, const char* field) const {
    if (bytes_.size() - at_ < n)
      throw Error(ErrorKind::usage,
                  what_ + " ends inside its " + std::string(field) + " (a malformed message)");
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
  std::string what_;
};

bool printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

std::vector<std::byte> framed(Kind kind, std::vector<std::byte> body) {
  Writer w;
  w.u32(kMagic);
  w.u32(kProtocol);
  w.u32(static_cast<std::uint32_t>(kind));
  w.u32(static_cast<std::uint32_t>(body.size()));
  std::vector<std::byte> out = w.take();
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

void check_size(int size, const std::string& what) {
  if (size < 2 || size > kMaxWorldSize)
    throw Error(ErrorKind::usage, what + " says the run has " + std::to_string(size) +
                                      " processes; a run over processes has 2 to " +
                                      std::to_string(kMaxWorldSize));
}

void check_rank(int rank, int size, const std::string& what) {
  if (rank < 0 || rank >= size)
    throw Error(ErrorKind::usage, what + " says it is rank " + std::to_string(rank) + " of " +
                                      std::to_string(size) + " (ranks 0 to " + std::to_string(size - 1) +
                                      ")");
}

void check_port(int port, const std::string& what) {
  if (port < 1 || port > 65535)
    throw Error(ErrorKind::usage,
                what + " names port " + std::to_string(port) + "; a TCP port is 1 to 65535");
}

// A field of a decoded message: the same checks as check_host_name, as a malformed message.
std::string host_field(Reader& r, const char* field) {
  std::string s = r.text(field, kMaxHostName);
  if (s.empty() || !printable(s))
    throw Error(ErrorKind::usage, r.what() + ": its " + field +
                                      " is empty or holds a character other than "
                                      "printable ASCII");
  return s;
}

}  // namespace

const char* to_string(Kind kind) noexcept {
  switch (kind) {
    case Kind::hello:
      return "hello";
    case Kind::peer_table:
      return "peer table";
    case Kind::ring_hello:
      return "ring hello";
    case Kind::refusal:
      return "refusal";
  }
  return "?";
}

Proof job_proof(std::string_view identity) {
  Sha256 sha;
  sha.update(std::string_view("unet-train rendezvous 2\n"));
  sha.update(identity);
  return sha.finish();
}

void check_host_name(const std::string& name, const std::string& what) {
  if (name.empty()) throw ConfigError(what, "is empty");
  if (name.size() > kMaxHostName)
    throw ConfigError(what, "is " + std::to_string(name.size()) +
                                " characters long; a host name is at most " + std::to_string(kMaxHostName) +
                                " (DNS's limit)");
  if (!printable(name))
    throw ConfigError(what,
                      "holds a space or a character other than printable ASCII; a host name or address "
                      "holds neither");
}

Frame decode_frame(std::span<const std::byte> bytes, std::span<const Expected> expected) {
  Reader r(bytes, "a rendezvous message");
  if (bytes.size() != kFrameSize)
    throw Error(ErrorKind::usage, "a rendezvous frame of " + std::to_string(bytes.size()) + " bytes (" +
                                      std::to_string(kFrameSize) + " expected)");
  if (r.u32("magic") != kMagic)
    throw Error(ErrorKind::usage, "not a unet-train rendezvous message (its magic is wrong)");
  const std::uint32_t protocol = r.u32("protocol");
  if (protocol != kProtocol)
    throw Error(ErrorKind::usage, "a rendezvous message of protocol " + std::to_string(protocol) +
                                      ", this build speaks " + std::to_string(kProtocol) +
                                      ": use one build of unet-train on every node");
  const std::uint32_t kind = r.u32("kind");
  const std::uint32_t body = r.u32("body size");
  std::string wanted;
  for (const Expected& e : expected) {
    if (static_cast<std::uint32_t>(e.kind) != kind) {
      wanted += std::string(wanted.empty() ? "" : " or ") + to_string(e.kind);
      continue;
    }
    if (body > e.max_body)
      throw Error(ErrorKind::usage, std::string("a rendezvous ") + to_string(e.kind) + " announces " +
                                        std::to_string(body) + " bytes, more than the " +
                                        std::to_string(e.max_body) + " it can hold");
    return {e.kind, body};
  }
  throw Error(ErrorKind::usage, "a rendezvous message of kind " + std::to_string(kind) + " where a " +
                                    wanted + " was expected: the processes are out of step");
}

std::vector<std::byte> encode_hello(const Hello& h) {
  Writer w;
  w.raw(h.proof);
  w.u32(static_cast<std::uint32_t>(h.rank));
  w.u32(static_cast<std::uint32_t>(h.size));
  w.u32(static_cast<std::uint32_t>(h.ring_port));
  w.text(h.host.substr(0, kMaxHostName));
  return framed(Kind::hello, w.take());
}

Hello decode_hello(std::span<const std::byte> body) {
  Reader r(body, "a rank's hello");
  Hello h;
  h.proof = r.proof();
  h.rank = r.i32("rank");
  h.size = r.i32("world size");
  h.ring_port = r.i32("ring port");
  h.host = host_field(r, "host name");
  r.finish();
  check_size(h.size, "a rank's hello");
  check_rank(h.rank, h.size, "a hello");
  check_port(h.ring_port, "a hello");
  return h;
}

std::size_t max_peer_table_body(int world_size) {
  return 4 + static_cast<std::size_t>(std::max(world_size, 0)) * (4 + 2 * (2 + kMaxHostName));
}

std::vector<std::byte> encode_peer_table(std::span<const Peer> peers) {
  Writer w;
  w.u32(static_cast<std::uint32_t>(peers.size()));
  for (const Peer& p : peers) {
    w.u32(static_cast<std::uint32_t>(p.ring_port));
    w.text(p.address.substr(0, kMaxHostName));
    w.text(p.host.substr(0, kMaxHostName));
  }
  return framed(Kind::peer_table, w.take());
}

std::vector<Peer> decode_peer_table(std::span<const std::byte> body, int world_size) {
  Reader r(body, "rank 0's peer table");
  check_size(world_size, "this rank");
  const std::uint32_t count = r.u32("count");
  if (count != static_cast<std::uint32_t>(world_size))
    throw Error(ErrorKind::usage, "rank 0's peer table lists " + std::to_string(count) +
                                      " ranks, this rank " + "was told " + std::to_string(world_size));
  std::vector<Peer> peers(count);
  for (Peer& p : peers) {
    p.ring_port = r.i32("ring port");
    check_port(p.ring_port, "rank 0's peer table");
    p.address = host_field(r, "address");
    p.host = host_field(r, "host name");
  }
  r.finish();
  return peers;
}

std::vector<std::byte> encode_ring_hello(const RingHello& h) {
  Writer w;
  w.raw(h.proof);
  w.u32(static_cast<std::uint32_t>(h.rank));
  return framed(Kind::ring_hello, w.take());
}

RingHello decode_ring_hello(std::span<const std::byte> body, int world_size) {
  Reader r(body, "a ring link's hello");
  RingHello h;
  h.proof = r.proof();
  h.rank = r.i32("rank");
  r.finish();
  check_rank(h.rank, world_size, "a ring link's hello");
  return h;
}

std::vector<std::byte> encode_refusal(const Refusal& refusal) {
  Writer w;
  w.u32(static_cast<std::uint32_t>(refusal.reason));
  std::string text = refusal.text.substr(0, kMaxRefusalText);
  for (char& c : text)
    if (c < ' ' || c >= 0x7f) c = '?';
  w.text(text);
  return framed(Kind::refusal, w.take());
}

Refusal decode_refusal(std::span<const std::byte> body) {
  Reader r(body, "rank 0's refusal");
  Refusal refusal;
  const std::uint32_t reason = r.u32("reason");
  if (reason < 1 || reason > 3)
    throw Error(ErrorKind::usage,
                "rank 0's refusal gives reason " + std::to_string(reason) + ", not one of 1 to 3");
  refusal.reason = static_cast<RefusalReason>(reason);
  refusal.text = r.text("text", kMaxRefusalText);
  if (!std::all_of(refusal.text.begin(), refusal.text.end(), [](char c) { return c >= ' ' && c < 0x7f; }))
    throw Error(ErrorKind::usage, "rank 0's refusal holds a character other than printable ASCII");
  r.finish();
  return refusal;
}

std::array<std::byte, kMessageHeaderSize> encode_message_header(const MessageHeader& header) {
  Writer w;
  w.u32(header.magic);
  w.u32(header.tag);
  w.u64(header.size);
  const std::vector<std::byte> bytes = w.take();
  std::array<std::byte, kMessageHeaderSize> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

MessageHeader decode_message_header(std::span<const std::byte> bytes) {
  Reader r(bytes, "a ring message's header");
  MessageHeader h;
  h.magic = r.u32("magic");
  h.tag = r.u32("tag");
  h.size = r.u(8, "size");
  r.finish();
  return h;
}

void check_message_header(const MessageHeader& header, MessageTag expected, std::uint64_t max_bytes,
                          const std::string& from) {
  if (header.magic != kMessageMagic || header.tag != static_cast<std::uint32_t>(expected))
    throw Error(ErrorKind::usage,
                from + " sent message " + std::to_string(header.tag) + " where this rank expected " +
                    std::to_string(static_cast<std::uint32_t>(expected)) + ": the processes are out of step");
  if (header.size > max_bytes)
    throw Error(ErrorKind::usage, from + " announced a message of " + std::to_string(header.size) +
                                      " bytes where this rank expected at most " + std::to_string(max_bytes) +
                                      ": the processes are out of step");
}

std::size_t max_gathered_bytes(int parts, std::size_t max_part) {
  return static_cast<std::size_t>(std::max(parts, 0)) * (sizeof(std::uint64_t) + max_part);
}

void append_gathered(std::vector<std::byte>& partial, std::string_view part) {
  Writer w;
  w.u64(part.size());
  const std::vector<std::byte> length = w.take();
  partial.insert(partial.end(), length.begin(), length.end());
  const auto* p = reinterpret_cast<const std::byte*>(part.data());
  partial.insert(partial.end(), p, p + part.size());
}

std::vector<std::string> parse_gathered(std::span<const std::byte> partial, int parts, std::size_t max_part) {
  if (parts < 0) throw Error(ErrorKind::usage, "all_gather: a negative count of parts");
  std::vector<std::string> all;
  std::size_t at = 0;
  for (int i = 0; i < parts; ++i) {
    const std::span<const std::byte> rest = partial.subspan(at);
    Reader length(rest.first(std::min<std::size_t>(8, rest.size())), "all_gather's result");
    const std::uint64_t n = length.u(8, "length");
    if (n > max_part || n > rest.size() - 8)
      throw Error(ErrorKind::usage, "all_gather: rank " + std::to_string(i) + "'s part announces " +
                                        std::to_string(n) + " bytes (at most " + std::to_string(max_part) +
                                        ", " + std::to_string(rest.size() - 8) +
                                        " left): a malformed message");
    all.emplace_back(reinterpret_cast<const char*>(rest.data() + 8), static_cast<std::size_t>(n));
    at += 8 + static_cast<std::size_t>(n);
  }
  if (at != partial.size())
    throw Error(ErrorKind::usage, "all_gather: " + std::to_string(partial.size() - at) + " bytes after the " +
                                      std::to_string(parts) + " ranks' parts: a malformed message");
  return all;
}

std::string rank_list_text(const std::vector<int>& ranks, std::size_t max_items) {
  std::string text;
  std::size_t items = 0, i = 0;
  const auto add = [&](const std::string& item) { text += (text.empty() ? "" : ", ") + item; };
  while (i < ranks.size() && items < max_items) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    add(j > i ? std::to_string(ranks[i]) + " to " + std::to_string(ranks[j]) : std::to_string(ranks[i]));
    ++items;
    i = j + 1;
  }
  if (i < ranks.size()) add("and " + std::to_string(ranks.size() - i) + " others");
  return text;
}

}  // namespace unet::rendezvous
