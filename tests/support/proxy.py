"""A TCP proxy on loopback that a test can cut and restore: the network between a client and a
server failing (connections reset, new ones refused) without either process knowing."""

from __future__ import annotations

import contextlib
import socket
import threading


def _loopback_listener() -> socket.socket:
    """A listening socket on a free loopback port."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``. ``cut()`` closes every connection and refuses new
    ones (they are accepted and closed at once); ``restore()`` forwards again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = _loopback_listener()
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._open = True
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                refuse = not self._open or self._closed
            if refuse:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def cut(self) -> None:
        with self._lock:
            self._open = False
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()
        self._thread.join(5)


class AckDroppingProxy:
    """A Kafka-protocol proxy that loses acknowledgements: it forwards requests and responses frame
    by frame, but the response to each of the first ``drops`` Produce requests is thrown away and
    the client's connection closed, as when a network fails after the broker appended the batch.
    The client retries the batch; ``dropped`` counts the lost acknowledgements. Point a broker's
    advertised address at ``port`` so that clients reach it only through here; ``target_port``
    may be set after the broker started."""

    PRODUCE = 0

    def __init__(self, drops: int) -> None:
        self.drops_left = drops
        self.dropped = 0
        self.target_port = 0
        self._listener = _loopback_listener()
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            produce_ids: set[int] = set()
            threading.Thread(target=self._requests, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, produce_ids), daemon=True).start()

    @staticmethod
    def _frame(source: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = source.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        size = int.from_bytes(head, "big")
        body = bytearray()
        while len(body) < size:
            chunk = source.recv(min(65536, size - len(body)))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    def _requests(self, client: socket.socket, upstream: socket.socket, produce_ids: set[int]) -> None:
        try:
            while (frame := self._frame(client)) is not None:
                if int.from_bytes(frame[4:6], "big") == self.PRODUCE:
                    produce_ids.add(int.from_bytes(frame[8:12], "big"))
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            _close_both(client, upstream)

    def _responses(self, upstream: socket.socket, client: socket.socket, produce_ids: set[int]) -> None:
        try:
            while (frame := self._frame(upstream)) is not None:
                correlation_id = int.from_bytes(frame[4:8], "big")
                with self._lock:
                    drop = correlation_id in produce_ids and self.drops_left > 0
                    if drop:
                        self.drops_left -= 1
                        self.dropped += 1
                if drop:
                    break  # the broker appended it; the client never hears so
                client.sendall(frame)
        except OSError:
            pass
        finally:
            _close_both(client, upstream)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self._thread.join(5)


def _close_both(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()
