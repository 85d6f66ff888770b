//! The exchange's CGI side (RFC 3875): a script started for the request by the launcher
//! (`crate::programs::cgi`, off the serving loop), its standard input and output one end of a
//! socket pair the engine drives as the upstream socket. The body is written to it and its end
//! is a half-close; the response is what the script writes until it exits (`gateway.rs`).
//!
//! Owns: starting the script (the cap on scripts running at once, its meta-variables, where it
//! is looked for) and what a failed start answers. Must not touch: processes (the launcher's),
//! sockets (the engine's).

use std::sync::{Arc, OnceLock};

use super::{Proxy, Stage, Step};
use crate::config::{CgiSettings, Level};
use crate::conn::handler::meta_variables;
use crate::conn::handler::Routed;
use crate::conn::upstream::{Connect, LinkId, ProgramStart, Timeouts};
use crate::conn::{Conn, Context, Need};
use crate::log::error::Throttle;
use crate::programs::cgi::{Launch, LaunchFailure, Script as Program};
use crate::response::Persistence;
use crate::site::ScriptSplit;

/// How long after the exchange's timeout the launcher kills a script still running.
const KILL_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// One request's script.
#[derive(Debug)]
pub(in crate::conn) struct Script {
    /// The normalised path the request was routed by.
    clean: String,
    /// The script's URL path when the location names it, for the error log.
    name: Option<String>,
    /// What the launcher runs (taken when it is asked to); `None`: the path names no script
    /// (an `extension` location's rule finds none).
    program: Option<Program>,
    /// Set by the launcher when no script could be started.
    failure: Arc<OnceLock<LaunchFailure>>,
    /// The location's limits.
    settings: CgiSettings,
}

impl Script {
    /// The location's split of the path (`Route::script_split`): a script it names, or a
    /// directory the launcher searches segment by segment (Apache's `ScriptAlias`).
    pub(super) fn new(routed: &Routed, settings: CgiSettings) -> Script {
        let route = &routed.route;
        let clean = routed.clean.as_str();
        let (name, program) = match route.script_split(clean) {
            Some(split @ ScriptSplit::Known { .. }) => {
                match meta_variables::named_script(route, split) {
                    Some(path) => (
                        Some(path.script_name.clone()),
                        Some(Program::Fixed {
                            filename: path.filename,
                            script_name: path.script_name,
                            path_info: path.path_info,
                        }),
                    ),
                    None => (None, None),
                }
            }
            Some(ScriptSplit::Search { url_base, rest }) => (
                None,
                Some(Program::Search {
                    directory: route.script_directory().to_path_buf(),
                    url_base: url_base.to_owned(),
                    rest: rest.to_owned(),
                }),
            ),
            None => (None, None),
        };
        Script {
            clean: clean.to_owned(),
            name,
            program,
            failure: Arc::new(OnceLock::new()),
            settings,
        }
    }

    /// What starting the script needs, the program taken (a script starts once).
    pub(super) fn start(&mut self) -> Start {
        Start {
            program: self.program.take(),
            clean: self.clean.clone(),
            failure: self.failure.clone(),
            settings: self.settings.clone(),
        }
    }

    /// The script, for the error log.
    pub(super) fn describe(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.clean)
    }

    /// The status a failed start answers: no such script `404`, one that may not run `403`,
    /// one that could not be started `502`.
    pub(super) fn launch_failed(&self) -> Option<u16> {
        self.failure.get().map(|failure| match failure {
            LaunchFailure::NotFound => 404,
            LaunchFailure::Forbidden => 403,
            LaunchFailure::Spawn => 502,
        })
    }
}

/// What starting a request's script needs (`Script::start`).
pub(super) struct Start {
    /// `None`: the path names no script.
    program: Option<Program>,
    clean: String,
    failure: Arc<OnceLock<LaunchFailure>>,
    settings: CgiSettings,
}

impl Conn {
    /// Ask the engine for the script's socket pair, its start queued to the launcher; over
    /// the cap on scripts running at once, `503` with `Retry-After`.
    pub(super) fn start_script(
        &mut self,
        mut proxy: Box<Proxy>,
        start: Start,
        context: &mut Context<'_>,
    ) -> Step {
        let Start {
            program,
            clean,
            failure,
            settings,
        } = start;
        let Some(slot) = context.launcher.reserve() else {
            return self.too_many_scripts(proxy, context);
        };
        // The launcher adds the script's own variables (`SCRIPT_NAME`, ...) where it finds it.
        let env = self.gateway_variables(&proxy, &clean, None, context);
        let document_root = proxy.route.settings.static_files.root.clone();
        let Some(program) = program else {
            // An `extension` location asked for a path without a script.
            return self.refuse(proxy, 404, &[], context);
        };
        let launch = Launch {
            slot,
            script: program,
            document_root,
            env,
            // The exchange gives up first (`504`), so that a script that overruns is answered
            // as a timeout rather than as output cut short by its death.
            timeout: settings.timeout + KILL_AFTER,
            failure,
        };
        self.awaiting_link = Some(timeouts(&settings));
        proxy.stage = Stage::Opening;
        let start = ProgramStart::new(move |stdio| launch.start(stdio));
        Step::Wait(proxy, Need::Connect(LinkId::FIRST, Connect::Program(start)))
    }

    fn too_many_scripts(&mut self, proxy: Box<Proxy>, context: &mut Context<'_>) -> Step {
        static BUSY: Throttle = Throttle::new();
        BUSY.log(
            Level::Warn,
            format_args!(
                "cgi: max_scripts = {} are running: {} {} answered 503",
                context.config.cgi.max_scripts,
                proxy.exchange.head.method.as_str(),
                proxy.exchange.head.target.escape_debug()
            ),
        );
        self.refuse(proxy, 503, &[("Retry-After", b"1")], context)
    }

    /// Answer `status` before any script runs; a body the client may still be sending ends
    /// the connection.
    fn refuse(
        &mut self,
        mut proxy: Box<Proxy>,
        status: u16,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) -> Step {
        if !proxy.request.done() {
            proxy.exchange.persistence = Persistence::Close;
            self.linger = true;
        }
        let route = proxy.route.clone();
        self.answer(&proxy.exchange, Some(&route), status, extra, context)
            .map_or(Step::Over, Step::Job)
    }
}

/// A script has its timeout for everything: taking its input, writing its output, running.
fn timeouts(settings: &CgiSettings) -> Timeouts {
    Timeouts {
        connect: settings.timeout,
        send: settings.timeout,
        read: settings.timeout,
    }
}
