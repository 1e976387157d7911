//! The Go Text Protocol: a client for driving other engines (GnuGo in the
//! tests and in matches).

pub mod client;

pub use client::{GtpClient, GtpError};
