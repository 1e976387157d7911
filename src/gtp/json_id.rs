//! The `"id"` of a JSON analysis query too long to read, found as its
//! bytes stream past, so that the error refusing it can name the query
//! its client waits on (KaTrain writes the id last, after the moves).

use super::input::LineId;

/// The longest id kept, in bytes as written (escapes included).
const MAX_ID_BYTES: usize = 1024;

/// A scanner of a JSON object's top-level string member `"id"`: it
/// follows strings and nesting, holds a few bytes of the current key and
/// the id's own bytes, and nothing else of the line.
#[derive(Default)]
pub struct JsonId {
    /// Objects and arrays open (1: inside the top-level object).
    depth: u32,
    in_string: bool,
    /// The last byte was a backslash inside a string.
    escaped: bool,
    /// At depth 1, a string now would be a key (after `{` or `,`).
    expect_key: bool,
    /// The string being read is a top-level key (bytes kept: up to 3).
    key: Option<Vec<u8>>,
    /// The last top-level key read was `id`.
    after_id: bool,
    /// The id's bytes as written, while it is being read.
    value: Option<Vec<u8>>,
    /// The id, once read; `None` within: it was too long to keep.
    found: Option<Option<Vec<u8>>>,
}

impl LineId for JsonId {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() {
                return;
            }
            self.step(b);
        }
    }

    fn id(self) -> Option<String> {
        let raw = self.found??;
        let quoted = [&b"\""[..], &raw, b"\""].concat();
        serde_json::from_slice(&quoted).ok()
    }
}

impl JsonId {
    fn step(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                self.end_string();
                return;
            }
            if let Some(key) = &mut self.key {
                if key.len() < 3 {
                    key.push(b);
                }
            } else if let Some(value) = &mut self.value {
                value.push(b);
                if value.len() > MAX_ID_BYTES {
                    self.found = Some(None);
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key = Some(Vec::new());
                } else if self.depth == 1 && self.after_id {
                    self.value = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.expect_key = self.depth == 1 && b == b'{';
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => {
                self.expect_key = true;
                self.after_id = false;
            }
            b':' if self.depth == 1 => self.expect_key = false,
            _ => {}
        }
    }

    fn end_string(&mut self) {
        if let Some(key) = self.key.take() {
            self.after_id = key == b"id";
        } else if let Some(value) = self.value.take() {
            self.found = Some(Some(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(text: &str) -> Option<String> {
        let mut scanner = JsonId::default();
        // In pieces of 3 bytes, as a reader's buffer would cut them.
        text.as_bytes().chunks(3).for_each(|piece| scanner.feed(piece));
        scanner.id()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(id_of(r#"{"id":"a","moves":[]}"#).as_deref(), Some("a"));
        assert_eq!(id_of(r#"{"moves":[["B","Q16"]], "id" : "last"}"#).as_deref(), Some("last"));
        // Escapes are decoded; braces and keys inside strings or nested
        // values are not taken for the query's own.
        assert_eq!(id_of(r#"{"note":"{\"id\":\"no\"}","x":{"id":"no"},"id":"q\"1\u00e9"}"#).as_deref(), Some("q\"1é"));
        assert_eq!(id_of(r#"{"moves":[],"ids":"no","i":"no"}"#), None);
        assert_eq!(id_of(r#"{"id":7}"#), None, "an id that is no string");
        assert_eq!(id_of(&format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_ID_BYTES + 1))), None, "too long to keep");
        assert_eq!(id_of(r#"["id","a"]"#), None);
    }
}
