//! Finding the game trees of a collection, before `sgf-parse` reads each.
//!
//! `sgf-parse` reads a whole text as one collection, and real files need
//! more than it gives, so go-train walks the bytes first (no tree is built
//! here: this is a scan, not a second parser):
//! - text before, between and after game trees (server banners, `---`, a
//!   byte-order mark) is skipped; sgf-parse refuses it;
//! - one malformed game in a collection must not lose the others: strict
//!   parsing fails the whole text, lenient parsing drops every game after
//!   the damage;
//! - sgf-parse's lexer takes any ASCII byte into a property identifier, so
//!   `W[bb]#;B[cc]` would silently become one node holding two moves: a byte
//!   that has no place in SGF outside a value is refused here, with its line;
//! - sgf-parse nests each node inside the one before it and frees them
//!   recursively, so a line of some 50,000 nodes overflows a thread's stack,
//!   and it holds some 100 bytes per property value: lines, nodes and trees
//!   past [`MAX_LINE_NODES`], [`MAX_NODE_VALUES`] and [`MAX_TREE_VALUES`] are
//!   refused before it sees them, which bounds a game's memory whatever the
//!   file's size.
//!
//! The scan follows sgfmill's grammar for where a game tree starts (`(`
//! followed by `;`) and is one pass over the bytes: lines are counted on
//! from the last one asked for, so a file of garbage stays linear.

use thiserror::Error;

/// Why a game tree is not well-formed SGF, or is refused. Lines count from 1.
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
    /// A node with more than [`MAX_NODE_VALUES`] values.
    #[error("a node with more than {max} property values on line {line}", max = MAX_NODE_VALUES)]
    NodeTooLarge {
        /// Where the value past the limit is.
        line: usize,
    },
    /// A line of play longer than [`MAX_LINE_NODES`] nodes.
    #[error("a line of more than {max} nodes (the one reaching line {line})", max = MAX_LINE_NODES)]
    LineTooLong {
        /// Where the node past the limit is.
        line: usize,
    },
    /// A game tree with more than [`MAX_TREE_VALUES`] values.
    #[error("a game tree of more than {max} property values (the one opened on line {line})", max = MAX_TREE_VALUES)]
    TreeTooLarge {
        /// Line of the `(` that opens the game tree.
        line: usize,
    },
    /// What sgf-parse found wrong with a game tree this scan let through
    /// (a property without a value, a value outside a node...).
    #[error("malformed game tree opened on line {line}: {reason}")]
    Grammar {
        /// Line of the `(` that opens the game tree.
        line: usize,
        /// sgf-parse's words.
        reason: String,
    },
}

/// At most this many values in one node (all its properties together).
/// A 19×19 board has 361 points, so even a node marking every point in
/// several ways stays far below; a node past it is hostile or broken.
pub const MAX_NODE_VALUES: usize = 10_000;

/// At most this many nodes on one line of play, root included. Real games
/// end before 1,000 moves; sgf-parse's recursive drop overflows a 2 MiB
/// thread stack near 50,000 nodes in a release build and 20,000 in a
/// debug one, and this keeps well clear of both.
pub const MAX_LINE_NODES: usize = 5_000;

/// At most this many property values in one game tree, variations
/// included: a few hundred times a real game's (about 1,000 for 300 moves
/// with clock times), about 30 MB of sgf-parse's nodes at most.
pub const MAX_TREE_VALUES: usize = 200_000;

/// One game tree's text, from its `(` to its matching `)` (or to the end of
/// the text when truncated), and what is wrong with it, if anything.
pub(crate) struct TreeText<'a> {
    pub text: &'a str,
    /// Line of its `(`.
    pub line: usize,
    /// Its nodes, in all variations.
    pub nodes: usize,
    pub damage: Option<Damage>,
}

/// The first thing wrong in a game tree, and how much of its text can
/// still be read: up to a bad byte or an unclosed value (the properties
/// before it in its node stay), or up to the node past a limit.
pub(crate) struct Damage {
    pub error: SyntaxError,
    pub readable: usize,
}

impl<'a> TreeText<'a> {
    /// The text up to the damaged node (all of it when undamaged).
    pub fn readable(&self) -> &'a str {
        &self.text[..self.damage.as_ref().map_or(self.text.len(), |d| d.readable)]
    }
}

/// Splits `text` into its game trees, in file order; none means no game
/// tree was found.
pub(crate) fn game_trees(text: &str) -> GameTrees<'_> {
    GameTrees { scanner: Scanner::new(text) }
}

/// The iterator of [`game_trees`].
pub(crate) struct GameTrees<'a> {
    scanner: Scanner<'a>,
}

impl<'a> Iterator for GameTrees<'a> {
    type Item = TreeText<'a>;

    fn next(&mut self) -> Option<TreeText<'a>> {
        if !self.scanner.find_game_tree_start() {
            return None;
        }
        Some(self.scanner.game_tree())
    }
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// A byte offset and its line, to count lines on from: errors come in
    /// file order, so counting from the last one keeps the scan linear
    /// (counting from the start for each error made garbage quadratic).
    line_mark: std::cell::Cell<(usize, usize)>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Scanner<'a> {
        Scanner { text, bytes: text.as_bytes(), pos: 0, line_mark: std::cell::Cell::new((0, 1)) }
    }

    /// Line number (from 1) of byte offset `at`.
    fn line(&self, at: usize) -> usize {
        let (mark, line) = self.line_mark.get();
        let newlines = |range: &[u8]| range.iter().filter(|&&b| b == b'\n').count();
        if at >= mark {
            let line = line + newlines(&self.bytes[mark..at]);
            self.line_mark.set((at, line));
            line
        } else {
            line - newlines(&self.bytes[at..mark])
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

    /// Scans one game tree from its `(` to the matching `)`, tracking
    /// parentheses outside values; after the first damage it goes on to the
    /// tree's end, so that the next game in the collection is found.
    fn game_tree(&mut self) -> TreeText<'a> {
        let start = self.pos;
        let line = self.line(start);
        let mut damage: Option<Damage> = None;
        let mut depth = 0usize;
        // Nodes on the line of play so far, and at each open `(`.
        let mut line_nodes = 0usize;
        let mut line_nodes_at_open: Vec<usize> = Vec::new();
        let mut node_start = start;
        let mut nodes = 0usize;
        let mut node_values = 0usize;
        let mut tree_values = 0usize;
        let mut fail = |error: SyntaxError, readable: usize| {
            damage.get_or_insert(Damage { error, readable: readable - start });
        };
        while let Some(&b) = self.bytes.get(self.pos) {
            let at = self.pos;
            self.pos += 1;
            match b {
                b'(' => {
                    depth += 1;
                    line_nodes_at_open.push(line_nodes);
                }
                b')' => {
                    depth -= 1;
                    line_nodes = line_nodes_at_open.pop().unwrap_or(0);
                    if depth == 0 {
                        return TreeText { text: &self.text[start..self.pos], line, nodes, damage };
                    }
                }
                b';' => {
                    nodes += 1;
                    node_start = at;
                    node_values = 0;
                    line_nodes += 1;
                    if line_nodes > MAX_LINE_NODES {
                        fail(SyntaxError::LineTooLong { line: self.line(at) }, node_start);
                    }
                }
                b'[' => {
                    if !self.skip_value() {
                        // The node's whole properties before the value stay.
                        fail(SyntaxError::UnterminatedValue { line: self.line(at) }, at);
                        break;
                    }
                    node_values += 1;
                    tree_values += 1;
                    if node_values > MAX_NODE_VALUES {
                        fail(SyntaxError::NodeTooLarge { line: self.line(at) }, node_start);
                    }
                    if tree_values > MAX_TREE_VALUES {
                        fail(SyntaxError::TreeTooLarge { line }, node_start);
                    }
                }
                b if b.is_ascii_alphabetic() || b.is_ascii_whitespace() => {}
                _ => {
                    let found = self.text[at..].chars().next().expect("at < len");
                    self.pos = at + found.len_utf8();
                    fail(SyntaxError::UnexpectedChar { found, line: self.line(at) }, at);
                }
            }
        }
        // The end of the text inside the tree: what was read stays readable.
        self.pos = self.bytes.len();
        fail(SyntaxError::Truncated { line }, self.pos);
        TreeText { text: &self.text[start..], line, nodes, damage }
    }

    /// Moves past a value whose `[` was just read, to after the unescaped
    /// `]` that ends it (`\x` is `x`, whatever `x` is). False when the text
    /// ends first.
    fn skip_value(&mut self) -> bool {
        let mut escaped = false;
        while let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b']' => return true,
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees(text: &str) -> Vec<(&str, Option<SyntaxError>)> {
        game_trees(text).map(|t| (t.text, t.damage.map(|d| d.error))).collect()
    }

    fn error(text: &str) -> SyntaxError {
        let mut all = trees(text);
        assert_eq!(all.len(), 1, "{text}");
        all.pop().unwrap().1.expect("damaged")
    }

    #[test]
    fn skips_text_around_and_between_games() {
        let text = "\u{feff}banner (not sgf)\n(;GM[1]) --- \n( ; B[aa](;W[bb]))\n---\n";
        assert_eq!(trees(text), vec![("(;GM[1])", None), ("( ; B[aa](;W[bb]))", None)]);
        assert!(trees("no game here (at all)").is_empty());
    }

    #[test]
    fn brackets_inside_values_are_text() {
        let text = "(;C[a ) \\] ( b \\\\]GC[;])(;B[aa])";
        assert_eq!(trees(text), vec![("(;C[a ) \\] ( b \\\\]GC[;])", None), ("(;B[aa])", None)]);
    }

    #[test]
    fn truncation_is_reported_and_keeps_what_came_before() {
        let tree = game_trees("(;SZ[9]\n;B[aa];W[bb]").next().unwrap();
        assert_eq!(tree.damage.as_ref().unwrap().error, SyntaxError::Truncated { line: 1 });
        assert_eq!(tree.readable(), "(;SZ[9]\n;B[aa];W[bb]");
        let tree = game_trees("\n(;SZ[9]\n;B[aa];W[b").next().unwrap();
        assert_eq!(tree.damage.as_ref().unwrap().error, SyntaxError::UnterminatedValue { line: 3 });
        assert_eq!(tree.readable(), "(;SZ[9]\n;B[aa];W");
        assert_eq!(error("(;C[ends in escape\\"), SyntaxError::UnterminatedValue { line: 1 });
    }

    #[test]
    fn bytes_sgf_parse_would_take_into_an_identifier_are_refused() {
        let tree = game_trees("(;B[aa]\n;W[bb]#;B[cc])").next().unwrap();
        assert_eq!(tree.damage.as_ref().unwrap().error, SyntaxError::UnexpectedChar { found: '#', line: 2 });
        assert_eq!(tree.readable(), "(;B[aa]\n;W[bb]");
        assert_eq!(error("(;B[aa]é)"), SyntaxError::UnexpectedChar { found: 'é', line: 1 });
        assert_eq!(error("(;B1[aa])"), SyntaxError::UnexpectedChar { found: '1', line: 1 });
    }

    #[test]
    fn a_bad_game_leaves_the_next_readable() {
        let all = trees("(;B[aa] % (;W[bb]) [x] )(;W[cc])");
        assert_eq!(all.len(), 2);
        assert!(matches!(all[0].1, Some(SyntaxError::UnexpectedChar { found: '%', .. })));
        assert_eq!(all[1], ("(;W[cc])", None));
    }

    #[test]
    fn limits_refuse_what_would_cost_too_much() {
        let node = format!("(;SZ[19]{};B[aa])", "XX[1]".repeat(MAX_NODE_VALUES));
        assert_eq!(error(&node), SyntaxError::NodeTooLarge { line: 1 });
        let fits = format!("(;XX{})", "[1]".repeat(MAX_NODE_VALUES));
        assert_eq!(trees(&fits)[0].1, None);
        let long = format!("({})", ";B[aa]".repeat(MAX_LINE_NODES + 1));
        assert_eq!(error(&long), SyntaxError::LineTooLong { line: 1 });
        // Nodes in sibling variations are on different lines of play.
        let wide = format!("(;GM[1]{})", "(;B[aa];W[bb])".repeat(MAX_LINE_NODES));
        assert_eq!(trees(&wide)[0].1, None);
        let variation = format!("(;XX{})", "[1]".repeat(MAX_NODE_VALUES));
        let big = format!("(;GM[1]\n{})", variation.repeat(MAX_TREE_VALUES / MAX_NODE_VALUES));
        assert_eq!(error(&big), SyntaxError::TreeTooLarge { line: 1 });
    }

    /// Lines are counted from the last error, not from the start, so a
    /// file of garbage (an error every few bytes) is read in linear time:
    /// here the reported lines of many errors, checked against counting
    /// from the start, including an error before the last one counted.
    #[test]
    fn line_numbers_counted_on_from_the_last_error() {
        let text = "a\nb\n\nc\nd\n";
        let scanner = Scanner::new(text);
        let from_start = |at: usize| 1 + text[..at].matches('\n').count();
        for at in [0, 2, 5, 3, 9, 1, 9] {
            assert_eq!(scanner.line(at), from_start(at), "offset {at}");
        }
    }
}
