//! Content negotiation's keys of a `[[site]]` or `[[site.location]]` (inherited site →
//! location): `multiviews` and `negotiation`.
//!
//! Owns: reading them, with errors naming the line and key. Must not touch: the choice itself
//! (`content::negotiate`).

use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::RawBlock;

impl Loader<'_> {
    pub(super) fn negotiation_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        partial.multiviews = block.multiviews.as_ref().map(|value| *value.get_ref());
        if let Some(value) = &block.negotiation {
            partial.strict_negotiation = Some(match value.get_ref().as_str() {
                "strict" => true,
                "lenient" => false,
                other => {
                    return Err(self.hinted(
                        value.span(),
                        &format!("{table}.negotiation"),
                        format!("unknown negotiation '{other}'"),
                        "\"strict\" (406 when no variant is acceptable) or \"lenient\" (the default variant)",
                    ))
                }
            });
        }
        Ok(())
    }
}
