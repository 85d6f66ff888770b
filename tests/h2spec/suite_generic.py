"""h2spec's "generic" suite: what every HTTP/2 server must accept (RFC 9113 / RFC 7540 frames
used correctly, RFC 7541 representations). Each case sends a well-formed exchange and expects
the server to carry on: a response HEADERS, the DATA, or a PING answered afterwards.
"""

import h2conn as h
import hpack_wire as wire
from spec import Suite

SUITE = Suite("generic", "Generic tests for HTTP/2 server")
USER_AGENT = 58  # RFC 7541 Appendix A


def request(conn, stream=1, method="GET", end_stream=True):
    conn.write_headers(stream, conn.encode(conn.common_headers(method)), end_stream=end_stream)


# ---- 1. Starting HTTP/2

starting = SUITE.group("1", "Starting HTTP/2")


@starting.case(1, "Sends a client connection preface", "The server connection preface MUST be the first frame the server sends.")
def generic_1_1(conn):
    conn.send_preface()
    h.verify_frame_type(conn, h.SETTINGS)


# ---- 2. Streams and Multiplexing

streams = SUITE.group("2", "Streams and Multiplexing")


@streams.case(1, "Sends a PRIORITY frame on idle stream", "The endpoint MUST accept PRIORITY frame.")
def generic_2_1(conn):
    conn.handshake()
    conn.write_priority(1, depends_on=0, weight=255)
    h.verify_alive(conn)


@streams.case(2, "Sends a WINDOW_UPDATE frame on half-closed (remote) stream", "The endpoint MUST accept WINDOW_UPDATE frame.")
def generic_2_2(conn):
    conn.handshake()
    request(conn)
    conn.write_window_update(1, 1)
    h.wait_frame(conn, "DATA Frame (stream_id:1)", lambda f: f.type == h.DATA and f.stream_id == 1)


@streams.case(3, "Sends a PRIORITY frame on half-closed (remote) stream", "The endpoint MUST accept PRIORITY frame.")
def generic_2_3(conn):
    conn.handshake()
    request(conn)
    conn.write_priority(1, depends_on=0, weight=255)
    h.wait_frame(conn, "DATA Frame (stream_id:1)", lambda f: f.type == h.DATA and f.stream_id == 1)


@streams.case(4, "Sends a RST_STREAM frame on half-closed (remote) stream", "The endpoint MUST accept RST_STREAM frame.")
def generic_2_4(conn):
    conn.handshake()
    request(conn)
    conn.write_rst_stream(1, h.CODE["CANCEL"])
    h.verify_alive(conn)


@streams.case(5, "Sends a PRIORITY frame on closed stream", "The endpoint MUST accept PRIORITY frame.")
def generic_2_5(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)
    conn.write_priority(1, depends_on=0, weight=255)
    h.verify_alive(conn)


# ---- 3. Frame Definitions

frames = SUITE.group("3", "Frame Definitions")
data = frames.group("3.1", "DATA")


@data.case(1, "Sends a DATA frame", "The endpoint MUST accept DATA frame.")
def generic_3_1_1(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=True)
    h.verify_stream_close(conn, 1)


@data.case(2, "Sends multiple DATA frames", "The endpoint MUST accept multiple DATA frames.")
def generic_3_1_2(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=False)
    conn.write_data(1, b"test", end_stream=True)
    h.verify_stream_close(conn, 1)


@data.case(3, "Sends a DATA frame with padding", "The endpoint MUST accept DATA frame with padding.")
def generic_3_1_3(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=True, padding=8)
    h.verify_stream_close(conn, 1)


headers = frames.group("3.2", "HEADERS")


@headers.case(1, "Sends a HEADERS frame", "The endpoint MUST accept HEADERS frame.")
def generic_3_2_1(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)


@headers.case(2, "Sends a HEADERS frame with padding", "The endpoint MUST accept HEADERS frame with padding.")
def generic_3_2_2(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), padding=8)
    h.verify_stream_close(conn, 1)


@headers.case(3, "Sends a HEADERS frame with priority", "The endpoint MUST accept HEADERS frame with priority.")
def generic_3_2_3(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), priority=(0, 255, False))
    h.verify_stream_close(conn, 1)


priority = frames.group("3.3", "PRIORITY")


@priority.case(1, "Sends a PRIORITY frame with priority 1", "The endpoint MUST accept PRIORITY frame with priority 1.")
def generic_3_3_1(conn):
    conn.handshake()
    conn.write_priority(1, depends_on=0, weight=0)  # weight field 0 = priority 1 (§5.3.2)
    request(conn)
    h.verify_headers_frame(conn, 1)


@priority.case(2, "Sends a PRIORITY frame with priority 256", "The endpoint MUST accept PRIORITY frame with priority 256.")
def generic_3_3_2(conn):
    conn.handshake()
    conn.write_priority(1, depends_on=0, weight=255)
    request(conn)
    h.verify_headers_frame(conn, 1)


@priority.case(3, "Sends a PRIORITY frame with stream dependency", "The endpoint MUST accept PRIORITY frame with stream dependency.")
def generic_3_3_3(conn):
    conn.handshake()
    conn.write_priority(3, depends_on=1, weight=0)
    request(conn)
    h.verify_headers_frame(conn, 1)


@priority.case(4, "Sends a PRIORITY frame with exclusive", "The endpoint MUST accept PRIORITY frame with exclusive.")
def generic_3_3_4(conn):
    conn.handshake()
    conn.write_priority(1, depends_on=0, weight=0, exclusive=True)
    request(conn)
    h.verify_headers_frame(conn, 1)


@priority.case(
    5,
    "Sends a PRIORITY frame for an idle stream, then send a HEADER frame for a lower stream ID",
    "The endpoint MUST respond the HEADER frame.",
)
def generic_3_3_5(conn):
    # PRIORITY does not open a stream (RFC 9113 §5.1.1: only HEADERS/PUSH_PROMISE close lower idle ones).
    conn.handshake()
    conn.write_priority(3, depends_on=0, weight=255)
    request(conn, stream=1)
    h.verify_headers_frame(conn, 1)


rst_stream = frames.group("3.4", "RST_STREAM")


@rst_stream.case(1, "Sends a RST_STREAM frame", "The endpoint MUST accept RST_STREAM frame.")
def generic_3_4_1(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_rst_stream(1, h.CODE["CANCEL"])
    h.verify_alive(conn)


settings = frames.group("3.5", "SETTINGS")


@settings.case(1, "Sends a SETTINGS frame", "The endpoint MUST accept SETTINGS frame.")
def generic_3_5_1(conn):
    conn.handshake()
    conn.write_settings({h.ENABLE_PUSH: 0})
    h.verify_settings_ack(conn)


ping = frames.group("3.7", "PING")


@ping.case(1, "Sends a PING frame", "The endpoint MUST accept PING frame.")
def generic_3_7_1(conn):
    conn.handshake()
    conn.write_ping(b"h2spec\x01\x02")
    h.verify_ping_ack(conn, b"h2spec\x01\x02")


goaway = frames.group("3.8", "GOAWAY")


@goaway.case(1, "Sends a GOAWAY frame", "The endpoint MUST accept GOAWAY frame.")
def generic_3_8_1(conn):
    conn.handshake()
    conn.write_goaway(0, h.CODE["NO_ERROR"])
    h.verify_alive(conn)


window_update = frames.group("3.9", "WINDOW_UPDATE")


@window_update.case(1, "Sends a WINDOW_UPDATE frame with stream ID 0", "The endpoint MUST accept WINDOW_UPDATE frame.")
def generic_3_9_1(conn):
    conn.handshake()
    conn.write_window_update(0, 1)
    h.verify_alive(conn)


@window_update.case(2, "Sends a WINDOW_UPDATE frame with arbitrary stream ID", "The endpoint MUST accept WINDOW_UPDATE frame.")
def generic_3_9_2(conn):
    conn.handshake()
    request(conn)
    conn.write_window_update(1, 1)
    h.verify_stream_close(conn, 1)


continuation = frames.group("3.10", "CONTINUATION")


@continuation.case(1, "Sends a CONTINUATION frame", "The endpoint MUST accept CONTINUATION frame.")
def generic_3_10_1(conn):
    conn.handshake()
    block = conn.encode(conn.common_headers())
    conn.write_headers(1, block[:5], end_stream=True, end_headers=False)
    conn.write_continuation(1, block[5:], end_headers=True)
    h.verify_stream_close(conn, 1)


@continuation.case(2, "Sends multiple CONTINUATION frames", "The endpoint MUST accept multiple CONTINUATION frames.")
def generic_3_10_2(conn):
    conn.handshake()
    block = conn.encode(conn.common_headers())
    conn.write_headers(1, block[:5], end_stream=True, end_headers=False)
    conn.write_continuation(1, block[5:10], end_headers=False)
    conn.write_continuation(1, block[10:], end_headers=True)
    h.verify_stream_close(conn, 1)


# ---- 4. HTTP Message Exchanges

exchanges = SUITE.group("4", "HTTP Message Exchanges")


@exchanges.case(1, "Sends a GET request", "The endpoint MUST respond to the request.")
def generic_4_1(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)


@exchanges.case(2, "Sends a HEAD request", "The endpoint MUST respond to the request.")
def generic_4_2(conn):
    conn.handshake()
    request(conn, method="HEAD")
    h.verify_stream_close(conn, 1)


@exchanges.case(3, "Sends a POST request", "The endpoint MUST respond to the request.")
def generic_4_3(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=True)
    h.verify_stream_close(conn, 1)


@exchanges.case(4, "Sends a POST request with trailers", "The endpoint MUST respond to the request.")
def generic_4_4(conn):
    conn.handshake()
    fields = conn.common_headers("POST") + [("trailer", "x-test")]
    conn.write_headers(1, conn.encode(fields), end_stream=False)
    conn.write_data(1, b"test", end_stream=False)
    conn.write_headers(1, conn.encode([("x-test", "ok")]), end_stream=True)
    h.verify_stream_close(conn, 1)


# ---- 5. HPACK: every representation of RFC 7541 §6, each in a request the server must answer

hpack_group = SUITE.group("5", "HPACK")


def hpack_case(number, description, field):
    def run(conn):
        conn.handshake()
        block = wire.request_block(conn.config) + field
        conn.write_headers(1, block)
        h.verify_headers_frame(conn, 1)

    run.__name__ = "generic_5_%d" % number
    hpack_group.case(number, description, "The endpoint MUST accept %s." % description[len("Sends a ") :])(run)
    return run


REPRESENTATIONS = [
    ("Sends a indexed header field representation", wire.indexed(USER_AGENT)),  # user-agent, empty value
    ("Sends a literal header field with indexing - indexed name", wire.literal_indexed_name(USER_AGENT, "h2spec", "incremental")),
    (
        "Sends a literal header field with indexing - indexed name (with Huffman coding)",
        wire.literal_indexed_name(USER_AGENT, "h2spec", "incremental", huffman=True),
    ),
    ("Sends a literal header field with indexing - new name", wire.literal_new_name("x-test", "h2spec", "incremental")),
    (
        "Sends a literal header field with indexing - new name (with Huffman coding)",
        wire.literal_new_name("x-test", "h2spec", "incremental", huffman=True),
    ),
    ("Sends a literal header field without indexing - indexed name", wire.literal_indexed_name(USER_AGENT, "h2spec", "without")),
    (
        "Sends a literal header field without indexing - indexed name (with Huffman coding)",
        wire.literal_indexed_name(USER_AGENT, "h2spec", "without", huffman=True),
    ),
    ("Sends a literal header field without indexing - new name", wire.literal_new_name("x-test", "h2spec", "without")),
    (
        "Sends a literal header field without indexing - new name (huffman encoded)",
        wire.literal_new_name("x-test", "h2spec", "without", huffman=True),
    ),
    ("Sends a literal header field never indexed - indexed name", wire.literal_indexed_name(USER_AGENT, "h2spec", "never")),
    (
        "Sends a literal header field never indexed - indexed name (huffman encoded)",
        wire.literal_indexed_name(USER_AGENT, "h2spec", "never", huffman=True),
    ),
    ("Sends a literal header field never indexed - new name", wire.literal_new_name("x-test", "h2spec", "never")),
    (
        "Sends a literal header field never indexed - new name (huffman encoded)",
        wire.literal_new_name("x-test", "h2spec", "never", huffman=True),
    ),
]


def _register_representations():
    for number, (description, field) in enumerate(REPRESENTATIONS, start=1):
        globals()["generic_5_%d" % number] = hpack_case(number, description, field)


_register_representations()


@hpack_group.case(14, "Sends a dynamic table size update", "The endpoint MUST accept dynamic table size update")
def generic_5_14(conn):
    conn.handshake()
    limit = conn.server_settings.get(h.HEADER_TABLE_SIZE, 4096)  # the most the server allows
    conn.write_headers(1, wire.table_size_update(limit) + wire.request_block(conn.config))
    h.verify_headers_frame(conn, 1)


@hpack_group.case(15, "Sends multiple dynamic table size update", "The endpoint MUST accept multiple dynamic table size update")
def generic_5_15(conn):
    # RFC 7541 §4.2: a smaller size then the final one, both at the start of the block.
    conn.handshake()
    limit = conn.server_settings.get(h.HEADER_TABLE_SIZE, 4096)
    block = wire.table_size_update(0) + wire.table_size_update(limit) + wire.request_block(conn.config)
    conn.write_headers(1, block)
    h.verify_headers_frame(conn, 1)
