//! Which of the client's streams of one type (bidirectional or unidirectional) have shown
//! up. QUIC opens a stream's lower-numbered siblings with it (RFC 9000 §3.2), so data for
//! stream 8 may arrive before stream 4's: 4 is open but not yet seen, and must not be taken
//! for a stream already done when its data comes.
//!
//! Owns that bookkeeping, in memory that grows with the streams seen out of order (QUIC's
//! stream credit bounds them), not with their IDs. Must not know what the streams carry.

#[derive(Debug)]
pub(super) struct StreamIds {
    /// The lowest ID of the type not yet opened.
    next: u64,
    /// IDs below `next` opened only by a higher one and not seen yet, as `[start, end)`
    /// ranges of stride 4.
    unseen: Vec<(u64, u64)>,
}

impl StreamIds {
    /// The IDs `first`, `first + 4`, …: 0 for client bidirectional streams, 2 for client
    /// unidirectional ones.
    pub(super) fn new(first: u64) -> StreamIds {
        StreamIds {
            next: first,
            unseen: Vec::new(),
        }
    }

    /// The lowest ID not yet opened, by itself or by a higher one.
    pub(super) fn next(&self) -> u64 {
        self.next
    }

    /// Whether `id` shows up for the first time now; it is then marked as seen. `false`: it
    /// was seen before (and may be done by now).
    pub(super) fn first_sight(&mut self, id: u64) -> bool {
        if id >= self.next {
            if id > self.next {
                self.unseen.push((self.next, id));
            }
            self.next = id.saturating_add(4);
            return true;
        }
        let Some(position) = self
            .unseen
            .iter()
            .position(|&(start, end)| start <= id && id < end)
        else {
            return false;
        };
        let (start, end) = self.unseen.swap_remove(position);
        if start < id {
            self.unseen.push((start, id));
        }
        if id.saturating_add(4) < end {
            self.unseen.push((id + 4, end));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::StreamIds;

    #[test]
    fn a_stream_is_new_once_in_whatever_order_they_show_up() {
        let mut ids = StreamIds::new(0);
        assert!(ids.first_sight(0));
        assert!(!ids.first_sight(0));
        // 16 opens 4, 8 and 12 with it.
        assert!(ids.first_sight(16));
        assert_eq!(ids.next(), 20);
        assert!(ids.first_sight(8));
        assert!(!ids.first_sight(8));
        assert!(ids.first_sight(12));
        assert!(ids.first_sight(4));
        for id in [0, 4, 8, 12, 16] {
            assert!(!ids.first_sight(id), "{id}");
        }
        assert!(ids.unseen.is_empty());
        let mut unidirectional = StreamIds::new(2);
        assert!(unidirectional.first_sight(10));
        assert!(unidirectional.first_sight(2));
        assert!(unidirectional.first_sight(6));
        assert!(!unidirectional.first_sight(10));
        // An ID no client could reach does not overflow.
        assert!(unidirectional.first_sight(u64::MAX - 1));
        assert!(!unidirectional.first_sight(u64::MAX - 1));
    }
}
