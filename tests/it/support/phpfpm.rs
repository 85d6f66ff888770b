//! `PhpFpm`: Debian's php8.2-fpm as a child of the test, on a unix socket in a directory of the
//! test's own, with a temporary configuration (a static pool of four workers, uploads and
//! sessions in that directory). It runs in the foreground (`-F`), in its own process group, and
//! is stopped on Drop (SIGTERM to the master, which stops its workers; SIGKILL to the whole group
//! if it lingers), so it never outlives the test.
//! Owns: the php-fpm processes and the files of its directory. Must not touch: ampd.

use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::processes::{signal, wait_gone};
use super::server::is_root_user;

/// The Debian package's binary (scripts/test.sh installs `php8.2-fpm`).
const PHP_FPM: &str = "/usr/sbin/php-fpm8.2";
/// How long php-fpm may take to bind its socket.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Workers of the static pool: as the reference configuration (ref_up.sh).
pub const WORKERS: usize = 4;

pub struct PhpFpm {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl PhpFpm {
    /// Starts php-fpm with its socket, log, sessions and uploads under `dir` (created), and waits
    /// (bounded) until the socket accepts a connection.
    ///
    /// # Panics
    /// If php8.2-fpm is not installed, exits early, or does not listen within 15 s; the message
    /// carries its log.
    pub fn start(dir: &Path) -> PhpFpm {
        assert!(
            Path::new(PHP_FPM).exists(),
            "{PHP_FPM} is missing: apt-get install php8.2-fpm (scripts/test.sh does)"
        );
        for sub in ["sessions", "uploads"] {
            std::fs::create_dir_all(dir.join(sub)).expect("create php-fpm directories");
        }
        let socket = dir.join("php.sock");
        let config = dir.join("php-fpm.conf");
        std::fs::write(&config, configuration(dir, &socket)).expect("write php-fpm.conf");
        let mut command = Command::new(PHP_FPM);
        command.arg("-F").arg("-y").arg(&config);
        if is_root_user() {
            // php-fpm refuses to run as root unless told so; the tests run as root in CI.
            command.arg("-R");
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|error| panic!("spawn {PHP_FPM}: {error}"));
        let mut fpm = PhpFpm {
            child,
            dir: dir.to_path_buf(),
            socket,
        };
        fpm.wait_ready();
        fpm
    }

    /// The pool's listening socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `unix:SOCKET`, as a `fastcgi_pass` or a pool's `servers` entry names it.
    pub fn address(&self) -> String {
        format!("unix:{}", self.socket.display())
    }

    /// What php-fpm has logged (its master's and its workers' lines).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("php-fpm.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "php-fpm exited ({status}) before listening; log:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "php-fpm did not listen on {} within {READY_TIMEOUT:?}; log:\n{}",
            self.socket.display(),
            self.log()
        );
    }
}

/// The php-fpm.conf text: one static pool on `socket`, PHP's upload and body limits raised above
/// the tests' 10 MiB uploads, sessions kept in `dir`. PHP's own error_log is left unset, so
/// PHP's messages go to the web server on the request's FastCGI stderr stream.
fn configuration(dir: &Path, socket: &Path) -> String {
    let dir = dir.display();
    let mut text = format!(
        "[global]\n\
         error_log = {dir}/php-fpm.log\n\
         pid = {dir}/php-fpm.pid\n\
         daemonize = no\n\
         \n\
         [test]\n\
         listen = {socket}\n\
         listen.mode = 0666\n\
         pm = static\n\
         pm.max_children = {WORKERS}\n\
         catch_workers_output = yes\n\
         php_admin_value[upload_max_filesize] = 32M\n\
         php_admin_value[post_max_size] = 32M\n\
         php_admin_value[upload_tmp_dir] = {dir}/uploads\n\
         php_admin_value[session.save_path] = {dir}/sessions\n\
         php_admin_flag[log_errors] = on\n",
        socket = socket.display()
    );
    if is_root_user() {
        // Only root may name a user; php-fpm ignores (and warns about) it otherwise.
        text.push_str("user = root\ngroup = root\n");
    }
    text
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        let pid = self.child.id();
        signal("TERM", pid, false);
        // The master stops its workers on SIGTERM. It is not reaped before the group's SIGKILL,
        // so its pid (the group's id) cannot have been reused by then.
        wait_gone(pid, STOP_TIMEOUT);
        signal("KILL", pid, true);
        let _ = self.child.wait();
    }
}
