//! The static-file handler (AFPA's cached and uncached responses): the path cache, or a
//! translation job on a helper, then the response from `content::serve` (or a redirect to
//! `path/`, a listing, an error page); for a path with variants (`multiviews`), the variant
//! `content::negotiate` chooses.
//!
//! Owns: a static location's own rules (dot-files, `~user`, `alias`) and turning a translation
//! into a response. Must not touch: how files are found and sent (`content`), sockets.

use super::{Handler, Routed, Waiting};
use crate::conn::reply::{response_context, Parts};
use crate::conn::route::{with_slash, ROUTING};
use crate::conn::{Context, Job, Outcome, Pending};
use crate::content::autoindex;
use crate::content::file::{Resolution, Resolved};
use crate::content::job::JobDone;
use crate::content::negotiate;
use crate::content::path::{self, CleanPath, PathOptions};
use crate::content::path_cache::Lookup;
use crate::content::serve::{self, Served};
use crate::content::sink::DiskAccess;
use crate::response::StatusAnswer;
use std::sync::Arc;

/// The static-file handler (`Pending` is its held request: the translation or data load out
/// for it), and the FastCGI script lookup's wait (`Pending::script`).
impl Handler for Pending {
    /// The path cache, or a translation job, then the response.
    fn start(routed: Routed, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let Routed {
            exchange,
            route,
            mut clean,
            redirect: redirect_base,
        } = routed;
        let Some(root) = route.root.clone() else {
            return parts.answer(&exchange, Some(&route), 500, &[], context);
        };
        let options = &route.settings.static_files;
        if options.userdir.is_some() {
            // `~user` paths may not climb out of `/~user` with `..`: judge again under that rule.
            let with_userdir = PathOptions {
                allow_dotfiles: true,
                userdir: true,
            };
            clean = match path::normalize(&clean.to_uri(), &with_userdir) {
                Ok(clean) => clean,
                Err(error) => {
                    return parts.answer(&exchange, Some(&route), error.status(), &[], context)
                }
            };
        }
        if !options.dotfiles && path::is_hidden(&clean) {
            return parts.answer(&exchange, Some(&route), 404, &[], context);
        }
        let path = if route.settings.alias {
            clean.below(&route.path).unwrap_or_else(CleanPath::root)
        } else {
            clean
        };
        let pending = Pending {
            exchange,
            route,
            path,
            redirect: redirect_base,
            resolved: None,
            retried: false,
            script: None,
        };
        let now = context.clock.now();
        let previous = match context.caches.lookup(root.id, pending.path.as_str(), now) {
            Lookup::Fresh(resolved) => {
                let disk = context.disk;
                return pending.respond(resolved, parts, context, disk);
            }
            Lookup::Stale(previous) => Some(previous),
            Lookup::Missing => None,
        };
        let job = Job::Resolve {
            root,
            path: pending.path.clone(),
            watcher: context.caches.watcher.clone(),
            previous,
        };
        Outcome::NeedJob(job, Box::new(pending))
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
                    pending.respond(resolved, parts, context, disk)
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
                pending.respond(resolved, parts, context, DiskAccess::Inline)
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
    /// Respond to this request from its translation.
    fn respond(
        self,
        resolved: Arc<Resolved>,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
        disk: DiskAccess,
    ) -> Outcome {
        let pending = self;
        if let Some(target) = hand_over(&pending, &resolved.resolution) {
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
        let answer: Result<u16, StatusAnswer> = match &resolved.resolution {
            Resolution::File(_) | Resolution::Variants(_) => {
                let file = match &resolved.resolution {
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
                        let directory = path::normalize(&pending.redirect.path, &ROUTING)
                            .unwrap_or_else(|_| pending.path.clone());
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
        let persistence = pending.exchange.persistence;
        match answer {
            Ok(status) => parts.record(Some(&pending.exchange), status, mark, context),
            Err(answer) => {
                let field = answer.field.as_ref();
                let extra = field.map(|(name, value)| (*name, &value[..]));
                parts.answer_status(
                    Some(&pending.exchange),
                    Some(&route),
                    answer.status,
                    persistence,
                    extra.as_slice(),
                    context,
                );
            }
        }
        Outcome::Responded(persistence)
    }
}

/// Where a static request goes instead of a file: a directory's index that is a script, to the
/// script's location (`index.php` with `.php` run by FastCGI: its source is never sent), or
/// that another location names, to that location; a
/// path with nothing behind it, to the location's `fallback` (a front controller), its query
/// kept.
fn hand_over(pending: &Pending, resolution: &Resolution) -> Option<String> {
    let redirect = &pending.redirect;
    let mut target = match resolution {
        Resolution::Script(index) => {
            // Below the directory the client named, normalised: `/docs/.` + `index.html` as
            // sent would be `/docs/.index.html`.
            let asked =
                path::normalize(&redirect.path, &ROUTING).unwrap_or_else(|_| pending.path.clone());
            let mut target = asked.with_trailing_slash().to_uri();
            target.push_str(&path::encode_path(index));
            target
        }
        Resolution::NotFound => pending.route.settings.fallback.clone()?,
        _ => return None,
    };
    if let Some(query) = &redirect.query {
        target.push('?');
        target.push_str(query);
    }
    Some(target)
}
