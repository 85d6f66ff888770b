//! The periodic sweep and the graceful drain of the engines that keep their connections in a
//! slab (the epoll loop and the io_uring proactor), written once: which connections are past a
//! limit and what each gets (`Client::verdict`), and which a drain may close now
//! (`Client::drain_may_close`).
//!
//! Owns: walking the slab and dispatching the verdicts. Must not touch: how a connection is
//! answered, reset or closed (the engine's `Driver` methods), the limits themselves
//! (`phase_clock.rs`).

use std::time::Instant;

use super::client::{Client, Verdict};
use super::slab::Slab;
use crate::config::Limits;

/// An engine's slot as the sweep sees it.
pub(crate) trait Held {
    fn client(&self) -> &Client;
    fn client_mut(&mut self) -> &mut Client;
    /// The engine still moves bytes for this connection (a send in flight, input not yet
    /// parsed): a drain must not close it yet.
    fn busy(&self) -> bool;
}

/// What an engine does with the verdicts.
pub(crate) trait Driver {
    type Slot: Held;
    fn slots(&mut self) -> &mut Slab<Self::Slot>;
    fn draining(&self) -> bool;
    /// A request had begun and its time ran out: `Conn::timed_out` (a `408`), then close.
    fn answer_timeout(&mut self, index: usize);
    /// Close with a reset (a stalled or too slow response).
    fn reset(&mut self, index: usize);
    fn close(&mut self, index: usize);
    /// `Conn::upstream_timed_out`, then drive the connection (it answers or tries again).
    fn upstream_timed_out(&mut self, index: usize);
    /// End a connection the drain may close: FIN after its last byte (lingering close).
    fn begin_close(&mut self, index: usize);
}

/// Apply each connection's limits at `now`; while draining, close what has become idle.
pub(crate) fn sweep<D: Driver>(driver: &mut D, now: Instant, limits: &Limits) {
    let expired: Vec<(usize, Verdict)> = driver
        .slots()
        .iter_mut()
        .filter_map(|(index, slot)| Some((index, slot.client_mut().verdict(now, limits)?)))
        .collect();
    for (index, verdict) in expired {
        match verdict {
            Verdict::AnswerTimeout => driver.answer_timeout(index),
            Verdict::Reset => driver.reset(index),
            Verdict::Close => driver.close(index),
            Verdict::UpstreamTimedOut => driver.upstream_timed_out(index),
        }
    }
    if driver.draining() {
        // Connections that were still to send their first request when the drain began.
        close_drained(driver);
    }
}

/// Whether connection `index` is done with while draining: idle, nothing in flight.
pub(crate) fn drained<D: Driver>(driver: &mut D, index: usize) -> bool {
    driver.draining()
        && driver
            .slots()
            .get(index)
            .is_some_and(|slot| slot.client().drain_may_close(slot.busy(), Instant::now()))
}

/// While draining, a connection with nothing left to do closes at once, FIN after its last
/// byte: an idle one when the drain begins, and one whose response, begun before the stop and
/// so without `Connection: close`, has just gone out. Without this such a connection stayed
/// open, idle, until the grace period ended and reset it.
pub(crate) fn close_if_drained<D: Driver>(driver: &mut D, index: usize) {
    if drained(driver, index) {
        driver.begin_close(index);
    }
}

/// `close_if_drained` for every connection.
pub(crate) fn close_drained<D: Driver>(driver: &mut D) {
    for index in 0..driver.slots().bound() {
        close_if_drained(driver, index);
    }
}
