//! Moving bytes between an upstream socket and its `Conn`, without blocking: the connect's
//! completion, then `upstream_output` written, then input read while `Conn` wants it. Shared
//! by every engine (epoll loop, io_uring proactor after a poll, blocking engines after their
//! `poll`).
//!
//! Owns: those reads and writes and what `Conn` is told of them (`upstream_connected`,
//! `upstream_sent`, `upstream_receive`, `upstream_finished`, `upstream_failed`). Must not touch:
//! waiting (the engine's).

use std::io;
use std::os::fd::AsFd;

use ampd_sys::{io as sysio, socket};

use super::{Endpoint, Upstream};

/// Bytes read from the upstream per pump, so that one fast upstream cannot hold a loop.
const READ_TURN: usize = 64 << 10;

/// Move what can move now between `upstream` and `conn`, reading through `scratch`. Returns
/// whether anything happened that `Conn` should act on (bytes moved, the connect completed,
/// end of stream, an error).
pub fn pump(upstream: &mut Upstream, conn: &mut impl Endpoint, scratch: &mut [u8]) -> bool {
    if upstream.broken {
        return false;
    }
    let mut moved = false;
    if upstream.connecting {
        if !upstream.can_write {
            return false;
        }
        match socket::connect_finished(upstream.fd.as_fd()) {
            Ok(true) => {
                upstream.connecting = false;
                // The completion is the writability event; the first read finds out the rest.
                upstream.can_read = true;
                conn.upstream_connected(upstream.link);
                moved = true;
            }
            // A stale hint: still under way.
            Ok(false) => {
                upstream.can_write = false;
                return false;
            }
            Err(error) => return fail(upstream, conn, &error),
        }
    }
    let link = upstream.link;
    while upstream.can_write {
        let output = conn.upstream_output(link);
        if output.is_empty() {
            break;
        }
        match sysio::send(upstream.fd.as_fd(), output, sysio::MSG_NOSIGNAL) {
            Ok(sent) => {
                conn.upstream_sent(link, sent);
                moved = true;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => upstream.can_write = false,
            Err(error) => return fail(upstream, conn, &error),
        }
    }
    if !upstream.write_shut
        && conn.upstream_output_ended(link)
        && conn.upstream_output(link).is_empty()
    {
        // The program's standard input ends here (its reads return 0); its output still comes.
        if let Err(error) = socket::shutdown_write(upstream.fd.as_fd()) {
            return fail(upstream, conn, &error);
        }
        upstream.write_shut = true;
        moved = true;
    }
    let mut total = 0;
    while upstream.can_read && !upstream.finished && conn.upstream_wants_input(link) {
        if total >= READ_TURN {
            // More may be there: `can_move` says so, and the engine comes back.
            break;
        }
        match sysio::read(upstream.fd.as_fd(), scratch) {
            Ok(0) => {
                upstream.finished = true;
                conn.upstream_finished(link);
                return true;
            }
            Ok(count) => {
                conn.upstream_receive(link, &scratch[..count]);
                total += count;
                moved = true;
                if count < scratch.len() && !upstream.hung_up {
                    // A short read drains a stream socket: skip the read that would say
                    // EAGAIN (the engine's readiness event reports new data). Not after a
                    // hang-up: the end of stream behind the data has had its one event.
                    upstream.can_read = false;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => upstream.can_read = false,
            Err(error) => return fail(upstream, conn, &error),
        }
    }
    moved
}

fn fail(upstream: &mut Upstream, conn: &mut impl Endpoint, error: &io::Error) -> bool {
    upstream.broken = true;
    upstream.can_read = false;
    upstream.can_write = false;
    conn.upstream_failed(upstream.link, error);
    true
}
