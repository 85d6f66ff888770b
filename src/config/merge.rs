//! Site → location inheritance (Abyss's per-directory sections; nginx `merge_loc_conf`).
//!
//! Owns: `Partial` (what one block sets) and `finish`, which fills what a location leaves
//! unset from its site, then from the defaults. A location's value always wins; lists
//! (`index`, `headers`, `allow`, `deny`) are replaced whole, never appended, so a location
//! reads the same whatever its site says about keys it sets itself.
//! Must not touch: the file's text (errors are placed by `load`).

use std::path::PathBuf;
use std::time::Duration;

use super::{AddressRange, BasicAuth, Handler, LocationSettings, Redirect};

/// The settings one `[[site]]` or `[[site.location]]` block sets; `None` is "not set here".
#[derive(Clone, Debug, Default)]
pub(super) struct Partial {
    /// (directory, is an alias).
    pub root: Option<(PathBuf, bool)>,
    pub index: Option<Vec<String>>,
    pub autoindex: Option<bool>,
    pub precompressed: Option<bool>,
    pub dotfiles: Option<bool>,
    pub follow_symlinks: Option<bool>,
    pub userdir: Option<String>,
    pub headers: Option<Vec<(String, String)>>,
    pub cache_control: Option<String>,
    pub expires: Option<Duration>,
    pub redirect: Option<Redirect>,
    pub rewrite: Option<String>,
    pub allow: Option<Vec<AddressRange>>,
    pub deny: Option<Vec<AddressRange>>,
    pub basic_auth: Option<BasicAuth>,
    pub handler: Option<Handler>,
    pub rate_limit: Option<bool>,
}

/// A static location (the default handler) that neither it nor its site gives a root.
#[derive(Debug)]
pub(super) struct MissingRoot;

/// The location's settings: its own, else its site's, else the defaults.
pub(super) fn finish(location: Partial, site: &Partial) -> Result<LocationSettings, MissingRoot> {
    let handler = location.handler.or(site.handler).unwrap_or(Handler::Static);
    let redirect = location.redirect.or_else(|| site.redirect.clone());
    let rewrite = location.rewrite.or_else(|| site.rewrite.clone());
    let root = location.root.or_else(|| site.root.clone());
    // Only a static location that is neither redirected nor rewritten reads files.
    let needs_root = handler == Handler::Static && redirect.is_none() && rewrite.is_none();
    let (root, alias) = match root {
        Some(root) => root,
        None if needs_root => return Err(MissingRoot),
        None => (PathBuf::from("/nonexistent"), false),
    };
    let mut settings = LocationSettings::new(root);
    settings.alias = alias;
    let files = &mut settings.static_files;
    if let Some(index) = location.index.or_else(|| site.index.clone()) {
        files.index = index;
    }
    files.autoindex = location
        .autoindex
        .or(site.autoindex)
        .unwrap_or(files.autoindex);
    files.precompressed = location
        .precompressed
        .or(site.precompressed)
        .unwrap_or(files.precompressed);
    files.dotfiles = location
        .dotfiles
        .or(site.dotfiles)
        .unwrap_or(files.dotfiles);
    files.follow_symlinks = location
        .follow_symlinks
        .or(site.follow_symlinks)
        .unwrap_or(files.follow_symlinks);
    files.userdir = location.userdir.or_else(|| site.userdir.clone());
    settings.headers = location
        .headers
        .or_else(|| site.headers.clone())
        .unwrap_or_default();
    settings.cache_control = location
        .cache_control
        .or_else(|| site.cache_control.clone());
    settings.expires = location.expires.or(site.expires);
    settings.redirect = redirect;
    settings.rewrite = rewrite;
    settings.access.allow = location
        .allow
        .or_else(|| site.allow.clone())
        .unwrap_or_default();
    settings.access.deny = location
        .deny
        .or_else(|| site.deny.clone())
        .unwrap_or_default();
    settings.access.basic_auth = location.basic_auth.or_else(|| site.basic_auth.clone());
    settings.handler = handler;
    settings.rate_limit = location.rate_limit.or(site.rate_limit).unwrap_or(true);
    Ok(settings)
}

/// Whether `hash` is a bcrypt (`$2a$`, `$2b$`, `$2y$`) or argon2 (PHC `$argon2id$…`) hash
/// that the verifier can read.
pub(super) fn is_password_hash(hash: &str) -> bool {
    if hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$") {
        return hash.parse::<bcrypt::HashParts>().is_ok();
    }
    hash.starts_with("$argon2") && argon2::PasswordHash::new(hash).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_keeps_what_it_sets_and_inherits_the_rest() {
        let site = Partial {
            root: Some((PathBuf::from("/srv/site"), false)),
            autoindex: Some(true),
            headers: Some(vec![("X-Site".into(), "1".into())]),
            ..Partial::default()
        };
        let location = Partial {
            autoindex: Some(false),
            expires: Some(Duration::from_secs(60)),
            ..Partial::default()
        };
        let settings = finish(location, &site).unwrap();
        assert_eq!(settings.static_files.root, PathBuf::from("/srv/site"));
        assert!(!settings.static_files.autoindex);
        assert_eq!(
            settings.headers,
            vec![("X-Site".to_owned(), "1".to_owned())]
        );
        assert_eq!(settings.expires, Some(Duration::from_secs(60)));
        assert!(finish(Partial::default(), &Partial::default()).is_err());
        let status = Partial {
            handler: Some(Handler::Status),
            ..Partial::default()
        };
        assert!(finish(status, &Partial::default()).is_ok());
    }
}
