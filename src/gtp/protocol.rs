//! GTP version 2 framing: reading command lines and writing answers
//! (specification sections 2.2–2.11 and 3.1).

use super::input::LineId;

/// The longest line read, commands and answers alike, newline left out:
/// GTP's longest lines (`set_free_handicap` with every point) take a few
/// kB, and a longer one is dropped unread, never held.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One command as sent by a controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// The optional numeric id, echoed in the answer as sent: kept as its
    /// digits, since GTP bounds it nowhere (ids of 2^32 and more were lost).
    pub id: Option<String>,
    /// The command name (case as sent).
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// A line as the controller sent it, cleaned as GTP asks: control
/// characters other than tab and newline removed, tabs turned into spaces,
/// everything from `#` on dropped. `None` for a line with nothing left
/// (which gets no answer).
pub fn parse_line(line: &str) -> Option<Result<Command, Option<String>>> {
    let cleaned: String = line
        .chars()
        .filter(|&c| !c.is_control() || c == '\t' || c == '\n')
        .map(|c| if c == '\t' { ' ' } else { c })
        .take_while(|&c| c != '#')
        .collect();
    let mut words = cleaned.split_whitespace();
    let first = words.next()?;
    let (id, name) = if first.bytes().all(|b| b.is_ascii_digit()) {
        match words.next() {
            Some(name) => (Some(first.to_string()), name),
            // An id alone: answered with an error under that id.
            None => return Some(Err(Some(first.to_string()))),
        }
    } else {
        (None, first)
    };
    Some(Ok(Command { id, name: name.to_string(), args: words.map(str::to_string).collect() }))
}

/// The id of a command line too long to read: its first word, when it
/// is all digits and ends within the line's first bytes.
#[derive(Default)]
pub struct GtpId {
    head: Vec<u8>,
}

/// Digits enough for any id a controller numbers its commands with.
const MAX_ID_DIGITS: usize = 64;

impl LineId for GtpId {
    fn feed(&mut self, bytes: &[u8]) {
        let room = (MAX_ID_DIGITS + 2).saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }

    fn id(self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.head);
        let text = text.trim_start_matches([' ', '\t']);
        let (first, rest) = text.split_at(text.find(|c: char| !c.is_ascii_digit())?);
        let ends = rest.starts_with([' ', '\t', '\r', '\n']);
        (ends && !first.is_empty()).then(|| first.to_string())
    }
}

/// The text of an answer: `=` or `?`, the id, the message, and the empty
/// line that ends every answer. A message of several lines keeps them
/// (with empty lines removed, since one would end the answer early).
pub fn format_answer(id: Option<&str>, answer: &Result<String, String>) -> String {
    let (status, text) = match answer {
        Ok(text) => ('=', text),
        Err(text) => ('?', text),
    };
    let id = id.unwrap_or_default();
    let text: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    // A multi-line answer that starts with a newline (a board diagram)
    // keeps it, as GnuGo's `showboard` does.
    let lead = if answer.as_ref().unwrap_or_else(|e| e).starts_with('\n') { "\n" } else { "" };
    format!("{status}{id} {lead}{}\n\n", text.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cleaned_as_gtp_says() {
        let c = parse_line("12 play\tb  D4 # a comment\r\n").unwrap().unwrap();
        assert_eq!(c, Command { id: Some("12".into()), name: "play".into(), args: vec!["b".into(), "D4".into()] });
        assert_eq!(parse_line("   # only a comment"), None);
        assert_eq!(parse_line("\x01\x02"), None);
        assert_eq!(parse_line("7"), Some(Err(Some("7".into()))));
        // Ids past 2^32 (and 2^64) keep every digit.
        let big = parse_line("123456789012345678901234 name").unwrap().unwrap();
        assert_eq!((big.id.as_deref(), big.name.as_str()), (Some("123456789012345678901234"), "name"));
        assert_eq!(parse_line("name").unwrap().unwrap().id, None);
    }

    #[test]
    fn an_overlong_lines_id_is_its_leading_number() {
        let id = |line: &str| {
            let mut id = GtpId::default();
            line.as_bytes().chunks(5).for_each(|piece| id.feed(piece));
            id.id()
        };
        assert_eq!(id(&format!("12 play b {}", "x".repeat(1000))).as_deref(), Some("12"));
        assert_eq!(id(&format!("  7\tname{}", " ".repeat(1000))).as_deref(), Some("7"));
        assert_eq!(id(&format!("play b {}", "x".repeat(1000))), None);
        assert_eq!(id(&format!("12x play{}", "x".repeat(1000))), None);
        assert_eq!(id(&"1".repeat(1000)), None, "an id cut off is no id");
    }

    #[test]
    fn answers_end_with_an_empty_line_and_echo_the_id() {
        assert_eq!(format_answer(Some("3"), &Ok("2".into())), "=3 2\n\n");
        assert_eq!(format_answer(Some("4294967296"), &Ok("2".into())), "=4294967296 2\n\n");
        assert_eq!(format_answer(None, &Err("unknown command".into())), "? unknown command\n\n");
        assert_eq!(format_answer(None, &Ok(String::new())), "= \n\n");
        assert_eq!(format_answer(None, &Ok("a\n\nb".into())), "= a\nb\n\n");
        assert_eq!(format_answer(None, &Ok("\n A B\n 1 .".into())), "= \n A B\n 1 .\n\n");
    }
}
