//! The static-file handler (AFPA's cached and uncached responses): the path cache, or a
//! translation job on a helper, then the response from `content::serve` (or a redirect to
//! `path/`, a listing, an error page); for a path with variants (`multiviews`), the variant
//! `content::negotiate` chooses.
//!
//! Owns: a static location's own rules (dot-files, `~user`, `alias`), the order `try_files`
//! (and `fallback`, its common case) looks paths up in, and turning a translation into a
//! response. Must not touch: how files are found and sent (`content`), sockets.

use super::{Handler, Routed, Waiting};
use crate::config::{routing::PATH, TryFiles, TryLast};
use crate::conn::path_templates::{expand, with_slash, ROUTING};
use crate::conn::reply::{response_context, Parts};
use crate::conn::{Context, Job, Outcome, Pending};
use crate::content::autoindex;
use crate::content::compressed::Compressed;
use crate::content::file::{Resolution, Resolved};
use crate::content::job::JobDone;
use crate::content::negotiate;
use crate::content::path::{self, CleanPath, PathOptions};
use crate::content::path_cache::Lookup;
use crate::content::serve::{self, Served};
use crate::content::sink::DiskAccess;
use crate::response::StatusAnswer;
use crate::site::Route;
use std::sync::Arc;

/// The static-file handler (`Pending` is its held request: the translation or data load out
/// for it), and the FastCGI script lookup's wait (`Pending::script`).
impl Handler for Pending {
    /// The path cache, or a translation job, then the response.
    fn start(routed: Routed, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let Routed {
            exchange,
            route,
            clean,
            redirect: redirect_base,
        } = routed;
        if route.root.is_none() {
            return parts.answer(&exchange, Some(&route), 500, &[], context);
        }
        let mut pending = Pending {
            exchange,
            route,
            path: clean,
            redirect: redirect_base,
            resolved: None,
            retried: false,
            script: None,
            trying: Trying::default(),
        };
        let route = pending.route.clone();
        if let Some(try_files) = &route.settings.try_files {
            let routed = std::mem::replace(&mut pending.path, CleanPath::root());
            return pending.try_from(try_files, routed, 0, parts, context);
        }
        match files_path(&route, pending.path, false) {
            Ok(path) => pending.path = path,
            Err(status) => {
                return parts.answer(&pending.exchange, Some(&route), status, &[], context)
            }
        }
        pending.look_up(parts, context)
    }
}

/// The path a static location looks up below its root for `clean`, a path of its URL space:
/// judged again under the `~user` rule, refused if hidden (`404`), and below an `alias`
/// location's prefix (`strict`: a path outside it is not the location's, `404`; otherwise the
/// alias directory itself).
fn files_path(route: &Route, clean: CleanPath, strict: bool) -> Result<CleanPath, u16> {
    let options = &route.settings.static_files;
    let clean = if options.userdir.is_some() {
        // `~user` paths may not climb out of `/~user` with `..`: judge again under that rule.
        let with_userdir = PathOptions {
            allow_dotfiles: true,
            userdir: true,
        };
        path::normalize(&clean.to_uri(), &with_userdir).map_err(|error| error.status())?
    } else {
        clean
    };
    if !options.dotfiles && path::is_hidden(&clean) {
        return Err(404);
    }
    if !route.settings.alias {
        return Ok(clean);
    }
    match clean.below(&route.path) {
        Some(below) => Ok(below),
        None if strict => Err(404),
        None => Ok(CleanPath::root()),
    }
}

/// Where a static request is in its location's `try_files`; the default: no `try_files`, the
/// path asked for is looked up and answers whatever it names.
#[derive(Debug, Default)]
pub(in crate::conn) struct Trying {
    /// The request's path as routed, which the templates are filled from; `None`: no
    /// `try_files`.
    routed: Option<CleanPath>,
    /// The path the lookup out is for, in the URL space (the directory an index is found in).
    candidate: Option<CleanPath>,
    /// The candidate after it.
    next: usize,
    /// What the lookup out may find to be an answer.
    names: Names,
    /// The candidate is `{path}/` for a path asked for without its '/': a directory found
    /// there is answered as one asked for without it (`301` to the path with it).
    adds_slash: bool,
}

/// What a `try_files` candidate names (nginx: a file, or with a trailing '/' a directory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Names {
    /// `{path}` followed by `{path}/` (one lookup), or no `try_files`.
    #[default]
    Either,
    File,
    Directory,
}

impl Trying {
    /// Whether `resolution` answers the request, or the next candidate is tried.
    fn accepts(&self, resolution: &Resolution) -> bool {
        if self.routed.is_none() {
            return true;
        }
        match self.names {
            Names::Either | Names::Directory => !matches!(resolution, Resolution::NotFound),
            // Found as a file; one that cannot be read is still found (`403`, `500`, `503`).
            Names::File => matches!(
                resolution,
                Resolution::File(_)
                    | Resolution::Variants(_)
                    | Resolution::Forbidden
                    | Resolution::Failed
                    | Resolution::Exhausted
            ),
        }
    }
}

impl Pending {
    /// The path cache, or a translation job, for `self.path`; then the response.
    fn look_up(self, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let Some(root) = self.route.root.clone() else {
            return parts.answer(&self.exchange, Some(&self.route), 500, &[], context);
        };
        let now = context.clock.now();
        let previous = match context.caches.lookup(root.id, self.path.as_str(), now) {
            Lookup::Fresh(resolved) => {
                let disk = context.disk;
                return self.respond(resolved, parts, context, disk, None);
            }
            Lookup::Stale(previous) => Some(previous),
            Lookup::Missing => None,
        };
        let job = Job::Resolve {
            root,
            path: self.path.clone(),
            watcher: context.caches.watcher.clone(),
            previous,
        };
        Outcome::NeedJob(job, Box::new(self))
    }

    /// Look up the first candidate of `try_files` from `from` on that names a path of this
    /// location (filled from `routed`), or, past the last, go where `try_files` ends: routed
    /// again (the query kept), or a status page.
    fn try_from(
        mut self,
        try_files: &TryFiles,
        routed: CleanPath,
        from: usize,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
    ) -> Outcome {
        let route = self.route.clone();
        let target = &self.exchange.head.target;
        let candidates = &try_files.candidates;
        let mut index = from;
        while let Some(template) = candidates.get(index) {
            // `{path}` then `{path}/` is one lookup, the one made without `try_files`.
            let either = template == PATH
                && candidates
                    .get(index + 1)
                    .is_some_and(|next| next.strip_suffix('/') == Some(PATH));
            index += if either { 2 } else { 1 };
            let filled = expand(template, &route, routed.as_str(), target);
            let Ok(candidate) = path::normalize(&filled, &ROUTING) else {
                continue;
            };
            let Ok(files) = files_path(&route, candidate.clone(), true) else {
                continue;
            };
            let names = match (either, candidate.ends_with_slash()) {
                (true, _) => Names::Either,
                (false, true) => Names::Directory,
                (false, false) => Names::File,
            };
            let adds_slash = names == Names::Directory
                && !routed.ends_with_slash()
                && candidate == routed.with_trailing_slash();
            self.path = files;
            self.trying = Trying {
                routed: Some(routed),
                candidate: Some(candidate),
                next: index,
                names,
                adds_slash,
            };
            return self.look_up(parts, context);
        }
        match &try_files.last {
            TryLast::Uri(template) => {
                let mut target = expand(template, &route, routed.as_str(), target);
                if let Some(query) = &self.redirect.query {
                    target.push('?');
                    target.push_str(query);
                }
                let Pending {
                    exchange, route, ..
                } = self;
                Outcome::RouteAgain {
                    exchange,
                    route,
                    target,
                }
            }
            TryLast::Status(status) => {
                parts.answer(&self.exchange, Some(&route), *status, &[], context)
            }
        }
    }

    /// The lookup out found nothing that answers: the next candidate of `try_files`.
    fn try_next(mut self, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let route = self.route.clone();
        let (Some(try_files), Some(routed)) =
            (&route.settings.try_files, self.trying.routed.take())
        else {
            return parts.answer(&self.exchange, Some(&route), 404, &[], context);
        };
        let next = self.trying.next;
        self.resolved = None;
        self.retried = false;
        self.try_from(try_files, routed, next, parts, context)
    }

    /// The path the client asked for, or the `try_files` candidate looked up for it: the
    /// directory an index or a listing is of.
    fn asked(&self) -> CleanPath {
        self.trying.candidate.clone().unwrap_or_else(|| {
            path::normalize(&self.redirect.path, &ROUTING).unwrap_or_else(|_| self.path.clone())
        })
    }
}

impl Waiting for Pending {
    fn job_done(
        self: Box<Self>,
        done: JobDone,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
    ) -> Outcome {
        let pending = self;
        match done {
            JobDone::Resolved(resolved) => {
                if matches!(resolved.resolution, Resolution::Exhausted) {
                    // Out of descriptors: close cached files and translate once more before
                    // answering 503.
                    context.caches.relieve("open");
                    if let (false, Some(root)) = (pending.retried, pending.root().cloned()) {
                        let job = Job::Resolve {
                            root,
                            path: pending.path.clone(),
                            watcher: context.caches.watcher.clone(),
                            previous: None,
                        };
                        let pending = Pending {
                            retried: true,
                            ..*pending
                        };
                        return Outcome::NeedJob(job, Box::new(pending));
                    }
                }
                let resolved = Arc::new(resolved);
                if let Some(root) = pending.root() {
                    context
                        .caches
                        .remember(root.id, pending.path.as_str(), &resolved);
                }
                if pending.script.is_some() {
                    Outcome::ScriptChecked(pending, resolved)
                } else {
                    let disk = context.disk;
                    pending.respond(resolved, parts, context, disk, None)
                }
            }
            JobDone::Loaded { file, data } => {
                // A load it did not ask for is not its own.
                let Some(resolved) = pending.resolved.clone() else {
                    return Outcome::Wait(pending);
                };
                if let Ok(data) = data {
                    context.caches.remember_data(file.key, data, resolved.watch);
                }
                // The data was just read, so its pages are resident: serving inline now cannot
                // block for long, and cannot ask for the same load again.
                pending.respond(resolved, parts, context, DiskAccess::Inline, None)
            }
            JobDone::Compressed(compressed) => {
                let Some(resolved) = pending.resolved.clone() else {
                    return Outcome::Wait(pending);
                };
                if let Some(data) = &compressed.data {
                    context.caches.remember_compressed(
                        compressed.file,
                        compressed.encoding,
                        compressed.level,
                        data.clone(),
                        resolved.watch,
                    );
                }
                // Answered from `compressed` even if the cache did not keep it (it is off, or
                // the body is larger than its share).
                let disk = context.disk;
                pending.respond(resolved, parts, context, disk, Some(&compressed))
            }
            // Page-ins are the engine's business (they serve output already queued); a
            // verification belongs to `Authenticating`; batches are an HTTP/2 session's.
            JobDone::PagedIn { .. } | JobDone::Verified(_) | JobDone::Batch(_) => {
                Outcome::Wait(pending)
            }
        }
    }
}

impl Pending {
    /// Respond to this request from its translation (`fresh`: the compression a job just did
    /// for it).
    fn respond(
        self,
        resolved: Arc<Resolved>,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
        disk: DiskAccess,
        fresh: Option<&Compressed>,
    ) -> Outcome {
        let pending = self;
        if !pending.trying.accepts(&resolved.resolution) {
            return pending.try_next(parts, context);
        }
        let resolution = if pending.trying.adds_slash {
            &Resolution::AddSlash
        } else {
            &resolved.resolution
        };
        if let Some(target) = hand_over(&pending, resolution) {
            let Pending {
                exchange, route, ..
            } = pending;
            return Outcome::RouteAgain {
                exchange,
                route,
                target,
            };
        }
        let mark = parts.output.mark();
        let route = pending.route.clone();
        let exchange = &pending.exchange;
        let mut response =
            response_context(context, exchange.persistence, Some(&route), parts.secure);
        response.disk = disk;
        let out = &mut *parts.output;
        // What was written (`Ok`), or the status page still to write (`Err`).
        let answer: Result<u16, StatusAnswer> = match resolution {
            Resolution::File(_) | Resolution::Variants(_) => {
                let file = match resolution {
                    Resolution::File(file) => Some(file),
                    // Chosen afresh for each request (and again after a load: the same
                    // request gets the same variant) from the set cached with the path.
                    Resolution::Variants(set) => negotiate::choose(
                        set,
                        &exchange.head,
                        route.settings.static_files.strict_negotiation,
                    ),
                    _ => None,
                };
                match file.map(|file| {
                    serve::serve_file(
                        &exchange.head,
                        file,
                        resolved.watch,
                        context.caches,
                        &response,
                        &route.settings.compression,
                        fresh,
                        out,
                    )
                }) {
                    Some(Served::Sent { status }) => Ok(status),
                    Some(Served::Status(answer)) => Err(answer),
                    Some(Served::NeedData(job)) => {
                        let pending = Pending {
                            resolved: Some(resolved.clone()),
                            ..pending
                        };
                        return Outcome::NeedJob(job, Box::new(pending));
                    }
                    // Strict negotiation and no acceptable variant (RFC 9110 §15.5.7); the
                    // answer depends on both fields whatever the variants are.
                    None => Err(StatusAnswer::with_field(
                        406,
                        "Vary",
                        b"Accept, Accept-Language".to_vec(),
                    )),
                }
            }
            Resolution::AddSlash => {
                // The path the client asked for (an alias or a rewrite looks up another).
                let asked = path::normalize(&pending.redirect.path, &ROUTING)
                    .unwrap_or_else(|_| pending.path.clone());
                let location = with_slash(&asked, pending.redirect.query.as_deref());
                Err(StatusAnswer::with_field(
                    301,
                    "Location",
                    location.into_bytes(),
                ))
            }
            Resolution::Listing(listing) => {
                match autoindex::View::from_query(pending.redirect.query.as_deref()) {
                    Ok(view) => {
                        // Titled and linked by the path the client asked for (an alias or a
                        // rewrite looks up another one below the root).
                        let directory = pending.asked();
                        let page = autoindex::render(&directory, listing, &view);
                        autoindex::respond(&exchange.head, &page, &response, out)
                    }
                    Err(_) => Err(StatusAnswer::new(400)),
                }
            }
            Resolution::DirectoryForbidden | Resolution::Forbidden => Err(StatusAnswer::new(403)),
            Resolution::NotFound | Resolution::Script(_) => Err(StatusAnswer::new(404)),
            Resolution::Failed => Err(StatusAnswer::new(500)),
            // Out of descriptors even after the caches let go of theirs: a passing overload,
            // so a client may retry (RFC 9110 §15.6.4), as for a connection cap.
            Resolution::Exhausted => {
                let retry = context.config.admission.retry_after.as_secs().max(1);
                Err(StatusAnswer::with_field(
                    503,
                    "Retry-After",
                    retry.to_string().into_bytes(),
                ))
            }
        };
        match answer {
            Ok(status) => {
                parts.record(Some(&pending.exchange), status, mark, context);
                Outcome::Responded(pending.exchange.persistence)
            }
            Err(answer) => {
                let field = answer.field.as_ref();
                let extra = field.map(|(name, value)| (*name, &value[..]));
                parts.answer(
                    &pending.exchange,
                    Some(&route),
                    answer.status,
                    extra.as_slice(),
                    context,
                )
            }
        }
    }
}

/// Where a static request goes instead of a file: a directory's index that is a script, to the
/// script's location (`index.php` with `.php` run by FastCGI: its source is never sent), or
/// that another location names, to that location, its query kept. (A path with nothing
/// behind it goes where `try_files` or `fallback` says: `Pending::try_from`.)
fn hand_over(pending: &Pending, resolution: &Resolution) -> Option<String> {
    let Resolution::Script(index) = resolution else {
        return None;
    };
    // Below the directory the client named, normalised: `/docs/.` + `index.html` as sent
    // would be `/docs/.index.html`.
    let mut target = pending.asked().with_trailing_slash().to_uri();
    target.push_str(&path::encode_path(index));
    if let Some(query) = &pending.redirect.query {
        target.push('?');
        target.push_str(query);
    }
    Some(target)
}
