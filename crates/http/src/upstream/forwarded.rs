//! The fields that tell the upstream who the client is: `X-Forwarded-For`,
//! `X-Forwarded-Proto`, `X-Forwarded-Host` (de facto, as nginx and Caddy send them) and
//! `Forwarded` (RFC 7239).
//!
//! Owns their values and the trust rule. Must not decide which client fields are forwarded
//! (`forward.rs` drops the client's own copies of these before this adds ampd's).
//!
//! Trust: what a client says about earlier hops is only kept when the connection comes from a
//! configured proxy (`trust_incoming`). Otherwise any client could put an address of its
//! choosing at the head of the chain that the application reads as the real client.

use std::net::IpAddr;

use crate::authority::is_valid_authority;
use crate::request::Header;
use crate::token::{is_field_value, is_tchar, list_elements};

use super::forward::ForwardRequest;
use super::hop::{named_by_connection, ConnectionOptions};

/// `(name, value)` of each forwarding field, in the order they are written.
pub(crate) fn forwarding_fields(request: &ForwardRequest<'_>) -> [(&'static str, Vec<u8>); 4] {
    let connection = named_by_connection(request.client_headers);
    let trusted = |name| incoming(request, &connection, name);
    let client = request.client.to_canonical();
    // Only a caller that built it by hand could pass a host that is no field value; leaving
    // it out beats writing a quoted CR or LF.
    let client_host = request
        .client_host
        .filter(|host| is_field_value(host.as_bytes()));

    let mut for_chain = joined(trusted("x-forwarded-for").flat_map(list_elements));
    append_element(&mut for_chain, client.to_string().as_bytes());

    // X-Forwarded-Proto and -Host describe the request as the first hop received it, so a
    // trusted proxy's value (the first, if it sent a list) wins over this hop's.
    let proto = trusted("x-forwarded-proto")
        .flat_map(list_elements)
        .next()
        .filter(|proto| is_scheme(proto))
        .unwrap_or(request.proto.as_bytes())
        .to_vec();
    let host = trusted("x-forwarded-host")
        .flat_map(list_elements)
        .next()
        .filter(|host| is_valid_authority(host, false))
        .or(client_host.map(str::as_bytes))
        .unwrap_or_default()
        .to_vec();

    let mut forwarded = joined(trusted("forwarded"));
    let mut element = b"for=".to_vec();
    push_node(&mut element, client);
    element.extend_from_slice(b";proto=");
    push_value(&mut element, request.proto.as_bytes());
    if let Some(host) = client_host {
        element.extend_from_slice(b";host=");
        push_value(&mut element, host.as_bytes());
    }
    append_element(&mut forwarded, &element);

    [
        ("X-Forwarded-For", for_chain),
        ("X-Forwarded-Proto", proto),
        ("X-Forwarded-Host", host),
        ("Forwarded", forwarded),
    ]
}

/// The client's values of field `name`, when the client is a trusted proxy and its
/// `Connection` does not name the field (which makes it hop-by-hop, RFC 9110 §7.6.1).
fn incoming<'a>(
    request: &ForwardRequest<'a>,
    connection: &ConnectionOptions<'a>,
    name: &'a str,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let headers: &'a [Header] = if request.trust_incoming && !connection.names(name) {
        request.client_headers
    } else {
        &[]
    };
    headers
        .iter()
        .filter(move |header| header.name.eq_ignore_ascii_case(name))
        .map(|header| &*header.value)
        .filter(|value| !value.is_empty())
}

/// `elements` joined into one list value.
fn joined<'a>(elements: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut list = Vec::new();
    for element in elements {
        append_element(&mut list, element);
    }
    list
}

fn append_element(list: &mut Vec<u8>, element: &[u8]) {
    if !list.is_empty() {
        list.extend_from_slice(b", ");
    }
    list.extend_from_slice(element);
}

/// A `node` (RFC 7239 §6): an IPv4 address as is, an IPv6 one in brackets and quotes, since
/// `[` and `:` are not token characters.
fn push_node(out: &mut Vec<u8>, address: IpAddr) {
    match address {
        IpAddr::V4(v4) => out.extend_from_slice(v4.to_string().as_bytes()),
        IpAddr::V6(v6) => out.extend_from_slice(format!("\"[{v6}]\"").as_bytes()),
    }
}

/// `value = token / quoted-string` (RFC 7239 §4): a token as is, anything else quoted, with
/// `"` and `\` escaped (RFC 9110 §5.6.4).
fn push_value(out: &mut Vec<u8>, value: &[u8]) {
    if !value.is_empty() && value.iter().all(|&b| is_tchar(b)) {
        out.extend_from_slice(value);
        return;
    }
    out.push(b'"');
    for &byte in value {
        if byte == b'"' || byte == b'\\' {
            out.push(b'\\');
        }
        out.push(byte);
    }
    out.push(b'"');
}

/// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 §3.1).
fn is_scheme(value: &[u8]) -> bool {
    value.first().is_some_and(u8::is_ascii_alphabetic)
        && value
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_tokens_or_quoted_strings() {
        let mut out = Vec::new();
        push_value(&mut out, b"example.com");
        out.push(b' ');
        push_value(&mut out, b"example.com:8080");
        out.push(b' ');
        push_value(&mut out, b"a\"b\\c");
        out.push(b' ');
        push_value(&mut out, b"");
        assert_eq!(
            out,
            br#"example.com "example.com:8080" "a\"b\\c" """#.to_vec()
        );
    }

    #[test]
    fn nodes_bracket_and_quote_ipv6() {
        let mut out = Vec::new();
        push_node(&mut out, "192.0.2.60".parse().unwrap());
        out.push(b' ');
        push_node(&mut out, "2001:db8:cafe::17".parse().unwrap());
        assert_eq!(out, br#"192.0.2.60 "[2001:db8:cafe::17]""#.to_vec());
    }

    #[test]
    fn schemes() {
        assert!(is_scheme(b"https"));
        assert!(is_scheme(b"coap+tcp"));
        assert!(!is_scheme(b""));
        assert!(!is_scheme(b"1http"));
        assert!(!is_scheme(b"ht tp"));
    }
}
