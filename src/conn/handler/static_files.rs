//! The static-file handler (AFPA's cached and uncached responses): the path cache, or a
//! translation job on a helper, then the response from `content::serve` (or a redirect to
//! `path/`, a listing, an error page).
//!
//! Owns: a static location's own rules (dot-files, `~user`, `alias`) and turning a translation
//! into a response. Must not touch: how files are found and sent (`content`), sockets.

use super::Routed;
use crate::conn::reply::response_context;
use crate::conn::route::{with_slash, ROUTING};
use crate::conn::{Conn, Context, Job, Outcome, Pending};
use crate::content::autoindex;
use crate::content::file::{Resolution, Resolved};
use crate::content::path::{self, CleanPath, PathOptions};
use crate::content::path_cache::Lookup;
use crate::content::serve::{self, Served};
use crate::content::sink::DiskAccess;
use crate::response::StatusAnswer;
use std::sync::Arc;

impl Conn {
    /// The static-file handler: the path cache, or a translation job, then the response.
    pub(in crate::conn) fn serve_static(
        &mut self,
        routed: Routed,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let Routed {
            exchange,
            route,
            mut clean,
            redirect: redirect_base,
        } = routed;
        let Some(root) = route.root.clone() else {
            return self.answer(&exchange, Some(&route), 500, &[], context);
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
                    return self.answer(&exchange, Some(&route), error.status(), &[], context)
                }
            };
        }
        if !options.dotfiles && path::is_hidden(&clean) {
            return self.answer(&exchange, Some(&route), 404, &[], context);
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
                let outcome = self.respond(pending, resolved, context, disk);
                return self.settle(outcome);
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
        self.settle(Outcome::NeedJob(job, Box::new(pending)))
    }

    /// Respond to `pending` from its translation.
    pub(in crate::conn) fn respond(
        &mut self,
        pending: Pending,
        resolved: Arc<Resolved>,
        context: &mut Context<'_>,
        disk: DiskAccess,
    ) -> Outcome {
        if let Some(target) = hand_over(&pending, &resolved.resolution) {
            let Pending {
                exchange, route, ..
            } = pending;
            return Outcome::Routed(self.route_again(exchange, &route, target, false, context));
        }
        let mark = self.output.mark();
        let route = pending.route.clone();
        let exchange = &pending.exchange;
        let mut response =
            response_context(context, exchange.persistence, Some(&route), self.secure);
        response.disk = disk;
        let out = &mut self.output;
        // What was written (`Ok`), or the status page still to write (`Err`).
        let answer: Result<u16, StatusAnswer> = match &resolved.resolution {
            Resolution::File(file) => match serve::serve_file(
                &exchange.head,
                file,
                resolved.watch,
                context.caches,
                &response,
                out,
            ) {
                Served::Sent { status } => Ok(status),
                Served::Status(answer) => Err(answer),
                Served::NeedData(job) => {
                    let pending = Pending {
                        resolved: Some(resolved.clone()),
                        ..pending
                    };
                    return Outcome::NeedJob(job, Box::new(pending));
                }
            },
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
            Ok(status) => self.record(Some(&pending.exchange), status, mark, context),
            Err(answer) => {
                let field = answer.field.as_ref();
                let extra = field.map(|(name, value)| (*name, &value[..]));
                self.answer_status(
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
