//! What a location compresses on the fly (RFC 9110 §8.4.1): whether it does, the content
//! codings it offers in the server's order of preference, their levels, the smallest body worth
//! it, and which `Content-Type`s are ([`CompressibleTypes`]).
//!
//! Owns: the settings and their defaults. Must not touch: the configuration's text
//! (`compression_keys.rs`), choosing for a request and the codecs (`response::compress`).

mod types;

pub use types::{CompressibleTypes, TypePatternError};

/// A content coding ampd can produce on the fly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Gzip,
    Brotli,
    Zstd,
}

impl Encoding {
    /// Every coding, in the default order of preference (`Compression::encodings`).
    pub const ALL: [Encoding; 3] = [Encoding::Zstd, Encoding::Brotli, Encoding::Gzip];

    /// The token in `Accept-Encoding` and `Content-Encoding`.
    #[must_use]
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    #[must_use]
    pub fn from_token(token: &str) -> Option<Encoding> {
        Encoding::ALL
            .into_iter()
            .find(|encoding| encoding.token().eq_ignore_ascii_case(token))
    }

    /// The levels the codec takes, lowest (fastest) to highest.
    #[must_use]
    pub fn levels(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Encoding::Gzip => 1..=9,
            Encoding::Brotli => 0..=11,
            Encoding::Zstd => 1..=19,
        }
    }

    /// The level used unless configured: where each codec's speed still keeps up with a
    /// server's output. gzip 5 as Caddy (nginx users mostly set `gzip_comp_level` 4-6; above 6
    /// zlib spends twice the time for about 1 % smaller output); Brotli 4, the densest level
    /// faster than gzip 5 (5 and above switch to a far slower block splitter); zstd 3, the
    /// library's own default, faster than gzip 1 and denser than gzip 9 on text.
    #[must_use]
    pub fn default_level(self) -> u32 {
        match self {
            Encoding::Gzip => 5,
            Encoding::Brotli => 4,
            Encoding::Zstd => 3,
        }
    }
}

/// A location's on-the-fly compression (`compress`, `compress_types`, `compress_min_length`,
/// `compress_encodings`, `compress_levels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compression {
    /// Off: responses go out as their handler made them (precompressed `.gz`/`.br` siblings
    /// are still chosen, that is `precompressed`).
    pub enabled: bool,
    /// The codings offered, the server's preference first: among codings a client weighs
    /// equally, the first listed wins (a client's higher q-value wins over this order).
    pub encodings: Vec<Encoding>,
    /// Level per coding, in the order of `Encoding::ALL` (`level`).
    levels: [u32; 3],
    /// Bodies shorter than this (when their length is known) go out plain: below it the
    /// coding's own framing eats most of the gain (Caddy's `minimum_length` default).
    pub min_length: u64,
    pub types: CompressibleTypes,
}

/// `compress_min_length` unless configured, as Caddy's `encode`.
pub const DEFAULT_MIN_LENGTH: u64 = 512;

impl Compression {
    /// The defaults, on or off: every coding offered (zstd, Brotli, gzip), the default levels
    /// and types, 512 bytes at least.
    #[must_use]
    pub fn new(enabled: bool) -> Compression {
        Compression {
            enabled,
            encodings: Encoding::ALL.to_vec(),
            levels: Encoding::ALL.map(Encoding::default_level),
            min_length: DEFAULT_MIN_LENGTH,
            types: CompressibleTypes::default(),
        }
    }

    /// The level `encoding` compresses at.
    #[must_use]
    pub fn level(&self, encoding: Encoding) -> u32 {
        self.levels[Self::slot(encoding)]
    }

    /// Set `encoding`'s level, clamped to what the codec takes.
    pub fn set_level(&mut self, encoding: Encoding, level: u32) {
        let range = encoding.levels();
        self.levels[Self::slot(encoding)] = level.clamp(*range.start(), *range.end());
    }

    fn slot(encoding: Encoding) -> usize {
        Encoding::ALL
            .iter()
            .position(|each| *each == encoding)
            .unwrap_or_default()
    }
}

impl Default for Compression {
    /// Off (what a proxy, FastCGI or CGI location gets unless it turns compression on).
    fn default() -> Compression {
        Compression::new(false)
    }
}
