"""HPACK representations built by hand (RFC 7541 §5, §6), for the cases that need one particular
representation or a broken one; well-formed blocks otherwise come from the hpack package's
Encoder. Owns only byte building: no sockets, no verdicts.
"""

from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH

EOS = 256


def integer(value, prefix_bits, first_byte_flags=0):
    """RFC 7541 §5.1: an integer with an N-bit prefix; the flags fill the byte's high bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        out.append((value % 128) + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def huffman_bits(symbols):
    """The Huffman codes of `symbols` (byte values, or EOS) as (bits, bit count)."""
    bits = 0
    count = 0
    for symbol in symbols:
        bits = (bits << REQUEST_CODES_LENGTH[symbol]) | REQUEST_CODES[symbol]
        count += REQUEST_CODES_LENGTH[symbol]
    return bits, count


def pack(bits, count, pad_with_ones=True, extra_padding_bytes=0):
    """Bits to bytes: padded to an octet with 1s (the EOS prefix, §5.2) or, broken, with 0s;
    `extra_padding_bytes` whole octets of 1s after that make padding longer than 7 bits."""
    pad = (8 - count % 8) % 8
    bits <<= pad
    if pad_with_ones:
        bits |= (1 << pad) - 1
    count += pad
    data = bits.to_bytes(count // 8, "big") if count else b""
    return data + b"\xff" * extra_padding_bytes


def string(text, huffman=False):
    """RFC 7541 §5.2: a string literal, raw or Huffman-coded."""
    raw = text.encode("latin-1") if isinstance(text, str) else text
    if not huffman:
        return integer(len(raw), 7) + raw
    data = pack(*huffman_bits(raw))
    return integer(len(data), 7, 0x80) + data


def huffman_string_bytes(data):
    """A string literal whose Huffman-coded octets are `data` exactly (valid or not)."""
    return integer(len(data), 7, 0x80) + data


def indexed(index):
    """§6.1: indexed header field."""
    return integer(index, 7, 0x80)


def literal_indexed_name(index, value, kind, huffman=False):
    """§6.2: a literal field whose name is table entry `index`.
    kind: "incremental" (§6.2.1), "without" (§6.2.2), "never" (§6.2.3)."""
    prefix, flags = {"incremental": (6, 0x40), "without": (4, 0x00), "never": (4, 0x10)}[kind]
    return integer(index, prefix, flags) + string(value, huffman)


def literal_new_name(name, value, kind, huffman=False):
    """§6.2: a literal field with a literal name."""
    flags = {"incremental": 0x40, "without": 0x00, "never": 0x10}[kind]
    return bytes([flags]) + string(name, huffman) + string(value, huffman)


def table_size_update(size):
    """§6.3: dynamic table size update."""
    return integer(size, 5, 0x20)


def request_block(config, method="GET"):
    """The common request as literals without indexing: no dynamic table state involved."""
    fields = [
        (":method", method),
        (":scheme", config.scheme),
        (":path", config.path),
        (":authority", config.authority),
    ]
    return b"".join(literal_new_name(name, value, "without") for name, value in fields)
