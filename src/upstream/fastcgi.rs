//! FastCGI pools: asking an application for its limits with `FCGI_GET_VALUES` (FastCGI
//! specification §4.1) and keeping what each server answered.
//!
//! Owns: the `FCGI_GET_VALUES` exchange over a blocking socket (a FastCGI pool's active check,
//! and the one-time learning of a server's limits), `LearnedLimits` and what an answer does to
//! them. Must not touch: when exchanges happen (`checks`), a check's effect on health
//! (`health`), the request exchange with the application (`conn`).
//!
//! php-fpm 8.2 answers only `FCGI_MPXS_CONNS` (0), flup an empty `FCGI_GET_VALUES_RESULT`, and
//! both then wait for a request on the same connection, so the exchange ends when the answer
//! arrives, not when the application closes.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use ampd_http::fastcgi::{
    write_get_values, Event, FastCgiError, NameValues, RecordReader, MAX_CONNS, MAX_REQS,
    MPXS_CONNS,
};

use super::probe::{classify, remaining, ProbeError, Stream};
use crate::config::{Level, UpstreamAddress};
use crate::log::error;

/// A value the application has not given (yet).
const UNKNOWN: u64 = u64::MAX;

/// The management variables one answer gave; `None`: not in the answer (or not a number).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct AppValues {
    pub(super) max_conns: Option<u64>,
    pub(super) max_reqs: Option<u64>,
    pub(super) mpxs_conns: Option<u64>,
}

impl AppValues {
    fn from_pairs(pairs: &NameValues) -> AppValues {
        let value = |name: &[u8]| {
            pairs
                .iter()
                .find(|(found, _)| found == name)
                .and_then(|(_, value)| std::str::from_utf8(value).ok()?.trim().parse().ok())
        };
        AppValues {
            max_conns: value(MAX_CONNS),
            max_reqs: value(MAX_REQS),
            mpxs_conns: value(MPXS_CONNS),
        }
    }
}

impl std::fmt::Display for AppValues {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |value: Option<u64>| value.map_or("-".to_string(), |value| value.to_string());
        write!(
            formatter,
            "FCGI_MAX_CONNS={}, FCGI_MAX_REQS={}, FCGI_MPXS_CONNS={}",
            show(self.max_conns),
            show(self.max_reqs),
            show(self.mpxs_conns)
        )
    }
}

/// Ask the application at `address` for `FCGI_MAX_CONNS`, `FCGI_MAX_REQS` and
/// `FCGI_MPXS_CONNS`, all within `timeout`.
///
/// An application that answers `FCGI_UNKNOWN_TYPE` is alive and speaks FastCGI but will not
/// say its limits: that is an answer with no values, not a failure (a check must not take a
/// working application out for lacking an optional courtesy).
pub(super) fn get_values(
    address: &UpstreamAddress,
    timeout: Duration,
) -> Result<AppValues, ProbeError> {
    let deadline = Instant::now() + timeout;
    let mut stream =
        Stream::connect(address, timeout).map_err(|error| classify(error, ProbeError::Connect))?;
    stream
        .set_timeouts(remaining(deadline)?)
        .map_err(ProbeError::Send)?;
    let mut request = Vec::with_capacity(64);
    write_get_values(&mut request, &[MAX_CONNS, MAX_REQS, MPXS_CONNS]);
    std::io::Write::write_all(&mut stream, &request)
        .map_err(|error| classify(error, ProbeError::Send))?;
    let mut reader = RecordReader::new(0);
    // Only a partial record header stays here: the reader keeps a record's content itself.
    let mut pending = Vec::with_capacity(64);
    let mut buffer = [0u8; 512];
    loop {
        // One call reads every whole record in `pending`: an event, or the need for more.
        match reader.next(&pending) {
            Ok((Some(Event::Values(pairs)), _)) => return Ok(AppValues::from_pairs(&pairs)),
            Ok((Some(_), _)) => unreachable!("a reader for id 0 refuses request records"),
            Ok((None, used)) => {
                pending.drain(..used);
            }
            Err(FastCgiError::ManagementTypeRefused(_)) => return Ok(AppValues::default()),
            Err(fault) => return Err(ProbeError::FastCgi(fault)),
        }
        stream
            .set_timeouts(remaining(deadline)?)
            .map_err(ProbeError::Receive)?;
        let count = std::io::Read::read(&mut stream, &mut buffer)
            .map_err(|error| classify(error, ProbeError::Receive))?;
        if count == 0 {
            return Err(ProbeError::Closed);
        }
        pending.extend_from_slice(&buffer[..count]);
    }
}

/// Whether a server's limits are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Learning {
    /// Not asked yet, or the last attempt could not reach the application: ask (again).
    Pending,
    /// The application answered (some values may be missing).
    Answered,
    /// The application was reached but gave no answer (it closed, or broke the protocol):
    /// asking again would give the same; the server's settings apply unchanged.
    NoAnswer,
}

/// What this process learnt of one server's limits. Read with one load on the path that opens
/// or parks a connection (`Pool::keepalive_for`).
#[derive(Debug)]
pub(super) struct LearnedLimits {
    max_conns: AtomicU64,
    max_reqs: AtomicU64,
    mpxs_conns: AtomicU64,
    learning: AtomicU8,
}

impl Default for LearnedLimits {
    fn default() -> LearnedLimits {
        LearnedLimits {
            max_conns: AtomicU64::new(UNKNOWN),
            max_reqs: AtomicU64::new(UNKNOWN),
            mpxs_conns: AtomicU64::new(UNKNOWN),
            learning: AtomicU8::new(Learning::Pending as u8),
        }
    }
}

fn known(value: &AtomicU64) -> Option<u64> {
    Some(value.load(Ordering::Relaxed)).filter(|&value| value != UNKNOWN)
}

impl LearnedLimits {
    pub(super) fn max_conns(&self) -> Option<u64> {
        known(&self.max_conns)
    }

    pub(super) fn max_reqs(&self) -> Option<u64> {
        known(&self.max_reqs)
    }

    pub(super) fn mpxs_conns(&self) -> Option<u64> {
        known(&self.mpxs_conns)
    }

    pub(super) fn learning(&self) -> Learning {
        match self.learning.load(Ordering::Relaxed) {
            1 => Learning::Answered,
            2 => Learning::NoAnswer,
            _ => Learning::Pending,
        }
    }

    /// Keep what one exchange gave; logs the values when they are new or changed, and once why
    /// a reachable application gave none. `pool` and `server` name it in the log.
    pub(super) fn record(&self, result: &Result<AppValues, ProbeError>, pool: &str, server: &str) {
        match result {
            Ok(values) => {
                let before = (self.learning(), self.values());
                self.max_conns
                    .store(values.max_conns.unwrap_or(UNKNOWN), Ordering::Relaxed);
                self.max_reqs
                    .store(values.max_reqs.unwrap_or(UNKNOWN), Ordering::Relaxed);
                self.mpxs_conns
                    .store(values.mpxs_conns.unwrap_or(UNKNOWN), Ordering::Relaxed);
                self.learning
                    .store(Learning::Answered as u8, Ordering::Relaxed);
                if before != (Learning::Answered, *values) {
                    error::log(
                        Level::Info,
                        format_args!("upstream {pool}: server {server}: FastCGI {values}"),
                    );
                }
            }
            Err(ProbeError::Closed | ProbeError::FastCgi(_)) => {
                let was = self
                    .learning
                    .swap(Learning::NoAnswer as u8, Ordering::Relaxed);
                if was != Learning::NoAnswer as u8 {
                    let cause = result.as_ref().err().map(ToString::to_string);
                    error::log(
                        Level::Warn,
                        format_args!(
                            "upstream {pool}: server {server}: no answer to FCGI_GET_VALUES ({}); its limits stay unknown",
                            cause.unwrap_or_default()
                        ),
                    );
                }
            }
            // Not reached: the application may not be up yet; the next attempt asks again.
            Err(_) => {}
        }
    }

    fn values(&self) -> AppValues {
        AppValues {
            max_conns: self.max_conns(),
            max_reqs: self.max_reqs(),
            mpxs_conns: self.mpxs_conns(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use ampd_http::fastcgi::{
        decode_name_values, write_get_values_result, write_record, RecordHeader, RecordType,
        HEADER_LEN,
    };
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::PathBuf;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Mutex};
    use std::thread;

    /// What the test application does with `FCGI_GET_VALUES`.
    #[derive(Clone, Debug)]
    pub(in crate::upstream) enum Answer {
        /// `FCGI_GET_VALUES_RESULT` with these pairs, then waits for more (as php-fpm does).
        Values(Vec<(&'static str, &'static str)>),
        /// `FCGI_UNKNOWN_TYPE` naming the GET_VALUES type.
        UnknownType,
        /// Reads and says nothing until the client goes.
        Silent,
        /// Closes without an answer.
        Close,
        /// Answers in HTTP: not a FastCGI application.
        Http,
    }

    /// A tiny FastCGI application on a unix socket under the temporary directory: answers
    /// `FCGI_GET_VALUES` as `answer` says and counts the requests.
    pub(in crate::upstream) struct Responder {
        pub address: UpstreamAddress,
        pub asked: Arc<AtomicUsize>,
        pub answer: Arc<Mutex<Answer>>,
        /// The names of the last `FCGI_GET_VALUES`.
        pub names: Arc<Mutex<Vec<Vec<u8>>>>,
        path: PathBuf,
    }

    impl Drop for Responder {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// A socket path no other test (or process) uses.
    pub(in crate::upstream) fn socket_path(name: &str) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        std::env::temp_dir().join(format!(
            "ampd-fcgi-{name}-{}-{}.sock",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ))
    }

    impl Responder {
        pub fn start(name: &str, answer: Answer) -> Responder {
            Responder::on(socket_path(name), answer)
        }

        pub fn on(path: PathBuf, answer: Answer) -> Responder {
            let _ = std::fs::remove_file(&path);
            let listener = UnixListener::bind(&path).unwrap();
            let responder = Responder {
                address: UpstreamAddress::Unix(path.clone()),
                asked: Arc::default(),
                answer: Arc::new(Mutex::new(answer)),
                names: Arc::default(),
                path,
            };
            let (asked, answer, names) = (
                responder.asked.clone(),
                responder.answer.clone(),
                responder.names.clone(),
            );
            thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let (asked, answer, names) = (asked.clone(), answer.clone(), names.clone());
                    thread::spawn(move || serve(stream, &asked, &answer, &names));
                }
            });
            responder
        }
    }

    /// One connection: read records; answer each `FCGI_GET_VALUES`.
    fn serve(
        mut stream: UnixStream,
        asked: &AtomicUsize,
        answer: &Mutex<Answer>,
        names: &Mutex<Vec<Vec<u8>>>,
    ) {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        loop {
            let mut header = [0u8; HEADER_LEN];
            if stream.read_exact(&mut header).is_err() {
                return;
            }
            let header = RecordHeader::parse(&header).unwrap();
            let mut body =
                vec![0u8; usize::from(header.content_length) + usize::from(header.padding_length)];
            if stream.read_exact(&mut body).is_err() {
                return;
            }
            if header.record_type != RecordType::GetValues {
                return;
            }
            asked.fetch_add(1, Ordering::Relaxed);
            let content = &body[..usize::from(header.content_length)];
            *names.lock().unwrap() = decode_name_values(content)
                .unwrap()
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            let mut reply = Vec::new();
            let answer = answer.lock().unwrap().clone();
            match answer {
                Answer::Values(pairs) => write_get_values_result(
                    &mut reply,
                    pairs.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
                ),
                Answer::UnknownType => write_record(
                    &mut reply,
                    RecordType::UnknownType,
                    0,
                    &[RecordType::GetValues.code(), 0, 0, 0, 0, 0, 0, 0],
                ),
                Answer::Silent => {}
                Answer::Close => return,
                Answer::Http => reply.extend_from_slice(b"HTTP/1.1 400 Bad Request\r\n\r\n"),
            }
            // Byte by byte: the client must put records together across reads.
            for byte in reply {
                if stream.write_all(&[byte]).is_err() {
                    return;
                }
            }
        }
    }

    const TIMEOUT: Duration = Duration::from_secs(5);

    #[test]
    fn values_are_asked_for_and_read() {
        let app = Responder::start(
            "values",
            Answer::Values(vec![
                ("FCGI_MAX_CONNS", "10"),
                ("FCGI_MAX_REQS", "50"),
                ("FCGI_MPXS_CONNS", "0"),
            ]),
        );
        let values = get_values(&app.address, TIMEOUT).unwrap();
        assert_eq!(
            values,
            AppValues {
                max_conns: Some(10),
                max_reqs: Some(50),
                mpxs_conns: Some(0)
            }
        );
        assert_eq!(
            *app.names.lock().unwrap(),
            vec![
                b"FCGI_MAX_CONNS".to_vec(),
                b"FCGI_MAX_REQS".to_vec(),
                b"FCGI_MPXS_CONNS".to_vec()
            ]
        );
        assert_eq!(
            values.to_string(),
            "FCGI_MAX_CONNS=10, FCGI_MAX_REQS=50, FCGI_MPXS_CONNS=0"
        );
    }

    #[test]
    fn php_fpm_answers_only_mpxs_conns_and_stays_open() {
        // What php-fpm 8.2 sends (seen on the wire), without closing the connection after it.
        let app = Responder::start("fpm", Answer::Values(vec![("FCGI_MPXS_CONNS", "0")]));
        let started = Instant::now();
        let values = get_values(&app.address, TIMEOUT).unwrap();
        assert!(started.elapsed() < TIMEOUT / 2, "waited for the close");
        assert_eq!(
            values,
            AppValues {
                max_conns: None,
                max_reqs: None,
                mpxs_conns: Some(0)
            }
        );
    }

    #[test]
    fn flup_answers_no_values_at_all() {
        // What flup's WSGIServer sends (seen on the wire): an empty GET_VALUES_RESULT.
        let app = Responder::start("flup", Answer::Values(Vec::new()));
        assert_eq!(
            get_values(&app.address, TIMEOUT).unwrap(),
            AppValues::default()
        );
    }

    #[test]
    fn unknown_type_is_an_answer_without_values() {
        let app = Responder::start("unknown", Answer::UnknownType);
        assert_eq!(
            get_values(&app.address, TIMEOUT).unwrap(),
            AppValues::default()
        );
    }

    #[test]
    fn silence_close_and_http_are_failures() {
        let app = Responder::start("silent", Answer::Silent);
        let started = Instant::now();
        let error = get_values(&app.address, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(error, ProbeError::TimedOut), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3));

        *app.answer.lock().unwrap() = Answer::Close;
        let error = get_values(&app.address, TIMEOUT).unwrap_err();
        assert!(matches!(error, ProbeError::Closed), "{error}");

        *app.answer.lock().unwrap() = Answer::Http;
        let error = get_values(&app.address, TIMEOUT).unwrap_err();
        assert!(
            matches!(error, ProbeError::FastCgi(FastCgiError::Version(b'H'))),
            "{error}"
        );
        assert_eq!(
            error.to_string(),
            "FastCGI: FastCGI record of version 72, not 1 (not FastCGI?)"
        );

        let gone = UpstreamAddress::Unix(socket_path("gone"));
        let error = get_values(&gone, TIMEOUT).unwrap_err();
        assert!(matches!(error, ProbeError::Connect(_)), "{error}");
    }

    #[test]
    fn recording_keeps_answers_and_stops_asking_what_cannot_answer() {
        let limits = LearnedLimits::default();
        assert_eq!(limits.learning(), Learning::Pending);
        assert_eq!(limits.max_conns(), None);
        let unreachable = Err(ProbeError::TimedOut);
        limits.record(&unreachable, "php", "unix:/x");
        assert_eq!(limits.learning(), Learning::Pending, "asked again later");
        let values = AppValues {
            max_conns: Some(4),
            max_reqs: None,
            mpxs_conns: Some(1),
        };
        limits.record(&Ok(values), "php", "unix:/x");
        assert_eq!(limits.learning(), Learning::Answered);
        assert_eq!(
            (limits.max_conns(), limits.max_reqs(), limits.mpxs_conns()),
            (Some(4), None, Some(1))
        );
        limits.record(&Err(ProbeError::Closed), "php", "unix:/x");
        assert_eq!(limits.learning(), Learning::NoAnswer);
        assert_eq!(limits.max_conns(), Some(4), "the last answer stays");
    }
}
