"""A produce load generator that costs almost nothing per message: one pre-encoded Produce request
(a message set of ``--batch`` 200-byte messages), sent over and over on one connection with up to
``--window`` requests in flight, responses checked for errors. It measures what the broker sustains
when the client is not the bottleneck; it is not a Kafka client.

    python -m bench.load_generator --port P --topic T --batch 50 --messages 2000000
prints ``RATE <messages/s>``."""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import time
from collections import deque

from kafkalog.protocol import ApiKey, decode_response, encode_request, lookup
from kafkalog.record import Codec, MessageSetBuilder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--codec", choices=["none", "snappy", "gzip"], default="none")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args(argv)
    builder = MessageSetBuilder(codec=Codec[args.codec.upper()])
    now = int(time.time() * 1000)
    for _ in range(args.batch):
        builder.append(b"z" * 200, None, now)
    api = lookup(ApiKey.PRODUCE, 2)
    body = {
        "acks": 1,
        "timeout_ms": 10_000,
        "topic_data": [{"topic": args.topic, "data": [{"partition": 0, "record_set": builder.build()}]}],
    }
    frame = encode_request(api, 1, "load-generator", body)
    requests = args.messages // args.batch
    sock = socket.create_connection(("127.0.0.1", args.port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    metadata = lookup(ApiKey.METADATA, 1)
    sock.sendall(encode_request(metadata, 0, "load-generator", {"topics": [{"name": args.topic}]}))  # creates it
    inbox = bytearray()

    def next_response() -> bytes:
        while True:
            if len(inbox) >= 4:
                size = struct.unpack_from(">i", inbox)[0]
                if len(inbox) >= 4 + size:
                    response = bytes(inbox[4 : 4 + size])
                    del inbox[: 4 + size]
                    return response
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            inbox.extend(chunk)

    def check(response: bytes) -> None:
        _, answer = decode_response(api, response)
        error = answer["responses"][0]["partition_responses"][0]["error_code"]
        if error:
            raise RuntimeError(f"produce failed with error code {error}")

    next_response()
    sock.sendall(frame)  # one first, untimed: the connection and the log are warm
    check(next_response())
    in_flight: deque[int] = deque()
    sent = 0
    start = time.perf_counter()
    while sent < requests or in_flight:
        while sent < requests and len(in_flight) < args.window:
            sock.sendall(frame)
            in_flight.append(sent)
            sent += 1
        check(next_response())
        in_flight.popleft()
    elapsed = time.perf_counter() - start
    sock.close()
    print(f"RATE {requests * args.batch / elapsed:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
