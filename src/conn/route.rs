//! The phases of a request, top to bottom (SWS `handler.rs`; nginx's phase order): method →
//! path → site and location → rewrite → rate limit → access → redirect or `return` → handler →
//! (static) path cache or translation job (`try_files`) → response. A request over plain HTTP to a `redirect_https`
//! site is sent to HTTPS as soon as it is located, whatever its method, then the site's
//! client-certificate check applies (`https.rs`).
//!
//! Owns: that order and each phase's answer (`405`, `400`, `429`, `403`, `401`, `3xx`, a
//! `return`, the status and health handlers, the static response).
//! Must not touch: sockets, the disk (a translation is a `Job`).

use std::sync::Arc;

use ampd_http::request::{split_target, Method, RequestHead};

use super::handler::{self, Methods, Routed, Waiting};
use super::path_templates::{expand, with_slash, ROUTING};
use super::reply::Parts;
use super::{Authenticating, Conn, Context, Exchange, Job, Outcome, RedirectBase, MAX_HANDOFFS};
use crate::config::{Handler, Level};
use crate::content::job::JobDone;
use crate::content::path::{self, CleanPath};
use crate::log::error;
use crate::log::stats::Shed;
use crate::response::Persistence;
use crate::site::access::{self, Verdict};
use crate::site::Route;

/// Internal rewrites one request may go through before it is a configuration loop (`500`).
const MAX_REWRITES: usize = 10;

impl Conn {
    /// Whether `route` refuses a request with this method before looking at anything else
    /// (a connection over a cap, or the static handlers' method rule: `405`, `501`): the answer
    /// is known from the head alone. A proxy location's requests with bodies never come here
    /// (`on_request` routes them first).
    pub(super) fn refuses_from_head(&self, method: &Method) -> bool {
        self.refused
            || !matches!(
                handler::methods(&Handler::Static, method),
                Methods::Take | Methods::Options(_)
            )
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
        let mut found = sites.find(host, clean.as_str());
        let mut rewrites = 0;
        while let Some(template) = found
            .route
            .settings
            .rewrite
            .as_ref()
            .filter(|_| !found.add_slash)
        {
            rewrites += 1;
            if rewrites > MAX_REWRITES {
                return Err(NotLocated::Looping(clean));
            }
            let rewritten = expand(template, found.route, clean.as_str(), &head.target);
            clean = path::normalize(&rewritten, &ROUTING)
                .map_err(|error| NotLocated::Status(error.status()))?;
            found = sites.find(host, clean.as_str());
            redirect.rewritten = true;
        }
        Ok(Located {
            route: found.route.clone(),
            clean,
            redirect,
            add_slash: found.add_slash,
        })
    }

    /// A request for a location's path without its trailing '/' is sent to the path with it
    /// (nginx), whatever the location's handler, before its access rules (the location is
    /// not entered): `301`, or `308` for a method other than GET and HEAD, which a client
    /// repeats with its body (RFC 9110 §15.4.9) where after a `301` it may turn a POST into
    /// a GET (§15.4.2).
    fn redirect_adding_slash(
        &mut self,
        exchange: &Exchange,
        located: &Located,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let status = match exchange.head.method {
            Method::Get | Method::Head => 301,
            _ => 308,
        };
        let location = with_slash(&located.clean, located.redirect.query.as_deref());
        self.answer(
            exchange,
            Some(&located.route),
            status,
            &[("Location", location.as_bytes())],
            context,
        )
    }

    /// Route a handed-back request again under `target` (`internal`: `internal` locations may
    /// answer it), unless it has been handed back too often: a loop, `500`.
    pub(in crate::conn) fn route_again(
        &mut self,
        mut exchange: Exchange,
        route: &Route,
        target: String,
        internal: bool,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        exchange.handoffs += 1;
        if exchange.handoffs > MAX_HANDOFFS {
            static LOOPING: crate::log::error::Throttle = crate::log::error::Throttle::new();
            LOOPING.log(
                crate::config::Level::Error,
                format_args!(
                    "{} handed back {MAX_HANDOFFS} times, last to {}: a loop",
                    exchange.head.target.escape_debug(),
                    target.escape_debug()
                ),
            );
            return self.answer(&exchange, Some(route), 500, &[], context);
        }
        let requested = std::mem::replace(&mut exchange.head.target, target.into_boxed_str());
        // `REQUEST_URI` stays what the client asked for, as nginx's `$request_uri`.
        exchange.requested.get_or_insert(requested);
        exchange.internal |= internal;
        self.route(exchange, context)
    }

    /// Answer a request whose body (if any) has been read, or (a proxy location) is to be
    /// forwarded.
    pub(super) fn route(
        &mut self,
        mut exchange: Exchange,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        // No location's header rules until one is found (a 400 or 405 has none, as it has
        // none of a location's `headers`).
        self.output.set_header_rules(None);
        if self.refused {
            let retry = context
                .config
                .admission
                .retry_after
                .as_secs()
                .max(1)
                .to_string();
            // An overloaded server spends nothing on error pages.
            let extra: &[(&str, &[u8])] = &[("Retry-After", retry.as_bytes())];
            let outcome = self
                .parts()
                .answer_built_in(&exchange, None, 503, extra, context);
            return self.settle(outcome, context);
        }
        // Before any site's rules: the CA's HTTP-01 check (RFC 8555 §8.3).
        if let Some(answer) = handler::acme_challenge::pending(&exchange.head, context.config) {
            return self.serve_acme_challenge(&exchange, &answer, context);
        }
        let located = self.locate(&exchange.head, context);
        if let Ok(located) = &located {
            if let Some(answered) = self.redirect_to_https(&exchange, located, context) {
                return answered;
            }
            if located.add_slash {
                return self.redirect_adding_slash(&exchange, located, context);
            }
        }
        // Before anything about the site is answered, its method rule included.
        if let Some(answered) = self.refuse_without_client_certificate(&exchange, context) {
            return answered;
        }
        // The handler's method rule comes first, whatever the path (a request that cannot be
        // located is judged by the static rule).
        let handler = located
            .as_ref()
            .map_or(&Handler::Static, |located| &located.route.settings.handler);
        match handler::methods(handler, &exchange.head.method) {
            Methods::Take => {}
            Methods::Options(allow) => {
                return self.answer(&exchange, None, 204, &[("Allow", allow)], context)
            }
            Methods::NotImplemented => return self.answer(&exchange, None, 501, &[], context),
            Methods::NotAllowed(allow) => {
                return self.answer(&exchange, None, 405, &[("Allow", allow)], context)
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
        if located.add_slash {
            return self.redirect_adding_slash(&exchange, &located, context);
        }
        let Located {
            route,
            clean,
            redirect: redirect_base,
            add_slash: _,
        } = located;
        self.output.set_header_rules(route.header_rules.as_ref());
        if route.settings.internal && !exchange.internal {
            // Only an upstream's `X-Accel-Redirect` reaches it (nginx `internal`).
            return self.answer(&exchange, Some(&route), 404, &[], context);
        }
        if route.settings.rate_limit {
            if let Err(wait) =
                context
                    .rates
                    .take(self.peer, context.clock.now(), &context.config.admission)
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
                    let request = Authenticating {
                        exchange,
                        route,
                        path: clean,
                        redirect: redirect_base,
                        user,
                        challenge,
                    };
                    return self.settle(Outcome::NeedJob(job, Box::new(request)), context);
                }
            }
        }
        self.after_access(exchange, route, clean, redirect_base, context)
    }

    /// The phases after access control: redirect or `return`, handler, static files.
    pub(super) fn after_access(
        &mut self,
        exchange: Exchange,
        route: Arc<Route>,
        clean: CleanPath,
        redirect_base: RedirectBase,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        if let Some(answer) = &route.settings.answer {
            let location = answer
                .location
                .as_ref()
                .map(|template| expand(template, &route, clean.as_str(), &exchange.head.target));
            let fields: Vec<(&str, &[u8])> = location
                .iter()
                .map(|location| ("Location", location.as_bytes()))
                .collect();
            let outcome = match &answer.body {
                Some(body) => self.parts().answer_body(
                    &exchange,
                    &route,
                    answer.status,
                    &fields,
                    (body.content_type.as_bytes(), body.text.as_bytes()),
                    context,
                ),
                None => {
                    self.parts()
                        .answer(&exchange, Some(&route), answer.status, &fields, context)
                }
            };
            return self.settle(outcome, context);
        }
        if let Some(redirect) = &route.settings.redirect {
            let location = expand(&redirect.to, &route, clean.as_str(), &exchange.head.target);
            return self.answer(
                &exchange,
                Some(&route),
                redirect.status,
                &[("Location", location.as_bytes())],
                context,
            );
        }
        let routed = Routed {
            exchange,
            route,
            clean,
            redirect: redirect_base,
        };
        self.handle(routed, context)
    }
}

/// A request's location, found before anything is answered (`Conn::locate`).
pub(super) struct Located {
    pub route: Arc<Route>,
    /// The decoded, normalised path it was routed by.
    pub clean: CleanPath,
    pub redirect: RedirectBase,
    /// `clean` is `route`'s path without its trailing '/': the request is redirected there
    /// (`Sites::find`).
    pub add_slash: bool,
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

/// The access phase's wait: a helper checks the request's password (`Job::Verify`).
impl Waiting for Authenticating {
    fn job_done(
        self: Box<Self>,
        done: JobDone,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
    ) -> Outcome {
        let JobDone::Verified(matched) = done else {
            return Outcome::Wait(self);
        };
        let Authenticating {
            mut exchange,
            route,
            path,
            redirect,
            user,
            challenge,
        } = *self;
        if !matched {
            let extra: &[(&str, &[u8])] = &[("WWW-Authenticate", &challenge)];
            return parts.answer(&exchange, Some(&route), 401, extra, context);
        }
        if let Some(authorization) = exchange.head.header("authorization") {
            route.access.remember(authorization, &user);
        }
        exchange.user = Some(user);
        Outcome::Admitted(Routed {
            exchange,
            route,
            clean: path,
            redirect,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::expand;
    use crate::config::{Config, Location, LocationSettings};
    use crate::site::Sites;

    #[test]
    fn placeholders_are_filled_and_encoded() {
        let dir = std::env::temp_dir();
        let mut config = Config::new(dir.clone());
        config.sites[0].locations.extend([
            Location {
                path: "/old/".to_owned(),
                exact: false,
                regex: None,
                settings: LocationSettings::new(dir.clone()),
            },
            Location {
                path: "/".to_owned(),
                exact: false,
                regex: Some(regex::Regex::new("^/img/(?<id>[^/]+)(/x)?\\.png$").unwrap()),
                settings: LocationSettings::new(dir),
            },
        ]);
        let sites = Sites::build(&config).unwrap();
        let old = sites.route(None, "/old/a b/c");
        assert_eq!(
            expand("/new/{rest}{path}", old, "/old/a b/c", "/old/a%20b/c"),
            "/new/a%20b/c/old/a%20b/c"
        );
        assert_eq!(
            expand("https://x{uri}", old, "/old/", "/p?q=1"),
            "https://x/p?q=1"
        );
        assert_eq!(
            expand("/{1}", old, "/old/", "/old/"),
            "/{1}",
            "no captures here"
        );
        let image = sites.route(None, "/img/a\r\n?.png");
        assert!(image.regex.is_some());
        assert_eq!(
            expand(
                "/i/{id}/{1}/{2}/{0}/{3}{other}",
                image,
                "/img/a\r\n?.png",
                "/"
            ),
            "/i/a%0D%0A%3F/a%0D%0A%3F///img/a%0D%0A%3F.png/{3}{other}",
            "encoded; a group that took no part is empty; unknown names stay"
        );
    }
}
