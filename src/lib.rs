//! ampd: a web server for Linux built on Flash's AMPED architecture.
//!
//! See `docs/architecture.md` for the request path drawn top to bottom. Layers, left to right
//! (a module may only import the ones to its left; `tests/it/imports.rs` checks it):
//! `ampd_http`, `ampd_sys` → `config` → `log` → `programs` → `response` → `content` → `upstream` → `site` → `conn` → `ops` → `engine`
//! → `main`.
#![forbid(unsafe_code)]

pub mod config;
pub mod conn;
pub mod content;
pub mod engine;
pub mod log;
pub mod mime;
pub mod ops;
pub mod programs;
pub mod response;
pub mod site;
pub mod sync;
pub mod tls;
pub mod upstream;
