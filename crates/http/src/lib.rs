#![forbid(unsafe_code)]
pub mod error;
mod framing;
pub mod request;
mod token;
pub use error::ParseError;
pub use request::*;
