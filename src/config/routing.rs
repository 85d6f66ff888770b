//! What a location answers without a handler, and in which order a static location looks for
//! files: `return` (nginx `return`), `try_files` (nginx `try_files`, of which `fallback` is the
//! common case), and the placeholders their templates (and `rewrite`, `redirect`) may use.
//!
//! Owns: these settings' types. Must not touch: the file's text (`routing_keys.rs` reads and
//! checks them), requests (`conn::route` fills the templates).

/// `return = { status = 301, location = "…", body = "…", content_type = "…" }`: the location
/// answers this itself, after access control, without looking at the disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Return {
    pub status: u16,
    /// A template (`{path}`, `{rest}`, `{uri}`, a regex location's captures) for `Location`;
    /// set for the redirect statuses and only for them.
    pub location: Option<String>,
    /// The body sent instead of the built-in status page.
    pub body: Option<ReturnBody>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturnBody {
    pub content_type: String,
    pub text: String,
}

/// `try_files = ["{path}", "{path}/", "/index.html"]`: the paths a static location looks up in
/// order (a candidate ending in `/` names a directory, any other a file), then `last`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TryFiles {
    /// Templates of paths in the site's URL space, looked up below the location's root.
    pub candidates: Vec<String>,
    pub last: TryLast,
}

/// What a request gets when no candidate of `try_files` exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TryLast {
    /// Routed again under this path template (an internal redirect), its query kept.
    Uri(String),
    /// `=404`: this status page.
    Status(u16),
}

/// The request's path, decoded and normalised, as `try_files` and the templates name it.
pub const PATH: &str = "{path}";

impl TryFiles {
    /// `fallback = "/index.php"`: the file or directory asked for, else the front controller
    /// (nginx's `try_files $uri $uri/ /index.php?$query_string`).
    #[must_use]
    pub fn fallback(uri: String) -> TryFiles {
        TryFiles {
            candidates: vec![PATH.to_owned(), format!("{PATH}/")],
            last: TryLast::Uri(uri),
        }
    }
}

/// `template` with each `{name}` placeholder replaced by `value(name)`, or kept as written
/// where that is `None` (a brace pair whose inside is not a name of letters, digits and `_` is
/// text, not a placeholder). One pass: a value is never scanned for placeholders itself.
pub fn fill(template: &str, mut value: impl FnMut(&str) -> Option<String>) -> String {
    let mut filled = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            break;
        };
        let name = &after[..close];
        let is_name = !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
        match is_name.then(|| value(name)).flatten() {
            Some(text) => {
                filled.push_str(&rest[..open]);
                filled.push_str(&text);
                rest = &after[close + 1..];
            }
            None => {
                filled.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    filled.push_str(rest);
    filled
}

/// The `{name}` placeholders of `template`, in order.
#[must_use]
pub fn placeholders(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    fill(template, |name| {
        names.push(name.to_owned());
        None
    });
    names
}

#[cfg(test)]
mod tests {
    use super::{fill, placeholders};

    #[test]
    fn placeholders_are_names_in_braces() {
        assert_eq!(
            placeholders("/a/{1}/{id}{rest}/{not a name}/{x"),
            ["1", "id", "rest"]
        );
        assert_eq!(placeholders("{{path}}"), ["path"]);
        let filled = fill("/{a}/{b}/{ c }/{a", |name| {
            (name == "a").then(|| "{b}".to_owned())
        });
        assert_eq!(filled, "/{b}/{b}/{ c }/{a", "values are not scanned again");
    }
}
