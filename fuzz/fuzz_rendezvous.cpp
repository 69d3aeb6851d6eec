// libFuzzer target: every message the processes of a run read from each other (dist/rendezvous_protocol.h)
// on any bytes: the rendezvous frame, a rank's hello, rank 0's peer table and refusal, the ring link's hello,
// the ring messages' header check and all_gather's parse of a partial result. Refusals must be unet::Error;
// anything else escaping, a crash, a leak, undefined behaviour or an allocation past what the decoder's
// bounds allow is a finding. What a decoder accepts must encode back to the same bytes (the fields are
// canonical), so that nothing it lets through is misread.
//
// The input's first byte picks the decoder and the world size it runs under; the rest is the message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "unet/core/error.h"
#include "unet/distributed/rendezvous_protocol.h"

namespace {

namespace rv = unet::rendezvous;

void expect_same(std::span<const std::byte> encoded, std::span<const std::byte> body) {
  // encoded = frame + body
  if (encoded.size() != rv::kFrameSize + body.size() ||
      !std::equal(body.begin(), body.end(), encoded.begin() + rv::kFrameSize))
    __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  const int world_size = 2 + (data[0] >> 3);  // 2 to 33
  try {
    switch (data[0] & 7) {
      case 0: {  // a frame, as rank 0 and a joining rank expect them
        const std::vector<rv::Expected> expected{{rv::Kind::hello, rv::kMaxHelloBody},
                                                 {rv::Kind::peer_table, rv::max_peer_table_body(world_size)},
                                                 {rv::Kind::refusal, rv::kMaxRefusalBody}};
        const rv::Frame frame =
            rv::decode_frame(bytes.first(std::min(bytes.size(), rv::kFrameSize)), expected);
        if (frame.body_size > rv::max_peer_table_body(world_size)) __builtin_trap();
        break;
      }
      case 1: {
        const rv::Hello hello = rv::decode_hello(bytes);
        if (hello.host.size() > rv::kMaxHostName || hello.rank >= hello.size) __builtin_trap();
        expect_same(rv::encode_hello(hello), bytes);
        break;
      }
      case 2: {
        const std::vector<rv::Peer> peers = rv::decode_peer_table(bytes, world_size);
        if (peers.size() != static_cast<std::size_t>(world_size)) __builtin_trap();
        expect_same(rv::encode_peer_table(peers), bytes);
        break;
      }
      case 3: {
        const rv::RingHello hello = rv::decode_ring_hello(bytes, world_size);
        expect_same(rv::encode_ring_hello(hello), bytes);
        break;
      }
      case 4: {
        const rv::Refusal refusal = rv::decode_refusal(bytes);
        expect_same(rv::encode_refusal(refusal), bytes);
        break;
      }
      case 5: {  // a ring message's header, checked as recv_prev checks it, for a sum and a gather
        const unet::MessageHeader header =
            rv::decode_message_header(bytes.first(std::min(bytes.size(), rv::kMessageHeaderSize)));
        rv::check_message_header(header, unet::MessageTag::sum_f64, 8 * 1024, "rank 1");
        if (header.size > 8 * 1024) __builtin_trap();
        break;
      }
      case 6: {  // all_gather's partial result of `world_size` ranks, at most 64 bytes each
        const std::vector<std::string> parts = rv::parse_gathered(bytes, world_size, 64);
        if (parts.size() != static_cast<std::size_t>(world_size)) __builtin_trap();
        std::vector<std::byte> again;
        for (const std::string& p : parts) rv::append_gathered(again, p);
        if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) __builtin_trap();
        break;
      }
      default: {  // a host name as detect_launch checks MASTER_ADDR
        rv::check_host_name(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                            "MASTER_ADDR");
        if (bytes.size() > rv::kMaxHostName) __builtin_trap();
        break;
      }
    }
  } catch (const unet::Error&) {
  }
  return 0;
}
