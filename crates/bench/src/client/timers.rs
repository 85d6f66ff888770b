//! The client loop's clocks: think times ending, requests and connects timing out, and open-loop
//! arrivals coming due.
//!
//! Owns: the `Driver` methods that act because time passed rather than because a socket was
//! ready. Must not touch: socket readiness handling (see `mod.rs`).
//! Sources: httperf's `--rate` (fixed inter-arrival times); Abyss §5 (errors under overload).

use std::cmp::Reverse;
use std::time::Instant;

use super::{Driver, State};
use crate::stats::ErrorKind;

impl Driver<'_> {
    pub(super) fn wake_thinkers(&mut self, now: Instant) {
        while let Some(&Reverse((until, index))) = self.thinking.peek() {
            if until > now {
                break;
            }
            self.thinking.pop();
            match std::mem::replace(&mut self.clients[index].state, State::Idle) {
                State::Thinking {
                    connection,
                    until: due,
                } if due <= now => match connection {
                    Some(connection) => self.send_batch(index, connection, None, now),
                    None => self.connect(index, None, now),
                },
                other => self.clients[index].state = other,
            }
        }
    }

    /// Open loop: hands every request that has come due to a free connection, or queues it.
    pub(super) fn release_due(&mut self, now: Instant) {
        loop {
            let Some(open) = &mut self.open else { return };
            if open.next_due > now {
                return;
            }
            let due = open.next_due;
            open.next_due += open.interval;
            open.backlog.push_back(due);
            if due >= self.measure_from {
                self.recorder.offered += 1;
            }
            self.dispatch_backlog(now);
        }
    }

    pub(super) fn dispatch_backlog(&mut self, now: Instant) {
        loop {
            let Some(open) = &mut self.open else { return };
            if open.backlog.is_empty() {
                return;
            }
            if let Some(index) = open.waiting.pop() {
                // The stack may hold clients that have moved on since; skip those.
                match std::mem::replace(&mut self.clients[index].state, State::Idle) {
                    State::Waiting(connection) => {
                        let due = open.backlog.pop_front();
                        self.send_batch(index, connection, due, now);
                    }
                    other => self.clients[index].state = other,
                }
                continue;
            }
            if let Some(index) = open.idle.pop() {
                if matches!(self.clients[index].state, State::Idle) {
                    let due = open.backlog.pop_front();
                    self.connect(index, due, now);
                }
                continue;
            }
            return;
        }
    }

    pub(super) fn sweep_timeouts(&mut self, now: Instant) {
        let limit = self.config.timeout;
        for index in 0..self.clients.len() {
            let expired = match &self.clients[index].state {
                State::Connecting { started, due, .. } => {
                    now.duration_since(due.unwrap_or(*started)) >= limit
                }
                State::Sending(connection)
                | State::ReadingHead(connection)
                | State::ReadingBody(connection) => connection
                    .in_flight
                    .front()
                    .is_some_and(|request| now.duration_since(request.sent) >= limit),
                _ => false,
            };
            if !expired {
                continue;
            }
            match std::mem::replace(&mut self.clients[index].state, State::Idle) {
                State::Connecting { started, due, .. } => {
                    self.fail(ErrorKind::Timeout, due.unwrap_or(started));
                }
                State::Sending(connection)
                | State::ReadingHead(connection)
                | State::ReadingBody(connection) => self.fail_all(&connection, ErrorKind::Timeout),
                _ => {}
            }
            self.start_over(index, now);
        }
        if let Some(open) = &mut self.open {
            while open
                .backlog
                .front()
                .is_some_and(|due| now.duration_since(*due) >= limit)
            {
                if let Some(due) = open.backlog.pop_front() {
                    if due >= self.measure_from {
                        self.recorder.error(ErrorKind::Timeout);
                    }
                }
            }
        }
        self.dispatch_backlog(now);
    }
}
