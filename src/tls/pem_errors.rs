//! PEM files' errors in words, for the server's certificates (`context`) and the ACME client's
//! `ca_root` alike.
//!
//! Owns: `pem_reason`. Must not touch: reading the files (their callers do).

use rustls::pki_types::pem;

/// What is wrong with a PEM file, in words (the parser's own message shows the labels as
/// lists of bytes).
pub(super) fn pem_reason(error: &pem::Error) -> String {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_owned();
    match error {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "a PEM section is cut short: no \"-----END {}-----\" line (is the file truncated?)",
            text(end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => {
            format!("a malformed PEM line: \"{}\"", text(line).escape_debug())
        }
        pem::Error::Base64Decode(reason) => {
            format!("the base64 inside a PEM section does not decode ({reason})")
        }
        pem::Error::NoItemsFound => "no PEM section of the kind expected".to_owned(),
        other => format!("not PEM: {other}"),
    }
}
