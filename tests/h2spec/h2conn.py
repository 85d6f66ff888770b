"""One client connection of the conformance runner: a raw socket (cleartext with prior
knowledge, or TLS with ALPN h2), frames out (well-formed ones built with hyperframe, broken ones
as raw bytes), frames in as events, and the pass criteria the cases share.

It owns the wire and the verdicts; the cases (suite_*.py) own what is sent. Every wait is
bounded by the per-case timeout. tests/fixtures/h2_flood.py connects and builds its frames with
it too, so the two speak HTTP/2 from one frame codec.
"""

import socket
import ssl
import struct
import time

import hpack
from hyperframe.frame import Frame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# RFC 9113 §7.
ERROR_CODES = {
    0x0: "NO_ERROR",
    0x1: "PROTOCOL_ERROR",
    0x2: "INTERNAL_ERROR",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "SETTINGS_TIMEOUT",
    0x5: "STREAM_CLOSED",
    0x6: "FRAME_SIZE_ERROR",
    0x7: "REFUSED_STREAM",
    0x8: "CANCEL",
    0x9: "COMPRESSION_ERROR",
    0xA: "CONNECT_ERROR",
    0xB: "ENHANCE_YOUR_CALM",
    0xC: "INADEQUATE_SECURITY",
    0xD: "HTTP_1_1_REQUIRED",
}
CODE = {name: code for code, name in ERROR_CODES.items()}

# Frame types (RFC 9113 §6) and their names as h2spec prints them.
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
TYPE_NAMES = [
    "DATA",
    "HEADERS",
    "PRIORITY",
    "RST_STREAM",
    "SETTINGS",
    "PUSH_PROMISE",
    "PING",
    "GOAWAY",
    "WINDOW_UPDATE",
    "CONTINUATION",
]

# SETTINGS identifiers (RFC 9113 §6.5.2).
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = range(1, 7)

DEFAULT_WINDOW = 65535

END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20


def code_name(code):
    return ERROR_CODES.get(code, "UNKNOWN(0x%x)" % code)


def raw_frame(kind, flags, stream, payload, length=None):
    """A frame as bytes, whatever it breaks: `length` overrides the header's length field."""
    size = len(payload) if length is None else length
    return struct.pack(">I", size)[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


# The frames below, but for a SETTINGS with parameters, are built by hand rather than with
# hyperframe: the cases need the frames hyperframe refuses to build (stream 0 for DATA/HEADERS,
# bad padding, ...). Bytes only, no socket: `Conn` sends them, tests/fixtures/h2_flood.py queues
# them in bursts.


def settings_frame(settings, ack=False):
    if ack:
        return raw_frame(SETTINGS, ACK, 0, b"")
    return SettingsFrame(0, settings=settings).serialize()


def headers_frame(stream, block, end_stream=True, end_headers=True, padding=None, priority=None):
    flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
    payload = block
    if priority is not None:
        depends_on, weight, exclusive = priority
        flags |= PRIORITY_FLAG
        payload = struct.pack(">IB", depends_on | (0x80000000 if exclusive else 0), weight) + payload
    if padding is not None:
        flags |= PADDED
        payload = bytes([padding]) + payload + b"\x00" * padding
    return raw_frame(HEADERS, flags, stream, payload)


def continuation_frame(stream, block, end_headers=True):
    return raw_frame(CONTINUATION, END_HEADERS if end_headers else 0, stream, block)


def data_frame(stream, data, end_stream=True, padding=None):
    flags = END_STREAM if end_stream else 0
    payload = data
    if padding is not None:
        flags |= PADDED
        payload = bytes([padding]) + data + b"\x00" * padding
    return raw_frame(DATA, flags, stream, payload)


def priority_frame(stream, depends_on=0, weight=15, exclusive=False):
    payload = struct.pack(">IB", depends_on | (0x80000000 if exclusive else 0), weight)
    return raw_frame(PRIORITY, 0, stream, payload)


def rst_stream_frame(stream, code):
    return raw_frame(RST_STREAM, 0, stream, struct.pack(">I", code))


def window_update_frame(stream, increment):
    return raw_frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", increment))


def ping_frame(data=b"h2spec\x00\x00", ack=False):
    return raw_frame(PING, ACK if ack else 0, 0, data)


def goaway_frame(last_stream, code, stream=0):
    return raw_frame(GOAWAY, 0, stream, struct.pack(">II", last_stream, code))


def decode_frame(header, body):
    """hyperframe's parse of one frame (its 9-octet header, its payload); raises on a frame
    hyperframe rejects."""
    parsed, _ = Frame.parse_frame_header(memoryview(header))
    parsed.parse_body(memoryview(body))
    return parsed


class Event:
    """What the server did next: a frame, a close, or nothing within the timeout."""

    def __init__(self, kind, frame=None, detail=""):
        self.kind = kind  # "frame", "closed", "timeout", "error"
        self.frame = frame
        self.detail = detail

    def __str__(self):
        if self.kind == "closed":
            return "Connection closed" + (" (%s)" % self.detail if self.detail else "")
        if self.kind == "timeout":
            return "Timeout"
        if self.kind == "error":
            return "Error: " + self.detail
        return describe(self.frame)


def describe(frame):
    """A received frame the way h2spec prints one."""
    kind = frame.type
    name = TYPE_NAMES[kind] if kind < len(TYPE_NAMES) else "UNKNOWN(0x%x)" % kind
    head = "%s Frame (length:%d, flags:0x%02x, stream_id:%d" % (name, frame.body_len, frame.flag_bits, frame.stream_id)
    if kind == GOAWAY:
        return head + ", error_code:%s, last_stream_id:%d)" % (code_name(frame.error_code), frame.last_stream_id)
    if kind == RST_STREAM:
        return head + ", error_code:%s)" % code_name(frame.error_code)
    if kind == WINDOW_UPDATE:
        return head + ", window_size_increment:%d)" % frame.window_increment
    return head + ")"


def describe_bytes(data):
    """What the client sends, frame by frame, for the trace (the preface and raw text as such)."""
    lines = []
    if data[:1].isalpha() and not data.startswith(PREFACE):
        return ["raw %r" % data[:60]]  # text, not frames (http2/3.5/2)
    if data.startswith(PREFACE):
        lines.append("connection preface")
        data = data[len(PREFACE) :]
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        kind, flags = data[3], data[4]
        stream = int.from_bytes(data[5:9], "big")
        name = TYPE_NAMES[kind] if kind < len(TYPE_NAMES) else "UNKNOWN(0x%x)" % kind
        payload = data[9 : 9 + length]
        extra = ""
        if kind in (RST_STREAM, GOAWAY) and len(payload) >= 4:
            extra = ", error_code:%s" % code_name(int.from_bytes(payload[-4:] if kind == RST_STREAM else payload[4:8], "big"))
        if kind == WINDOW_UPDATE and len(payload) == 4:
            extra = ", window_size_increment:%d" % int.from_bytes(payload, "big")
        if kind == SETTINGS and len(payload) % 6 == 0:
            pairs = [struct.unpack(">HI", payload[i : i + 6]) for i in range(0, len(payload), 6)]
            extra = "".join(", 0x%x=%d" % pair for pair in pairs)
        lines.append("%s Frame (length:%d, flags:0x%02x, stream_id:%d%s)" % (name, length, flags, stream, extra))
        data = data[9 + length :]
    if data:
        lines.append("raw %r" % data[:40])
    return lines


class Received:
    """A server frame: hyperframe's parse plus the raw header fields the verdicts need."""

    def __init__(self, kind, flag_bits, stream_id, body, parsed):
        self.type = kind
        self.flag_bits = flag_bits
        self.stream_id = stream_id
        self.body = body
        self.body_len = len(body)
        self.parsed = parsed
        self.error_code = getattr(parsed, "error_code", None)
        self.last_stream_id = getattr(parsed, "last_stream_id", None)
        self.window_increment = getattr(parsed, "window_increment", None)

    def has(self, flag):
        return bool(self.flag_bits & flag)


class Failure(Exception):
    """A case's verdict when the server did not do what the RFC requires."""

    def __init__(self, expected, actual):
        super().__init__(actual)
        self.expected = expected if isinstance(expected, list) else [expected]
        self.actual = str(actual)


class Skipped(Exception):
    """The server's configuration makes the case meaningless (as h2spec skips it)."""


class Config:
    def __init__(self, host, port, tls, insecure, timeout, path, max_header_length, strict):
        self.host = host
        self.port = port
        self.tls = tls
        self.insecure = insecure
        self.timeout = timeout
        self.path = path
        self.max_header_length = max_header_length
        self.strict = strict

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    @property
    def authority(self):
        return "%s:%d" % (self.host, self.port)


class Conn:
    """A client connection. `handshake()` does the prefaces and the SETTINGS exchange."""

    def __init__(self, config):
        self.config = config
        self.encoder = hpack.Encoder()
        self.buffer = b""
        self.closed = False
        self.close_detail = ""
        self.server_settings = {}
        self.receive_windows = {0: DEFAULT_WINDOW}
        self.trace = []  # what was sent and received, for the failure report (-v)
        self.sock = socket.create_connection((config.host, config.port), timeout=config.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if config.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if config.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            self.sock = context.wrap_socket(self.sock, server_hostname=config.host)
            if self.sock.selected_alpn_protocol() != "h2":
                raise Failure("ALPN h2", "ALPN %r" % self.sock.selected_alpn_protocol())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- sending

    def send(self, data):
        """Sends bytes; a server that already closed is not an error here (the verdict reads it)."""
        self.trace.extend("[send] " + line for line in describe_bytes(data))
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError) as error:
            self.closed = True
            self.close_detail = str(error)

    def send_preface(self, settings=None):
        self.send(PREFACE)
        self.write_settings({INITIAL_WINDOW_SIZE: DEFAULT_WINDOW} if settings is None else settings)

    def write_settings(self, settings, ack=False):
        self.send(settings_frame(settings, ack))

    def write_headers(self, stream, block, end_stream=True, end_headers=True, padding=None, priority=None):
        self.send(headers_frame(stream, block, end_stream, end_headers, padding, priority))

    def write_continuation(self, stream, block, end_headers=True):
        self.send(continuation_frame(stream, block, end_headers))

    def write_data(self, stream, data, end_stream=True, padding=None):
        self.send(data_frame(stream, data, end_stream, padding))

    def write_priority(self, stream, depends_on=0, weight=15, exclusive=False):
        self.send(priority_frame(stream, depends_on, weight, exclusive))

    def write_rst_stream(self, stream, code):
        self.send(rst_stream_frame(stream, code))

    def write_window_update(self, stream, increment):
        self.send(window_update_frame(stream, increment))

    def write_ping(self, data=b"h2spec\x00\x00", ack=False):
        self.send(ping_frame(data, ack))

    def write_goaway(self, last_stream, code, stream=0):
        self.send(goaway_frame(last_stream, code, stream))

    def encode(self, fields, huffman=True):
        return self.encoder.encode(fields, huffman=huffman)

    # ---- requests

    def common_headers(self, method="GET"):
        return [
            (":method", method),
            (":scheme", self.config.scheme),
            (":path", self.config.path),
            (":authority", self.config.authority),
        ]

    def dummy_headers(self, count):
        return [("x-dummy%d" % i, "x" * self.config.max_header_length) for i in range(count)]

    @property
    def max_frame_size(self):
        return self.server_settings.get(MAX_FRAME_SIZE, 16384)

    # ---- receiving

    def _read_exactly(self, count, deadline):
        while len(self.buffer) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except ssl.SSLWantReadError:
                continue
            except (ConnectionResetError, BrokenPipeError, ssl.SSLError, OSError) as error:
                self.closed = True
                self.close_detail = str(error)
                return b""
            if not chunk:
                self.closed = True
                return b""
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def next_event(self, timeout=None):
        """The next thing the server does, within `timeout` (the case's timeout by default)."""
        event = self._next_event(timeout)
        self.trace.append("[recv] %s" % event)
        return event

    def _next_event(self, timeout):
        if self.closed and not self.buffer:
            return Event("closed", detail=self.close_detail)
        deadline = time.monotonic() + (self.config.timeout if timeout is None else timeout)
        header = self._read_exactly(9, deadline)
        if header is None:
            return Event("timeout")
        if len(header) < 9:
            if self.buffer:  # part of a header, then the close: io.ReadFull's "unexpected EOF"
                self.buffer = b""
                return Event("error", detail="unexpected EOF (the connection closed in the middle of a frame header)")
            return Event("closed", detail=self.close_detail)
        length = int.from_bytes(header[:3], "big")
        body = self._read_exactly(length, deadline) if length else b""
        if body is None:
            return Event("timeout")
        if len(body) < length:
            self.buffer = b""
            # h2spec's framer reads the payload with io.ReadFull: "unexpected EOF", an error
            # event, not a close (bytes that are no frames, an HTTP/1 answer, end up here).
            return Event("error", detail="unexpected EOF (the connection closed in the middle of a frame)")
        kind, flags = header[3], header[4]
        stream = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
        try:
            parsed = decode_frame(header, body)
        except Exception:  # a frame hyperframe rejects is still a frame: the verdict judges it
            parsed = None
        frame = Received(kind, flags, stream, body, parsed)
        if kind == SETTINGS and not flags & ACK and parsed is not None:
            self.server_settings.update(parsed.settings)
        if kind == DATA:
            self._replenish(stream, length)
        return Event("frame", frame)

    def _replenish(self, stream, length):
        """Keeps the server's send windows open, as h2spec does: when what we received uses up
        a window, a WINDOW_UPDATE gives it back (the flow-control cases set smaller windows
        with SETTINGS and never reach this)."""
        for key in (stream, 0):
            window = self.receive_windows.get(key, DEFAULT_WINDOW) - length
            if window <= 0:
                self.write_window_update(key, DEFAULT_WINDOW - window)
                window = DEFAULT_WINDOW
            self.receive_windows[key] = window

    def handshake(self, settings=None):
        """Both prefaces: ours with `settings`, the server's SETTINGS, each side's ACK."""
        self.send_preface(settings)
        got_settings = got_ack = False
        while not (got_settings and got_ack):
            event = self.next_event()
            if event.kind != "frame":
                raise Failure("SETTINGS Frame (handshake)", event)
            frame = event.frame
            if frame.type == SETTINGS and not frame.has(ACK):
                got_settings = True
                self.write_settings({}, ack=True)
            elif frame.type == SETTINGS:
                got_ack = True
            elif frame.type == GOAWAY:
                raise Failure("SETTINGS Frame (handshake)", event)


# ---- verdicts (the pass criteria the cases share)

GOAWAY_EXPECT = "GOAWAY Frame (Error Code: %s)"
RST_EXPECT = "RST_STREAM Frame (Error Code: %s)"


def expect_error(conn, expected, decisive):
    """h2spec's loop for the error verdicts: reads until a frame `decisive` accepts or the
    connection closes (both pass); a frame that does not match is not final (a server may answer
    RST_STREAM NO_ERROR, or GOAWAY with another code, and then do the right thing or close); a
    timeout fails, reporting the last frame seen."""
    last = None
    while True:
        event = conn.next_event()
        if event.kind == "closed":
            return
        if event.kind == "timeout":
            raise Failure(expected, last if last is not None else event)
        if event.kind == "error":
            raise Failure(expected, event)
        last = event
        if decisive(event.frame):
            return


def verify_connection_error(conn, *codes):
    """A connection error: GOAWAY with one of `codes`, or the connection closed."""
    expected = [GOAWAY_EXPECT % code_name(code) for code in codes] + ["Connection closed"]
    expect_error(conn, expected, lambda f: f.type == GOAWAY and f.error_code in codes)


def verify_stream_error(conn, *codes):
    """A stream error: RST_STREAM (or, stronger, GOAWAY) with one of `codes`, or a close."""
    expected = []
    for code in codes:
        expected += [GOAWAY_EXPECT % code_name(code), RST_EXPECT % code_name(code)]
    expected.append("Connection closed")
    expect_error(conn, expected, lambda f: f.type in (GOAWAY, RST_STREAM) and f.error_code in codes)


def verify_connection_close(conn):
    """The TCP connection closed (a GOAWAY before it is allowed)."""
    expect_error(conn, ["Connection closed"], lambda f: False)


def verify_goaway(conn, *codes):
    """A GOAWAY frame with one of `codes` before the close (h2spec's strict 5.4.1/2)."""
    expected = [GOAWAY_EXPECT % code_name(code) for code in codes]
    wait_frame(conn, expected, lambda f: f.type == GOAWAY)


def wait_frame(conn, expected, accept):
    """Reads until a frame `accept` likes; a close or timeout first fails the case."""
    last = None
    while True:
        event = conn.next_event()
        if event.kind != "frame":
            raise Failure(expected, last if (last is not None and event.kind == "timeout") else event)
        last = event
        if accept(event.frame):
            return event.frame


def verify_headers_frame(conn, stream):
    """The response's HEADERS on `stream`: the server accepted the request."""
    expected = "HEADERS Frame (stream_id:%d)" % stream
    wait_frame(conn, expected, lambda f: f.type == HEADERS and f.stream_id == stream)


def verify_stream_close(conn, stream=1):
    """The server ended `stream`: a HEADERS or DATA frame with END_STREAM."""
    expected = ["DATA Frame (flags:0x01, stream_id:%d)" % stream, "HEADERS Frame (flags:0x01, stream_id:%d)" % stream]
    wait_frame(conn, expected, lambda f: f.type in (DATA, HEADERS) and f.stream_id == stream and f.has(END_STREAM))


def verify_ping_ack(conn, data=b"h2spec\x00\x00"):
    """Sends nothing: waits for the PING ACK carrying `data` (the connection is still alive)."""
    expected = "PING Frame (length:8, flags:0x01, stream_id:0, opaque_data:%s)" % data.decode("latin-1")
    frame = wait_frame(conn, expected, lambda f: f.type == PING and f.has(ACK))
    if frame.body != data:
        raise Failure(expected, describe(frame) + " with opaque data %r" % frame.body)


def verify_alive(conn):
    """The server ignored what came before: a PING is still answered."""
    conn.write_ping()
    verify_ping_ack(conn)


def verify_settings_ack(conn):
    wait_frame(conn, "SETTINGS Frame (flags:0x01, stream_id:0)", lambda f: f.type == SETTINGS and f.has(ACK))


def verify_frame_type(conn, kind):
    expected = "%s Frame" % TYPE_NAMES[kind]
    wait_frame(conn, expected, lambda f: f.type == kind)


def verify_data_length(conn, stream, length):
    """The next DATA frame on `stream` carries exactly `length` octets (flow control held it)."""
    expected = "DATA Frame (length:%d, flags:0x00, stream_id:%d)" % (length, stream)
    frame = wait_frame(conn, expected, lambda f: f.type == DATA and f.stream_id == stream)
    if frame.body_len != length:
        raise Failure(expected, describe(frame))


def response_body_length(config):
    """How long the body at the target path is (h2spec asks once before the flow-control cases)."""
    conn = Conn(config)
    try:
        conn.handshake()
        conn.write_headers(1, conn.encode(conn.common_headers()))
        total = 0
        while True:
            event = conn.next_event()
            if event.kind != "frame":
                raise Failure("a response to GET %s" % config.path, event)
            frame = event.frame
            if frame.type == DATA and frame.stream_id == 1:
                total += len(frame.parsed.data) if frame.parsed is not None else frame.body_len
            if frame.type in (DATA, HEADERS) and frame.stream_id == 1 and frame.has(END_STREAM):
                return total
            if frame.type in (GOAWAY, RST_STREAM):
                raise Failure("a response to GET %s" % config.path, event)
    finally:
        conn.close()
