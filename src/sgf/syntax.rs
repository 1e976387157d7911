//! The SGF grammar: splits decoded text into game trees and keeps, for each,
//! the nodes of its main line with their raw (unescaped) property values.
//!
//! Hand-written rather than `sgf-parse` because real files need what that
//! crate rejects: text before, between and after game trees (server banners,
//! `---`, a byte-order mark), repeated root properties (`GM[1]GM[1]`), and
//! one malformed game in a collection must not lose the others. The scanner
//! is a loop over bytes with no recursion, so a game of thousands of nodes
//! costs no stack. It follows sgfmill's grammar: a game tree starts at `(`
//! followed by `;`, lower-case letters in identifiers (`FF[1]–FF[3]` style
//! `AddBlack`) are dropped, anything else inside a game tree is an error.

use thiserror::Error;

/// Why a game tree is not well-formed SGF. Lines count from 1.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SyntaxError {
    /// The text ends before the game tree is closed (a truncated file).
    #[error("truncated: the text ends inside the game tree opened on line {line}")]
    Truncated {
        /// Line of the `(` that opens the unfinished game tree.
        line: usize,
    },
    /// The text ends inside a `[...]` value.
    #[error("truncated: the text ends inside the property value opened on line {line}")]
    UnterminatedValue {
        /// Line of the `[` that opens the value.
        line: usize,
    },
    /// A character that has no place in SGF outside a value.
    #[error("unexpected character {found:?} on line {line}")]
    UnexpectedChar {
        /// The offending character.
        found: char,
        /// Where it is.
        line: usize,
    },
    /// A `(` or `)` right after `(`: SGF requires at least one node.
    #[error("empty game tree or variation on line {line}")]
    EmptySequence {
        /// Where it is.
        line: usize,
    },
    /// A `;` after a closed variation: nodes may not follow variations.
    #[error("node after a variation on line {line}")]
    NodeAfterVariation {
        /// Where it is.
        line: usize,
    },
    /// A property identifier that is not inside a node.
    #[error("property {ident} outside a node on line {line}")]
    PropertyOutsideNode {
        /// The property identifier.
        ident: String,
        /// Where it is.
        line: usize,
    },
    /// A property identifier with no `[...]` value after it.
    #[error("property {ident} without a value on line {line}")]
    PropertyWithoutValue {
        /// The property identifier.
        ident: String,
        /// Where it is.
        line: usize,
    },
    /// A `[...]` value that follows no property identifier.
    #[error("value without a property identifier on line {line}")]
    ValueWithoutProperty {
        /// Where it is.
        line: usize,
    },
}

/// One property of a node: identifier (upper-case letters only) and values,
/// unescaped, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawProperty {
    pub ident: String,
    pub values: Vec<String>,
}

/// The properties of one node, in file order (a repeated identifier stays
/// repeated).
pub(crate) type RawNode = Vec<RawProperty>;

/// One game tree's main line: the root node first, then the first child at
/// each branch.
pub(crate) type RawGame = Vec<RawNode>;

/// Splits `text` into game trees. Each is its main line or the first reason
/// it is malformed; an empty result means no game tree was found at all.
pub(crate) fn game_trees(text: &str) -> Vec<Result<RawGame, SyntaxError>> {
    let mut scanner = Scanner { text, bytes: text.as_bytes(), pos: 0 };
    let mut games = Vec::new();
    while scanner.find_game_tree_start() {
        games.push(scanner.game_tree());
    }
    games
}

/// What the grammar allows next inside a game tree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Just after `(`: a `;` must start the sequence.
    SequenceStart,
    /// Inside a sequence: properties, `;`, `(` or `)`.
    InSequence,
    /// After a variation's `)`: only `(` or `)`.
    AfterVariation,
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    /// Line number (from 1) of byte offset `at`; only computed for errors.
    fn line(&self, at: usize) -> usize {
        1 + self.bytes[..at].iter().filter(|&&b| b == b'\n').count()
    }

    fn skip_whitespace(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    /// Moves to the next `(` followed (after whitespace) by `;`, skipping
    /// the non-SGF text before it. Returns false when there is none.
    fn find_game_tree_start(&mut self) -> bool {
        while let Some(offset) = self.bytes[self.pos..].iter().position(|&b| b == b'(') {
            self.pos += offset;
            let after = self.bytes[self.pos + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if after == Some(&b';') {
                return true;
            }
            self.pos += 1;
        }
        self.pos = self.bytes.len();
        false
    }

    /// Reads one game tree starting at its `(`. On an error, skips to the end
    /// of the tree (tracking parentheses outside values) so that the next
    /// game in the collection can still be read.
    fn game_tree(&mut self) -> Result<RawGame, SyntaxError> {
        let open_line = self.line(self.pos);
        let mut nodes: RawGame = Vec::new();
        let mut depth = 0usize;
        let mut expect = Expect::SequenceStart;
        // The main line is everything before the first `)`: the first
        // variation at each branch is read completely before its siblings.
        let mut on_main_line = true;
        let mut error: Option<SyntaxError> = None;
        loop {
            self.skip_whitespace();
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(error.unwrap_or(SyntaxError::Truncated { line: open_line }));
            };
            let at = self.pos;
            let step = match b {
                b'(' => {
                    self.pos += 1;
                    depth += 1;
                    let ok = expect != Expect::SequenceStart || depth == 1;
                    expect = Expect::SequenceStart;
                    if ok {
                        Ok(())
                    } else {
                        Err(SyntaxError::EmptySequence { line: self.line(at) })
                    }
                }
                b')' => {
                    self.pos += 1;
                    depth -= 1;
                    on_main_line = false;
                    let was = std::mem::replace(&mut expect, Expect::AfterVariation);
                    let step = match was {
                        Expect::SequenceStart => Err(SyntaxError::EmptySequence { line: self.line(at) }),
                        _ => Ok(()),
                    };
                    if depth == 0 {
                        return match error.or(step.err()) {
                            Some(e) => Err(e),
                            None => Ok(nodes),
                        };
                    }
                    step
                }
                b';' => {
                    self.pos += 1;
                    if expect == Expect::AfterVariation {
                        Err(SyntaxError::NodeAfterVariation { line: self.line(at) })
                    } else {
                        expect = Expect::InSequence;
                        if on_main_line {
                            nodes.push(Vec::new());
                        }
                        Ok(())
                    }
                }
                b'[' => match self.values() {
                    Ok(_) => Err(SyntaxError::ValueWithoutProperty { line: self.line(at) }),
                    Err(e) => return Err(error.unwrap_or(e)),
                },
                b if b.is_ascii_alphabetic() => {
                    let ident = self.identifier();
                    let values = match self.values() {
                        Ok(values) => values,
                        Err(e) => return Err(error.unwrap_or(e)),
                    };
                    if expect != Expect::InSequence {
                        Err(SyntaxError::PropertyOutsideNode { ident, line: self.line(at) })
                    } else if values.is_empty() {
                        Err(SyntaxError::PropertyWithoutValue { ident, line: self.line(at) })
                    } else {
                        if on_main_line {
                            nodes.last_mut().expect("InSequence implies a node").push(RawProperty { ident, values });
                        }
                        Ok(())
                    }
                }
                _ => {
                    let found = self.text[at..].chars().next().expect("at < len");
                    self.pos += found.len_utf8();
                    Err(SyntaxError::UnexpectedChar { found, line: self.line(at) })
                }
            };
            if let Err(e) = step {
                error.get_or_insert(e);
            }
        }
    }

    /// Reads a property identifier, dropping lower-case letters (`FF[3]`'s
    /// `AddBlack` is `AB`).
    fn identifier(&mut self) -> String {
        let start = self.pos;
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_alphabetic() {
            self.pos += 1;
        }
        self.text[start..self.pos].chars().filter(char::is_ascii_uppercase).collect()
    }

    /// Reads the `[...]` values that follow, possibly none, with whitespace
    /// between them (`AB[pd]\n[dp]`).
    fn values(&mut self) -> Result<Vec<String>, SyntaxError> {
        let mut values = Vec::new();
        loop {
            self.skip_whitespace();
            if self.bytes.get(self.pos) != Some(&b'[') {
                return Ok(values);
            }
            values.push(self.value()?);
        }
    }

    /// Reads one value from its `[` to the matching unescaped `]`, resolving
    /// escapes: `\x` is `x`, and a backslash before a line break (a soft
    /// line break) removes both.
    fn value(&mut self) -> Result<String, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut start = self.pos;
        loop {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(SyntaxError::UnterminatedValue { line: self.line(open) });
            };
            match b {
                b']' => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(&self.text[start..self.pos]);
                    self.pos += 1;
                    let Some(escaped) = self.text[self.pos..].chars().next() else {
                        return Err(SyntaxError::UnterminatedValue { line: self.line(open) });
                    };
                    self.pos += escaped.len_utf8();
                    if escaped == '\n' || escaped == '\r' {
                        // \r\n and \n\r are one line break.
                        let pair = if escaped == '\n' { b'\r' } else { b'\n' };
                        if self.bytes.get(self.pos) == Some(&pair) {
                            self.pos += 1;
                        }
                    } else {
                        out.push(escaped);
                    }
                    start = self.pos;
                }
                _ => self.pos += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(ident: &str, values: &[&str]) -> RawProperty {
        RawProperty { ident: ident.into(), values: values.iter().map(|v| v.to_string()).collect() }
    }

    fn one(text: &str) -> Result<RawGame, SyntaxError> {
        let mut games = game_trees(text);
        assert_eq!(games.len(), 1, "{text}");
        games.pop().unwrap()
    }

    #[test]
    fn main_line_takes_first_variation_only() {
        let game = one("(;SZ[9];B[aa](;W[bb];B[cc](;W[dd])(;W[ee]))(;W[ff]))").unwrap();
        let moves: Vec<_> = game.iter().skip(1).map(|n| n[0].values[0].as_str()).collect();
        assert_eq!(moves, ["aa", "bb", "cc", "dd"]);
    }

    #[test]
    fn skips_text_around_and_between_games() {
        let text = "\u{feff}banner (not sgf)\n(;GM[1]) --- \n( ; B[aa])\n---\n";
        let games = game_trees(text);
        assert_eq!(games.len(), 2);
        assert_eq!(games[0].as_ref().unwrap(), &vec![vec![prop("GM", &["1"])]]);
        assert_eq!(games[1].as_ref().unwrap(), &vec![vec![prop("B", &["aa"])]]);
        assert!(game_trees("no game here (at all)").is_empty());
    }

    #[test]
    fn values_span_lines_and_unescape() {
        let game = one("(;AB[pd]\n[dp]  [dd]C[a \\] b \\\\ c\\\nd]GM[1]GM[1])").unwrap();
        assert_eq!(
            game[0],
            vec![prop("AB", &["pd", "dp", "dd"]), prop("C", &["a ] b \\ cd"]), prop("GM", &["1"]), prop("GM", &["1"])]
        );
    }

    #[test]
    fn lower_case_identifiers_are_ff3_style() {
        let game = one("(;AddBlack[aa]CoPyright[x])").unwrap();
        assert_eq!(game[0], vec![prop("AB", &["aa"]), prop("CP", &["x"])]);
    }

    #[test]
    fn non_ascii_values_survive() {
        let game = one("(;PW[白]C[ソ表])").unwrap();
        assert_eq!(game[0], vec![prop("PW", &["白"]), prop("C", &["ソ表"])]);
    }

    #[test]
    fn truncation_is_reported() {
        assert_eq!(one("(;B[aa];W[bb]"), Err(SyntaxError::Truncated { line: 1 }));
        assert_eq!(one("\n(;B[aa];W[b"), Err(SyntaxError::UnterminatedValue { line: 2 }));
        assert_eq!(one("(;C[ends in escape\\"), Err(SyntaxError::UnterminatedValue { line: 1 }));
    }

    #[test]
    fn grammar_errors_are_named() {
        assert!(matches!(one("(;B[aa]()"), Err(SyntaxError::EmptySequence { .. })));
        assert!(matches!(one("(;B[aa](;W[bb]);B[cc])"), Err(SyntaxError::NodeAfterVariation { .. })));
        assert!(matches!(one("(;B[aa];W )"), Err(SyntaxError::PropertyWithoutValue { .. })));
        assert!(matches!(one("(;[aa])"), Err(SyntaxError::ValueWithoutProperty { .. })));
        assert_eq!(one("(;B[aa]\n;W[bb]#)"), Err(SyntaxError::UnexpectedChar { found: '#', line: 2 }));
        assert_eq!(one("(;B[aa]é)"), Err(SyntaxError::UnexpectedChar { found: 'é', line: 1 }));
    }

    #[test]
    fn a_bad_game_leaves_the_next_readable() {
        let games = game_trees("(;B[aa] % (;W[bb]) [x] )(;W[cc])");
        assert_eq!(games.len(), 2);
        assert!(matches!(games[0], Err(SyntaxError::UnexpectedChar { found: '%', .. })));
        assert_eq!(games[1].as_ref().unwrap(), &vec![vec![prop("W", &["cc"])]]);
    }

    #[test]
    fn deep_games_need_no_stack() {
        let text = format!("({})", ";B[aa];W[bb]".repeat(50_000));
        let handle = std::thread::Builder::new().stack_size(64 * 1024).spawn(move || one(&text).unwrap().len());
        assert_eq!(handle.unwrap().join().unwrap(), 100_000);
    }
}
