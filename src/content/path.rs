//! Request-path translation: from the still-encoded path of a request target to a clean,
//! confined path that can be handed to `openat2` below the document root.
//!
//! Owns: percent-decoding, dot-segment removal (RFC 3986 §5.2.4), the refusals that keep a URL
//! inside the root (NUL, backslash, encoded slash, overlong UTF-8, `..` above the root), hiding
//! dot-files, recognising `~user` paths (JAWS §3) and percent-encoding paths back for URLs.
//! Must not touch: the file system. The kernel's `RESOLVE_BENEATH` is the second line of defence;
//! this module is the first, and must be safe on its own.

use std::borrow::Cow;
use std::fmt;

/// Per-location choices that change how a path is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathOptions {
    /// Serve names starting with '.' (`.htaccess`, `.git/`). Off: they answer 404.
    pub allow_dotfiles: bool,
    /// `/~name/...` maps to a user's directory, so `..` may not climb out of `/~name` either.
    pub userdir: bool,
}

/// Why a request path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// The path does not start with '/' (origin-form targets always do, RFC 9112 §3.2.1).
    NotAbsolute,
    /// A '%' not followed by two hex digits.
    BadEncoding,
    /// A NUL byte, raw or `%00`: C string APIs would cut the name short.
    Nul,
    /// A control character (`%0d%0a`, `%1b`…): no served name needs one, and they would reach
    /// logs and `Location` headers.
    ControlCharacter,
    /// A backslash, raw or `%5c`: Windows-style separators used for traversal.
    Backslash,
    /// `%2f`: an encoded '/' would make a segment name contain a separator (Apache's
    /// `AllowEncodedSlashes Off`).
    EncodedSlash,
    /// The decoded bytes are not UTF-8 (this also refuses overlong forms such as `%c0%ae`).
    NotUtf8,
    /// A `..` that would climb above the root (or above `/~user` with userdirs on).
    EscapesRoot,
    /// A segment starting with '.' while dot-files are not served: answered as "not found".
    Hidden,
}

impl PathError {
    /// The HTTP status for this refusal: 404 for hidden files (they must look like they do not
    /// exist), 400 for everything else (as nginx answers a `..` above the root).
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            PathError::Hidden => 404,
            _ => 400,
        }
    }
}

impl fmt::Display for PathError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            PathError::NotAbsolute => "request path does not start with '/'",
            PathError::BadEncoding => "'%' not followed by two hex digits",
            PathError::Nul => "NUL byte in request path",
            PathError::ControlCharacter => "control character in request path",
            PathError::Backslash => "backslash in request path",
            PathError::EncodedSlash => "encoded '/' (%2F) in request path",
            PathError::NotUtf8 => "request path is not UTF-8 after decoding",
            PathError::EscapesRoot => "'..' climbs above the root",
            PathError::Hidden => "hidden file",
        };
        formatter.write_str(text)
    }
}

impl std::error::Error for PathError {}

/// A decoded, normalised request path: starts with '/', has no empty, `.` or `..` segments and
/// no NUL, backslash or control character; ends with '/' when the request's did (the
/// directory-redirect logic needs to know).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CleanPath(String);

impl CleanPath {
    /// A path that was normalised already (in another process: a helper process receives it
    /// as text), checked again for every property `normalize` guarantees; `None` if it lacks one.
    #[must_use]
    pub fn from_normalized(path: &str) -> Option<CleanPath> {
        let body = path.strip_prefix('/')?;
        let segments_ok = body.is_empty()
            || body
                .strip_suffix('/')
                .unwrap_or(body)
                .split('/')
                .all(|segment| !matches!(segment, "" | "." | ".."));
        let characters_ok = !path
            .chars()
            .any(|character| character == '\\' || character.is_control());
        (segments_ok && characters_ok).then(|| CleanPath(path.to_owned()))
    }

    /// The root path, `/`.
    #[must_use]
    pub fn root() -> CleanPath {
        CleanPath(String::from("/"))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    #[must_use]
    pub fn ends_with_slash(&self) -> bool {
        self.0.ends_with('/')
    }

    #[must_use]
    pub fn is_root(&self) -> bool {
        self.0 == "/"
    }

    /// The segments in order (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.split('/').filter(|segment| !segment.is_empty())
    }

    /// The path without its leading (and trailing) '/', to open relative to the root
    /// directory; `.` for the root itself.
    #[must_use]
    pub fn relative(&self) -> &str {
        let inner = self.0.trim_start_matches('/').trim_end_matches('/');
        if inner.is_empty() {
            "."
        } else {
            inner
        }
    }

    /// The path below `prefix` as a path of its own (`/static/a.css` under `/static/` is
    /// `/a.css`): what an `alias` location looks up below its directory. A clean path's tail
    /// is clean, so no new normalisation is needed.
    #[must_use]
    pub fn below(&self, prefix: &str) -> Option<CleanPath> {
        let rest = self.0.strip_prefix(prefix)?;
        let rest = rest.trim_start_matches('/');
        Some(CleanPath(format!("/{rest}")))
    }

    /// The same path with a trailing '/' (for the redirect `/dir` → `/dir/`).
    #[must_use]
    pub fn with_trailing_slash(&self) -> CleanPath {
        if self.ends_with_slash() {
            self.clone()
        } else {
            CleanPath(format!("{}/", self.0))
        }
    }

    /// The path percent-encoded for use in a URL (`Location`, links): [`normalize`] of this
    /// string gives the same `CleanPath` back.
    #[must_use]
    pub fn to_uri(&self) -> String {
        encode_path(&self.0)
    }
}

impl fmt::Display for CleanPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%XX` once, refusing what must never reach a file name.
fn percent_decode(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = raw.as_bytes();
    // Most paths have nothing to decode: checked in place, they need no copy and no second
    // UTF-8 validation.
    if !bytes.contains(&b'%') {
        return match bytes.iter().find(|&&byte| is_refused(byte)) {
            Some(&byte) => Err(refusal(byte)),
            None => Ok(Cow::Borrowed(raw)),
        };
    }
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let (value, encoded) = if byte == b'%' {
            let high = bytes.get(index + 1).copied().and_then(hex_value);
            let low = bytes.get(index + 2).copied().and_then(hex_value);
            match (high, low) {
                (Some(high), Some(low)) => {
                    index += 3;
                    (high << 4 | low, true)
                }
                _ => return Err(PathError::BadEncoding),
            }
        } else {
            index += 1;
            (byte, false)
        };
        if value == b'/' && encoded {
            return Err(PathError::EncodedSlash);
        }
        if is_refused(value) {
            return Err(refusal(value));
        }
        decoded.push(value);
    }
    String::from_utf8(decoded)
        .map(Cow::Owned)
        .map_err(|_| PathError::NotUtf8)
}

/// A byte no path may hold, encoded or not: NUL, a backslash, a control character.
fn is_refused(byte: u8) -> bool {
    matches!(byte, 0..=0x1f | 0x7f | b'\\')
}

/// Why `is_refused` refused `byte`.
fn refusal(byte: u8) -> PathError {
    match byte {
        0 => PathError::Nul,
        b'\\' => PathError::Backslash,
        _ => PathError::ControlCharacter,
    }
}

/// Turns the path part of a request target (before '?', still percent-encoded) into a
/// [`CleanPath`].
///
/// Decoding happens once and before dot-segment removal, so `%2e%2e` is a `..` (and is judged as
/// one) while `%252e%252e` is the literal name `%2e%2e`. Runs of '/' collapse. A path ending in
/// '/', `/.` or `/..` keeps a trailing '/' (RFC 3986 §5.2.4). `/.well-known/` is served even
/// when dot-files are not (RFC 8615).
///
/// # Errors
/// See [`PathError`]; `status()` gives the answer to send.
pub fn normalize(raw_path: &str, opts: &PathOptions) -> Result<CleanPath, PathError> {
    if !raw_path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    let decoded = percent_decode(raw_path)?;
    // Segments are appended to `clean` as they come and `..` cuts the last one off again.
    let mut clean = String::with_capacity(decoded.len() + 1);
    let mut kept = 0;
    // The number of leading segments `..` may not pop: 1 under `/~user` with userdirs on.
    let mut floor = 0;
    let mut trailing_slash = false;
    for segment in decoded.split('/').skip(1) {
        trailing_slash = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => {
                if kept <= floor {
                    return Err(PathError::EscapesRoot);
                }
                clean.truncate(clean.rfind('/').unwrap_or(0));
                kept -= 1;
            }
            _ => {
                if kept == 0 && opts.userdir && user_name(segment).is_some() {
                    floor = 1;
                }
                clean.push('/');
                clean.push_str(segment);
                kept += 1;
            }
        }
    }
    if !opts.allow_dotfiles && is_hidden_path(&clean) {
        return Err(PathError::Hidden);
    }
    if clean.is_empty() || trailing_slash {
        clean.push('/');
    }
    Ok(CleanPath(clean))
}

/// Whether a clean path names a dot-file (a segment starting with '.', other than a leading
/// `/.well-known`): the check `normalize` makes when dot-files are not served, for callers
/// that normalized with them allowed and learn the rule later (per location).
#[must_use]
pub fn is_hidden(clean: &CleanPath) -> bool {
    is_hidden_path(&clean.0)
}

/// `is_hidden` of a path made of `/segment`s. Most paths have no segment that starts with a
/// dot, which one pass of `memchr` tells (splitting every path into segments was 5 % of a
/// cached response's instructions, callgrind).
fn is_hidden_path(clean: &str) -> bool {
    let bytes = clean.as_bytes();
    let dot_segment = memchr::memchr_iter(b'.', bytes).any(|at| at > 0 && bytes[at - 1] == b'/');
    dot_segment
        && clean
            .split('/')
            .skip(1)
            .enumerate()
            .any(|(index, segment)| segment.starts_with('.') && !is_well_known(index, segment))
}

fn is_well_known(index: usize, segment: &str) -> bool {
    index == 0 && segment == ".well-known"
}

/// The user name of a `~name` segment, if it is a valid one: `[a-z_][a-z0-9_-]*`, at most 32.
fn user_name(segment: &str) -> Option<&str> {
    let name = segment.strip_prefix('~')?;
    let mut bytes = name.bytes();
    let first_ok = matches!(bytes.next(), Some(b'a'..=b'z' | b'_'));
    let rest_ok = bytes.all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'));
    (first_ok && rest_ok && name.len() <= 32).then_some(name)
}

/// For `/~name` and `/~name/...`: the user name and the rest of the path (starting with '/', or
/// empty for `/~name` itself, which the caller redirects to `/~name/`).
#[must_use]
pub fn userdir(clean: &CleanPath) -> Option<(&str, &str)> {
    let after_root = clean.as_str().strip_prefix('/')?;
    let (first, rest) = match after_root.find('/') {
        Some(at) => after_root.split_at(at),
        None => (after_root, ""),
    };
    Some((user_name(first)?, rest))
}

/// Bytes left as they are in a URL path: RFC 3986 §3.3 `pchar` and '/', minus '%' (always
/// encoded so decoding gives the name back).
fn is_path_safe(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'/'
        )
}

/// Percent-encodes a decoded path (or one segment) for a URL: everything outside `pchar` and
/// '/' becomes `%XX` (upper-case hex), including '%', '?', '#', spaces and non-ASCII bytes.
#[must_use]
pub fn encode_path(decoded: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut encoded = String::with_capacity(decoded.len());
    for &byte in decoded.as_bytes() {
        if is_path_safe(byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push('%');
            encoded.push(char::from(HEX[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
    encoded
}

/// Checks the invariants of a successful [`normalize`]; panics with the offending input.
fn check_clean(input: &str, clean: &CleanPath, opts: &PathOptions) {
    let text = clean.as_str();
    assert!(text.starts_with('/'), "{input:?} -> {text:?}: not absolute");
    assert!(!text.contains('\0'), "{input:?} -> {text:?}: NUL");
    assert!(!text.contains('\\'), "{input:?} -> {text:?}: backslash");
    assert!(!text.contains("//"), "{input:?} -> {text:?}: empty segment");
    for segment in clean.segments() {
        assert!(
            segment != ".." && segment != ".",
            "{input:?} -> {text:?}: dot segment"
        );
        if !opts.allow_dotfiles && segment.starts_with('.') {
            assert_eq!(segment, ".well-known", "{input:?} -> {text:?}: hidden");
        }
    }
    let again = normalize(&clean.to_uri(), opts);
    assert_eq!(
        again.as_ref(),
        Ok(clean),
        "{input:?} -> {text:?}: not idempotent"
    );
}

/// The fuzz entry point (fuzz/fuzz_targets/path.rs and tests/it/path_corpus.rs): runs
/// [`normalize`] under every option combination and checks the invariants of each result.
/// Panics only when an invariant is broken.
pub fn fuzz_path(data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    for allow_dotfiles in [false, true] {
        for userdir_on in [false, true] {
            let opts = PathOptions {
                allow_dotfiles,
                userdir: userdir_on,
            };
            if let Ok(clean) = normalize(&input, &opts) {
                check_clean(&input, &clean, &opts);
                if let Some((user, rest)) = userdir(&clean) {
                    assert!(rest.is_empty() || rest.starts_with('/'));
                    assert!(!user.is_empty() && user.len() <= 32);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STRICT: PathOptions = PathOptions {
        allow_dotfiles: false,
        userdir: false,
    };
    const DOTFILES: PathOptions = PathOptions {
        allow_dotfiles: true,
        userdir: false,
    };
    const USERDIR: PathOptions = PathOptions {
        allow_dotfiles: false,
        userdir: true,
    };

    fn ok(path: &str) -> Result<CleanPath, PathError> {
        Ok(CleanPath(path.to_owned()))
    }

    #[test]
    fn from_normalized_accepts_exactly_what_normalize_produces() {
        for good in [
            "/",
            "/a",
            "/a/b/",
            "/~user/x.txt",
            "/a%20b",
            "/.well-known/x",
        ] {
            assert_eq!(CleanPath::from_normalized(good).unwrap().as_str(), good);
        }
        for bad in [
            "", "a", "//", "/a//b", "/./a", "/a/../b", "/a/..", "/a\\b", "/a\0b", "/a\nb",
        ] {
            assert!(CleanPath::from_normalized(bad).is_none(), "{bad:?}");
        }
    }

    /// Traversal attempts and what the strict options make of them. Each one is also a file in
    /// fuzz/corpus/path/ (replayed by tests/it/path_corpus.rs).
    const TRAVERSALS: &[(&str, Result<&str, PathError>)] = &[
        ("/../etc/passwd", Err(PathError::EscapesRoot)),
        ("/..", Err(PathError::EscapesRoot)),
        ("/../", Err(PathError::EscapesRoot)),
        ("/%2e%2e/etc/passwd", Err(PathError::EscapesRoot)),
        ("/%2E%2e/", Err(PathError::EscapesRoot)),
        ("/%2e%2E/%2e%2e/etc/passwd", Err(PathError::EscapesRoot)),
        ("/.%2e/etc/passwd", Err(PathError::EscapesRoot)),
        ("/%2E./", Err(PathError::EscapesRoot)),
        ("/a/b/../../../etc/passwd", Err(PathError::EscapesRoot)),
        ("/a/./b/../../..", Err(PathError::EscapesRoot)),
        ("/./../", Err(PathError::EscapesRoot)),
        ("//../etc/passwd", Err(PathError::EscapesRoot)),
        ("/a/%2e%2e/%2e%2e/%2e%2e/etc", Err(PathError::EscapesRoot)),
        ("/~root/../../etc/passwd", Err(PathError::EscapesRoot)),
        ("/%252e%252e/etc/passwd", Ok("/%2e%2e/etc/passwd")),
        ("/%25%32%65%25%32%65/", Ok("/%2e%2e/")),
        ("/..%2f..%2fetc/passwd", Err(PathError::EncodedSlash)),
        (
            "/%2e%2e%2f%2e%2e%2fetc/passwd",
            Err(PathError::EncodedSlash),
        ),
        ("/a/..%2F..%2F", Err(PathError::EncodedSlash)),
        ("/..%5c..%5cetc/passwd", Err(PathError::Backslash)),
        ("/..\\..\\etc\\passwd", Err(PathError::Backslash)),
        ("/%5c../%5c../", Err(PathError::Backslash)),
        ("/%2e%2e%5c", Err(PathError::Backslash)),
        ("/%c0%ae%c0%ae/etc/passwd", Err(PathError::NotUtf8)),
        ("/%c0%af", Err(PathError::NotUtf8)),
        ("/..%c0%af../etc/passwd", Err(PathError::NotUtf8)),
        ("/%c0%2e%c0%2e/", Err(PathError::NotUtf8)),
        ("/%e0%80%ae%e0%80%ae/", Err(PathError::NotUtf8)),
        ("/%f0%80%80%ae/", Err(PathError::NotUtf8)),
        ("/%c1%9c", Err(PathError::NotUtf8)),
        ("/%00", Err(PathError::Nul)),
        ("/index.html%00.txt", Err(PathError::Nul)),
        ("/.%00./", Err(PathError::Nul)),
        ("/..%00/", Err(PathError::Nul)),
        ("/..%0d%0a/", Err(PathError::ControlCharacter)),
        ("/%u002e%u002e/", Err(PathError::BadEncoding)),
        ("/%%32%65%%32%65/", Err(PathError::BadEncoding)),
        ("/%2", Err(PathError::BadEncoding)),
        ("/%zz/", Err(PathError::BadEncoding)),
        ("/....//....//etc/passwd", Err(PathError::Hidden)),
        ("/.../.../", Err(PathError::Hidden)),
        ("/..;/etc/passwd", Err(PathError::Hidden)),
        ("/..%255c../", Err(PathError::Hidden)),
        ("/.git/config", Err(PathError::Hidden)),
        ("/a/.htaccess", Err(PathError::Hidden)),
        ("/etc/passwd.", Ok("/etc/passwd.")),
        ("/etc/passwd...", Ok("/etc/passwd...")),
        (
            "/%ef%bc%8e%ef%bc%8e/etc/passwd",
            Ok("/\u{ff0e}\u{ff0e}/etc/passwd"),
        ),
        ("/\u{ff0e}\u{ff0e}/", Ok("/\u{ff0e}\u{ff0e}/")),
        ("/a/b/../../etc/passwd", Ok("/etc/passwd")),
        ("/a/%2e%2e/b", Ok("/b")),
        ("/~alice/../etc/passwd", Ok("/etc/passwd")),
        (
            "/.well-known/acme-challenge/token",
            Ok("/.well-known/acme-challenge/token"),
        ),
        ("..%2f..%2fetc/passwd", Err(PathError::NotAbsolute)),
        ("\\..\\", Err(PathError::NotAbsolute)),
    ];

    #[test]
    fn traversal_table_never_leaves_the_root() {
        assert!(TRAVERSALS.len() >= 40);
        for &(input, expected) in TRAVERSALS {
            let result = normalize(input, &STRICT);
            assert_eq!(
                result
                    .as_ref()
                    .map(CleanPath::as_str)
                    .map_err(|error| *error),
                expected,
                "{input:?}"
            );
            if let Ok(clean) = &result {
                assert!(clean.segments().all(|segment| segment != ".."));
            }
            fuzz_path(input.as_bytes());
        }
    }

    #[test]
    fn every_table_entry_is_in_the_fuzz_corpus() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/path");
        let on_disk: std::collections::HashSet<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| std::fs::read(entry.unwrap().path()).unwrap())
            .collect();
        for (input, _) in TRAVERSALS {
            assert!(on_disk.contains(input.as_bytes()), "{input:?} missing");
        }
    }

    #[test]
    fn ordinary_paths() {
        assert_eq!(normalize("/", &STRICT), ok("/"));
        assert_eq!(normalize("/index.html", &STRICT), ok("/index.html"));
        assert_eq!(normalize("/docs/", &STRICT), ok("/docs/"));
        assert_eq!(normalize("//docs//a.txt", &STRICT), ok("/docs/a.txt"));
        assert_eq!(normalize("/docs/.", &STRICT), ok("/docs/"));
        assert_eq!(normalize("/docs/sub/..", &STRICT), ok("/docs/"));
        assert_eq!(normalize("/my%20file.txt", &STRICT), ok("/my file.txt"));
        assert_eq!(normalize("/caf%C3%A9", &STRICT), ok("/café"));
        assert_eq!(normalize("/caf%c3%a9", &STRICT), ok("/café"));
        assert_eq!(normalize("/100%25", &STRICT), ok("/100%"));
        assert_eq!(normalize("/a+b", &STRICT), ok("/a+b"));
    }

    #[test]
    fn dotfiles_option_and_well_known() {
        assert_eq!(normalize("/.env", &STRICT), Err(PathError::Hidden));
        assert_eq!(normalize("/.env", &DOTFILES), ok("/.env"));
        assert_eq!(normalize("/.well-known/", &STRICT), ok("/.well-known/"));
        assert_eq!(
            normalize("/.well-known/.secret", &STRICT),
            Err(PathError::Hidden)
        );
        assert_eq!(normalize("/a/.well-known", &STRICT), Err(PathError::Hidden));
        assert_eq!(PathError::Hidden.status(), 404);
        assert_eq!(PathError::EscapesRoot.status(), 400);
        assert_eq!(PathError::Nul.status(), 400);
    }

    #[test]
    fn userdir_paths_cannot_climb_out_of_the_user() {
        assert_eq!(
            normalize("/~alice/../etc/passwd", &USERDIR),
            Err(PathError::EscapesRoot)
        );
        assert_eq!(normalize("/~alice/a/../b", &USERDIR), ok("/~alice/b"));
        // Not a valid user name: an ordinary segment.
        assert_eq!(normalize("/~Alice/../x", &USERDIR), ok("/x"));
        let clean = normalize("/~alice/pub/index.html", &USERDIR).unwrap();
        assert_eq!(userdir(&clean), Some(("alice", "/pub/index.html")));
        let bare = normalize("/~bob", &USERDIR).unwrap();
        assert_eq!(userdir(&bare), Some(("bob", "")));
        let slash = normalize("/~bob/", &USERDIR).unwrap();
        assert_eq!(userdir(&slash), Some(("bob", "/")));
        for invalid in ["/~", "/~9x", "/~Bob", "/~a.b", "/x/~bob"] {
            let clean = normalize(invalid, &USERDIR).unwrap();
            assert_eq!(userdir(&clean), None, "{invalid}");
        }
        let long = format!("/~{}", "a".repeat(33));
        assert_eq!(userdir(&normalize(&long, &USERDIR).unwrap()), None);
        let longest = format!("/~{}", "a".repeat(32));
        assert!(userdir(&normalize(&longest, &USERDIR).unwrap()).is_some());
    }

    #[test]
    fn clean_path_accessors() {
        let root = normalize("/", &STRICT).unwrap();
        assert_eq!((root.relative(), root.is_root()), (".", true));
        assert_eq!(root.segments().count(), 0);
        let dir = normalize("/a/b/", &STRICT).unwrap();
        assert!(dir.ends_with_slash());
        assert_eq!(dir.relative(), "a/b");
        assert_eq!(dir.segments().collect::<Vec<_>>(), ["a", "b"]);
        let file = normalize("/a/b", &STRICT).unwrap();
        assert!(!file.ends_with_slash());
        assert_eq!(file.with_trailing_slash(), dir);
        let odd = normalize("/a%20b/%3F%23%25/caf%C3%A9", &STRICT).unwrap();
        assert_eq!(odd.as_str(), "/a b/?#%/café");
        assert_eq!(odd.to_uri(), "/a%20b/%3F%23%25/caf%C3%A9");
        assert_eq!(CleanPath::root(), root);
    }

    fn path_piece() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "/",
            "//",
            ".",
            "..",
            "%2e",
            "%2E",
            "%2f",
            "%5c",
            "%25",
            "%",
            "%00",
            "a",
            "b.txt",
            "~alice",
            "~",
            ".well-known",
            ".git",
            "%c3%a9",
            "é",
            "\u{ff0e}",
            "%c0%ae",
            "?",
            " ",
            "%20",
            "\\",
            ";",
            "%0a",
            "%7e",
        ])
    }

    proptest! {
        #[test]
        fn normalize_is_idempotent_and_never_escapes(
            pieces in prop::collection::vec(path_piece(), 0..16),
            allow_dotfiles: bool,
            userdir_on: bool,
        ) {
            let input = format!("/{}", pieces.concat());
            let opts = PathOptions { allow_dotfiles, userdir: userdir_on };
            if let Ok(clean) = normalize(&input, &opts) {
                check_clean(&input, &clean, &opts);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..64)) {
            fuzz_path(&data);
        }
    }
}
