//! Reading a controller's input on a thread of its own, so that a search
//! can notice a new line (GTP analysis stops at the next command; the
//! JSON analysis engine takes queries while it searches).

use std::io::{self, BufRead};
use std::sync::mpsc::{channel, Receiver};

/// What the reader thread hands the engine.
pub enum Incoming {
    /// A line, its newline included.
    Line(Vec<u8>),
    /// The input ended.
    End,
    /// Reading failed.
    Failed(io::Error),
}

/// Reads `input` on a thread of its own, line by line, into a channel.
/// The thread ends with the input; an engine that quits first leaves it
/// blocked on a read that the process's exit ends.
pub fn read_lines(mut input: impl BufRead + Send + 'static) -> Receiver<Incoming> {
    let (send, receive) = channel();
    std::thread::spawn(move || loop {
        let mut bytes = Vec::new();
        let incoming = match input.read_until(b'\n', &mut bytes) {
            Ok(0) => Incoming::End,
            Ok(_) => Incoming::Line(bytes),
            Err(e) => Incoming::Failed(e),
        };
        let last = !matches!(incoming, Incoming::Line(_));
        if send.send(incoming).is_err() || last {
            return;
        }
    });
    receive
}
