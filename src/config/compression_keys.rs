//! On-the-fly compression's keys of a `[[site]]` or `[[site.location]]` (inherited site →
//! location, key by key; a list or table replaces the site's whole): `compress`,
//! `compress_types`, `compress_min_length`, `compress_encodings`, `compress_levels`.
//!
//! Owns: reading them, with errors naming the line and key. Must not touch: the defaults
//! (`compression.rs`), choosing a coding for a request (`response::compress`).

use super::compression::{CompressibleTypes, Encoding};
use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::RawBlock;

/// What an unknown coding's error suggests.
const ENCODINGS_HINT: &str = "\"zstd\", \"br\" or \"gzip\", the preferred first";

impl Loader<'_> {
    pub(super) fn compression_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        partial.compress = block.compress.as_ref().map(|value| *value.get_ref());
        if let Some(types) = &block.compress_types {
            let key = format!("{table}.compress_types");
            partial.compress_types = Some(
                CompressibleTypes::from_patterns(types.get_ref()).map_err(|error| {
                    self.hinted(
                        types.span(),
                        &key,
                        error.to_string(),
                        "e.g. [\"text/*\", \"application/json\", \"*/*+xml\"]",
                    )
                })?,
            );
        }
        if let Some(length) = &block.compress_min_length {
            partial.compress_min_length =
                Some(self.size(length, &format!("{table}.compress_min_length"))?);
        }
        if let Some(encodings) = &block.compress_encodings {
            let key = format!("{table}.compress_encodings");
            let mut list = Vec::new();
            for token in encodings.get_ref() {
                let encoding = self.encoding(token, encodings.span(), &key)?;
                if list.contains(&encoding) {
                    return Err(self.error(
                        encodings.span(),
                        &key,
                        format!("'{token}' is listed twice"),
                    ));
                }
                list.push(encoding);
            }
            if list.is_empty() {
                return Err(self.hinted(
                    encodings.span(),
                    &key,
                    "no coding listed",
                    "list at least one, or set compress = false",
                ));
            }
            partial.compress_encodings = Some(list);
        }
        if let Some(levels) = &block.compress_levels {
            let key = format!("{table}.compress_levels");
            let mut list = Vec::new();
            for (token, &level) in levels.get_ref() {
                let encoding = self.encoding(token, levels.span(), &key)?;
                let range = encoding.levels();
                let fits = u32::try_from(level).is_ok_and(|level| range.contains(&level));
                if !fits {
                    return Err(self.error(
                        levels.span(),
                        &key,
                        format!(
                            "{token} level {level} is out of range: {} to {}",
                            range.start(),
                            range.end()
                        ),
                    ));
                }
                list.push((encoding, u32::try_from(level).unwrap_or_default()));
            }
            partial.compress_levels = Some(list);
        }
        Ok(())
    }

    fn encoding(&self, token: &str, span: std::ops::Range<usize>, key: &str) -> Loaded<Encoding> {
        Encoding::from_token(token).ok_or_else(|| {
            self.hinted(
                span,
                key,
                format!("unknown content coding '{token}'"),
                ENCODINGS_HINT,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::compression::{Compression, Encoding, DEFAULT_MIN_LENGTH};
    use crate::config::load::load_str;

    const SITE: &str = "listen = \"127.0.0.1:0\"\n\n[[site]]\nroot = \"/tmp\"\n";

    fn locations(text: &str) -> Vec<Compression> {
        let config = load_str(&format!("{SITE}{text}"), Path::new("c.toml")).expect("loads");
        config.sites[0]
            .locations
            .iter()
            .map(|location| (*location.settings.compression).clone())
            .collect()
    }

    fn error(text: &str) -> String {
        load_str(&format!("{SITE}{text}"), Path::new("c.toml"))
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn static_locations_compress_by_default_and_programs_do_not() {
        let all = locations(
            "[[site.location]]\npath = \"/api/\"\nproxy_pass = \"http://127.0.0.1:9\"\n\
             [[site.location]]\npath = \"/php/\"\ncompress = true\n\
             fastcgi_pass = \"127.0.0.1:9\"\n",
        );
        let by_path = |index: usize| &all[index];
        assert_eq!(all.len(), 3);
        assert!(!by_path(0).enabled, "proxy");
        assert!(by_path(1).enabled, "fastcgi turned on");
        assert!(by_path(2).enabled, "the static /");
        assert_eq!(by_path(2).encodings, Encoding::ALL);
        assert_eq!(by_path(2).min_length, DEFAULT_MIN_LENGTH);
    }

    #[test]
    fn a_location_inherits_each_key_and_replaces_lists_whole() {
        let text = "compress_encodings = [\"gzip\", \"br\"]\ncompress_levels = { gzip = 9 }\n\
                    compress_min_length = \"1k\"\n\
                    [[site.location]]\npath = \"/a/\"\ncompress_levels = { br = 11 }\n\
                    compress_types = [\"text/plain\"]\n";
        let all = locations(text);
        let site = all
            .iter()
            .find(|each| each.types.matches("text/css"))
            .expect("/");
        assert_eq!(site.encodings, [Encoding::Gzip, Encoding::Brotli]);
        assert_eq!(site.level(Encoding::Gzip), 9);
        assert_eq!(site.min_length, 1024);
        let own = all
            .iter()
            .find(|each| !each.types.matches("text/css"))
            .expect("/a/");
        assert!(own.types.matches("text/plain; charset=utf-8"));
        assert_eq!(own.encodings, [Encoding::Gzip, Encoding::Brotli]);
        assert_eq!(own.level(Encoding::Brotli), 11);
        assert_eq!(
            own.level(Encoding::Gzip),
            5,
            "the location's table replaced the site's"
        );
        assert_eq!(own.min_length, 1024);
    }

    #[test]
    fn bad_values_name_file_line_and_key() {
        for (text, line, key, says) in [
            (
                "compress_encodings = [\"deflate\"]\n",
                5,
                "site.compress_encodings",
                "'deflate'",
            ),
            (
                "compress_encodings = [\"br\", \"br\"]\n",
                5,
                "site.compress_encodings",
                "twice",
            ),
            (
                "compress_encodings = []\n",
                5,
                "site.compress_encodings",
                "no coding",
            ),
            (
                "compress_levels = { gzip = 10 }\n",
                5,
                "site.compress_levels",
                "1 to 9",
            ),
            (
                "compress_levels = { lzma = 1 }\n",
                5,
                "site.compress_levels",
                "'lzma'",
            ),
            (
                "compress_types = [\"text\"]\n",
                5,
                "site.compress_types",
                "'text'",
            ),
            (
                "compress_min_length = \"lots\"\n",
                5,
                "site.compress_min_length",
                "size",
            ),
            (
                "[[site.location]]\npath = \"/a/\"\ncompress = \"yes\"\n",
                7,
                "compress",
                "",
            ),
        ] {
            let message = error(text);
            assert!(
                message.contains(&format!("c.toml:{line}:"))
                    && message.contains(key)
                    && message.contains(says),
                "{text}: {message}"
            );
        }
    }
}
