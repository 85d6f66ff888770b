"""h2spec's "hpack" suite: header blocks that break RFC 7541, each of which the server's decoder
must refuse with a connection error of type COMPRESSION_ERROR (RFC 9113 §4.3).
"""

import h2conn as h
import hpack_wire as wire
from spec import Suite

SUITE = Suite("hpack", "HPACK: Header Compression for HTTP/2")

COMPRESSION_ERROR = h.CODE["COMPRESSION_ERROR"]
REQUIREMENT = "The endpoint MUST treat this as a decoding error."
STATIC_ENTRIES = 61  # RFC 7541 Appendix A


def refused_block(conn, block):
    conn.handshake()
    conn.write_headers(1, block)
    h.verify_connection_error(conn, COMPRESSION_ERROR)


def with_request(conn, field, before=False):
    common = wire.request_block(conn.config)
    return field + common if before else common + field


overview = SUITE.group("2", "Compression Process Overview")
tables = overview.group("2.3", "Indexing Tables")
address_space = tables.group("2.3.3", "Index Address Space")


@address_space.case(1, "Sends a indexed header field representation with invalid index", REQUIREMENT)
def hpack_2_3_3_1(conn):
    # The dynamic table is empty: index 70 is past both tables (§2.3.3).
    refused_block(conn, with_request(conn, wire.indexed(STATIC_ENTRIES + 9)))


@address_space.case(2, "Sends a literal header field representation with invalid index", REQUIREMENT)
def hpack_2_3_3_2(conn):
    refused_block(conn, with_request(conn, wire.literal_indexed_name(STATIC_ENTRIES + 9, "test", "incremental")))


dynamic_table = SUITE.group("4", "Dynamic Table Management")
maximum_size = dynamic_table.group("4.2", "Maximum Table Size")


@maximum_size.case(1, "Sends a dynamic table size update at the end of header block", REQUIREMENT)
def hpack_4_2_1(conn):
    # §4.2: a size update MUST come at the beginning of the first block after the change.
    refused_block(conn, with_request(conn, wire.table_size_update(4096)))


primitives = SUITE.group("5", "Primitive Type Representations")
string_literals = primitives.group("5.2", "String Literal Representation")


def huffman_field(data):
    """x-test with a Huffman-flagged value whose octets are `data`."""
    return b"\x00" + wire.string("x-test") + wire.huffman_string_bytes(data)


@string_literals.case(1, "Sends a Huffman-encoded string literal representation with padding longer than 7 bits", REQUIREMENT)
def hpack_5_2_1(conn):
    data = wire.pack(*wire.huffman_bits(b"test"), extra_padding_bytes=1)
    refused_block(conn, with_request(conn, huffman_field(data)))


@string_literals.case(2, "Sends a Huffman-encoded string literal representation padded by zero", REQUIREMENT)
def hpack_5_2_2(conn):
    bits, count = wire.huffman_bits(b"test")
    if count % 8 == 0:
        raise AssertionError("the test string must leave padding bits")
    refused_block(conn, with_request(conn, huffman_field(wire.pack(bits, count, pad_with_ones=False))))


@string_literals.case(3, "Sends a Huffman-encoded string literal representation containing the EOS symbol", REQUIREMENT)
def hpack_5_2_3(conn):
    data = wire.pack(*wire.huffman_bits([ord("t"), ord("e"), wire.EOS, ord("s"), ord("t")]))
    refused_block(conn, with_request(conn, huffman_field(data)))


binary_format = SUITE.group("6", "Binary Format")
indexed = binary_format.group("6.1", "Indexed Header Field Representation")


@indexed.case(1, "Sends a indexed header field representation with index 0", REQUIREMENT)
def hpack_6_1_1(conn):
    refused_block(conn, with_request(conn, wire.indexed(0)))


size_update = binary_format.group("6.3", "Dynamic Table Size Update")


@size_update.case(1, "Sends a dynamic table size update larger than the value of SETTINGS_HEADER_TABLE_SIZE", REQUIREMENT)
def hpack_6_3_1(conn):
    conn.handshake()
    limit = conn.server_settings.get(h.HEADER_TABLE_SIZE, 4096)
    conn.write_headers(1, with_request(conn, wire.table_size_update(limit + 1), before=True))
    h.verify_connection_error(conn, COMPRESSION_ERROR)
