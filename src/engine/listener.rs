//! A listening socket as the engines hold it: the descriptor, the address it is bound to (what
//! `SERVER_ADDR`/`SERVER_PORT` and an HTTPS redirect's port say), and whether it speaks TLS.
//!
//! Owns: pairing the sockets with the `listen` entries, including sockets passed by systemd
//! or by the process this one upgrades. Must not touch: accepting (`client::Door`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use ampd_sys::socket;

use crate::config::Listen;

/// What a connection learns of the listener that accepted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub local: SocketAddr,
    pub tls: bool,
    /// Cleartext HTTP/2 with prior knowledge is taken beside HTTP/1.1 (`"ADDR h2c"`).
    pub h2c: bool,
}

/// What a listener speaks besides HTTP/1.1, as its `listen` entry says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Speaks {
    pub tls: bool,
    pub h2c: bool,
}

impl Speaks {
    #[must_use]
    pub fn of(entry: &Listen) -> Speaks {
        Speaks {
            tls: entry.tls,
            h2c: entry.h2c,
        }
    }
}

#[derive(Debug)]
pub struct Listener {
    pub fd: OwnedFd,
    /// As bound (a configured port 0 is the kernel's choice here).
    pub local: SocketAddr,
    pub tls: bool,
    /// See `Endpoint::h2c`.
    pub h2c: bool,
}

impl Listener {
    /// `fd`, bound as `listen` says.
    ///
    /// # Errors
    /// `getsockname` fails.
    pub fn new(fd: OwnedFd, speaks: Speaks) -> io::Result<Listener> {
        let local = socket::local_addr(fd.as_fd())?;
        Ok(Listener {
            fd,
            local,
            tls: speaks.tls,
            h2c: speaks.h2c,
        })
    }

    /// Another descriptor for the same socket.
    ///
    /// # Errors
    /// Out of descriptors.
    pub fn try_clone(&self) -> io::Result<Listener> {
        Ok(Listener {
            fd: self.fd.try_clone()?,
            local: self.local,
            tls: self.tls,
            h2c: self.h2c,
        })
    }

    #[must_use]
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            local: self.local,
            tls: self.tls,
            h2c: self.h2c,
        }
    }

    #[must_use]
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `http://ADDR/` or `https://ADDR/`, for the ready line.
    #[must_use]
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/", self.local)
    }
}

/// What each passed socket (in the order they came) speaks: a socket bound to an address a
/// `listen` entry names is that entry's; the others take the entries no socket matched, in
/// order (a predecessor passes its sockets in `listen` order, and `listen` may say port 0).
#[must_use]
pub fn speaks_of_passed(locals: &[SocketAddr], listen: &[Listen]) -> Vec<Speaks> {
    let mut unmatched: Vec<&Listen> = listen
        .iter()
        .filter(|entry| !locals.contains(&entry.address))
        .collect();
    unmatched.reverse();
    let mut seen: Vec<(SocketAddr, Speaks)> = Vec::new();
    locals
        .iter()
        .map(|local| {
            if let Some(entry) = listen.iter().find(|entry| entry.address == *local) {
                return Speaks::of(entry);
            }
            // Several descriptors of one socket (one per loop) share its entry.
            if let Some((_, speaks)) = seen.iter().find(|(address, _)| address == local) {
                return *speaks;
            }
            let speaks = unmatched.pop().map(Speaks::of).unwrap_or_default();
            seen.push((*local, speaks));
            speaks
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(text: &str, tls: bool) -> Listen {
        Listen {
            address: text.parse().unwrap(),
            tls,
            h2c: !tls,
            ipv6_half: false,
        }
    }

    #[test]
    fn passed_sockets_find_their_entries() {
        let entries = [
            listen("127.0.0.1:0", false),
            listen("127.0.0.1:0", true),
            listen("127.0.0.1:8443", true),
        ];
        let locals: Vec<SocketAddr> = [
            "127.0.0.1:40001",
            "127.0.0.1:40001",
            "127.0.0.1:40002",
            "127.0.0.1:8443",
        ]
        .iter()
        .map(|text| text.parse().unwrap())
        .collect();
        let tls: Vec<bool> = speaks_of_passed(&locals, &entries)
            .iter()
            .map(|speaks| speaks.tls)
            .collect();
        assert_eq!(tls, [false, false, true, true]);
    }
}
