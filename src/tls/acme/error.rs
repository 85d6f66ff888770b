//! What can go wrong while obtaining a certificate, naming the step of RFC 8555's flow it went
//! wrong in and, when the server said why, its problem document (RFC 8555 §6.7, RFC 7807).
//!
//! Owns: the error type and its one-line form for the error log. Must not touch: recovery
//! (the manager keeps the stored certificate and retries).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The steps of obtaining a certificate (RFC 8555 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Directory,
    Nonce,
    Account,
    Order,
    Authorization,
    Challenge,
    Finalize,
    Download,
}

impl fmt::Display for Step {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Step::Directory => "directory",
            Step::Nonce => "newNonce",
            Step::Account => "newAccount",
            Step::Order => "newOrder",
            Step::Authorization => "authorization",
            Step::Challenge => "challenge",
            Step::Finalize => "finalize",
            Step::Download => "certificate download",
        })
    }
}

/// An ACME problem document: `type` (`urn:ietf:params:acme:error:...`) and `detail`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub kind: String,
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.kind, self.detail)
    }
}

#[derive(Debug)]
pub enum AcmeError {
    /// The server could not be reached, or its answer could not be read.
    Transport {
        step: Step,
        url: String,
        reason: String,
    },
    /// The server refused, with a problem document.
    Refused {
        step: Step,
        status: u16,
        problem: Problem,
    },
    /// The server's answer is not what RFC 8555 says it is.
    Protocol { step: Step, reason: String },
    /// An authorization or order became `invalid` (the challenge's error, when given).
    Invalid {
        step: Step,
        what: String,
        problem: Option<Problem>,
    },
    /// Still not done after the bounded wait.
    TimedOut {
        step: Step,
        what: String,
        waited: Duration,
    },
    /// A wildcard name, which only DNS-01 can validate (RFC 8555 §7.1.3, §8.4).
    Wildcard { name: String },
    /// No challenge of the configured type was offered for a name.
    NoChallenge { name: String, kind: &'static str },
    /// The state directory could not be read or written.
    State { path: PathBuf, reason: String },
    /// A key, CSR or certificate could not be made or read.
    Crypto(String),
}

impl fmt::Display for AcmeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcmeError::Transport { step, url, reason } => {
                write!(formatter, "{step}: {url}: {reason}")
            }
            AcmeError::Refused {
                step,
                status,
                problem,
            } => write!(formatter, "{step}: refused ({status}) {problem}"),
            AcmeError::Protocol { step, reason } => write!(formatter, "{step}: {reason}"),
            AcmeError::Invalid {
                step,
                what,
                problem,
            } => match problem {
                Some(problem) => write!(formatter, "{step}: {what} is invalid: {problem}"),
                None => write!(formatter, "{step}: {what} is invalid"),
            },
            AcmeError::TimedOut { step, what, waited } => write!(
                formatter,
                "{step}: {what} not ready after {} s",
                waited.as_secs()
            ),
            AcmeError::Wildcard { name } => write!(
                formatter,
                "{name}: a wildcard name needs the DNS-01 challenge, which ampd does not answer; list the names instead"
            ),
            AcmeError::NoChallenge { name, kind } => {
                write!(formatter, "{name}: the server offers no {kind} challenge")
            }
            AcmeError::State { path, reason } => {
                write!(formatter, "state directory: {}: {reason}", path.display())
            }
            AcmeError::Crypto(reason) => formatter.write_str(reason),
        }
    }
}

impl std::error::Error for AcmeError {}
