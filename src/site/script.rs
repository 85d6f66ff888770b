//! Which script a CGI or FastCGI location's request runs: whether a path matches an
//! `extension` location, and how the path divides into `SCRIPT_NAME` and `PATH_INFO`
//! (RFC 3875 §4.1.13, §4.1.5) and names `SCRIPT_FILENAME`.
//!
//! Owns: these pure functions over a `Route` and a clean request path.
//! Must not touch: the file system (a CGI directory's script is found by `crate::programs`,
//! which walks the disk), the meta-variables themselves (`crate::conn` builds them).
//! Sources: nginx's `fastcgi_split_path_info ^(.+?\.php)(/.*)$` (the first segment ending in
//! the extension), Apache's `ScriptAlias` (the first segment that is a file), PEP 3333 (an
//! application at the site's root has an empty `SCRIPT_NAME`).

use std::path::PathBuf;

use super::Route;
use crate::config::HandlerKind;

/// How a gateway location's request path divides. Every slice is part of the request path or
/// of the location's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptSplit<'a> {
    /// The script is known from the path: `SCRIPT_NAME` is `script_name` followed by `index`,
    /// `PATH_INFO` is `path_info` (empty: leave it unset). `index` is empty except when an
    /// extension location is asked for a directory (`/blog/` → `/blog/` + `index.php`).
    Known {
        script_name: &'a str,
        index: &'a str,
        path_info: &'a str,
    },
    /// A CGI directory (`handler = "cgi"` without `extension` or `script`): the script is the
    /// first segment of `rest` that names a regular file below the location's root or alias
    /// (`Route::script_directory`), which is `url_base` in the URL space (`crate::programs`'s
    /// `Script::Search`).
    Search { url_base: &'a str, rest: &'a str },
}

impl Route {
    /// How `path` (clean, as routed) divides for this location; `None` for a location that runs
    /// no script (static, proxy, status, health).
    ///
    /// * `extension = ".php"`: `SCRIPT_NAME` ends with the first segment that ends in the
    ///   extension (`/a/index.php/x/y` → `/a/index.php` + `/x/y`); a directory path gets the
    ///   location's first index file (`/a/` → `/a/` + `index.php`).
    /// * `script = "/index.php"`: `SCRIPT_NAME` is it, `PATH_INFO` the path from the location's
    ///   prefix on, with its slash (`/shop/` and `/shop/a/b` → `/a/b`).
    /// * neither, FastCGI: `SCRIPT_NAME` is the prefix without its trailing slash, `PATH_INFO`
    ///   the rest (`/flup/` and `/flup/a/b` → `/flup` + `/a/b`; at `/`, `""` + the whole path).
    /// * neither, CGI: `Search`, below the root (`url_base` empty, `rest` the whole path) or the
    ///   alias (`url_base` the prefix without its trailing slash, `rest` what follows).
    #[must_use]
    pub fn script_split<'a>(&'a self, path: &'a str) -> Option<ScriptSplit<'a>> {
        let handler = self.settings.handler.kind();
        if !matches!(handler, HandlerKind::FastCgi | HandlerKind::Cgi) {
            return None;
        }
        let script = &self.settings.script;
        if let Some(extension) = &script.extension {
            return self.extension_split(path, extension);
        }
        let (prefix, rest) = self.prefix_split(path);
        if let Some(script_name) = &script.script {
            return Some(ScriptSplit::Known {
                script_name,
                index: "",
                path_info: rest,
            });
        }
        Some(match handler {
            HandlerKind::Cgi if self.settings.alias => ScriptSplit::Search {
                url_base: prefix,
                rest,
            },
            HandlerKind::Cgi => ScriptSplit::Search {
                url_base: "",
                rest: path,
            },
            _ => ScriptSplit::Known {
                script_name: prefix,
                index: "",
                path_info: rest,
            },
        })
    }

    /// Whether `path` is this extension location's: below its `path`, with a segment ending in
    /// its extension, or a directory whose first index file has it.
    pub(super) fn matches_extension(&self, path: &str) -> bool {
        self.settings
            .script
            .extension
            .as_deref()
            .is_some_and(|extension| self.extension_split(path, extension).is_some())
    }

    fn extension_split<'a>(&'a self, path: &'a str, extension: &str) -> Option<ScriptSplit<'a>> {
        if !path.starts_with(self.path.as_str()) {
            return None;
        }
        let names = |name: &str| name.len() > extension.len() && name.ends_with(extension);
        let mut start = 0;
        while start < path.len() {
            let end = path[start..]
                .find('/')
                .map_or(path.len(), |slash| start + slash);
            if names(&path[start..end]) {
                return Some(ScriptSplit::Known {
                    script_name: &path[..end],
                    index: "",
                    path_info: &path[end..],
                });
            }
            start = end + 1;
        }
        let index = self.settings.static_files.index.first()?;
        (path.ends_with('/') && names(index)).then_some(ScriptSplit::Known {
            script_name: path,
            index,
            path_info: "",
        })
    }

    /// `path` divided at the end of the segment the location's prefix ends in: (`/flup`,
    /// `/a/b`) for `/flup/` and `/flup/a/b`, (``, `/a`) for `/` and `/a`.
    fn prefix_split<'a>(&self, path: &'a str) -> (&'a str, &'a str) {
        let prefix = self.path.strip_suffix('/').unwrap_or(&self.path);
        // A path routed here lies below the prefix; any other is all `PATH_INFO`.
        let mut at = if path.starts_with(prefix) {
            prefix.len()
        } else {
            0
        };
        if !path[at..].is_empty() && !path[at..].starts_with('/') {
            at = path[at..].find('/').map_or(path.len(), |slash| at + slash);
        }
        path.split_at(at)
    }

    /// The directory a CGI location's scripts are found in (its root, or its alias), for
    /// `ScriptSplit::Search`.
    #[must_use]
    pub fn script_directory(&self) -> &std::path::Path {
        &self.settings.static_files.root
    }

    /// `SCRIPT_FILENAME` for a known `SCRIPT_NAME` (`script_name` + `index`): below the root,
    /// the whole name (nginx's `$document_root$fastcgi_script_name`); below an alias, the name
    /// after the location's prefix (a `script` outside the prefix: the whole name).
    #[must_use]
    pub fn script_filename(&self, script_name: &str, index: &str) -> PathBuf {
        let root = &self.settings.static_files.root;
        let below = if self.settings.alias {
            script_name
                .strip_prefix(self.path.as_str())
                .unwrap_or(script_name)
        } else {
            script_name
        };
        let mut file = root.join(below.trim_start_matches('/'));
        if !index.is_empty() {
            file.push(index);
        }
        file
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::LocationSettings;
    use crate::site::access::Access;

    fn route(
        path: &str,
        handler: HandlerKind,
        change: impl FnOnce(&mut LocationSettings),
    ) -> Route {
        let mut settings = LocationSettings::new("/srv/www".into());
        settings.handler = crate::config::Handler::with_defaults(handler);
        change(&mut settings);
        Route {
            path: path.to_owned(),
            exact: false,
            regex: None,
            access: Access::new(&settings.access),
            settings,
            root: None,
            script_root: None,
            extra_headers: Box::default(),
            header_rules: None,
            strict_transport_security: Box::default(),
            https_redirect: None,
        }
    }

    fn known<'a>(script_name: &'a str, index: &'a str, path_info: &'a str) -> ScriptSplit<'a> {
        ScriptSplit::Known {
            script_name,
            index,
            path_info,
        }
    }

    #[test]
    fn an_extension_ends_the_script_name_at_its_first_segment() {
        let php = route("/", HandlerKind::FastCgi, |settings| {
            settings.script.extension = Some(".php".into());
            settings.static_files.index = vec!["index.php".into()];
        });
        let split = |path| php.script_split(path);
        assert_eq!(split("/index.php"), Some(known("/index.php", "", "")));
        assert_eq!(
            split("/a/index.php/x/y"),
            Some(known("/a/index.php", "", "/x/y"))
        );
        assert_eq!(
            split("/a/b.php/c.php/"),
            Some(known("/a/b.php", "", "/c.php/"))
        );
        assert_eq!(split("/blog/"), Some(known("/blog/", "index.php", "")));
        assert_eq!(split("/blog"), None);
        assert_eq!(split("/x.phpx"), None);
        assert!(php.matches_extension("/a.php/b"));
        assert!(!php.matches_extension("/a.txt"));
        assert_eq!(
            php.script_filename("/a/index.php", ""),
            Path::new("/srv/www/a/index.php")
        );
        assert_eq!(
            php.script_filename("/blog/", "index.php"),
            Path::new("/srv/www/blog/index.php")
        );
        // Below its path only.
        let below = route("/app/", HandlerKind::Cgi, |settings| {
            settings.script.extension = Some(".cgi".into());
        });
        assert_eq!(below.script_split("/other/a.cgi"), None);
        assert!(!below.matches_extension("/other/a.cgi"));
        assert_eq!(
            below.script_split("/app/a.cgi/x"),
            Some(known("/app/a.cgi", "", "/x"))
        );
        // The first index file decides: a directory whose first index is not a script is not
        // the extension location's.
        assert!(!below.matches_extension("/app/"));
    }

    #[test]
    fn a_script_location_runs_its_script_with_the_rest_as_path_info() {
        let shop = route("/shop/", HandlerKind::FastCgi, |settings| {
            settings.script.script = Some("/shop/index.php".into());
        });
        assert_eq!(
            shop.script_split("/shop/a/b"),
            Some(known("/shop/index.php", "", "/a/b"))
        );
        assert_eq!(
            shop.script_split("/shop/"),
            Some(known("/shop/index.php", "", "/"))
        );
        assert_eq!(
            shop.script_filename("/shop/index.php", ""),
            Path::new("/srv/www/shop/index.php")
        );
        let aliased = route("/shop/", HandlerKind::FastCgi, |settings| {
            settings.alias = true;
            settings.static_files.root = "/srv/shop".into();
        });
        assert_eq!(
            aliased.script_filename("/shop/index.php", ""),
            Path::new("/srv/shop/index.php")
        );
        assert_eq!(
            aliased.script_filename("/index.php", ""),
            Path::new("/srv/shop/index.php"),
            "a script outside the prefix: the whole name"
        );
    }

    #[test]
    fn a_fastcgi_application_is_mounted_at_its_prefix() {
        let flup = route("/flup/", HandlerKind::FastCgi, |_| {});
        assert_eq!(
            flup.script_split("/flup/a/b"),
            Some(known("/flup", "", "/a/b"))
        );
        assert_eq!(flup.script_split("/flup/"), Some(known("/flup", "", "/")));
        let root = route("/", HandlerKind::FastCgi, |_| {});
        assert_eq!(root.script_split("/a"), Some(known("", "", "/a")));
        // A prefix without a slash ends at the end of its segment.
        let bare = route("/app", HandlerKind::FastCgi, |_| {});
        assert_eq!(bare.script_split("/app/x"), Some(known("/app", "", "/x")));
        assert_eq!(bare.script_split("/apps/x"), Some(known("/apps", "", "/x")));
        assert_eq!(bare.script_split("/app"), Some(known("/app", "", "")));
        let exact = route("/run", HandlerKind::FastCgi, |_| {});
        assert_eq!(exact.script_split("/run"), Some(known("/run", "", "")));
        assert_eq!(
            exact.script_split("/é/x"),
            Some(known("", "", "/é/x")),
            "a path from elsewhere is not cut inside a character"
        );
    }

    #[test]
    fn a_cgi_directory_is_searched_below_its_root_or_alias() {
        let cgi_bin = route("/cgi-bin/", HandlerKind::Cgi, |_| {});
        assert_eq!(
            cgi_bin.script_split("/cgi-bin/env.py/x"),
            Some(ScriptSplit::Search {
                url_base: "",
                rest: "/cgi-bin/env.py/x"
            })
        );
        assert_eq!(cgi_bin.script_directory(), Path::new("/srv/www"));
        let aliased = route("/cgi-bin/", HandlerKind::Cgi, |settings| {
            settings.alias = true;
            settings.static_files.root = "/usr/lib/cgi-bin".into();
        });
        assert_eq!(
            aliased.script_split("/cgi-bin/env.py/x"),
            Some(ScriptSplit::Search {
                url_base: "/cgi-bin",
                rest: "/env.py/x"
            })
        );
        assert_eq!(aliased.script_directory(), Path::new("/usr/lib/cgi-bin"));
        assert_eq!(
            route("/", HandlerKind::Static, |_| {}).script_split("/a.php"),
            None
        );
        assert_eq!(
            route("/", HandlerKind::Proxy, |_| {}).script_split("/a"),
            None
        );
    }
}
