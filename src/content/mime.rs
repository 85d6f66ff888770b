//! File-name extension → `Content-Type`.
//!
//! Owns: the extension table (nginx's mime.types plus the types the web gained since: wasm, mjs,
//! avif, jxl, webmanifest, markdown…) and which types are text. Must not touch: content sniffing
//! (ampd never guesses from bytes; with `X-Content-Type-Options: nosniff` neither do browsers).
//!
//! Textual types carry `; charset=utf-8` so browsers do not guess an encoding (RFC 9110 §8.3.2;
//! text/* defaults to ISO-8859-1 in old clients otherwise). JavaScript is served as nginx does,
//! `application/javascript`; RFC 9239 prefers `text/javascript`, and browsers accept both.

/// The type for names without a known extension: a download, never rendered.
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// Longest extension in [`TYPES`]; longer ones cannot match.
const MAX_EXTENSION: usize = 16;

/// (extension in lower case, full `Content-Type` value), sorted by extension for binary search.
const TYPES: &[(&str, &str)] = &[
    ("3gp", "video/3gpp"),
    ("3gpp", "video/3gpp"),
    ("7z", "application/x-7z-compressed"),
    ("aac", "audio/aac"),
    ("ai", "application/postscript"),
    ("apng", "image/apng"),
    ("asc", "application/pgp-signature"),
    ("asf", "video/x-ms-asf"),
    ("asx", "video/x-ms-asf"),
    ("atom", "application/atom+xml; charset=utf-8"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bin", "application/octet-stream"),
    ("bmp", "image/bmp"),
    ("bz2", "application/x-bzip2"),
    ("cco", "application/x-cocoa"),
    ("cjs", "application/javascript; charset=utf-8"),
    ("crt", "application/x-x509-ca-cert"),
    ("css", "text/css; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("deb", "application/octet-stream"),
    ("der", "application/x-x509-ca-cert"),
    ("dll", "application/octet-stream"),
    ("dmg", "application/octet-stream"),
    ("doc", "application/msword"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("ear", "application/java-archive"),
    ("eot", "application/vnd.ms-fontobject"),
    ("eps", "application/postscript"),
    ("epub", "application/epub+zip"),
    ("exe", "application/octet-stream"),
    ("flac", "audio/flac"),
    ("flv", "video/x-flv"),
    ("geojson", "application/geo+json; charset=utf-8"),
    ("gif", "image/gif"),
    ("gz", "application/gzip"),
    ("heic", "image/heic"),
    ("hqx", "application/mac-binhex40"),
    ("htc", "text/x-component; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("html", "text/html; charset=utf-8"),
    ("ico", "image/x-icon"),
    ("ics", "text/calendar; charset=utf-8"),
    ("img", "application/octet-stream"),
    ("iso", "application/octet-stream"),
    ("jad", "text/vnd.sun.j2me.app-descriptor; charset=utf-8"),
    ("jar", "application/java-archive"),
    ("jardiff", "application/x-java-archive-diff"),
    ("jng", "image/x-jng"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "application/javascript; charset=utf-8"),
    ("json", "application/json; charset=utf-8"),
    ("jsonld", "application/ld+json; charset=utf-8"),
    ("jxl", "image/jxl"),
    ("kar", "audio/midi"),
    ("kml", "application/vnd.google-earth.kml+xml; charset=utf-8"),
    ("kmz", "application/vnd.google-earth.kmz"),
    ("log", "text/plain; charset=utf-8"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("m4a", "audio/x-m4a"),
    ("m4v", "video/x-m4v"),
    ("map", "application/json; charset=utf-8"),
    ("markdown", "text/markdown; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("mjs", "application/javascript; charset=utf-8"),
    ("mkv", "video/x-matroska"),
    ("mml", "text/mathml; charset=utf-8"),
    ("mng", "video/x-mng"),
    ("mov", "video/quicktime"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpd", "application/dash+xml; charset=utf-8"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("msi", "application/octet-stream"),
    ("msm", "application/octet-stream"),
    ("msp", "application/octet-stream"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("oga", "audio/ogg"),
    ("ogg", "audio/ogg"),
    ("ogv", "video/ogg"),
    ("opus", "audio/ogg"),
    ("otf", "font/otf"),
    ("pdb", "application/x-pilot"),
    ("pdf", "application/pdf"),
    ("pem", "application/x-x509-ca-cert"),
    ("pl", "application/x-perl"),
    ("pm", "application/x-perl"),
    ("png", "image/png"),
    ("ppt", "application/vnd.ms-powerpoint"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("prc", "application/x-pilot"),
    ("ps", "application/postscript"),
    ("ra", "audio/x-realaudio"),
    ("rar", "application/x-rar-compressed"),
    ("rdf", "application/rdf+xml; charset=utf-8"),
    ("rpm", "application/x-redhat-package-manager"),
    ("rss", "application/rss+xml; charset=utf-8"),
    ("rtf", "application/rtf"),
    ("run", "application/x-makeself"),
    ("sea", "application/x-sea"),
    ("shtml", "text/html; charset=utf-8"),
    ("sig", "application/pgp-signature"),
    ("sit", "application/x-stuffit"),
    ("svg", "image/svg+xml; charset=utf-8"),
    ("svgz", "image/svg+xml; charset=utf-8"),
    ("swf", "application/x-shockwave-flash"),
    ("tar", "application/x-tar"),
    ("tcl", "application/x-tcl"),
    ("text", "text/plain; charset=utf-8"),
    ("tgz", "application/gzip"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tk", "application/x-tcl"),
    ("toml", "application/toml; charset=utf-8"),
    ("ts", "video/mp2t"),
    ("ttc", "font/collection"),
    ("ttf", "font/ttf"),
    ("txt", "text/plain; charset=utf-8"),
    ("vcf", "text/vcard; charset=utf-8"),
    ("vtt", "text/vtt; charset=utf-8"),
    ("war", "application/java-archive"),
    ("wasm", "application/wasm"),
    ("wav", "audio/wav"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("weba", "audio/webm"),
    ("webm", "video/webm"),
    ("webmanifest", "application/manifest+json; charset=utf-8"),
    ("webp", "image/webp"),
    ("wml", "text/vnd.wap.wml; charset=utf-8"),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wmv", "video/x-ms-wmv"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xhtml", "application/xhtml+xml; charset=utf-8"),
    ("xls", "application/vnd.ms-excel"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("xml", "text/xml; charset=utf-8"),
    ("xpi", "application/x-xpinstall"),
    ("xsd", "application/xml; charset=utf-8"),
    ("xsl", "application/xml; charset=utf-8"),
    ("xslt", "application/xml; charset=utf-8"),
    ("xspf", "application/xspf+xml; charset=utf-8"),
    ("xz", "application/x-xz"),
    ("yaml", "application/yaml; charset=utf-8"),
    ("yml", "application/yaml; charset=utf-8"),
    ("zip", "application/zip"),
    ("zst", "application/zstd"),
];

/// The `Content-Type` for `path` by its extension (case-insensitive), or [`DEFAULT_TYPE`].
/// Only the last segment counts, and a leading dot does not start an extension (`.bashrc`).
#[must_use]
pub fn content_type(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some(dot) = name.rfind('.') else {
        return DEFAULT_TYPE;
    };
    if dot == 0 {
        return DEFAULT_TYPE;
    }
    let extension = &name.as_bytes()[dot + 1..];
    if extension.is_empty() || extension.len() > MAX_EXTENSION {
        return DEFAULT_TYPE;
    }
    let mut lower = [0u8; MAX_EXTENSION];
    let lower = &mut lower[..extension.len()];
    for (out, byte) in lower.iter_mut().zip(extension) {
        *out = byte.to_ascii_lowercase();
    }
    TYPES
        .binary_search_by(|(known, _)| known.as_bytes().cmp(lower))
        .map_or(DEFAULT_TYPE, |index| TYPES[index].1)
}

/// The table's own copy of a `Content-Type` value (as `content_type` returns it), for a value
/// that crossed a process boundary as text; `None` for a value not in the table.
#[must_use]
pub fn known(value: &str) -> Option<&'static str> {
    if value == DEFAULT_TYPE {
        return Some(DEFAULT_TYPE);
    }
    TYPES
        .iter()
        .find(|(_, known)| *known == value)
        .map(|(_, known)| *known)
}

/// Whether a `Content-Type` value names text (and so carries a charset): text/*, JSON, XML,
/// JavaScript, YAML, TOML.
#[must_use]
pub fn is_textual(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or(content_type)
        .trim();
    essence.starts_with("text/")
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
        || matches!(
            essence,
            "application/json"
                | "application/javascript"
                | "application/xml"
                | "application/yaml"
                | "application/toml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_returns_the_tables_own_value() {
        let value = String::from("text/html; charset=utf-8");
        assert!(std::ptr::eq(known(&value).unwrap(), content_type("a.html")));
        assert_eq!(known(DEFAULT_TYPE), Some(DEFAULT_TYPE));
        assert_eq!(known("text/x-nonsense"), None);
    }

    #[test]
    fn table_is_sorted_unique_lowercase_and_large() {
        assert!(TYPES.len() >= 110, "{}", TYPES.len());
        for pair in TYPES.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{:?} before {:?}", pair[0], pair[1]);
        }
        for (extension, _) in TYPES {
            assert_eq!(*extension, extension.to_ascii_lowercase());
            assert!(extension.len() <= MAX_EXTENSION);
        }
    }

    #[test]
    fn textual_types_and_only_those_carry_a_charset() {
        for (extension, value) in TYPES {
            let has_charset = value.ends_with("; charset=utf-8");
            assert_eq!(has_charset, is_textual(value), "{extension}: {value}");
        }
    }

    #[test]
    fn sample_of_entries() {
        let cases = [
            ("/index.html", "text/html; charset=utf-8"),
            ("/a/b.HTM", "text/html; charset=utf-8"),
            ("/style.css", "text/css; charset=utf-8"),
            ("/app.js", "application/javascript; charset=utf-8"),
            ("/module.mjs", "application/javascript; charset=utf-8"),
            ("/data.json", "application/json; charset=utf-8"),
            ("/app.js.map", "application/json; charset=utf-8"),
            (
                "/site.webmanifest",
                "application/manifest+json; charset=utf-8",
            ),
            ("/logo.svg", "image/svg+xml; charset=utf-8"),
            ("/cal.ics", "text/calendar; charset=utf-8"),
            ("/README.md", "text/markdown; charset=utf-8"),
            ("/feed.rss", "application/rss+xml; charset=utf-8"),
            ("/photo.JPG", "image/jpeg"),
            ("/photo.webp", "image/webp"),
            ("/photo.avif", "image/avif"),
            ("/font.woff2", "font/woff2"),
            ("/mod.wasm", "application/wasm"),
            ("/doc.pdf", "application/pdf"),
            ("/a.tar.gz", "application/gzip"),
            ("/clip.mp4", "video/mp4"),
            ("/song.mp3", "audio/mpeg"),
            (
                "/sheet.xlsx",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            ),
        ];
        for (path, expected) in cases {
            assert_eq!(content_type(path), expected, "{path}");
        }
    }

    #[test]
    fn unknown_and_extensionless_names_fall_back() {
        for path in [
            "/Makefile",
            "/.bashrc",
            "/file.",
            "/archive.unknownext",
            "/dir.d/noext",
            "/x.abcdefghijklmnopqrstuvwxyz",
            "",
            "/",
            "/é.ünï",
        ] {
            assert_eq!(content_type(path), DEFAULT_TYPE, "{path:?}");
        }
        assert_eq!(content_type("plain.txt"), "text/plain; charset=utf-8");
    }
}
