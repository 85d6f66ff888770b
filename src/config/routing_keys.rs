//! The routing keys of a `[[site]]` or `[[site.location]]` block: a location's `regex`, and
//! `return` and `try_files`; and the placeholders of every template a block sets (`rewrite`,
//! `redirect`, `return.location`, `try_files`), with their errors.
//!
//! Owns: compiling a location's pattern (with its size limits) and checking each template
//! against the placeholders it may use: a regex location's captures are known at load, so
//! `{3}` in a pattern with two groups is refused here rather than left empty at run time.
//! Must not touch: matching requests (`site`), filling templates (`conn::route`).

use regex::{Regex, RegexBuilder};
use toml::Spanned;

use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::{RawBlock, RawReturn};
use super::routing::{placeholders, Return, ReturnBody, TryFiles, TryLast, PATH};

/// The most memory one compiled pattern may take (the `regex` crate's default is 10 MiB): a
/// location's pattern past 1 MiB compiled is a mistake (`\w{1000}` is 2.8 MiB), kept once per
/// location; refused at load instead.
const PATTERN_SIZE: usize = 1 << 20;
/// The lazy DFA's cache per pattern and matching thread; past it the crate falls back to a
/// slower engine that is still linear in the path.
const PATTERN_DFA_SIZE: usize = 1 << 20;
/// Deepest nesting of groups and repetitions in a pattern.
const PATTERN_NESTING: u32 = 64;

/// The redirect statuses: they need a `Location`, and only they get one.
const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

/// What a template may name besides a regex location's captures: `{path}` the decoded,
/// normalised path; `{rest}` what follows the location's prefix; `{uri}` the target as sent.
const URI_NAMES: [&str; 3] = ["path", "rest", "uri"];
/// `try_files` names paths, never a query: `{uri}` would bring one.
const PATH_NAMES: [&str; 2] = ["path", "rest"];

impl Loader<'_> {
    /// A location's `regex`, compiled once here; its errors name the key.
    pub(super) fn location_regex(&self, block: &RawBlock, table: &str) -> Loaded<Option<Regex>> {
        let Some(value) = &block.regex else {
            return Ok(None);
        };
        let key = format!("{table}.regex");
        for (other, set) in [
            ("path", block.path.is_some()),
            ("exact", block.exact.is_some()),
            ("extension", block.extension.is_some()),
            ("alias", block.alias.is_some()),
        ] {
            if set {
                return Err(self.hinted(
                    value.span(),
                    &key,
                    format!("conflicts with {other} in the same location"),
                    "a location is matched by a path, an extension or a regex: choose one \
                     (alias needs a prefix to replace: use root)",
                ));
            }
        }
        RegexBuilder::new(value.get_ref())
            .size_limit(PATTERN_SIZE)
            .dfa_size_limit(PATTERN_DFA_SIZE)
            .nest_limit(PATTERN_NESTING)
            .build()
            .map(Some)
            .map_err(|error| {
                self.hinted(
                    value.span(),
                    &key,
                    format!("not a usable regular expression: {}", one_line(&error)),
                    "the regex crate's syntax, matched against the decoded path: \
                     \"^/img/(?<id>[0-9]+)\\\\.png$\"; (?i) for any case",
                )
            })
    }

    /// `return`, `try_files`, and the templates of `rewrite` and `redirect`, checked against
    /// `regex` (the block's own; a site has none).
    pub(super) fn routing_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        let key = |name: &str| format!("{table}.{name}");
        let regex = partial.regex.as_ref();
        if let Some(value) = &block.rewrite {
            self.template(value, &key("rewrite"), &URI_NAMES, regex)?;
        }
        if let Some(value) = &block.redirect {
            self.template(value, &key("redirect"), &URI_NAMES, regex)?;
        }
        if let Some(value) = &block.return_ {
            for (other, set) in [
                ("redirect", block.redirect.is_some()),
                ("rewrite", block.rewrite.is_some()),
            ] {
                if set {
                    return Err(self.hinted(
                        value.span(),
                        &key("return"),
                        format!("conflicts with {other} in the same block"),
                        "a request is answered by one of them: drop one",
                    ));
                }
            }
            partial.answer = Some(self.return_answer(value, &key("return"), regex)?);
        }
        if let Some(value) = &block.try_files {
            if let Some(fallback) = &block.fallback {
                return Err(self.hinted(
                    fallback.span(),
                    &key("fallback"),
                    "conflicts with try_files in the same block",
                    "fallback = \"/x\" is try_files = [\"{path}\", \"{path}/\", \"/x\"]: keep one",
                ));
            }
            partial.try_files = Some(self.try_files(value, &key("try_files"), regex)?);
        }
        Ok(())
    }

    fn return_answer(
        &self,
        value: &Spanned<RawReturn>,
        key: &str,
        regex: Option<&Regex>,
    ) -> Loaded<Return> {
        let raw = value.get_ref();
        let status_key = format!("{key}.status");
        let status = u16::try_from(*raw.status.get_ref())
            .ok()
            .filter(|status| (200..=599).contains(status))
            .ok_or_else(|| {
                self.hinted(
                    raw.status.span(),
                    &status_key,
                    format!(
                        "{} is not a status a server answers with",
                        raw.status.get_ref()
                    ),
                    "200 to 599: 410 for gone, 301 with location = \"…\" for moved",
                )
            })?;
        let location = match &raw.location {
            Some(location) => {
                let location_key = format!("{key}.location");
                if !REDIRECTS.contains(&status) {
                    return Err(self.hinted(
                        location.span(),
                        &location_key,
                        format!("a location with status {status}"),
                        "location goes with 301, 302, 303, 307 or 308",
                    ));
                }
                if location.get_ref().is_empty() || has_control(location.get_ref()) {
                    return Err(self.error(
                        location.span(),
                        &location_key,
                        "empty, or has a line break or a control character",
                    ));
                }
                self.template(location, &location_key, &URI_NAMES, regex)?;
                Some(location.get_ref().clone())
            }
            None if REDIRECTS.contains(&status) => {
                return Err(self.hinted(
                    raw.status.span(),
                    &status_key,
                    format!("{status} without a location"),
                    "return = { status = 301, location = \"https://example.com{path}\" }",
                ));
            }
            None => None,
        };
        if let (Some(content_type), None) = (&raw.content_type, &raw.body) {
            return Err(self.hinted(
                content_type.span(),
                &format!("{key}.content_type"),
                "content_type without a body",
                "set body = \"…\" too, or drop content_type",
            ));
        }
        let body = match &raw.body {
            Some(body) if status == 204 || status == 304 => {
                return Err(self.error(
                    body.span(),
                    &format!("{key}.body"),
                    format!("a {status} has no body (RFC 9110 §15.3.5, §15.4.5)"),
                ));
            }
            Some(body) => {
                let content_type = match &raw.content_type {
                    Some(value) if value.get_ref().is_empty() || has_control(value.get_ref()) => {
                        return Err(self.error(
                            value.span(),
                            &format!("{key}.content_type"),
                            "empty, or has a line break or a control character",
                        ));
                    }
                    Some(value) => value.get_ref().clone(),
                    None => "text/plain; charset=utf-8".to_owned(),
                };
                Some(ReturnBody {
                    content_type,
                    text: body.get_ref().clone(),
                })
            }
            None => None,
        };
        Ok(Return {
            status,
            location,
            body,
        })
    }

    fn try_files(
        &self,
        value: &Spanned<Vec<String>>,
        key: &str,
        regex: Option<&Regex>,
    ) -> Loaded<TryFiles> {
        let list = value.get_ref();
        let Some((last, candidates)) = list.split_last().filter(|(_, rest)| !rest.is_empty())
        else {
            return Err(self.hinted(
                value.span(),
                key,
                "needs what to try and what comes last",
                "try_files = [\"{path}\", \"{path}/\", \"/index.html\"]; the last may be \"=404\"",
            ));
        };
        let entry = |text: &String| Spanned::new(value.span(), text.clone());
        for candidate in candidates {
            if !(candidate.starts_with('/') || candidate.starts_with(PATH)) {
                return Err(self.hinted(
                    value.span(),
                    key,
                    format!("'{candidate}' is not a path"),
                    "a path of this site, from / or {path}: \"{path}.html\", \"/maintenance.html\"",
                ));
            }
            self.plain_path(candidate, value, key)?;
            self.template(&entry(candidate), key, &PATH_NAMES, regex)?;
        }
        let last = if let Some(code) = last.strip_prefix('=') {
            let status = code
                .parse::<u16>()
                .ok()
                .filter(|status| (400..=599).contains(status))
                .ok_or_else(|| {
                    self.hinted(
                        value.span(),
                        key,
                        format!("'{last}' is not an error status"),
                        "=404, or any status from 400 to 599",
                    )
                })?;
            TryLast::Status(status)
        } else {
            if !last.starts_with('/') {
                return Err(self.hinted(
                    value.span(),
                    key,
                    format!("'{last}' is neither a path nor a status"),
                    "the last entry is a path the request is routed to (\"/index.html\") or =404",
                ));
            }
            self.plain_path(last, value, key)?;
            self.template(&entry(last), key, &PATH_NAMES, regex)?;
            TryLast::Uri(last.clone())
        };
        Ok(TryFiles {
            candidates: candidates.to_vec(),
            last,
        })
    }

    /// A `try_files` entry: a path without a space, a control character or a query (the
    /// request's query is kept).
    fn plain_path(&self, text: &str, value: &Spanned<Vec<String>>, key: &str) -> Loaded<()> {
        if text
            .bytes()
            .any(|byte| byte <= b' ' || byte == 0x7f || byte == b'?' || byte == b'#')
        {
            return Err(self.hinted(
                value.span(),
                key,
                format!("'{text}' has a space, a control character, '?' or '#'"),
                "a plain path: the request's query is kept",
            ));
        }
        Ok(())
    }

    /// Every `{name}` of a template names one of `names` or, in a regex location, a capture
    /// group by number or name.
    fn template(
        &self,
        value: &Spanned<String>,
        key: &str,
        names: &[&str],
        regex: Option<&Regex>,
    ) -> Loaded<()> {
        for name in placeholders(value.get_ref()) {
            let name = name.as_str();
            if names.contains(&name) {
                continue;
            }
            let capture = match (regex, name.parse::<usize>()) {
                (Some(regex), Ok(number)) => number < regex.captures_len(),
                (Some(regex), Err(_)) => regex.capture_names().flatten().any(|group| group == name),
                (None, _) => false,
            };
            if capture {
                continue;
            }
            let known = names
                .iter()
                .map(|name| format!("{{{name}}}"))
                .collect::<Vec<_>>()
                .join(", ");
            let hint = match regex {
                Some(regex) => format!(
                    "{known}, or one of the regex's {} groups by number ({{0}} is the whole match) or name",
                    regex.captures_len() - 1
                ),
                None => format!("{known}; captures only in a location with a regex"),
            };
            return Err(self.hinted(
                value.span(),
                key,
                format!("{{{name}}} names nothing here"),
                hint,
            ));
        }
        Ok(())
    }
}

fn has_control(text: &str) -> bool {
    text.bytes().any(|byte| byte < b' ' || byte == 0x7f)
}

/// The `regex` crate's error on one line: the line that says what is wrong (its syntax errors
/// draw the pattern with a caret over several lines).
fn one_line(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines()
        .find_map(|line| line.trim().strip_prefix("error: "))
        .map_or_else(
            || text.split_whitespace().collect::<Vec<_>>().join(" "),
            str::to_owned,
        )
}
