//! The header rules of a `[[site]]` or `[[site.location]]` (inherited site → location, each
//! list whole, as `headers`): `headers_set` (replace a field) and `headers_remove`.
//!
//! Owns: reading them, with errors naming the line and key (a field ampd frames the message
//! with is refused: `header_rules::PROTECTED`). Must not touch: applying them
//! (`header_rules.rs`).

use super::header_rules::protected;
use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::RawBlock;

/// What a refused name's error suggests.
const PROTECTED_HINT: &str = "Content-Length, Transfer-Encoding, Content-Range, Date and the \
     connection's own fields (Connection, Keep-Alive, Upgrade, TE, Trailer) are ampd's to \
     write; rules may change any other field (Server, X-Powered-By, Cache-Control, ...)";

impl Loader<'_> {
    pub(super) fn header_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        if let Some(set) = &block.headers_set {
            let key = format!("{table}.headers_set");
            let mut list = Vec::new();
            for (name, value) in set.get_ref() {
                self.rule_name(name, set.span(), &key)?;
                if value
                    .bytes()
                    .any(|byte| byte == b'\r' || byte == b'\n' || byte == 0)
                {
                    return Err(self.error(
                        set.span(),
                        &key,
                        format!("the value of '{name}' has a line break"),
                    ));
                }
                list.push((name.clone(), value.clone()));
            }
            partial.headers_set = Some(list);
        }
        if let Some(remove) = &block.headers_remove {
            let key = format!("{table}.headers_remove");
            for name in remove.get_ref() {
                self.rule_name(name, remove.span(), &key)?;
            }
            partial.headers_remove = Some(remove.get_ref().clone());
        }
        Ok(())
    }

    /// A field name a rule may act on: a token, and not one ampd frames the message with.
    fn rule_name(&self, name: &str, span: std::ops::Range<usize>, key: &str) -> Loaded<()> {
        if !ampd_http::is_token(name.as_bytes()) {
            return Err(self.error(span, key, format!("'{name}' is not a header name")));
        }
        if protected(name) {
            return Err(self.hinted(
                span,
                key,
                format!("'{name}' frames the message and cannot be removed or replaced"),
                PROTECTED_HINT,
            ));
        }
        Ok(())
    }
}
