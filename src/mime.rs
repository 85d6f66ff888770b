//! File-name extension → `Content-Type`.
//!
//! Owns: the built-in extension table (nginx's mime.types plus the types the web gained since:
//! wasm, mjs, avif, jxl, webmanifest, markdown…), which types are text, the configuration's
//! table over it (`[types]`, `types_file` in the Debian `mime.types` format: [`TypeTable`]), and
//! a location's default type and charset ([`TypeOptions`]). Must not touch: content sniffing
//! (ampd never guesses from bytes; with `X-Content-Type-Options: nosniff` neither do browsers).
//!
//! Textual types carry `; charset=utf-8` so browsers do not guess an encoding (RFC 9110 §8.3.2;
//! text/* defaults to ISO-8859-1 in old clients otherwise); a location's `charset` names another
//! or none. JavaScript is served as nginx does, `application/javascript`; RFC 9239 prefers
//! `text/javascript`, and browsers accept both.
//!
//! Values are `&'static str` so that a translation and a cached head hold no allocation: those
//! the configuration makes are interned once at load ([`intern`]), bounded by what the
//! configurations a process ever loads name.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The type for names without a known extension: a download, never rendered.
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// Longest extension looked up (in [`TYPES`] or a configured table); longer ones never match.
pub const MAX_EXTENSION: usize = 32;

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

/// The `Content-Type` for `path` by its extension (case-insensitive), or [`DEFAULT_TYPE`], from
/// the built-in table alone. Only the last segment counts, and a leading dot does not start an
/// extension (`.bashrc`).
#[must_use]
pub fn content_type(path: &str) -> &'static str {
    let mut buffer = [0u8; MAX_EXTENSION];
    extension(path, &mut buffer)
        .and_then(builtin)
        .unwrap_or(DEFAULT_TYPE)
}

/// `path`'s extension in lower case, in `buffer`.
fn extension<'b>(path: &str, buffer: &'b mut [u8; MAX_EXTENSION]) -> Option<&'b str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dot = name.rfind('.').filter(|&dot| dot > 0)?;
    let extension = &name.as_bytes()[dot + 1..];
    if extension.is_empty() || extension.len() > MAX_EXTENSION {
        return None;
    }
    let lower = &mut buffer[..extension.len()];
    for (out, byte) in lower.iter_mut().zip(extension) {
        *out = byte.to_ascii_lowercase();
    }
    std::str::from_utf8(lower).ok()
}

fn builtin(lower: &str) -> Option<&'static str> {
    TYPES
        .binary_search_by(|(known, _)| known.cmp(&lower))
        .ok()
        .map(|index| TYPES[index].1)
}

/// The table's own copy of a `Content-Type` value (as `content_type` or
/// [`TypeOptions::content_type`] returns it), for a value that crossed a process boundary as
/// text; `None` for a value neither in the table nor interned by a configuration.
#[must_use]
pub fn known(value: &str) -> Option<&'static str> {
    if value == DEFAULT_TYPE {
        return Some(DEFAULT_TYPE);
    }
    TYPES
        .iter()
        .find(|(_, known)| *known == value)
        .map(|(_, known)| *known)
        .or_else(|| interned().get(value).copied())
}

fn interned() -> std::sync::MutexGuard<'static, BTreeSet<&'static str>> {
    static INTERNED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    INTERNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `value` as a `&'static str`: the built-in table's copy, or one made once per distinct value
/// (leaked on purpose: a process holds the types its configurations name, and a reload that
/// names the same ones adds nothing).
#[must_use]
pub fn intern(value: &str) -> &'static str {
    if let Some(known) = known(value) {
        return known;
    }
    let mut set = interned();
    if let Some(existing) = set.get(value) {
        return existing;
    }
    let leaked: &'static str = Box::leak(value.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// Whether `value` is a `Content-Type` a configuration may name: `type/subtype` (tokens), then
/// optional `; name=value` parameters, no control characters.
#[must_use]
pub fn is_media_type(value: &str) -> bool {
    let token = |text: &str| ampd_http::is_token(text.as_bytes());
    let mut pieces = value.split(';');
    let essence = pieces.next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    token(kind)
        && token(subtype)
        && !value.bytes().any(|b| b.is_ascii_control())
        && pieces.all(|piece| {
            piece
                .split_once('=')
                .is_some_and(|(name, value)| token(name.trim()) && !value.trim().is_empty())
        })
}

/// Whether `name` may be a file-name extension in a table: no dot, slash or space, not longer
/// than [`MAX_EXTENSION`].
#[must_use]
pub fn is_extension(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_EXTENSION
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'.' | b'/' | b'\\'))
}

/// Extension → type pairs from the configuration (`[types]` over `types_file`), consulted
/// before the built-in table. One per loaded configuration, shared by its locations.
#[derive(Debug)]
pub struct TypeTable {
    /// Unique in the process: a helper process is sent a table once, then its id.
    id: u64,
    entries: HashMap<Box<str>, &'static str>,
}

impl TypeTable {
    /// A table of `entries` (extension, type), later ones winning; extensions are compared
    /// without case.
    #[must_use]
    pub fn new<I: IntoIterator<Item = (String, String)>>(entries: I) -> TypeTable {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        TypeTable::with_id(NEXT_ID.fetch_add(1, Ordering::Relaxed), entries)
    }

    /// A table known by `id` (as it was made in the server, for a helper process).
    #[must_use]
    pub fn with_id<I: IntoIterator<Item = (String, String)>>(id: u64, entries: I) -> TypeTable {
        TypeTable {
            id,
            entries: entries
                .into_iter()
                .map(|(extension, value)| {
                    (
                        extension.to_ascii_lowercase().into_boxed_str(),
                        intern(&value),
                    )
                })
                .collect(),
        }
    }

    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The pairs, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.entries
            .iter()
            .map(|(extension, value)| (&**extension, *value))
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What is wrong with a line of a `mime.types` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypesFileError {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

/// Reads the Debian `mime.types` format (`/etc/mime.types`, from the `media-types` package):
/// per line a type and the extensions it is for, separated by spaces or tabs; `#` starts a
/// comment; a type without extensions is allowed (and names none).
///
/// # Errors
/// The first line whose type is not `type/subtype` or that names an impossible extension.
pub fn parse_mime_types(text: &str) -> Result<Vec<(String, String)>, TypesFileError> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_ascii_whitespace();
        let Some(kind) = words.next() else {
            continue;
        };
        let error = |message: String| TypesFileError {
            line: index + 1,
            message,
        };
        if !is_media_type(kind) || kind.contains(';') {
            return Err(error(format!("'{kind}' is not a type/subtype")));
        }
        for extension in words {
            if !is_extension(extension) {
                return Err(error(format!(
                    "'{extension}' is not a file-name extension (no dot, at most {MAX_EXTENSION} bytes)"
                )));
            }
            entries.push((extension.to_owned(), kind.to_owned()));
        }
    }
    Ok(entries)
}

/// How a location's files are typed: the configuration's table, then the built-in one, then the
/// default type; textual types get the location's charset.
#[derive(Debug, Clone)]
pub struct TypeOptions {
    table: Arc<TypeTable>,
    default_type: &'static str,
    /// `None`: textual types are sent without a charset (`charset = "off"`).
    charset: Option<&'static str>,
    /// The value to send for each value a lookup can find, where the charset changes it; made
    /// once here so that a lookup neither allocates nor locks.
    charset_applied: Arc<HashMap<&'static str, &'static str>>,
}

impl Default for TypeOptions {
    /// The built-in table, [`DEFAULT_TYPE`], UTF-8.
    fn default() -> TypeOptions {
        TypeOptions::new(
            Arc::new(TypeTable::with_id(0, [])),
            DEFAULT_TYPE,
            Some("utf-8"),
        )
    }
}

impl TypeOptions {
    #[must_use]
    pub fn new(table: Arc<TypeTable>, default_type: &str, charset: Option<&str>) -> TypeOptions {
        let default_type = intern(default_type);
        let charset = charset.map(intern);
        let mut charset_applied = HashMap::new();
        let candidates = TYPES
            .iter()
            .map(|(_, value)| *value)
            .chain(table.entries().map(|(_, value)| value))
            .chain([default_type]);
        for value in candidates {
            if let Some(applied) = with_charset(value, charset) {
                if applied != value {
                    charset_applied.insert(value, intern(&applied));
                }
            }
        }
        TypeOptions {
            table,
            default_type,
            charset,
            charset_applied: Arc::new(charset_applied),
        }
    }

    /// The same options over another table (the configuration's, once it is read).
    #[must_use]
    pub fn with_table(&self, table: Arc<TypeTable>) -> TypeOptions {
        TypeOptions::new(table, self.default_type, self.charset)
    }

    #[must_use]
    pub fn table(&self) -> &Arc<TypeTable> {
        &self.table
    }

    #[must_use]
    pub fn default_type(&self) -> &'static str {
        self.default_type
    }

    #[must_use]
    pub fn charset(&self) -> Option<&'static str> {
        self.charset
    }

    /// The `Content-Type` for `path`, by its extension.
    #[must_use]
    pub fn content_type(&self, path: &str) -> &'static str {
        self.known_type(path).unwrap_or_else(|| {
            let value = self.default_type;
            self.charset_applied.get(value).copied().unwrap_or(value)
        })
    }

    /// The `Content-Type` a table (the configuration's, then the built-in one) gives `path`'s
    /// extension; `None` where no table knows it (content negotiation tells a type extension
    /// from a language one by this: `content::negotiate`).
    #[must_use]
    pub fn known_type(&self, path: &str) -> Option<&'static str> {
        let mut buffer = [0u8; MAX_EXTENSION];
        let value = extension(path, &mut buffer).and_then(|extension| {
            self.table
                .entries
                .get(extension)
                .copied()
                .or_else(|| builtin(extension))
        })?;
        Some(self.charset_applied.get(value).copied().unwrap_or(value))
    }
}

/// `value` with `charset` if it is textual and names no parameter of its own (the built-in
/// `; charset=utf-8` is replaced); `None` when it is left as it is.
fn with_charset(value: &str, charset: Option<&str>) -> Option<String> {
    let (essence, parameters) = value.split_once(';').unwrap_or((value, ""));
    let essence = essence.trim();
    let builtin_charset = parameters.trim() == "charset=utf-8";
    if !is_textual(essence) || !(parameters.trim().is_empty() || builtin_charset) {
        return None;
    }
    Some(match charset {
        Some(charset) => format!("{essence}; charset={charset}"),
        None => essence.to_owned(),
    })
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

    #[test]
    fn the_default_options_are_the_builtin_table() {
        let options = TypeOptions::default();
        for (extension, value) in TYPES {
            assert_eq!(options.content_type(&format!("/a.{extension}")), *value);
        }
        assert_eq!(options.content_type("/Makefile"), DEFAULT_TYPE);
    }

    #[test]
    fn a_table_default_type_and_charset() {
        let table = Arc::new(TypeTable::new([
            ("WASM".to_owned(), "application/x-wasm-test".to_owned()),
            ("special".to_owned(), "text/x-special".to_owned()),
            ("own".to_owned(), "text/x-own; charset=koi8-r".to_owned()),
        ]));
        let options = TypeOptions::new(table.clone(), "text/plain", Some("iso-8859-1"));
        for (path, expected) in [
            ("/mod.wasm", "application/x-wasm-test"),
            ("/MOD.Wasm", "application/x-wasm-test"),
            ("/a.special", "text/x-special; charset=iso-8859-1"),
            ("/a.own", "text/x-own; charset=koi8-r"),
            ("/a.html", "text/html; charset=iso-8859-1"),
            ("/a.json", "application/json; charset=iso-8859-1"),
            ("/a.png", "image/png"),
            ("/README", "text/plain; charset=iso-8859-1"),
        ] {
            assert_eq!(options.content_type(path), expected, "{path}");
        }
        let off = TypeOptions::new(table, "application/x-unknown", None);
        assert_eq!(off.content_type("/a.html"), "text/html");
        assert_eq!(off.content_type("/a.special"), "text/x-special");
        assert_eq!(off.content_type("/blob"), "application/x-unknown");
        // Every value a lookup returns crosses a process boundary as text and back.
        for path in ["/a.special", "/a.html", "/blob", "/mod.wasm"] {
            let value = off.content_type(path);
            assert!(std::ptr::eq(known(value).unwrap(), value), "{value}");
        }
        assert!(std::ptr::eq(
            intern("text/x-special"),
            intern("text/x-special")
        ));
    }

    #[test]
    fn mime_types_files_are_read_as_debian_writes_them() {
        let text = "# comment\n\napplication/wasm\t\t\twasm\ntext/x-a a  aa # trailing\napplication/x-none\n";
        assert_eq!(
            parse_mime_types(text).unwrap(),
            [
                ("wasm".to_owned(), "application/wasm".to_owned()),
                ("a".to_owned(), "text/x-a".to_owned()),
                ("aa".to_owned(), "text/x-a".to_owned()),
            ]
        );
        let error = parse_mime_types("text/plain txt\nnot-a-type x\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.contains("not-a-type"), "{}", error.message);
        let error = parse_mime_types("\n\ntext/plain t.xt\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.message.contains("t.xt"), "{}", error.message);
    }

    #[test]
    fn media_types_and_extensions_a_configuration_may_name() {
        for good in ["application/wasm", "text/html; charset=utf-8", "a/b;x=y"] {
            assert!(is_media_type(good), "{good}");
        }
        for bad in [
            "",
            "wasm",
            "text/",
            "/x",
            "text/ht ml",
            "a/b\r\nX: y",
            "a/b; x",
            "a/b/c",
        ] {
            assert!(!is_media_type(bad), "{bad:?}");
        }
        assert!(is_extension("tar-gz") && is_extension("wasm"));
        for bad in ["", ".wasm", "a/b", "a b", &"x".repeat(MAX_EXTENSION + 1)] {
            assert!(!is_extension(bad), "{bad:?}");
        }
    }
}
