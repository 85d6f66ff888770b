//! The settings of locations whose answers come from programs: CGI scripts (RFC 3875), FastCGI
//! applications (external ones such as php-fpm, and the persistent ones ampd starts and keeps,
//! Flash §5.6), and how a request becomes a script's meta-variables.
//!
//! Owns: the typed settings and their defaults. nginx's `fastcgi_*` directives and Apache's
//! `ScriptAlias`/`AddHandler cgi-script` are the models.
//! Must not touch: processes, sockets (`crate::programs` starts and keeps the programs).

use std::path::PathBuf;
use std::time::Duration;

/// How a request's path becomes `SCRIPT_NAME` and `PATH_INFO` (RFC 3875 §4.1.13, §4.1.5), for
/// CGI and FastCGI locations alike.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScriptSettings {
    /// `extension = ".php"`: the location matches any path of its site with a segment ending
    /// in it (under its `path`, if it has one), before prefix locations are tried; the path up
    /// to and including that segment is `SCRIPT_NAME`, the rest `PATH_INFO`
    /// (`/index.php/a/b` → `/index.php` + `/a/b`). A path ending in `/` gets the location's
    /// first `index` file appended.
    pub extension: Option<String>,
    /// `script = "/index.php"`: every request of the location runs this script (a front
    /// controller); `SCRIPT_NAME` is it, `PATH_INFO` the request path after the location's
    /// prefix.
    pub script: Option<String>,
    /// `params = { NAME = "value" }`: meta-variables added to (or replacing) ampd's own, as
    /// nginx's `fastcgi_param`.
    pub params: Vec<(String, String)>,
}

/// What a `handler = "fastcgi"` location does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FastCgiSettings {
    /// Index into `Config::upstreams` (a pool whose `protocol` is `FastCgi`).
    pub pool: usize,
    /// Honour `X-Accel-Redirect` in the application's response.
    pub x_accel_redirect: bool,
    /// Honour `X-Sendfile` for files below this directory; `None`: off.
    pub x_sendfile_root: Option<PathBuf>,
    /// `fastcgi_check_script`: where the request path names the script (an `extension`
    /// location), answer `404` for a script that is not a file below the root instead of
    /// passing it on (nginx's `try_files $fastcgi_script_name =404`). `None`: on when every
    /// server of the pool shares ampd's file system (a unix socket, a loopback address).
    pub check_script: Option<bool>,
}

/// What a `handler = "cgi"` location does (scripts are found below its `root` or `alias`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgiSettings {
    /// Longest a script may run; then its process group is killed and the client gets `504`
    /// (or a cut response, if the head went out).
    pub timeout: Duration,
    /// Honour `X-Accel-Redirect` in the script's response.
    pub x_accel_redirect: bool,
    /// Honour `X-Sendfile` for files below this directory; `None`: off.
    pub x_sendfile_root: Option<PathBuf>,
}

impl Default for CgiSettings {
    fn default() -> CgiSettings {
        CgiSettings {
            timeout: Duration::from_secs(60),
            x_accel_redirect: true,
            x_sendfile_root: None,
        }
    }
}

/// The server-wide `[cgi]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgiLimits {
    /// Scripts running at once in one server process; a request beyond it gets `503` with
    /// `Retry-After`.
    pub max_scripts: usize,
}

impl Default for CgiLimits {
    fn default() -> CgiLimits {
        CgiLimits { max_scripts: 64 }
    }
}

/// `[application.NAME]`: a FastCGI application ampd starts, keeps running and stops (Flash's
/// persistent CGI processes). Its processes share one listening unix socket, passed to each as
/// descriptor 0 (`FCGI_LISTENSOCK_FILENO`, as `spawn-fcgi` does); a location reaches it with
/// `fastcgi_pass = "NAME"` through a pool of that socket (`Config::upstreams`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Application {
    /// Letters, digits, `-`, `_`, `.`; unique among applications and upstream pools.
    pub name: String,
    /// The program and its arguments (no shell).
    pub command: Vec<String>,
    /// Processes kept running.
    pub processes: usize,
    /// The listening socket ampd binds (a stale socket file there is replaced).
    pub socket: PathBuf,
    /// The processes' working directory (default: the configuration file's).
    pub directory: PathBuf,
    /// Added to the environment ampd was started with.
    pub env: Vec<(String, String)>,
    /// On stop, how long a process has after `SIGTERM` before `SIGKILL`.
    pub stop_timeout: Duration,
}
