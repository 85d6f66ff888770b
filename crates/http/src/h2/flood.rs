//! The flood budgets (RFC 9113 §10.5): how many of each costly-but-cheap-to-send frame a
//! client may send per window before the connection ends with ENHANCE_YOUR_CALM.
//!
//! Owns: counting per window. Must not touch: frames (`connection.rs` says what to count).
