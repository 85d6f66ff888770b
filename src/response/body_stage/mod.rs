//! The response stage's body transform: between a handler that streams a body (an upstream's,
//! a FastCGI application's, a CGI script's) and the connection's framing, the filters a
//! response's head and its request ask for see the body in pieces and pass on what they make
//! of it. The order of the stage: header rules (`config::header_rules`, applied where the head
//! is committed), then these filters (chosen on the committed head), then framing (the
//! connection's: chunked, close-delimited or HTTP/2 DATA).
//!
//! Owns: the filter interface and the registry (`REGISTRY`: one line per filter, tried in
//! order, each chained after the ones before it). A filter is one file here: a `select`
//! function that looks at the head (and may change it: a new coding, no length) and returns
//! the filter if it applies. Must not touch: framing, sockets, the handler's decisions.

mod compress;

use std::fmt;
use std::io;

use ampd_http::request::RequestHead;

use crate::config::LocationSettings;
use crate::response::Head;

/// A transform of a response body seen in pieces. Memory stays bounded by what the filter
/// keeps between calls (a codec's window), never by the body's length.
pub trait BodyFilter: Send {
    /// What the filter is, for debugging output.
    fn name(&self) -> &'static str;

    /// Transforms `input`, appending what is ready to `out` (possibly nothing yet).
    ///
    /// # Errors
    /// When the transform fails: the body cannot be completed.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()>;

    /// The source paused: append everything owed for the input so far, so that a streaming
    /// response (server-sent events, a long poll) reaches its client live.
    ///
    /// # Errors
    /// As `feed`.
    fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()>;

    /// The body ended: append the rest (a coding's trailer). Nothing is fed after it.
    ///
    /// # Errors
    /// As `feed`.
    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()>;
}

/// What a filter is chosen on, besides the head: the location that answers and the request.
#[derive(Clone, Copy)]
pub struct Facts<'a> {
    pub location: &'a LocationSettings,
    pub request: &'a RequestHead,
}

/// One filter's choice for a response: the filter if it applies (having marked `head` as its
/// output needs), `None` otherwise. `length` is the body's, when known.
type Select = fn(&Facts<'_>, &mut Head, Option<u64>) -> Option<Box<dyn BodyFilter>>;

/// Every filter, in the order a body passes through them.
const REGISTRY: &[Select] = &[compress::select];

/// The filters one response's body passes through (none: the body passes as it is).
#[derive(Default)]
pub struct BodyStage {
    filters: Vec<Box<dyn BodyFilter>>,
    /// Input was fed since the last flush: a pause owes the client its output.
    unflushed: bool,
    /// Between two filters of a chain.
    between: Vec<u8>,
}

impl fmt::Debug for BodyStage {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.filters.iter().map(|filter| filter.name()).collect();
        formatter
            .debug_struct("BodyStage")
            .field("filters", &names)
            .field("unflushed", &self.unflushed)
            .finish()
    }
}

impl BodyStage {
    /// The filters that apply to a response whose committed head is `head` (each may mark it:
    /// a `Content-Encoding`, no `Content-Length`), its body `length` long when known.
    pub fn select(facts: &Facts<'_>, head: &mut Head, length: Option<u64>) -> BodyStage {
        let filters = REGISTRY
            .iter()
            .filter_map(|select| select(facts, head, length))
            .collect();
        BodyStage {
            filters,
            unflushed: false,
            between: Vec::new(),
        }
    }

    /// Whether the body is transformed (its length then is no longer the source's).
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.filters.is_empty()
    }

    /// Passes a piece of the body through every filter; the result is appended to `out`.
    ///
    /// # Errors
    /// A filter failed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if input.is_empty() {
            return Ok(());
        }
        self.unflushed = true;
        let Some((last, first)) = self.filters.split_last_mut() else {
            out.extend_from_slice(input);
            return Ok(());
        };
        if first.is_empty() {
            return last.feed(input, out);
        }
        let mut piece = input.to_vec();
        for filter in first {
            self.between.clear();
            filter.feed(&piece, &mut self.between)?;
            std::mem::swap(&mut piece, &mut self.between);
        }
        last.feed(&piece, out)
    }

    /// The source paused: flush what was fed since the last pause (nothing if nothing was).
    ///
    /// # Errors
    /// A filter failed.
    pub fn pause(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if !std::mem::take(&mut self.unflushed) {
            return Ok(());
        }
        self.end_each(out, |filter, out| filter.flush(out))
    }

    /// The body ended: each filter's rest, in order.
    ///
    /// # Errors
    /// A filter failed.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.unflushed = false;
        self.end_each(out, |filter, out| filter.finish(out))
    }

    /// `ending` (flush or finish) on each filter in order, what one gives up fed to the next
    /// before that one ends too; the last one's output goes to `out`.
    fn end_each(
        &mut self,
        out: &mut Vec<u8>,
        ending: impl Fn(&mut dyn BodyFilter, &mut Vec<u8>) -> io::Result<()>,
    ) -> io::Result<()> {
        let count = self.filters.len();
        let mut carried: Vec<u8> = Vec::new();
        for (index, filter) in self.filters.iter_mut().enumerate() {
            let last = index + 1 == count;
            let target = if last {
                &mut *out
            } else {
                self.between.clear();
                &mut self.between
            };
            if !carried.is_empty() {
                filter.feed(&carried, target)?;
            }
            ending(filter.as_mut(), target)?;
            if !last {
                carried = std::mem::take(&mut self.between);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
