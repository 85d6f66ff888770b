//! The phases of a request, top to bottom (SWS `handler.rs`; nginx's phase order): method →
//! path → site and location → rewrite → rate limit → access → redirect → handler → (static)
//! path cache or translation job → response.
//!
//! Owns: that order and each phase's answer (`405`, `400`, `429`, `403`, `401`, `3xx`, the
//! status and health handlers, the static response).
//! Must not touch: sockets, the disk (a translation is a `Job`).

use std::sync::Arc;
use std::time::Instant;

use ampd_http::request::{split_target, Method, RequestHead};

use super::reply::response_context;
use super::{
    Authenticating, Conn, Context, Exchange, Job, Outcome, Pending, RedirectBase, State, ALLOW,
};
use crate::config::{Handler, Level};
use crate::content::autoindex;
use crate::content::file::{Resolution, Resolved};
use crate::content::path::{self, CleanPath, PathOptions};
use crate::content::path_cache::Lookup;
use crate::content::serve::{self, DiskAccess, Served, Sink};
use crate::log::stats::Shed;
use crate::log::{error, metrics};
use crate::response::{status_page, Persistence};
use crate::site::access::{self, Verdict};
use crate::site::Route;

/// Internal rewrites one request may go through before it is a configuration loop (`500`).
const MAX_REWRITES: usize = 10;

/// Paths are routed with dot-files allowed and `~user` off; each location then applies its
/// own rules (`path::is_hidden`, a second pass for `userdir`), so a location's rules cannot be
/// dodged by encoding (`/%2e%2e/`, `/%73tatic/`): routing sees the decoded, normalised path.
const ROUTING: PathOptions = PathOptions {
    allow_dotfiles: true,
    userdir: false,
};

impl Conn {
    /// Whether `route` refuses a request with this method before looking at anything else
    /// (a connection over a cap, `405`, `501`): the answer is known from the head alone.
    pub(super) fn refuses_from_head(&self, method: &Method) -> bool {
        self.refused || !matches!(method, Method::Get | Method::Head | Method::Options)
    }

    /// Where a request goes: its location (after rewrites), the path it was routed by, and
    /// what a `301` to `path/` needs. Pure: nothing is answered here.
    pub(super) fn locate(
        &self,
        head: &RequestHead,
        context: &Context<'_>,
    ) -> Result<Located, NotLocated> {
        let (raw_path, query) = match split_target(&head.target) {
            Some((_, raw_path, query)) if raw_path.starts_with('/') => (raw_path, query),
            _ => return Err(NotLocated::BadTarget),
        };
        let mut redirect = RedirectBase {
            path: raw_path.to_owned(),
            query: query.map(str::to_owned),
            rewritten: false,
        };
        let mut clean = path::normalize(raw_path, &ROUTING)
            .map_err(|error| NotLocated::Status(error.status()))?;
        let sites = context.sites;
        // An absolute-form target's authority wins over `Host` (RFC 9112 §3.2.2).
        let host = head.host().map(str::as_bytes);
        let mut route = sites.route(host, clean.as_str()).clone();
        let mut rewrites = 0;
        while let Some(template) = &route.settings.rewrite {
            rewrites += 1;
            if rewrites > MAX_REWRITES {
                return Err(NotLocated::Looping(clean));
            }
            let rewritten = expand(template, route.rest(clean.as_str()), &head.target);
            clean = path::normalize(&rewritten, &ROUTING)
                .map_err(|error| NotLocated::Status(error.status()))?;
            route = sites.route(host, clean.as_str()).clone();
            redirect.rewritten = true;
        }
        Ok(Located {
            route,
            clean,
            redirect,
        })
    }

    /// Answer a request whose body (if any) has been read, or (a proxy location) is to be
    /// forwarded.
    pub(super) fn route(
        &mut self,
        mut exchange: Exchange,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        if self.refused {
            let retry = context
                .config
                .admission
                .retry_after
                .as_secs()
                .max(1)
                .to_string();
            return self.answer(
                &exchange,
                None,
                503,
                &[("Retry-After", retry.as_bytes())],
                context,
            );
        }
        let located = self.locate(&exchange.head, context);
        let proxied =
            matches!(&located, Ok(located) if located.route.settings.handler == Handler::Proxy);
        // Static files, status and health take GET and HEAD (their method check comes first,
        // whatever the path); a proxy location leaves methods to its upstream.
        if !proxied {
            match exchange.head.method {
                Method::Get | Method::Head => {}
                Method::Options => {
                    return self.answer(&exchange, None, 204, &[("Allow", ALLOW)], context)
                }
                Method::Other(_) => return self.answer(&exchange, None, 501, &[], context),
                _ => return self.answer(&exchange, None, 405, &[("Allow", ALLOW)], context),
            }
        }
        match located {
            Ok(located) => self.phases(exchange, located, context),
            Err(NotLocated::BadTarget) => {
                exchange.persistence = Persistence::Close;
                self.answer(&exchange, None, 400, &[], context)
            }
            Err(NotLocated::Status(status)) => self.answer(&exchange, None, status, &[], context),
            Err(NotLocated::Looping(clean)) => {
                static LOOPING: error::Throttle = error::Throttle::new();
                LOOPING.log(
                    Level::Error,
                    format_args!("rewrite loop at {}", clean.as_str().escape_debug()),
                );
                self.answer(&exchange, None, 500, &[], context)
            }
        }
    }

    /// The phases after routing: internal locations, rate limit, access, then (`after_access`)
    /// redirect and handler.
    pub(super) fn phases(
        &mut self,
        mut exchange: Exchange,
        located: Located,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let Located {
            route,
            clean,
            redirect: redirect_base,
        } = located;
        if route.settings.internal && !exchange.internal {
            // Only an upstream's `X-Accel-Redirect` reaches it (nginx `internal`).
            return self.answer(&exchange, Some(&route), 404, &[], context);
        }
        if route.settings.rate_limit {
            if let Err(wait) =
                context
                    .rates
                    .take(self.peer, Instant::now(), &context.config.admission)
            {
                context.stats.shed(Shed::Rate);
                static LIMITED: error::Throttle = error::Throttle::new();
                LIMITED.log(
                    Level::Warn,
                    format_args!(
                        "request from {} refused with 429: over requests_per_second = {}",
                        self.peer, context.config.admission.requests_per_second
                    ),
                );
                let retry = wait.as_secs_f64().ceil().max(1.0).to_string();
                return self.answer(
                    &exchange,
                    Some(&route),
                    429,
                    &[("Retry-After", retry.as_bytes())],
                    context,
                );
            }
        }
        if !route.access.is_open() {
            match route
                .access
                .check(self.peer, exchange.head.header("authorization"))
            {
                Verdict::Allowed { user } => exchange.user = user,
                Verdict::Forbidden => {
                    return self.answer(&exchange, Some(&route), 403, &[], context)
                }
                Verdict::Unauthorized { challenge } => {
                    return self.answer(
                        &exchange,
                        Some(&route),
                        401,
                        &[("WWW-Authenticate", &challenge)],
                        context,
                    )
                }
                Verdict::Verify {
                    user,
                    password,
                    hash,
                    challenge,
                } => {
                    // Milliseconds of CPU: a helper's work, like a disk read.
                    let job = Job::Verify {
                        password,
                        hash,
                        verify: access::password_matches,
                    };
                    self.state = State::Authenticating(Box::new(Authenticating {
                        exchange,
                        route,
                        path: clean,
                        redirect: redirect_base,
                        user,
                        challenge,
                    }));
                    return Some(job);
                }
            }
        }
        self.after_access(exchange, route, clean, redirect_base, context)
    }

    /// A helper checked the password of a request held in `Authenticating`.
    pub(super) fn authenticated(
        &mut self,
        request: Authenticating,
        matched: bool,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let Authenticating {
            mut exchange,
            route,
            path,
            redirect,
            user,
            challenge,
        } = request;
        if !matched {
            return self.answer(
                &exchange,
                Some(&route),
                401,
                &[("WWW-Authenticate", &challenge)],
                context,
            );
        }
        if let Some(authorization) = exchange.head.header("authorization") {
            route.access.remember(authorization, &user);
        }
        exchange.user = Some(user);
        self.after_access(exchange, route, path, redirect, context)
    }

    /// The phases after access control: redirect, handler, static files.
    fn after_access(
        &mut self,
        exchange: Exchange,
        route: Arc<Route>,
        clean: CleanPath,
        redirect_base: RedirectBase,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        if let Some(redirect) = &route.settings.redirect {
            let location = expand(
                &redirect.to,
                route.rest(clean.as_str()),
                &exchange.head.target,
            );
            return self.answer(
                &exchange,
                Some(&route),
                redirect.status,
                &[("Location", location.as_bytes())],
                context,
            );
        }
        match route.settings.handler {
            Handler::Static => {}
            Handler::Proxy => {
                // Tunnels to arbitrary hosts and request echoes are not a reverse proxy's to
                // pass on (nginx answers them the same way).
                if matches!(exchange.head.method, Method::Connect | Method::Trace) {
                    return self.answer(
                        &exchange,
                        Some(&route),
                        405,
                        &[("Allow", PROXY_ALLOW)],
                        context,
                    );
                }
                let target = proxy_target(&route, &clean, &redirect_base);
                self.start_proxy(exchange, route, target, context);
                return None;
            }
            Handler::Status => {
                let mut text = metrics::render(context.metrics, context.draining);
                context.upstreams.render_metrics(&mut text);
                return self.answer_text(
                    &exchange,
                    &route,
                    200,
                    metrics::CONTENT_TYPE,
                    text.as_bytes(),
                    context,
                );
            }
            Handler::Health if context.draining => {
                return self.answer_text(
                    &exchange,
                    &route,
                    503,
                    b"text/plain",
                    b"draining\n",
                    context,
                )
            }
            Handler::Health => {
                return self.answer_text(&exchange, &route, 200, b"text/plain", b"ok\n", context)
            }
        }
        self.serve_static(exchange, route, clean, redirect_base, context)
    }

    /// The static-file handler: the path cache, or a translation job, then the response.
    pub(super) fn serve_static(
        &mut self,
        exchange: Exchange,
        route: Arc<Route>,
        mut clean: CleanPath,
        redirect_base: RedirectBase,
        context: &mut Context<'_>,
    ) -> Option<Job> {
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
        };
        let previous = match context
            .caches
            .lookup(root.id, pending.path.as_str(), Instant::now())
        {
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
    pub(super) fn respond(
        &mut self,
        pending: Pending,
        resolved: Arc<Resolved>,
        context: &mut Context<'_>,
        disk: DiskAccess,
    ) -> Outcome {
        let mark = self.output.mark();
        let route = pending.route.clone();
        let exchange = &pending.exchange;
        let mut response = response_context(context, exchange.persistence, Some(&route));
        response.disk = disk;
        // Error pages carry the location's headers but not its cache headers.
        let mut error_response = response_context(context, exchange.persistence, Some(&route));
        error_response.head.cache_control = None;
        error_response.head.expires = None;
        let head_only = exchange.head.method == Method::Head;
        let out = &mut self.output;
        let status = match &resolved.resolution {
            Resolution::File(file) => {
                match serve::serve_file(
                    &exchange.head,
                    file,
                    resolved.watch,
                    context.caches,
                    &response,
                    out,
                ) {
                    Served::Sent { status } => status,
                    Served::NeedData(job) => {
                        let pending = Pending {
                            resolved: Some(resolved.clone()),
                            ..pending
                        };
                        return Outcome::NeedJob(job, Box::new(pending));
                    }
                }
            }
            Resolution::AddSlash => {
                let mut location = pending.redirect.path.clone();
                location.push('/');
                if let Some(query) = &pending.redirect.query {
                    location.push('?');
                    location.push_str(query);
                }
                status_page::write(
                    out.bytes(),
                    301,
                    &error_response.head,
                    &[("Location", location.as_bytes())],
                    !head_only,
                );
                301
            }
            Resolution::Listing(listing) => {
                match autoindex::View::from_query(pending.redirect.query.as_deref()) {
                    Ok(view) => {
                        // Titled and linked by the path the client asked for (an alias or a
                        // rewrite looks up another one below the root).
                        let directory = path::normalize(&pending.redirect.path, &ROUTING)
                            .unwrap_or_else(|_| pending.path.clone());
                        let page = autoindex::render(&directory, listing, &view);
                        autoindex::respond(&exchange.head, &page, &response, &error_response, out)
                    }
                    Err(_) => {
                        status_page::write(out.bytes(), 400, &error_response.head, &[], !head_only);
                        400
                    }
                }
            }
            Resolution::DirectoryForbidden | Resolution::Forbidden => {
                status_page::write(out.bytes(), 403, &error_response.head, &[], !head_only);
                403
            }
            Resolution::NotFound => {
                status_page::write(out.bytes(), 404, &error_response.head, &[], !head_only);
                404
            }
            Resolution::Failed => {
                status_page::write(out.bytes(), 500, &error_response.head, &[], !head_only);
                500
            }
            // Out of descriptors even after the caches let go of theirs: a passing overload,
            // so a client may retry (RFC 9110 §15.6.4), as for a connection cap.
            Resolution::Exhausted => {
                let retry = context
                    .config
                    .admission
                    .retry_after
                    .as_secs()
                    .max(1)
                    .to_string();
                status_page::write(
                    out.bytes(),
                    503,
                    &error_response.head,
                    &[("Retry-After", retry.as_bytes())],
                    !head_only,
                );
                503
            }
        };
        self.record(Some(&pending.exchange), status, mark, context);
        Outcome::Responded(pending.exchange.persistence)
    }
}

/// What a proxy location answers `405` with.
const PROXY_ALLOW: &[u8] = b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// A request's location, found before anything is answered (`Conn::locate`).
pub(super) struct Located {
    pub route: Arc<Route>,
    /// The decoded, normalised path it was routed by.
    pub clean: CleanPath,
    pub redirect: RedirectBase,
}

/// Why a request has no location.
pub(super) enum NotLocated {
    /// Not an origin-form (or absolute-form) target: `400`, and the connection closes.
    BadTarget,
    /// The path cannot be normalised (`400`, `404` …).
    Status(u16),
    /// Rewrites went round more than `MAX_REWRITES` times: a configuration loop, `500`.
    Looping(CleanPath),
}

/// The path and query a proxy location requests upstream: with a path in `proxy_pass`, it
/// replaces the location's prefix (the rest re-encoded from the normalised path); without one,
/// the target as the client sent it, or as a rewrite made it (nginx `proxy_pass` semantics).
fn proxy_target(route: &Route, clean: &CleanPath, redirect: &RedirectBase) -> String {
    let prefix = route
        .settings
        .proxy
        .as_ref()
        .and_then(|proxy| proxy.path.as_deref());
    let mut target = match prefix {
        Some(prefix) => {
            let rest = route.rest(clean.as_str());
            let mut target = prefix.to_owned();
            if target.ends_with('/') && rest.starts_with('/') {
                target.pop();
            }
            target.push_str(&path::encode_path(rest));
            target
        }
        None if redirect.rewritten => path::encode_path(clean.as_str()),
        None => redirect.path.clone(),
    };
    if let Some(query) = &redirect.query {
        target.push('?');
        target.push_str(query);
    }
    target
}

/// A redirect or rewrite target with `{rest}` (the path after the location's prefix,
/// percent-encoded again) and `{uri}` (the request target as sent) filled in.
fn expand(template: &str, rest: &str, uri: &str) -> String {
    let rest = path::encode_path(rest.trim_start_matches('/'));
    template.replace("{rest}", &rest).replace("{uri}", uri)
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn placeholders_are_filled_and_encoded() {
        assert_eq!(
            expand("/new/{rest}", "a b/c", "/old/a%20b/c"),
            "/new/a%20b/c"
        );
        assert_eq!(expand("https://x{uri}", "", "/p?q=1"), "https://x/p?q=1");
    }
}
