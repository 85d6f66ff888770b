//! MIME types: the server-wide `[types]` table and `types_file` (the Debian `mime.types`
//! format), and a block's `default_type` and `charset` (inherited site → location).
//!
//! Owns: reading these keys, with errors naming the configuration's (or the types file's) line
//! and key. Must not touch: lookups (`mime`).

use std::collections::BTreeMap;
use std::sync::Arc;

use toml::Spanned;

use crate::mime::{self, TypeTable};

use super::load::{ConfigError, Loaded, Loader};
use super::merge::{Charset, Partial};
use super::raw::RawBlock;
use super::text::plain;
use super::Site;

impl Loader<'_> {
    /// `types_file`, then `[types]` over it (both over the built-in table), given to every
    /// location of `sites`.
    pub(super) fn type_table(
        &self,
        types: Option<&Spanned<BTreeMap<String, Spanned<String>>>>,
        types_file: Option<&Spanned<String>>,
        sites: &mut [Site],
    ) -> Loaded<()> {
        let mut entries = Vec::new();
        if let Some(file) = types_file {
            let path = self.path(file.get_ref());
            let text = std::fs::read_to_string(&path).map_err(|error| {
                self.hinted(
                    file.span(),
                    "types_file",
                    format!("cannot read {}: {}", path.display(), plain(&error)),
                    "a file in the mime.types format, such as /etc/mime.types (Debian package media-types)",
                )
            })?;
            entries = mime::parse_mime_types(&text).map_err(|error| ConfigError {
                file: path.clone(),
                line: error.line,
                column: 1,
                key: "types_file".to_owned(),
                message: error.message,
                hint: Some("each line: a type, then its extensions; # starts a comment".to_owned()),
            })?;
        }
        if let Some(types) = types {
            for (extension, value) in types.get_ref() {
                let key = format!("types.{extension}");
                if !mime::is_extension(extension) {
                    return Err(self.hinted(
                        value.span(),
                        &key,
                        format!("'{extension}' is not a file-name extension"),
                        format!(
                            "the extension without its dot, at most {} bytes: wasm = \"application/wasm\"",
                            mime::MAX_EXTENSION
                        ),
                    ));
                }
                self.media_type(value, &key)?;
                entries.push((extension.clone(), value.get_ref().clone()));
            }
        }
        if entries.is_empty() {
            return Ok(());
        }
        let table = Arc::new(TypeTable::new(entries));
        for location in sites.iter_mut().flat_map(|site| &mut site.locations) {
            let files = &mut location.settings.static_files;
            files.types = files.types.with_table(table.clone());
        }
        Ok(())
    }

    /// `default_type` and `charset` of a `[[site]]` or `[[site.location]]`.
    pub(super) fn type_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        if let Some(value) = &block.default_type {
            self.media_type(value, &format!("{table}.default_type"))?;
            partial.default_type = Some(value.get_ref().clone());
        }
        if let Some(value) = &block.charset {
            let name = value.get_ref();
            partial.charset = Some(if name.eq_ignore_ascii_case("off") {
                Charset::Off
            } else if ampd_http::is_token(name.as_bytes()) {
                Charset::Named(name.clone())
            } else {
                return Err(self.hinted(
                    value.span(),
                    &format!("{table}.charset"),
                    format!("'{name}' is not a charset name"),
                    "a name such as \"utf-8\" or \"iso-8859-1\", or \"off\" for none",
                ));
            });
        }
        Ok(())
    }

    fn media_type(&self, value: &Spanned<String>, key: &str) -> Loaded<()> {
        if mime::is_media_type(value.get_ref()) {
            Ok(())
        } else {
            Err(self.hinted(
                value.span(),
                key,
                format!("'{}' is not a media type", value.get_ref()),
                "type/subtype, such as \"application/wasm\" or \"text/plain\"",
            ))
        }
    }
}
