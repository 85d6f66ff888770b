//! The exchange's FastCGI side (FastCGI 1.0, Responder role): the request goes out as
//! `FCGI_BEGIN_REQUEST`, the meta-variables in `FCGI_PARAMS` and the body in `FCGI_STDIN`
//! records (`relay.rs`); the application's records are taken apart as they arrive, standard
//! output being the CGI response (`gateway.rs`), standard error lines going to the error log,
//! and `FCGI_END_REQUEST` ending the request. A connection carries one request at a time (no
//! multiplexing: php-fpm and most applications refuse it), kept open with `FCGI_KEEP_CONN`
//! when the pool keeps connections.
//!
//! Owns: that framing and what an application's end of request means. Must not touch: sockets,
//! the CGI fields (`gateway.rs`).

use std::sync::Arc;

use ampd_http::fastcgi::{self, EndRequest, Event, ProtocolStatus, RecordReader, Role};

use super::relay::FASTCGI_REQUEST;
use super::HIGH_WATER;
use crate::config::{FastCgiSettings, Level};
use crate::conn::handler::meta_variables::{self, ScriptPath};
use crate::conn::handler::Routed;
use crate::conn::Context;
use crate::content::path::CleanPath;
use crate::log::error;
use crate::site::Route;
use crate::upstream::Pool;

/// An application's standard error line longer than this is logged in pieces.
const STDERR_LINE: usize = 2048;

/// One request to a FastCGI application.
#[derive(Debug)]
pub(in crate::conn) struct Application {
    pool: Arc<Pool>,
    /// The normalised path the request was routed by.
    clean: String,
    script: ScriptPath,
    /// The current attempt asked the application to keep the connection open.
    keep_conn: bool,
    records: RecordReader,
    /// Standard output taken out of its records, not yet used.
    output: Vec<u8>,
    /// The response is complete: output beyond it is read and dropped until the end of the
    /// request.
    discarding: bool,
    /// The start of a standard error line whose end has not arrived.
    stderr: Vec<u8>,
    end: Option<EndRequest>,
}

impl Application {
    /// The request to a `handler = "fastcgi"` location; `None` when its path names no script
    /// (an `extension` location whose rule finds none: `404`).
    pub(super) fn new(
        routed: &Routed,
        settings: &FastCgiSettings,
        context: &Context<'_>,
    ) -> Option<Application> {
        let script = meta_variables::script_path(&routed.route, routed.clean.as_str())?;
        Some(Application {
            pool: context.upstreams.pool(settings.pool).clone(),
            clean: routed.clean.as_str().to_owned(),
            script,
            keep_conn: false,
            records: RecordReader::new(FASTCGI_REQUEST),
            output: Vec::new(),
            discarding: false,
            stderr: Vec::new(),
            end: None,
        })
    }

    pub(super) fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    pub(super) fn clean(&self) -> &str {
        &self.clean
    }

    pub(super) fn script(&self) -> &ScriptPath {
        &self.script
    }

    /// The script's file as a path below the location's root (or alias directory), as
    /// `Route::script_root` looks it up; `None` if it is not below it.
    pub(super) fn script_below(&self, route: &Route) -> Option<CleanPath> {
        let relative = self
            .script
            .filename
            .strip_prefix(&route.settings.static_files.root)
            .ok()?;
        CleanPath::from_normalized(&format!("/{}", relative.to_str()?))
    }

    /// A new attempt (the first, or a retry on another server) starts from nothing.
    pub(super) fn begin(&mut self, keep_conn: bool) {
        self.keep_conn = keep_conn;
        self.records = RecordReader::new(FASTCGI_REQUEST);
        self.output.clear();
        self.discarding = false;
        self.stderr.clear();
        self.end = None;
    }

    /// `FCGI_BEGIN_REQUEST` and `FCGI_PARAMS`, and with no body the end of `FCGI_STDIN`
    /// (the body's records, and their end, are the relay's).
    pub(super) fn write_request(
        &self,
        variables: &[(Vec<u8>, Vec<u8>)],
        no_body: bool,
        out: &mut Vec<u8>,
    ) {
        fastcgi::write_begin_request(out, FASTCGI_REQUEST, Role::Responder, self.keep_conn);
        fastcgi::write_params(
            out,
            FASTCGI_REQUEST,
            variables
                .iter()
                .map(|(name, value)| (name.as_slice(), value.as_slice())),
        );
        if no_body {
            fastcgi::write_stdin(out, FASTCGI_REQUEST, &[]);
        }
    }

    /// Take the records in `input` apart (as far as the output buffer has room), leaving a
    /// record's unread part there. An error breaks the protocol: the connection is closed.
    pub(super) fn demultiplex(&mut self, input: &mut Vec<u8>) -> Result<(), String> {
        let mut used = 0;
        while self.end.is_none() && (self.discarding || self.output.len() < HIGH_WATER) {
            let (event, taken) = self
                .records
                .next(&input[used..])
                .map_err(|error| format!("broke FastCGI: {error}"))?;
            used += taken;
            match event {
                None if taken == 0 => break,
                None => {}
                Some(Event::Stdout(data)) if !self.discarding => {
                    self.output.extend_from_slice(data);
                }
                Some(Event::Stdout(_)) => {}
                Some(Event::Stderr(data)) => self.log_stderr(data),
                Some(Event::End(end)) => {
                    self.end = Some(end);
                    let rest = std::mem::take(&mut self.stderr);
                    if !rest.is_empty() {
                        self.log_line(&rest);
                    }
                }
                // Only a management request is answered with values.
                Some(Event::Values(_)) => return Err("sent FCGI_GET_VALUES_RESULT".to_owned()),
            }
        }
        input.drain(..used);
        Ok(())
    }

    /// Standard error goes to the error log a line at a time, naming the pool and the script.
    fn log_stderr(&mut self, mut data: &[u8]) {
        while let Some(end) = data.iter().position(|&byte| byte == b'\n') {
            let mut line = std::mem::take(&mut self.stderr);
            line.extend_from_slice(&data[..end]);
            self.log_line(&line);
            data = &data[end + 1..];
        }
        self.stderr.extend_from_slice(data);
        if self.stderr.len() >= STDERR_LINE {
            let line = std::mem::take(&mut self.stderr);
            self.log_line(&line);
        }
    }

    fn log_line(&self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        error::log(
            Level::Warn,
            format_args!(
                "fastcgi {} {}: {}",
                self.pool.settings().name,
                self.script.script_name.escape_debug(),
                String::from_utf8_lossy(line).escape_debug()
            ),
        );
    }

    /// The application ended the request without serving it because it cannot take it now
    /// (`FCGI_OVERLOADED`, `FCGI_CANT_MPX_CONN`): `503`.
    pub(super) fn refusal(&self) -> Option<&'static str> {
        match self.end?.protocol_status {
            ProtocolStatus::Overloaded => Some("overloaded"),
            ProtocolStatus::CantMpxConn => Some("cannot take another request on the connection"),
            _ => None,
        }
    }

    /// `FCGI_END_REQUEST` arrived.
    pub(super) fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// The standard output not yet used.
    pub(super) fn output(&mut self) -> &mut Vec<u8> {
        &mut self.output
    }

    pub(super) fn buffered(&self) -> usize {
        self.output.len()
    }

    /// The response is complete: what else the application writes is dropped.
    pub(super) fn discard_output(&mut self) {
        self.output.clear();
        self.discarding = true;
    }

    /// The connection may carry another request: it was asked to stay open and the request
    /// ended.
    pub(super) fn reusable(&self) -> bool {
        self.keep_conn && self.end.is_some()
    }
}
