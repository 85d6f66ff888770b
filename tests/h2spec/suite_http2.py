"""h2spec's "http2" suite: the MUSTs of RFC 7540 (now RFC 9113), section by section, each case
one exchange that breaks (or exercises) exactly one rule and the error the RFC requires for it.
"""

import struct

import h2conn as h
from h2conn import CODE, Skipped
from spec import Suite

SUITE = Suite("http2", "Hypertext Transfer Protocol Version 2 (HTTP/2)")

PROTOCOL_ERROR = CODE["PROTOCOL_ERROR"]
FLOW_CONTROL_ERROR = CODE["FLOW_CONTROL_ERROR"]
STREAM_CLOSED = CODE["STREAM_CLOSED"]
FRAME_SIZE_ERROR = CODE["FRAME_SIZE_ERROR"]
REFUSED_STREAM = CODE["REFUSED_STREAM"]
COMPRESSION_ERROR = CODE["COMPRESSION_ERROR"]

MAX_WINDOW = 2**31 - 1
CONN_ERROR = "The endpoint MUST treat this as a connection error of type %s."
STREAM_ERROR = "The endpoint MUST respond with a stream error of type %s."


def request(conn, stream=1, method="GET", end_stream=True, extra=()):
    conn.write_headers(stream, conn.encode(conn.common_headers(method) + list(extra)), end_stream=end_stream)


def settings_payload(*pairs):
    return b"".join(struct.pack(">HI", ident, value) for ident, value in pairs)


def body_at_least(conn, length):
    """h2spec skips the flow-control cases when the response body is too short to observe."""
    config = conn.config
    if not hasattr(config, "body_length"):
        config.body_length = h.response_body_length(config)
    if config.body_length < length:
        raise Skipped("the response body at %s is %d octets, shorter than %d" % (config.path, config.body_length, length))


# ---- 3. Starting HTTP/2

starting = SUITE.group("3", "Starting HTTP/2")
preface = starting.group("3.5", "HTTP/2 Connection Preface")


@preface.case(1, "Sends client connection preface", "The server connection preface MUST be the first frame the server sends.")
def http2_3_5_1(conn):
    conn.send_preface()
    event = conn.next_event()
    if event.kind != "frame" or event.frame.type != h.SETTINGS or event.frame.has(h.ACK):
        raise h.Failure("SETTINGS Frame", event)


@preface.case(2, "Sends invalid connection preface", CONN_ERROR % "PROTOCOL_ERROR")
def http2_3_5_2(conn):
    conn.send(b"INVALID CONNECTION PREFACE\r\n\r\n")
    h.verify_connection_error(conn, PROTOCOL_ERROR)


# ---- 4. HTTP Frames

frames = SUITE.group("4", "HTTP Frames")
frame_format = frames.group("4.1", "Frame Format")


@frame_format.case(1, "Sends a frame with unknown type", "The endpoint MUST ignore and discard any frame that has a type that is unknown.")
def http2_4_1_1(conn):
    conn.handshake()
    conn.send(h.raw_frame(0x16, 0x00, 0, b"dummy"))
    h.verify_alive(conn)


@frame_format.case(2, "Sends a frame with undefined flag", "The endpoint MUST ignore any flags that is undefined.")
def http2_4_1_2(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0x16, 0, b"h2spec\x00\x00"))  # 0x16: no ACK bit, the rest undefined
    h.verify_ping_ack(conn)


@frame_format.case(3, "Sends a frame with reserved field bit", "The endpoint MUST ignore the value of reserved field.")
def http2_4_1_3(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0x00, 0x80000000, b"h2spec\x00\x00"))  # R bit set on stream 0
    h.verify_ping_ack(conn)


frame_size = frames.group("4.2", "Frame Size")


@frame_size.case(1, "Sends a DATA frame with 2^14 octets in length", "The endpoint MUST be capable of receiving and minimally processing frames up to 2^14 octets in length.")
def http2_4_2_1(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"x" * 16384, end_stream=True)
    h.verify_headers_frame(conn, 1)


@frame_size.case(2, "Sends a large size DATA frame that exceeds the SETTINGS_MAX_FRAME_SIZE", STREAM_ERROR % "FRAME_SIZE_ERROR")
def http2_4_2_2(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"x" * (conn.max_frame_size + 1), end_stream=True)
    h.verify_stream_error(conn, FRAME_SIZE_ERROR)


@frame_size.case(3, "Sends a large size HEADERS frame that exceeds the SETTINGS_MAX_FRAME_SIZE", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_4_2_3(conn):
    conn.handshake()
    count = conn.max_frame_size // conn.config.max_header_length + 2
    block = conn.encoder.encode(conn.common_headers() + conn.dummy_headers(count), huffman=False)
    conn.write_headers(1, block)
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


compression = frames.group("4.3", "Header Compression and Decompression")


@compression.case(1, "Sends invalid header block fragment", CONN_ERROR % "COMPRESSION_ERROR")
def http2_4_3_1(conn):
    conn.handshake()
    # A literal with incremental indexing (§6.2.1 of RFC 7541) cut before its name.
    conn.send(h.raw_frame(h.HEADERS, h.END_STREAM | h.END_HEADERS, 1, b"\x40"))
    h.verify_connection_error(conn, COMPRESSION_ERROR)


@compression.case(2, "Sends a PRIORITY frame while sending the header blocks", CONN_ERROR % "PROTOCOL_ERROR")
def http2_4_3_2(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), end_stream=False, end_headers=False)
    conn.write_priority(1, depends_on=0, weight=255)
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@compression.case(3, "Sends a HEADERS frame to another stream while sending the header blocks", CONN_ERROR % "PROTOCOL_ERROR")
def http2_4_3_3(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), end_stream=False, end_headers=False)
    conn.write_headers(3, conn.encode(conn.common_headers()))
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


# ---- 5. Streams and Multiplexing

streams = SUITE.group("5", "Streams and Multiplexing")
states = streams.group("5.1", "Stream States")


@states.case(1, "idle: Sends a DATA frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_1(conn):
    conn.handshake()
    conn.write_data(1, b"test")
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@states.case(2, "idle: Sends a RST_STREAM frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_2(conn):
    conn.handshake()
    conn.write_rst_stream(1, CODE["CANCEL"])
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@states.case(3, "idle: Sends a WINDOW_UPDATE frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_3(conn):
    conn.handshake()
    conn.write_window_update(1, 100)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@states.case(4, "idle: Sends a CONTINUATION frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_4(conn):
    conn.handshake()
    conn.write_continuation(1, conn.encode(conn.common_headers()))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@states.case(5, "half closed (remote): Sends a DATA frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_5(conn):
    conn.handshake()
    request(conn)
    conn.write_data(1, b"test")
    h.verify_stream_error(conn, STREAM_CLOSED)


@states.case(6, "half closed (remote): Sends a HEADERS frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_6(conn):
    conn.handshake()
    request(conn)
    request(conn)
    h.verify_stream_error(conn, STREAM_CLOSED)


@states.case(7, "half closed (remote): Sends a CONTINUATION frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_7(conn):
    # A CONTINUATION after END_HEADERS is also a PROTOCOL_ERROR (§6.10): either code passes.
    conn.handshake()
    block = conn.encode(conn.common_headers())
    conn.write_headers(1, block)
    conn.write_continuation(1, block)
    h.verify_stream_error(conn, STREAM_CLOSED, PROTOCOL_ERROR)


@states.case(8, "closed: Sends a DATA frame after sending RST_STREAM frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_8(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_rst_stream(1, CODE["CANCEL"])
    conn.write_data(1, b"test")
    h.verify_stream_error(conn, STREAM_CLOSED)


@states.case(9, "closed: Sends a HEADERS frame after sending RST_STREAM frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_9(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_rst_stream(1, CODE["CANCEL"])
    request(conn)
    h.verify_stream_error(conn, STREAM_CLOSED)


@states.case(10, "closed: Sends a CONTINUATION frame after sending RST_STREAM frame", STREAM_ERROR % "STREAM_CLOSED")
def http2_5_1_10(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_rst_stream(1, CODE["CANCEL"])
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_stream_error(conn, STREAM_CLOSED, PROTOCOL_ERROR)


@states.case(11, "closed: Sends a DATA frame", CONN_ERROR % "STREAM_CLOSED")
def http2_5_1_11(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)
    conn.write_data(1, b"test")
    h.verify_connection_error(conn, STREAM_CLOSED)


@states.case(12, "closed: Sends a HEADERS frame", CONN_ERROR % "STREAM_CLOSED")
def http2_5_1_12(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)
    request(conn)
    h.verify_connection_error(conn, STREAM_CLOSED)


@states.case(13, "closed: Sends a CONTINUATION frame", CONN_ERROR % "STREAM_CLOSED")
def http2_5_1_13(conn):
    conn.handshake()
    request(conn)
    h.verify_stream_close(conn, 1)
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, STREAM_CLOSED, PROTOCOL_ERROR)


identifiers = states.group("5.1.1", "Stream Identifiers")


@identifiers.case(1, "Sends even-numbered stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_1_1(conn):
    conn.handshake()
    request(conn, stream=2)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@identifiers.case(2, "Sends stream identifier that is numerically smaller than previous", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_1_1_2(conn):
    conn.handshake()
    request(conn, stream=5)
    request(conn, stream=3)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


concurrency = states.group("5.1.2", "Stream Concurrency")


@concurrency.case(
    1,
    "Sends HEADERS frames that causes their advertised concurrent stream limit to be exceeded",
    "The endpoint MUST treat this as a stream error of type PROTOCOL_ERROR or REFUSED_STREAM.",
)
def http2_5_1_2_1(conn):
    conn.handshake()
    limit = conn.server_settings.get(h.MAX_CONCURRENT_STREAMS)
    if limit is None:
        raise Skipped("SETTINGS_MAX_CONCURRENT_STREAMS is unlimited")
    for index in range(limit + 1):
        request(conn, stream=1 + 2 * index, end_stream=False)
    h.verify_stream_error(conn, PROTOCOL_ERROR, REFUSED_STREAM)


priority = streams.group("5.3", "Stream Priority")
dependencies = priority.group("5.3.1", "Stream Dependencies")


@dependencies.case(1, "Sends HEADERS frame that depends on itself", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_5_3_1_1(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), priority=(1, 255, False))
    h.verify_stream_error(conn, PROTOCOL_ERROR)


@dependencies.case(2, "Sends PRIORITY frame that depend on itself", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_5_3_1_2(conn):
    conn.handshake()
    conn.write_priority(1, depends_on=1, weight=255)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


errors = streams.group("5.4", "Error Handling")
connection_errors = errors.group("5.4.1", "Connection Error Handling")


@connection_errors.case(1, "Sends an invalid PING frame for connection close", "The endpoint MUST close the TCP connection")
def http2_5_4_1_1(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0, 3, b"\x00" * 8))  # PING on a stream: a connection error (§6.7)
    h.verify_connection_close(conn)


@connection_errors.case(
    2,
    "Sends an invalid PING frame to receive GOAWAY frame",
    "An endpoint that encounters a connection error SHOULD first send a GOAWAY frame",
    strict=True,
)
def http2_5_4_1_2(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0, 3, b"\x00" * 8))
    h.verify_goaway(conn, PROTOCOL_ERROR)


extending = streams.group("5.5", "Extending HTTP/2")


@extending.case(1, "Sends an unknown extension frame", "The endpoint MUST ignore unknown or unsupported values in all extensible protocol elements.")
def http2_5_5_1(conn):
    conn.handshake()
    conn.send(h.raw_frame(0xFF, 0x00, 0, b"dummy"))
    h.verify_alive(conn)


@extending.case(2, "Sends an unknown extension frame in the middle of a header block", CONN_ERROR % "PROTOCOL_ERROR")
def http2_5_5_2(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), end_headers=False)
    conn.send(h.raw_frame(0xFF, 0x00, 0, b"dummy"))
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


# ---- 6. Frame Definitions

definitions = SUITE.group("6", "Frame Definitions")
data = definitions.group("6.1", "DATA")


@data.case(1, "Sends a DATA frame with 0x0 stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_1_1(conn):
    conn.handshake()
    conn.write_data(0, b"test")
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@data.case(2, "Sends a DATA frame on the stream that is not in \"open\" or \"half-closed (local)\" state", STREAM_ERROR % "STREAM_CLOSED")
def http2_6_1_2(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=True)
    conn.write_data(1, b"test")
    h.verify_stream_error(conn, STREAM_CLOSED)


@data.case(3, "Sends a DATA frame with invalid pad length", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_1_3(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False, extra=[("content-length", "4")])
    # Pad Length 6 in a payload of 5 octets: padding longer than the payload (§6.1).
    conn.send(h.raw_frame(h.DATA, h.PADDED | h.END_STREAM, 1, b"\x06test"))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


headers = definitions.group("6.2", "HEADERS")


@headers.case(1, "Sends a HEADERS frame without the END_HEADERS flag, and a PRIORITY frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_2_1(conn):
    conn.handshake()
    block = conn.encode(conn.common_headers() + conn.dummy_headers(1))
    conn.write_headers(1, block, end_headers=False)
    conn.write_priority(1, depends_on=0, weight=255)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@headers.case(2, "Sends a HEADERS frame to another stream while sending a HEADERS frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_2_2(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers() + conn.dummy_headers(1)), end_headers=False)
    conn.write_headers(3, conn.encode(conn.common_headers()))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@headers.case(3, "Sends a HEADERS frame with 0x0 stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_2_3(conn):
    conn.handshake()
    conn.write_headers(0, conn.encode(conn.common_headers()))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@headers.case(4, "Sends a HEADERS frame with invalid pad length", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_2_4(conn):
    conn.handshake()
    block = conn.encode(conn.common_headers())
    pad = len(block) + 1  # as long as the whole payload: no room for the block
    conn.send(h.raw_frame(h.HEADERS, h.PADDED | h.END_HEADERS | h.END_STREAM, 1, bytes([pad]) + block))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


priority_frame = definitions.group("6.3", "PRIORITY")


@priority_frame.case(1, "Sends a PRIORITY frame with 0x0 stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_3_1(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PRIORITY, 0, 0, b"\x00\x00\x00\x00\xff"))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@priority_frame.case(2, "Sends a PRIORITY frame with a length other than 5 octets", STREAM_ERROR % "FRAME_SIZE_ERROR")
def http2_6_3_2(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.send(h.raw_frame(h.PRIORITY, 0, 1, b"\x80\x00\x00\x00"))
    h.verify_stream_error(conn, FRAME_SIZE_ERROR)


rst_stream = definitions.group("6.4", "RST_STREAM")


@rst_stream.case(1, "Sends a RST_STREAM frame with 0x0 stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_4_1(conn):
    conn.handshake()
    conn.write_rst_stream(0, CODE["CANCEL"])
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@rst_stream.case(2, "Sends a RST_STREAM frame on a idle stream", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_4_2(conn):
    conn.handshake()
    conn.write_rst_stream(1, CODE["CANCEL"])
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@rst_stream.case(3, "Sends a RST_STREAM frame with a length other than 4 octets", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_6_4_3(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.send(h.raw_frame(h.RST_STREAM, 0, 1, b"\x00\x00\x08"))
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


settings = definitions.group("6.5", "SETTINGS")


@settings.case(1, "Sends a SETTINGS frame with ACK flag and payload", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_6_5_1(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, h.ACK, 0, settings_payload((h.ENABLE_PUSH, 0))))
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


@settings.case(2, "Sends a SETTINGS frame with a stream identifier other than 0x0", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_5_2(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, 0, 1, settings_payload((h.ENABLE_PUSH, 0))))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@settings.case(3, "Sends a SETTINGS frame with a length other than a multiple of 6 octets", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_6_5_3(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, 0, 0, settings_payload((h.ENABLE_PUSH, 0))[:3]))
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


defined = settings.group("6.5.2", "Defined SETTINGS Parameters")


def bad_setting(conn, ident, value, code):
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, 0, 0, settings_payload((ident, value))))
    h.verify_connection_error(conn, code)


@defined.case(1, "SETTINGS_ENABLE_PUSH (0x2): Sends the value other than 0 or 1", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_5_2_1(conn):
    bad_setting(conn, h.ENABLE_PUSH, 2, PROTOCOL_ERROR)


@defined.case(2, "SETTINGS_INITIAL_WINDOW_SIZE (0x4): Sends the value above the maximum flow control window size", CONN_ERROR % "FLOW_CONTROL_ERROR")
def http2_6_5_2_2(conn):
    bad_setting(conn, h.INITIAL_WINDOW_SIZE, 2**31, FLOW_CONTROL_ERROR)


@defined.case(3, "SETTINGS_MAX_FRAME_SIZE (0x5): Sends the value below the initial value", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_5_2_3(conn):
    bad_setting(conn, h.MAX_FRAME_SIZE, 16383, PROTOCOL_ERROR)


@defined.case(4, "SETTINGS_MAX_FRAME_SIZE (0x5): Sends the value above the maximum allowed frame size", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_5_2_4(conn):
    bad_setting(conn, h.MAX_FRAME_SIZE, 2**24, PROTOCOL_ERROR)


@defined.case(5, "Sends a SETTINGS frame with unknown identifier", "The endpoint MUST ignore that setting.")
def http2_6_5_2_5(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, 0, 0, settings_payload((0xFF, 1))))
    h.verify_settings_ack(conn)


synchronization = settings.group("6.5.3", "Settings Synchronization")


@synchronization.case(1, "Sends multiple values of SETTINGS_INITIAL_WINDOW_SIZE", "The endpoint MUST process the values in the settings in the order they apper.")
def http2_6_5_3_1(conn):
    body_at_least(conn, 1)
    conn.handshake()
    conn.send(h.raw_frame(h.SETTINGS, 0, 0, settings_payload((h.INITIAL_WINDOW_SIZE, 100), (h.INITIAL_WINDOW_SIZE, 1))))
    h.verify_settings_ack(conn)
    request(conn)
    h.verify_data_length(conn, 1, 1)


@synchronization.case(2, "Sends a SETTINGS frame without ACK flag", "The endpoint MUST immediately emit a SETTINGS frame with the ACK flag set.")
def http2_6_5_3_2(conn):
    conn.handshake()
    conn.write_settings({h.ENABLE_PUSH: 0})
    h.verify_settings_ack(conn)


ping = definitions.group("6.7", "PING")


@ping.case(1, "Sends a PING frame", "The endpoint MUST sends a PING frame with ACK, with an identical payload.")
def http2_6_7_1(conn):
    conn.handshake()
    conn.write_ping(b"h2spec\xff\xfe")
    h.verify_ping_ack(conn, b"h2spec\xff\xfe")


@ping.case(2, "Sends a PING frame with ACK", "The endpoint MUST NOT respond to PING frames with ACK.")
def http2_6_7_2(conn):
    conn.handshake()
    conn.write_ping(b"invalid!", ack=True)
    conn.write_ping(b"h2spec\x00\x00")
    h.verify_ping_ack(conn, b"h2spec\x00\x00")


@ping.case(3, "Sends a PING frame with a stream identifier field value other than 0x0", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_7_3(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0, 1, b"h2spec\x00\x00"))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@ping.case(4, "Sends a PING frame with a length field value other than 8", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_6_7_4(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.PING, 0, 0, b"h2spec"))
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


goaway = definitions.group("6.8", "GOAWAY")


@goaway.case(1, "Sends a GOAWAY frame with a stream identifier other than 0x0", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_8_1(conn):
    conn.handshake()
    conn.write_goaway(0, CODE["NO_ERROR"], stream=1)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


window_update = definitions.group("6.9", "WINDOW_UPDATE")


@window_update.case(1, "Sends a WINDOW_UPDATE frame with a flow control window increment of 0", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_9_1(conn):
    conn.handshake()
    conn.write_window_update(0, 0)
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@window_update.case(2, "Sends a WINDOW_UPDATE frame with a flow control window increment of 0 on a stream", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_6_9_2(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_window_update(1, 0)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


@window_update.case(3, "Sends a WINDOW_UPDATE frame with a length other than 4 octets", CONN_ERROR % "FRAME_SIZE_ERROR")
def http2_6_9_3(conn):
    conn.handshake()
    conn.send(h.raw_frame(h.WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"))
    h.verify_connection_error(conn, FRAME_SIZE_ERROR)


flow_window = window_update.group("6.9.1", "The Flow-Control Window")


@flow_window.case(1, "Sends SETTINGS frame to set the initial window size to 1 and sends HEADERS frame", "The endpoint MUST NOT send a flow-controlled frame with a length that exceeds the space available.")
def http2_6_9_1_1(conn):
    body_at_least(conn, 1)
    conn.handshake()
    conn.write_settings({h.INITIAL_WINDOW_SIZE: 1})
    h.verify_settings_ack(conn)
    request(conn)
    h.verify_data_length(conn, 1, 1)


@flow_window.case(2, "Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1", CONN_ERROR % "FLOW_CONTROL_ERROR")
def http2_6_9_1_2(conn):
    conn.handshake()
    conn.write_window_update(0, MAX_WINDOW)
    conn.write_window_update(0, MAX_WINDOW)
    h.verify_connection_error(conn, FLOW_CONTROL_ERROR)


@flow_window.case(3, "Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1 on a stream", STREAM_ERROR % "FLOW_CONTROL_ERROR")
def http2_6_9_1_3(conn):
    conn.handshake()
    request(conn, end_stream=False)
    conn.write_window_update(1, MAX_WINDOW)
    conn.write_window_update(1, MAX_WINDOW)
    h.verify_stream_error(conn, FLOW_CONTROL_ERROR)


initial_window = window_update.group("6.9.2", "Initial Flow-Control Window Size")


@initial_window.case(1, "Changes SETTINGS_INITIAL_WINDOW_SIZE after sending HEADERS frame", "The endpoint MUST adjust the size of all stream flow-control windows.")
def http2_6_9_2_1(conn):
    body_at_least(conn, 1)
    conn.handshake()
    conn.write_settings({h.INITIAL_WINDOW_SIZE: 0})
    h.verify_settings_ack(conn)
    request(conn)
    conn.write_settings({h.INITIAL_WINDOW_SIZE: 1})
    h.verify_settings_ack(conn)
    h.verify_data_length(conn, 1, 1)


@initial_window.case(2, "Sends a SETTINGS frame for window size to be negative", "The endpoint MUST track the negative flow-control window.")
def http2_6_9_2_2(conn):
    # Window 3: the server sends 3 octets; window 2 makes it -1; +2 allows exactly 1 more.
    body_at_least(conn, 5)
    conn.handshake()
    conn.write_settings({h.INITIAL_WINDOW_SIZE: 3})
    h.verify_settings_ack(conn)
    request(conn)
    h.wait_frame(conn, "DATA Frame (stream_id:1)", lambda f: f.type == h.DATA and f.stream_id == 1)
    conn.write_settings({h.INITIAL_WINDOW_SIZE: 2})
    h.verify_settings_ack(conn)
    conn.write_window_update(1, 2)
    h.verify_data_length(conn, 1, 1)


@initial_window.case(3, "Sends a SETTINGS_INITIAL_WINDOW_SIZE settings with an exceeded maximum window size value", CONN_ERROR % "FLOW_CONTROL_ERROR")
def http2_6_9_2_3(conn):
    bad_setting(conn, h.INITIAL_WINDOW_SIZE, 2**31, FLOW_CONTROL_ERROR)


continuation = definitions.group("6.10", "CONTINUATION")


@continuation.case(1, "Sends multiple CONTINUATION frames preceded by a HEADERS frame", "The endpoint must accept the frame.")
def http2_6_10_1(conn):
    conn.handshake()
    block = conn.encoder.encode(conn.common_headers() + conn.dummy_headers(2), huffman=False)
    third = len(block) // 3
    conn.write_headers(1, block[:third], end_headers=False)
    conn.write_continuation(1, block[third : 2 * third], end_headers=False)
    conn.write_continuation(1, block[2 * third :], end_headers=True)
    h.verify_headers_frame(conn, 1)


@continuation.case(2, "Sends a CONTINUATION frame followed by any frame other than CONTINUATION", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_10_2(conn):
    conn.handshake()
    block = conn.encoder.encode(conn.common_headers("POST") + conn.dummy_headers(1), huffman=False)
    half = len(block) // 2
    conn.write_headers(1, block[:half], end_stream=False, end_headers=False)
    conn.write_continuation(1, block[half:], end_headers=False)
    conn.write_data(1, b"test")
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@continuation.case(3, "Sends a CONTINUATION frame with 0x0 stream identifier", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_10_3(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers()), end_headers=False)
    conn.write_continuation(0, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@continuation.case(4, "Sends a CONTINUATION frame preceded by a HEADERS frame with END_HEADERS flag", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_10_4(conn):
    conn.handshake()
    request(conn)
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@continuation.case(5, "Sends a CONTINUATION frame preceded by a CONTINUATION frame with END_HEADERS flag", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_10_5(conn):
    conn.handshake()
    block = conn.encoder.encode(conn.common_headers() + conn.dummy_headers(1), huffman=False)
    half = len(block) // 2
    conn.write_headers(1, block[:half], end_headers=False)
    conn.write_continuation(1, block[half:], end_headers=True)
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


@continuation.case(6, "Sends a CONTINUATION frame preceded by a DATA frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_6_10_6(conn):
    conn.handshake()
    conn.write_headers(1, conn.encode(conn.common_headers("POST") + conn.dummy_headers(1)), end_stream=False)
    conn.write_data(1, b"test", end_stream=False)
    conn.write_continuation(1, conn.encode(conn.dummy_headers(1)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)


# ---- 7. Error Codes

error_codes = SUITE.group("7", "Error Codes")


@error_codes.case(1, "Sends a GOAWAY frame with unknown error code", "The endpoint MUST NOT trigger any special behavior for unknown error codes.")
def http2_7_1(conn):
    conn.handshake()
    conn.write_goaway(0, 0xFF)
    h.verify_alive(conn)


@error_codes.case(2, "Sends a RST_STREAM frame with unknown error code", "The endpoint MUST NOT trigger any special behavior for unknown error codes.")
def http2_7_2(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_rst_stream(1, 0xFF)
    h.verify_alive(conn)


# ---- 8. HTTP Message Exchanges

exchanges = SUITE.group("8", "HTTP Message Exchanges")
request_response = exchanges.group("8.1", "HTTP Request/Response Exchange")


@request_response.case(1, "Sends a second HEADERS frame without the END_STREAM flag", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_1(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=False)
    conn.write_headers(1, conn.encode([("x-test", "ok")]), end_stream=False)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


fields = request_response.group("8.1.2", "HTTP Header Fields")


def malformed(conn, fields_list, end_stream=True):
    """A request whose header block breaks §8.2/§8.3: a stream error PROTOCOL_ERROR."""
    conn.handshake()
    conn.write_headers(1, conn.encode(fields_list), end_stream=end_stream)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


@fields.case(1, "Sends a HEADERS frame that contains the header field name in uppercase letters", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_1(conn):
    malformed(conn, conn.common_headers() + [("X-TEST", "ok")])


pseudo = fields.group("8.1.2.1", "Pseudo-Header Fields")


@pseudo.case(1, "Sends a HEADERS frame that contains a unknown pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_1_1(conn):
    malformed(conn, conn.common_headers() + [(":test", "ok")])


@pseudo.case(2, "Sends a HEADERS frame that contains the pseudo-header field defined for response", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_1_2(conn):
    malformed(conn, conn.common_headers() + [(":status", "200")])


@pseudo.case(3, "Sends a HEADERS frame that contains a pseudo-header field as trailers", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_1_3(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False)
    conn.write_data(1, b"test", end_stream=False)
    conn.write_headers(1, conn.encode([(":method", "POST")]), end_stream=True)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


@pseudo.case(4, "Sends a HEADERS frame that contains a pseudo-header field that appears in a header block after a regular header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_1_4(conn):
    malformed(conn, [("x-test", "ok")] + conn.common_headers())


connection_specific = fields.group("8.1.2.2", "Connection-Specific Header Fields")


@connection_specific.case(1, "Sends a HEADERS frame that contains the connection-specific header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_2_1(conn):
    malformed(conn, conn.common_headers() + [("connection", "keep-alive")])


@connection_specific.case(2, "Sends a HEADERS frame that contains the TE header field with any value other than \"trailers\"", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_2_2(conn):
    malformed(conn, conn.common_headers() + [("trailers", "test"), ("te", "trailers, deflate")])


request_pseudo = fields.group("8.1.2.3", "Request Pseudo-Header Fields")


def without(conn, name):
    return [field for field in conn.common_headers() if field[0] != name]


@request_pseudo.case(1, "Sends a HEADERS frame with empty \":path\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_1(conn):
    malformed(conn, [(n, "" if n == ":path" else v) for n, v in conn.common_headers()])


@request_pseudo.case(2, "Sends a HEADERS frame that omits \":method\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_2(conn):
    malformed(conn, without(conn, ":method"))


@request_pseudo.case(3, "Sends a HEADERS frame that omits \":scheme\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_3(conn):
    malformed(conn, without(conn, ":scheme"))


@request_pseudo.case(4, "Sends a HEADERS frame that omits \":path\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_4(conn):
    malformed(conn, without(conn, ":path"))


@request_pseudo.case(5, "Sends a HEADERS frame with duplicated \":method\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_5(conn):
    fields_list = conn.common_headers()
    malformed(conn, fields_list[:1] + [(":method", "GET")] + fields_list[1:])


@request_pseudo.case(6, "Sends a HEADERS frame with duplicated \":scheme\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_6(conn):
    fields_list = conn.common_headers()
    malformed(conn, fields_list[:2] + [(":scheme", conn.config.scheme)] + fields_list[2:])


@request_pseudo.case(7, "Sends a HEADERS frame with duplicated \":path\" pseudo-header field", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_3_7(conn):
    fields_list = conn.common_headers()
    malformed(conn, fields_list[:3] + [(":path", conn.config.path)] + fields_list[3:])


malformed_group = fields.group("8.1.2.6", "Malformed Requests and Responses")


@malformed_group.case(1, "Sends a HEADERS frame with the \"content-length\" header field which does not equal the DATA frame payload length", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_6_1(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False, extra=[("content-length", "1")])
    conn.write_data(1, b"test", end_stream=True)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


@malformed_group.case(2, "Sends a HEADERS frame with the \"content-length\" header field which does not equal the sum of the multiple DATA frames payload length", STREAM_ERROR % "PROTOCOL_ERROR")
def http2_8_1_2_6_2(conn):
    conn.handshake()
    request(conn, method="POST", end_stream=False, extra=[("content-length", "1")])
    conn.write_data(1, b"test", end_stream=False)
    conn.write_data(1, b"test", end_stream=True)
    h.verify_stream_error(conn, PROTOCOL_ERROR)


server_push = exchanges.group("8.2", "Server Push")


@server_push.case(1, "Sends a PUSH_PROMISE frame", CONN_ERROR % "PROTOCOL_ERROR")
def http2_8_2_1(conn):
    # A client cannot push (RFC 9113 §8.4): PUSH_PROMISE from it is a connection error.
    conn.handshake()
    conn.send(h.raw_frame(h.PUSH_PROMISE, h.END_HEADERS, 1, struct.pack(">I", 3)))
    h.verify_connection_error(conn, PROTOCOL_ERROR)
