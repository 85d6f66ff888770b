//! A verified client certificate read into the fields mod_ssl and nginx give applications
//! (`SSL_CLIENT_S_DN`, `$ssl_client_s_dn`, ...), each written exactly as
//! `openssl x509 -nameopt RFC2253 -subject -issuer -serial -dates` prints it, so a script moved
//! from Apache or nginx compares the same strings.
//!
//! Owns: DER → `ClientCertificate` (distinguished names in RFC 2253 form with OpenSSL's
//! escaping, the serial in upper-case hex, validity dates, PEM).
//! Must not touch: verification (rustls did it during the handshake), HTTP.

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};
use x509_parser::x509::AttributeTypeAndValue;

use super::ClientCertificate;

/// The fields of `der`; `None` when it does not parse as an X.509 certificate.
#[must_use]
pub fn describe(der: &CertificateDer<'_>) -> Option<ClientCertificate> {
    let (_, certificate) = X509Certificate::from_der(der.as_ref()).ok()?;
    let validity = certificate.validity();
    Some(ClientCertificate {
        subject: rfc2253(certificate.subject()),
        issuer: rfc2253(certificate.issuer()),
        serial: serial_hex(certificate.raw_serial()),
        not_before: openssl_time(validity.not_before.timestamp()),
        not_after: openssl_time(validity.not_after.timestamp()),
        pem: pem(der.as_ref()),
    })
}

/// A name as OpenSSL's `XN_FLAG_RFC2253` prints it: attributes last-to-first (the flat list
/// reversed, so a multi-valued RDN's members too), `,` between RDNs and `+` inside one, short
/// attribute names (`CN`, `emailAddress`) or the dotted OID, values escaped (`escape_value`);
/// an attribute OpenSSL does not know, or a value that is not a string, as `#` and its DER in
/// hex (RFC 2253 §2.4).
pub(super) fn rfc2253(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    let attributes: Vec<(usize, &AttributeTypeAndValue<'_>)> = name
        .iter()
        .enumerate()
        .flat_map(|(set, rdn)| rdn.iter().map(move |attribute| (set, attribute)))
        .collect();
    let mut previous = None;
    for (set, attribute) in attributes.into_iter().rev() {
        if let Some(previous) = previous {
            out.push(if previous == set { '+' } else { ',' });
        }
        previous = Some(set);
        let oid = attribute.attr_type().to_id_string();
        let value = attribute.attr_value();
        match short_name(&oid) {
            Some(short) => {
                out.push_str(short);
                out.push('=');
                match string_value(value.tag().0, value.data) {
                    Some(text) => escape_value(&text, &mut out),
                    None => dump(value.header.raw_tag(), value, &mut out),
                }
            }
            None => {
                out.push_str(&oid);
                out.push('=');
                dump(value.header.raw_tag(), value, &mut out);
            }
        }
    }
    out
}

/// OpenSSL's short names for the attributes certificates carry (`crypto/objects/objects.txt`).
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return None,
    })
}

/// The characters of a string value (OpenSSL converts every string type to UTF-8 before
/// escaping); `None` for a type that is not a string.
fn string_value(tag: u32, data: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, NumericString, PrintableString, IA5String, VisibleString.
        12 | 18 | 19 | 22 | 26 => Some(String::from_utf8_lossy(data).into_owned()),
        // T61String: OpenSSL reads it as Latin-1.
        20 => Some(data.iter().map(|&byte| char::from(byte)).collect()),
        // BMPString: UCS-2, big-endian.
        30 => Some(
            data.chunks(2)
                .map(|pair| {
                    let unit = u32::from(pair[0]) << 8 | u32::from(*pair.get(1).unwrap_or(&0));
                    char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER)
                })
                .collect(),
        ),
        // UniversalString: UCS-4, big-endian.
        28 => Some(
            data.chunks(4)
                .map(|quad| {
                    let mut bytes = [0u8; 4];
                    bytes[..quad.len()].copy_from_slice(quad);
                    char::from_u32(u32::from_be_bytes(bytes)).unwrap_or(char::REPLACEMENT_CHARACTER)
                })
                .collect(),
        ),
        _ => None,
    }
}

/// OpenSSL's `ASN1_STRFLGS_RFC2253` escaping: `,+"\<>;` with a backslash, `#` first and a space
/// first or last with a backslash, control characters and every byte of a non-ASCII
/// character's UTF-8 as `\XX`.
fn escape_value(text: &str, out: &mut String) {
    let last = text.len().saturating_sub(1);
    for (at, byte) in text.bytes().enumerate() {
        match byte {
            b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';' => {
                out.push('\\');
                out.push(char::from(byte));
            }
            b'#' if at == 0 => out.push_str("\\#"),
            b' ' if at == 0 || at == last => out.push_str("\\ "),
            0..=0x1f | 0x7f..=0xff => push_hex_escape(byte, out),
            _ => out.push(char::from(byte)),
        }
    }
}

fn push_hex_escape(byte: u8, out: &mut String) {
    out.push('\\');
    push_hex(byte, out);
}

fn push_hex(byte: u8, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 15)]));
}

/// `#` and the value's whole DER (tag, length, contents) in hex, as RFC 2253 §2.4 says for a
/// value without a string form.
fn dump(raw_tag: Option<&[u8]>, value: &x509_parser::asn1_rs::Any<'_>, out: &mut String) {
    out.push('#');
    let tag = raw_tag.map_or_else(|| vec![value.tag().0 as u8], <[u8]>::to_vec);
    let length = value.data.len();
    let mut der = tag;
    if length < 0x80 {
        der.push(length as u8);
    } else {
        let bytes = length.to_be_bytes();
        let skip = bytes.iter().take_while(|&&byte| byte == 0).count();
        der.push(0x80 | (bytes.len() - skip) as u8);
        der.extend_from_slice(&bytes[skip..]);
    }
    der.extend_from_slice(value.data);
    for byte in der {
        push_hex(byte, out);
    }
}

/// The serial as `openssl x509 -serial` prints it: the magnitude's bytes in upper-case hex
/// (DER's leading zero for a positive number with its high bit set dropped), `00` for zero, `-`
/// before a negative one (which RFC 5280 forbids, but which exists).
fn serial_hex(raw: &[u8]) -> String {
    let negative = raw.first().is_some_and(|&byte| byte & 0x80 != 0);
    let magnitude: Vec<u8> = if negative {
        // Two's complement: invert and add one.
        let mut bytes: Vec<u8> = raw.iter().map(|byte| !byte).collect();
        for byte in bytes.iter_mut().rev() {
            let (sum, carry) = byte.overflowing_add(1);
            *byte = sum;
            if !carry {
                break;
            }
        }
        bytes
    } else {
        raw.to_vec()
    };
    let start = magnitude.iter().take_while(|&&byte| byte == 0).count();
    let digits = &magnitude[start..];
    let mut out = String::with_capacity(digits.len() * 2 + 1);
    if negative {
        out.push('-');
    }
    if digits.is_empty() {
        out.push_str("00");
    }
    for &byte in digits {
        push_hex(byte, &mut out);
    }
    out
}

/// A time as OpenSSL's `ASN1_TIME_print` writes it: `Nov 25 12:00:00 2026 GMT`, the day padded
/// with a space.
pub(super) fn openssl_time(unix: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix.div_euclid(86_400);
    let seconds = unix.rem_euclid(86_400);
    let (year, month, day) = ampd_http::date::civil_from_days(days);
    format!(
        "{} {day:>2} {:02}:{:02}:{:02} {year} GMT",
        MONTHS[(month as usize).clamp(1, 12) - 1],
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The certificate in PEM (RFC 7468 §5: base64 in lines of 64).
fn pem(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut base64 = Vec::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let bytes = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let group = u32::from(bytes[0]) << 16 | u32::from(bytes[1]) << 8 | u32::from(bytes[2]);
        for index in 0..4 {
            if index <= chunk.len() {
                base64.push(ALPHABET[(group >> (18 - 6 * index) & 63) as usize]);
            } else {
                base64.push(b'=');
            }
        }
    }
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in base64.chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests;
