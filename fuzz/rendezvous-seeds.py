#!/usr/bin/env python3
"""Seeds for fuzz_rendezvous (run by make-seeds.sh): one file per message kind, laid out as
engine/unet/distributed/rendezvous_protocol.cpp writes them (little-endian fields, 2-byte text lengths), each after the
fuzzer's selector byte: decoder in the low 3 bits, world size - 2 above them."""
import pathlib, struct, sys

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
MAGIC, PROTOCOL = 0x56524E55, 2
HELLO, PEER_TABLE, RING_HELLO, REFUSAL = 1, 2, 3, 4


def text(s):
    return struct.pack("<H", len(s)) + s.encode()


def frame(kind, body):
    return struct.pack("<IIII", MAGIC, PROTOCOL, kind, len(body))


def seed(name, decoder, world, payload):
    (out / name).write_bytes(bytes([decoder | ((world - 2) << 3)]) + payload)


proof = bytes(range(32))
long_name = "b" * 249 + ".org"
hello = proof + struct.pack("<iii", 1, 2, 40000) + text("node-1")
hello_long = proof + struct.pack("<iii", 3, 4, 65535) + text(long_name)
table = struct.pack("<I", 2) + struct.pack("<i", 41000) + text("10.0.0.1") + text("node-0") + \
        struct.pack("<i", 41001) + text("10.0.0.2") + text(long_name)
ring = proof + struct.pack("<i", 1)
refusal = struct.pack("<I", 1) + text("rank 0 refused this process: another UNET_JOB_TOKEN")
seed("frame-hello", 0, 2, frame(HELLO, hello))
seed("frame-huge", 0, 2, struct.pack("<IIII", MAGIC, PROTOCOL, HELLO, 3 << 30))
seed("hello", 1, 2, hello)
seed("hello-253", 1, 4, hello_long)
seed("peer-table", 2, 2, table)
seed("ring-hello", 3, 2, ring)
seed("refusal", 4, 2, refusal)
seed("ring-header", 5, 2, struct.pack("<IIQ", 0x554E4554, 3, 8))
gathered = b"".join(struct.pack("<Q", len(p)) + p for p in (b"rank0", b"", b"x" * 64))
seed("gathered", 6, 3, gathered)
seed("master-addr", 7, 2, long_name.encode())
