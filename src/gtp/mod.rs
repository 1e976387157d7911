//! The Go Text Protocol: the engine behind `go-train gtp`, its framing, and
//! a client for driving other engines (GnuGo in tests and matches).

pub mod analysis_engine;
pub mod analyze;
pub mod client;
pub mod engine;
pub mod extensions;
pub mod input;
pub mod json_id;
pub mod protocol;

pub use client::{command_words, GtpClient, GtpError, GtpTimeouts};
pub use engine::{Engine, Flow, COMMANDS};
