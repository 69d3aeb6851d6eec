// Every message the processes of a run exchange before and while they train, as pure encode/decode
// functions: the rendezvous (a rank's hello to rank 0, rank 0's peer table or refusal), the ring link's
// hello, and the ring messages' header and all_gather's partial result. tcp_group.cpp and mpi_group.cpp move
// only these bytes; the fuzzer (fuzz/fuzz_rendezvous.cpp) feeds the decoders any bytes.
//
// WHAT A RANK TRUSTS (docs/DISTRIBUTED.md, "What a rank trusts"); this file is the one place the rule is
// kept:
//  - Nothing a peer says is believed before it proved it is a rank of this job: its first message (the hello,
//    or the ring hello) carries job_proof() of the job's identity (UNET_JOB_TOKEN; else srun's job and step
//    ids; else only the master port: no secret), and nothing is allocated for a peer beyond its fixed-size
//    hello until that proof matches. A connection that fails the proof, sends a malformed or oversized
//    message, or sends nothing within its hello deadline is closed and logged; the rendezvous goes on.
//  - Every length on the wire is checked against what the protocol expects at that point BEFORE anything is
//    allocated for it: a hello is at most kMaxHelloBody bytes, the peer table holds exactly world-size
//    entries, a host name or address is at most kMaxHostName bytes (DNS's limit) of printable ASCII, a ring
//    message at most what its caller expects (a sum: exactly its values; a gather: a stated bound per rank).
//  - The world size is at most kMaxWorldSize.
//  - A proof is a hash of the identity sent in clear: it keeps out programs and runs that are not this job;
//    it is not a defence against someone who can watch the network and replay it.
// Every refusal throws unet::Error naming what is wrong; no other exception leaves these functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "unet/distributed/process_group.h"

namespace unet::rendezvous {

inline constexpr std::uint32_t kMagic = 0x56524e55;  // "UNRV" on the wire (little-endian)
inline constexpr std::uint32_t kProtocol = 2;
// A host name as DNS allows it (RFC 1035: 253 characters in text form); MASTER_ADDR and every rank's host
// name and address are held to it.
inline constexpr std::size_t kMaxHostName = 253;
// The most ranks a run may have. A bound, so that a typo (WORLD_SIZE=10000000) is refused before tables of
// that size are made; 65536 processes is beyond any cluster this trainer's ring (2 (N - 1) hops a sum)
// serves.
inline constexpr int kMaxWorldSize = 65536;
inline constexpr std::size_t kProofSize = 32;
inline constexpr std::size_t kFrameSize = 16;         // magic, protocol, kind, body size: 4 bytes each
inline constexpr std::size_t kMaxRefusalText = 1024;  // a refusal's explanation
// The largest hello body: proof, rank, size, ring port, then the host name (2-byte length + text).
inline constexpr std::size_t kMaxHelloBody = kProofSize + std::size_t{3} * 4 + 2 + kMaxHostName;
inline constexpr std::size_t kRingHelloBody = kProofSize + 4;
inline constexpr std::size_t kMaxRefusalBody = 4 + 2 + kMaxRefusalText;

enum class Kind : std::uint32_t { hello = 1, peer_table = 2, ring_hello = 3, refusal = 4 };
const char* to_string(Kind kind) noexcept;

using Proof = std::array<std::uint8_t, kProofSize>;
// SHA-256 of the job's identity, under this protocol's own prefix.
Proof job_proof(std::string_view identity);

// Throws ConfigError(`what`) when `name` is empty, longer than kMaxHostName or holds a character other than
// printable ASCII without spaces.
void check_host_name(const std::string& name, const std::string& what);

// Every message starts with a frame: what it is and how long its body is.
struct Frame {
  Kind kind = Kind::hello;
  std::uint32_t body_size = 0;
};
// A kind the reader expects at this point, and the largest body it accepts for it.
struct Expected {
  Kind kind;
  std::size_t max_body;
};
// Throws Error(usage) naming the field when `bytes` (kFrameSize of them) is not this protocol's frame of one
// of the `expected` kinds, or announces a body over its bound.
Frame decode_frame(std::span<const std::byte> bytes, std::span<const Expected> expected);

// A rank's first message to rank 0.
struct Hello {
  Proof proof{};
  int rank = 0, size = 0, ring_port = 0;
  std::string host;
};
std::vector<std::byte> encode_hello(const Hello& hello);
// The body after its frame. Throws naming the field: a size outside 2..kMaxWorldSize, a rank outside
// 0..size-1, a port outside 1..65535, a bad host name, a body of the wrong length.
Hello decode_hello(std::span<const std::byte> body);

// Where each rank's ring listener is, by rank: rank 0's answer once everyone has come.
struct Peer {
  std::string address;  // what the next rank connects to: an IP address, or MASTER_ADDR for rank 0
  int ring_port = 0;
  std::string host;  // its host name, for messages and for which ranks share a host
};
std::vector<std::byte> encode_peer_table(std::span<const Peer> peers);
std::size_t max_peer_table_body(int world_size);
// Throws unless it holds exactly `world_size` well-formed peers and nothing more.
std::vector<Peer> decode_peer_table(std::span<const std::byte> body, int world_size);

// The first message on a ring link: the connecting rank proves the job and says who it is.
struct RingHello {
  Proof proof{};
  int rank = 0;
};
std::vector<std::byte> encode_ring_hello(const RingHello& hello);
RingHello decode_ring_hello(std::span<const std::byte> body, int world_size);

// Rank 0's answer to a hello it does not accept, before it closes the connection.
enum class RefusalReason : std::uint32_t { wrong_job = 1, wrong_size = 2, duplicate_rank = 3 };
struct Refusal {
  RefusalReason reason = RefusalReason::wrong_job;
  std::string text;  // printable ASCII, at most kMaxRefusalText (longer text is cut when encoded)
};
std::vector<std::byte> encode_refusal(const Refusal& refusal);
Refusal decode_refusal(std::span<const std::byte> body);

// The ring's messages (process_group.h): the header as bytes, and its check against what the receiver
// expects. check_message_header throws Error(usage) naming `from` when the magic or tag is not the expected
// one, and when the size announced exceeds `max_bytes`: before anything is allocated for it.
inline constexpr std::size_t kMessageHeaderSize = 16;
std::array<std::byte, kMessageHeaderSize> encode_message_header(const MessageHeader& header);
MessageHeader decode_message_header(std::span<const std::byte> bytes);
void check_message_header(const MessageHeader& header, MessageTag expected, std::uint64_t max_bytes,
                          const std::string& from);

// all_gather's partial result: each rank's part after its 8-byte length. Throws Error(usage) unless it holds
// exactly `parts` parts of at most `max_part` bytes each.
std::size_t max_gathered_bytes(int parts, std::size_t max_part);
void append_gathered(std::vector<std::byte>& partial, std::string_view part);
std::vector<std::string> parse_gathered(std::span<const std::byte> partial, int parts, std::size_t max_part);

// "1, 2, 5 to 9 and 12" for a sorted list of ranks, at most `max_items` items then "and N others": a message
// about 10000 missing ranks stays a line.
std::string rank_list_text(const std::vector<int>& ranks, std::size_t max_items = 8);

}  // namespace unet::rendezvous
