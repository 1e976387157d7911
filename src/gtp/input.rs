//! Reading a peer's lines on a thread of its own, so that a search can
//! notice a new line (GTP analysis stops at the next command; the JSON
//! analysis engine takes queries while it searches) and a GTP client can
//! stop waiting for an engine that has gone silent.
//!
//! Lines are capped: a longer one is read to its end and dropped as it
//! goes by, and the reader stays at most [`READ_AHEAD_LINES`] lines ahead
//! of its consumer, so that no peer can make it hold more than that many
//! lines of the cap.

use std::io::{self, BufRead};
use std::sync::mpsc::{sync_channel, Receiver};

/// The most lines the reader thread reads ahead of its consumer: one
/// that lags (an engine searching, or writing answers nobody reads) stops
/// the reading, and with it the peer's writing, rather than holding all
/// the peer sends.
pub const READ_AHEAD_LINES: usize = 64;

/// What the reader thread hands its consumer.
pub enum Incoming {
    /// A line, its newline included.
    Line(Vec<u8>),
    /// A line longer than the cap, read and dropped: its length (newline
    /// left out) and the id its protocol gives it, where one was found.
    TooLong { bytes: u64, id: Option<String> },
    /// The input ended.
    End,
    /// Reading failed.
    Failed(io::Error),
}

/// How a protocol names a line, found in the bytes of one too long to
/// keep as they stream past: fed every byte of the line in order, in
/// pieces, then asked for the id.
pub trait LineId: Default + Send + 'static {
    fn feed(&mut self, bytes: &[u8]);
    fn id(self) -> Option<String>;
}

/// Lines whose protocol gives them no id (an engine's answers).
#[derive(Default)]
pub struct NoId;

impl LineId for NoId {
    fn feed(&mut self, _: &[u8]) {}
    fn id(self) -> Option<String> {
        None
    }
}

/// Reads `input` on a thread of its own, line by line, into a channel;
/// a line of more than `max_bytes` bytes before its newline comes as
/// [`Incoming::TooLong`], its id found by `I`. Once [`READ_AHEAD_LINES`]
/// wait unreceived, the thread waits for room before reading on. It ends
/// with the input, or once the receiver is gone (at once when it was
/// waiting for room, else when a line has come); an engine that quits
/// first may leave it blocked on a read that the process's exit ends.
pub fn read_lines<I: LineId>(mut input: impl BufRead + Send + 'static, max_bytes: usize) -> Receiver<Incoming> {
    let (send, receive) = sync_channel(READ_AHEAD_LINES);
    std::thread::spawn(move || loop {
        let incoming = next_line::<I>(&mut input, max_bytes);
        let last = matches!(incoming, Incoming::End | Incoming::Failed(_));
        if send.send(incoming).is_err() || last {
            return;
        }
    });
    receive
}

/// The next line of `input`, or what became of it.
fn next_line<I: LineId>(input: &mut impl BufRead, max_bytes: usize) -> Incoming {
    let mut line = Vec::new();
    // Once over the cap: the bytes the line has had, and its id so far.
    let mut dropped: Option<(u64, I)> = None;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Incoming::Failed(e),
        };
        if chunk.is_empty() {
            return match dropped {
                Some((bytes, id)) => Incoming::TooLong { bytes, id: id.id() },
                None if line.is_empty() => Incoming::End,
                None => Incoming::Line(line),
            };
        }
        let newline = chunk.iter().position(|&b| b == b'\n');
        let piece = &chunk[..newline.map_or(chunk.len(), |at| at + 1)];
        let text_bytes = piece.len() - usize::from(newline.is_some());
        match &mut dropped {
            Some((bytes, id)) => {
                id.feed(piece);
                *bytes += text_bytes as u64;
            }
            None if line.len() + text_bytes <= max_bytes => line.extend_from_slice(piece),
            None => {
                let mut id = I::default();
                id.feed(&line);
                id.feed(piece);
                dropped = Some(((line.len() + text_bytes) as u64, id));
                line = Vec::new();
            }
        }
        let used = piece.len();
        input.consume(used);
        if newline.is_some() {
            return match dropped {
                Some((bytes, id)) => Incoming::TooLong { bytes, id: id.id() },
                None => Incoming::Line(line),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};

    /// The id is the line's first byte, to see that every byte is fed.
    #[derive(Default)]
    struct FirstByte(Option<u8>, u64);

    impl LineId for FirstByte {
        fn feed(&mut self, bytes: &[u8]) {
            self.0 = self.0.or(bytes.first().copied());
            self.1 += bytes.len() as u64;
        }
        fn id(self) -> Option<String> {
            Some(format!("{}:{}", self.0? as char, self.1))
        }
    }

    fn lines(input: &'static [u8], max_bytes: usize) -> Vec<String> {
        // A small buffer: lines arrive in many pieces.
        let reader = io::BufReader::with_capacity(3, input);
        read_lines::<FirstByte>(reader, max_bytes)
            .iter()
            .map(|incoming| match incoming {
                Incoming::Line(l) => String::from_utf8(l).unwrap(),
                Incoming::TooLong { bytes, id } => format!("too long: {bytes} {id:?}"),
                Incoming::End => "end".into(),
                Incoming::Failed(e) => format!("failed: {e}"),
            })
            .collect()
    }

    /// Endless empty lines, counting those taken, and saying when it is
    /// dropped (the reader thread has ended).
    struct Endless {
        taken: Arc<AtomicUsize>,
        dropped: Option<mpsc::Sender<()>>,
    }

    impl io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.fill_buf()?.len().min(buf.len());
            buf[..n].fill(b'\n');
            self.consume(n);
            Ok(n)
        }
    }

    impl BufRead for Endless {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            Ok(b"\n")
        }
        fn consume(&mut self, amount: usize) {
            self.taken.fetch_add(amount, Ordering::SeqCst);
        }
    }

    impl Drop for Endless {
        fn drop(&mut self) {
            let _ = self.dropped.take().map(|d| d.send(()));
        }
    }

    #[test]
    fn the_reader_reads_ahead_a_bounded_number_of_lines() {
        let taken = Arc::new(AtomicUsize::new(0));
        let (dropped, reader_ended) = mpsc::channel();
        let input = Endless { taken: taken.clone(), dropped: Some(dropped) };
        let lines = read_lines::<NoId>(input, 5);
        // The consumer takes nothing: the reader fills the channel, takes
        // one line more, and waits for room.
        while taken.load(Ordering::SeqCst) < READ_AHEAD_LINES + 1 {
            std::thread::yield_now();
        }
        // Given time to read on, were it unbounded (it once held gigabytes).
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(taken.load(Ordering::SeqCst), READ_AHEAD_LINES + 1);
        // A line taken makes room for one more.
        assert!(matches!(lines.recv(), Ok(Incoming::Line(l)) if l == b"\n"));
        while taken.load(Ordering::SeqCst) < READ_AHEAD_LINES + 2 {
            std::thread::yield_now();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(taken.load(Ordering::SeqCst), READ_AHEAD_LINES + 2);
        // A consumer gone (an engine that quit) ends the reader waiting
        // for room; the wait is a guard against a hang, not a measure.
        drop(lines);
        reader_ended.recv_timeout(std::time::Duration::from_secs(60)).expect("the reader thread ends");
    }

    #[test]
    fn lines_over_the_cap_are_dropped_with_their_length_and_id() {
        let got = lines(b"12345\n123456\nabcdefghij\n\nlast", 5);
        // The id is fed the newline too: 11 bytes for a line of 10.
        let want = ["12345\n", "too long: 6 Some(\"1:7\")", "too long: 10 Some(\"a:11\")", "\n", "last", "end"];
        assert_eq!(got, want);
        assert_eq!(lines(b"abcdefgh", 5), ["too long: 8 Some(\"a:8\")", "end"], "cut off by the end of the input");
        assert_eq!(lines(b"", 5), ["end"]);
    }
}
