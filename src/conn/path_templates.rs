//! How routing spells paths: the options a request path is normalised with before any
//! location sees it (`ROUTING`), the `Location` of a redirect to `path/`, and the templates of
//! `rewrite`, `redirect`, `return` and `try_files` filled in for a request (`expand`).
//!
//! Owns: those three, shared by the phases (`route`) and the static handler's `try_files`, so
//! neither depends on the other for them. Must not touch: the phases' order, answers.

use crate::content::path::{self, CleanPath, PathOptions};
use crate::site::Route;

/// Paths are routed with dot-files allowed and `~user` off; each location then applies its
/// own rules (`path::is_hidden`, a second pass for `userdir`), so a location's rules cannot be
/// dodged by encoding (`/%2e%2e/`, `/%73tatic/`): routing sees the decoded, normalised path.
pub(in crate::conn) const ROUTING: PathOptions = PathOptions {
    allow_dotfiles: true,
    userdir: false,
};

/// The `Location` of a redirect from `clean` to `clean/`: the normalised path, percent-encoded
/// again, then the query as sent. Never the target as sent: `//evil.example` would be a
/// network-path reference to another host (RFC 3986 §4.2), and dot segments and `%`-spellings
/// would be kept.
pub(in crate::conn) fn with_slash(clean: &CleanPath, query: Option<&str>) -> String {
    let mut location = clean.with_trailing_slash().to_uri();
    if let Some(query) = query {
        location.push('?');
        location.push_str(query);
    }
    location
}

/// A template of `rewrite`, `redirect`, `return` or `try_files` filled in for a request
/// routed to `route` by `clean` (config/routing.rs): `{path}` the path, `{rest}` the path after
/// the location's prefix, a regex location's groups by number or name (`{1}`, `{id}`; a group
/// that took no part is empty), each percent-encoded again (a decoded `%0D%0A` or `?` must not
/// end a header or start a query); `{uri}` the request target as sent. Anything else in
/// braces stays as written (the loader refuses unknown names).
pub(in crate::conn) fn expand(template: &str, route: &Route, clean: &str, uri: &str) -> String {
    let captures = route.captures(clean);
    crate::config::routing::fill(template, |name| match name {
        "path" => Some(path::encode_path(clean)),
        "rest" => Some(path::encode_path(route.rest(clean).trim_start_matches('/'))),
        "uri" => Some(uri.to_owned()),
        _ => {
            let captures = captures.as_ref()?;
            let group = match name.parse::<usize>() {
                Ok(number) if number < captures.len() => captures.get(number),
                Ok(_) => return None,
                Err(_) => {
                    let named = route
                        .regex
                        .as_ref()?
                        .capture_names()
                        .flatten()
                        .any(|group| group == name);
                    if !named {
                        return None;
                    }
                    captures.name(name)
                }
            };
            Some(group.map_or_else(String::new, |group| path::encode_path(group.as_str())))
        }
    })
}
