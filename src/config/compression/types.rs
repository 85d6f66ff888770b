//! Which `Content-Type`s are worth compressing: text and formats that are text underneath, not
//! formats that are compressed already (images, audio, video, archives, WOFF/WOFF2 fonts),
//! where compressing costs CPU and saves nothing.

use std::fmt;

/// A list of type patterns: `type/subtype`, `type/*`, or `*/*+suffix` (a structured syntax
/// suffix, RFC 6838 §4.2.8: `*/*+json` covers `application/ld+json`). Compared without case,
/// on the type's essence (parameters such as `charset` ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressibleTypes {
    patterns: Vec<Pattern>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    /// `type/subtype`, lower case.
    Exact(String),
    /// `type/*`: the type, lower case.
    AnySubtype(String),
    /// `*/*+suffix`: `+suffix`, lower case.
    Suffix(String),
}

/// The default list: text, JSON, JavaScript, XML, SVG, wasm, and fonts stored uncompressed
/// (TrueType, OpenType, their collections, EOT). WOFF and WOFF2 are compressed inside (zlib,
/// Brotli): they are left out, as are all `image/*` but SVG.
const DEFAULT: &[&str] = &[
    "text/*",
    "application/json",
    "*/*+json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/xml",
    "*/*+xml",
    "image/svg+xml",
    "application/wasm",
    "application/yaml",
    "application/toml",
    "application/x-sh",
    "application/rtf",
    "font/ttf",
    "font/otf",
    "font/collection",
    "font/sfnt",
    "application/font-sfnt",
    "application/x-font-ttf",
    "application/x-font-otf",
    "application/vnd.ms-fontobject",
];

/// A pattern that is none of the three forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypePatternError {
    pub pattern: String,
}

impl fmt::Display for TypePatternError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "'{}' is not a media type pattern (type/subtype, type/* or */*+suffix)",
            self.pattern
        )
    }
}

impl std::error::Error for TypePatternError {}

impl Default for CompressibleTypes {
    fn default() -> CompressibleTypes {
        CompressibleTypes::from_patterns(DEFAULT).expect("the default list is well formed")
    }
}

fn is_token(text: &str) -> bool {
    ampd_http::is_token(text.as_bytes())
}

impl CompressibleTypes {
    /// A list of patterns (a location's own, replacing the default).
    ///
    /// # Errors
    /// The first pattern that is not `type/subtype`, `type/*` or `*/*+suffix`.
    pub fn from_patterns<S: AsRef<str>>(
        patterns: &[S],
    ) -> Result<CompressibleTypes, TypePatternError> {
        let patterns = patterns
            .iter()
            .map(|pattern| {
                let text = pattern.as_ref().trim();
                let error = || TypePatternError {
                    pattern: pattern.as_ref().to_owned(),
                };
                let (kind, subtype) = text.split_once('/').ok_or_else(error)?;
                let lower = text.to_ascii_lowercase();
                if kind == "*" {
                    let suffix = subtype.strip_prefix("*+").ok_or_else(error)?;
                    return if is_token(suffix) && !suffix.contains('+') {
                        Ok(Pattern::Suffix(lower[3..].to_owned()))
                    } else {
                        Err(error())
                    };
                }
                if !is_token(kind) {
                    return Err(error());
                }
                if subtype == "*" {
                    Ok(Pattern::AnySubtype(kind.to_ascii_lowercase()))
                } else if is_token(subtype) {
                    Ok(Pattern::Exact(lower))
                } else {
                    Err(error())
                }
            })
            .collect::<Result<Vec<Pattern>, TypePatternError>>()?;
        Ok(CompressibleTypes { patterns })
    }

    /// Whether a response of `content_type` (a whole `Content-Type` value) is to be compressed.
    #[must_use]
    pub fn matches(&self, content_type: &str) -> bool {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let Some((kind, _)) = essence.split_once('/') else {
            return false;
        };
        self.patterns.iter().any(|pattern| match pattern {
            Pattern::Exact(exact) => *exact == essence,
            Pattern::AnySubtype(wanted) => wanted == kind,
            Pattern::Suffix(suffix) => essence.ends_with(suffix.as_str()),
        })
    }
}
