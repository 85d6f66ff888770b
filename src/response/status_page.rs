//! Responses that carry a status and a short explanatory page: errors, redirects, listings.
//!
//! Owns: the bodies of error pages (static strings, rendered once: nothing is formatted per
//! request but the head) and the shape of such responses.
//! Must not touch: anything but the output buffer.

use ampd_http::response::{write_content_length, write_header, write_status_line};

use super::{common_headers, HeadContext};

/// Write a complete response with a small HTML body explaining `status` (the head alone when
/// `with_body` is false, as for `HEAD`).
pub fn write(
    out: &mut Vec<u8>,
    status: u16,
    context: &HeadContext<'_>,
    extra: &[(&str, &[u8])],
    with_body: bool,
) {
    let has_body = status != 304 && status != 204;
    write_status_line(out, status);
    common_headers(out, context);
    for (name, value) in extra {
        write_header(out, name, value);
    }
    if has_body {
        out.extend_from_slice(b"Content-Type: text/html; charset=utf-8\r\n");
        write_content_length(out, page(status).len() as u64);
    }
    out.extend_from_slice(b"\r\n");
    if has_body && with_body {
        out.extend_from_slice(page(status).as_bytes());
    }
}

fn page(status: u16) -> &'static str {
    macro_rules! pages {
        ($($code:literal => $text:literal),* $(,)?) => {
            match status {
                $($code => concat!(
                    "<!DOCTYPE html>\n<html><head><title>", $code, " ", $text,
                    "</title></head>\n<body><h1>", $code, " ", $text, "</h1><hr>ampd</body></html>\n"
                ),)*
                _ => "<!DOCTYPE html>\n<html><body><h1>Error</h1><hr>ampd</body></html>\n",
            }
        };
    }
    pages! {
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        401 => "Unauthorized",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
    }
}
