//! [`RecordReader`]: the application's records for one request (or, with request id 0, the
//! management answers of a probe), read as they arrive.
//!
//! Owns record framing on the reading side and the checks on each record's header. Must not
//! parse what `FCGI_STDOUT` carries (`crate::cgi` does) or own a buffer the size of a record:
//! stream content is handed out as slices of the caller's input, so a 64 KiB record never has
//! to be held whole. Only the small records (`FCGI_END_REQUEST`, 8 bytes, and the management
//! answers) are collected inside the reader.

use super::name_value::{decode_name_values, NameValues};
use super::record::{RecordHeader, RecordType, HEADER_LEN, VERSION_1};
use super::{EndRequest, FastCgiError, ProtocolStatus};

/// What the application sent, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<'a> {
    /// A piece of `FCGI_STDOUT`: the CGI response (head, then body).
    Stdout(&'a [u8]),
    /// A piece of `FCGI_STDERR`: for the error log.
    Stderr(&'a [u8]),
    /// `FCGI_END_REQUEST`: the request is over; nothing more belongs to it.
    End(EndRequest),
    /// `FCGI_GET_VALUES_RESULT`: the management variables asked for (§4.1).
    Values(NameValues),
}

/// A record whose content is collected before it becomes an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collected {
    EndRequest,
    Values,
    UnknownType,
}

/// Where the reader is in the record stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At a record boundary, waiting for a whole header.
    Header,
    /// Inside a stream record's content; `padding` follows it.
    Stream {
        stderr: bool,
        remaining: usize,
        padding: usize,
    },
    /// Collecting a small record's content into `collected`, then skipping its padding; the
    /// event comes once both are done, so after `End` the reader sits on a record boundary.
    Collect {
        kind: Collected,
        content: usize,
        padding: usize,
    },
    /// Skipping padding, any length (§3.3 lets the sender choose it).
    Padding(usize),
}

/// Reads one request's records from an application (see the module comment).
#[derive(Debug)]
pub struct RecordReader {
    request_id: u16,
    state: State,
    collected: Vec<u8>,
    stdout_closed: bool,
    stderr_closed: bool,
    ended: bool,
}

impl RecordReader {
    /// A reader of the records of request `request_id`; with 0, of management records only.
    #[must_use]
    pub fn new(request_id: u16) -> Self {
        Self {
            request_id,
            state: State::Header,
            collected: Vec::new(),
            stdout_closed: false,
            stderr_closed: false,
            ended: false,
        }
    }

    /// Whether `FCGI_END_REQUEST` (and its padding) was read: the connection is at a record
    /// boundary and, with `FCGI_KEEP_CONN`, ready for another request.
    #[must_use]
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The next event in `input` and how many bytes of it were used. `(None, used)` means more
    /// input is needed; `used` may be above 0 (padding, an empty record, part of a small
    /// record), and a partial header is never consumed, so the caller keeps `input[used..]`
    /// and appends to it. A stream event's slice is part of `input`.
    ///
    /// # Errors
    /// A [`FastCgiError`] for the first record that breaks the protocol; the connection must
    /// then be closed.
    pub fn next<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(Option<Event<'a>>, usize), FastCgiError> {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.state {
                State::Header => {
                    if self.ended && !rest.is_empty() {
                        return Err(FastCgiError::AfterEnd);
                    }
                    let Some(header) = RecordHeader::parse(rest) else {
                        return Ok((None, used));
                    };
                    used += HEADER_LEN;
                    self.state = self.start_record(header)?;
                }
                State::Stream {
                    stderr,
                    remaining,
                    padding,
                } => {
                    if rest.is_empty() {
                        return Ok((None, used));
                    }
                    let taken = remaining.min(rest.len());
                    let piece = &rest[..taken];
                    used += taken;
                    self.state = if taken == remaining {
                        State::Padding(padding)
                    } else {
                        State::Stream {
                            stderr,
                            remaining: remaining - taken,
                            padding,
                        }
                    };
                    let event = if stderr {
                        Event::Stderr(piece)
                    } else {
                        Event::Stdout(piece)
                    };
                    return Ok((Some(event), used));
                }
                State::Collect {
                    kind,
                    content,
                    padding,
                } => {
                    let content_taken = content.min(rest.len());
                    self.collected.extend_from_slice(&rest[..content_taken]);
                    let padding_taken = padding.min(rest.len() - content_taken);
                    used += content_taken + padding_taken;
                    if content_taken < content || padding_taken < padding {
                        self.state = State::Collect {
                            kind,
                            content: content - content_taken,
                            padding: padding - padding_taken,
                        };
                        return Ok((None, used));
                    }
                    self.state = State::Header;
                    return Ok((Some(self.finish_collected(kind)?), used));
                }
                State::Padding(padding) => {
                    let taken = padding.min(rest.len());
                    used += taken;
                    if taken < padding {
                        self.state = State::Padding(padding - taken);
                        return Ok((None, used));
                    }
                    self.state = State::Header;
                }
            }
        }
    }

    /// Checks a record's header and says how its content is read.
    fn start_record(&mut self, header: RecordHeader) -> Result<State, FastCgiError> {
        if header.version != VERSION_1 {
            return Err(FastCgiError::Version(header.version));
        }
        let content = usize::from(header.content_length);
        let padding = usize::from(header.padding_length);
        let collect = |kind| State::Collect {
            kind,
            content,
            padding,
        };
        match header.record_type {
            RecordType::Stdout | RecordType::Stderr => {
                self.check_request_id(header.request_id)?;
                let stderr = header.record_type == RecordType::Stderr;
                let closed = if stderr {
                    &mut self.stderr_closed
                } else {
                    &mut self.stdout_closed
                };
                if content == 0 {
                    // §3.3: an empty record ends the stream.
                    *closed = true;
                    return Ok(State::Padding(padding));
                }
                if *closed {
                    return Err(FastCgiError::AfterStreamEnd);
                }
                Ok(State::Stream {
                    stderr,
                    remaining: content,
                    padding,
                })
            }
            RecordType::EndRequest => {
                self.check_request_id(header.request_id)?;
                if content != 8 {
                    return Err(FastCgiError::BadEndRequest);
                }
                self.collected.clear();
                Ok(collect(Collected::EndRequest))
            }
            RecordType::GetValuesResult | RecordType::UnknownType => {
                if header.request_id != 0 {
                    return Err(FastCgiError::RequestId(header.request_id));
                }
                self.collected.clear();
                Ok(collect(if header.record_type == RecordType::UnknownType {
                    Collected::UnknownType
                } else {
                    Collected::Values
                }))
            }
            RecordType::BeginRequest
            | RecordType::AbortRequest
            | RecordType::Params
            | RecordType::Stdin
            | RecordType::Data
            | RecordType::GetValues => Err(FastCgiError::UnexpectedType(header.record_type.code())),
            RecordType::Other(code) => Err(FastCgiError::UnknownType(code)),
        }
    }

    /// A request record must carry this reader's id, and id 0 belongs to management records.
    fn check_request_id(&self, request_id: u16) -> Result<(), FastCgiError> {
        if request_id == self.request_id && request_id != 0 {
            Ok(())
        } else {
            Err(FastCgiError::RequestId(request_id))
        }
    }

    fn finish_collected(&mut self, kind: Collected) -> Result<Event<'static>, FastCgiError> {
        match kind {
            Collected::EndRequest => {
                let body = &self.collected;
                self.ended = true;
                Ok(Event::End(EndRequest {
                    app_status: u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                    protocol_status: ProtocolStatus::from_code(body[4]),
                }))
            }
            Collected::Values => Ok(Event::Values(decode_name_values(&self.collected)?)),
            Collected::UnknownType => match self.collected.first() {
                Some(&refused) => Err(FastCgiError::ManagementTypeRefused(refused)),
                None => Err(FastCgiError::BadEndRequest),
            },
        }
    }
}

#[cfg(test)]
mod tests;
