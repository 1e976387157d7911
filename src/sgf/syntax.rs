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
    /// A node with more than [`MAX_NODE_VALUES`] values.
    #[error("a node with more than {max} property values on line {line}", max = MAX_NODE_VALUES)]
    NodeTooLarge {
        /// Where the value past the limit is.
        line: usize,
    },
    /// A text of 2 GiB or more (offsets are 32-bit).
    #[error("a text of 2 GiB or more")]
    TooLarge,
    /// A `[...]` value that follows no property identifier.
    #[error("value without a property identifier on line {line}")]
    ValueWithoutProperty {
        /// Where it is.
        line: usize,
    },
}

/// At most this many values in one node (all its properties together).
/// A 19×19 board has 361 points, so even a node marking every point in
/// several ways stays far below; a node past it is hostile or broken, and
/// refusing it bounds the memory a game tree can take.
pub const MAX_NODE_VALUES: usize = 10_000;

/// A piece of text: a span of the file (`start..end`), or, when it had to
/// be rewritten (an unescaped value, an identifier with lower-case letters
/// dropped), an index into [`RawGame::owned`], marked by the high bit of
/// `end`. Eight bytes, so that a game's memory stays within a few times its
/// text's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: u32,
    end: u32,
}

const OWNED: u32 = 1 << 31;

/// One property as stored: its identifier and where its values start in
/// [`RawGame::values`] (they end where the next property's start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StoredProperty {
    ident: Piece,
    first_value: u32,
}

/// One game tree's main line, the root node first, then the first child at
/// each branch; flat, borrowing its text. Nodes after the root keep only the
/// properties the caller asked for, and those left with none are dropped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RawGame<'a> {
    text: &'a str,
    /// Texts rewritten while reading (see [`Piece`]).
    owned: Vec<String>,
    /// Index in `properties` of each node's first property.
    nodes: Vec<u32>,
    properties: Vec<StoredProperty>,
    values: Vec<Piece>,
}

/// One node of a [`RawGame`].
#[derive(Clone, Copy)]
pub(crate) struct RawNode<'g> {
    game: &'g RawGame<'g>,
    properties: (usize, usize),
}

/// One property of a [`RawNode`]: identifier (upper-case letters only) and
/// values, unescaped, in file order.
#[derive(Clone, Copy)]
pub(crate) struct RawProperty<'g> {
    game: &'g RawGame<'g>,
    index: usize,
}

impl<'a> RawGame<'a> {
    fn new(text: &'a str) -> RawGame<'a> {
        RawGame { text, owned: Vec::new(), nodes: Vec::new(), properties: Vec::new(), values: Vec::new() }
    }

    fn piece(&self, piece: Piece) -> &str {
        match piece.end & OWNED {
            0 => &self.text[piece.start as usize..piece.end as usize],
            _ => &self.owned[piece.start as usize],
        }
    }

    fn own(&mut self, text: String) -> Piece {
        self.owned.push(text);
        Piece { start: (self.owned.len() - 1) as u32, end: OWNED }
    }

    /// Nodes on the main line (after the root, only those that kept a
    /// property).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn nodes(&self) -> impl Iterator<Item = RawNode<'_>> {
        (0..self.nodes.len()).map(move |i| {
            let end = self.nodes.get(i + 1).map_or(self.properties.len(), |&e| e as usize);
            RawNode { game: self, properties: (self.nodes[i] as usize, end) }
        })
    }

    /// Where property `index`'s values start (`values.len()` past the last).
    fn value_start(&self, index: usize) -> usize {
        self.properties.get(index).map_or(self.values.len(), |p| p.first_value as usize)
    }
}

impl<'g> RawNode<'g> {
    pub fn properties(self) -> impl Iterator<Item = RawProperty<'g>> {
        let game = self.game;
        (self.properties.0..self.properties.1).map(move |index| RawProperty { game, index })
    }

    /// The first value of the first property `ident`.
    pub fn first_value(self, ident: &str) -> Option<&'g str> {
        self.properties().find(|p| p.ident() == ident).map(|p| p.value(0))
    }
}

impl<'g> RawProperty<'g> {
    pub fn ident(self) -> &'g str {
        self.game.piece(self.game.properties[self.index].ident)
    }

    fn value_range(self) -> std::ops::Range<usize> {
        self.game.value_start(self.index)..self.game.value_start(self.index + 1)
    }

    /// How many values (at least one).
    pub fn count(self) -> usize {
        self.value_range().len()
    }

    /// Value `i`, `i` below [`RawProperty::count`].
    pub fn value(self, i: usize) -> &'g str {
        self.game.piece(self.game.values[self.value_range().start + i])
    }

    pub fn values(self) -> impl ExactSizeIterator<Item = &'g str> {
        let game = self.game;
        self.value_range().map(move |i| game.piece(game.values[i]))
    }
}

/// Splits `text` into game trees, one at a time. Each is its main line or
/// the first reason it is malformed, with the whole nodes read before it
/// (for readers that go up to the damage); none at all means no game tree
/// was found. After the root, only properties for which `keep` is true are
/// stored. Linear in the text's length, and a game holds a few bytes per
/// byte of its text at most.
pub(crate) fn game_trees<'a>(text: &'a str, keep: fn(&str) -> bool) -> GameTrees<'a> {
    GameTrees { scanner: Scanner::new(text), keep }
}

/// One game tree: its main line, and the first reason it is malformed (then
/// the main line holds the whole nodes read before it).
pub(crate) struct RawTree<'a> {
    pub game: RawGame<'a>,
    pub error: Option<SyntaxError>,
}

impl<'a> RawTree<'a> {
    /// The main line, or the reason it is malformed.
    pub fn whole(self) -> Result<RawGame<'a>, SyntaxError> {
        match self.error {
            None => Ok(self.game),
            Some(e) => Err(e),
        }
    }
}

/// The iterator of [`game_trees`].
pub(crate) struct GameTrees<'a> {
    scanner: Scanner<'a>,
    keep: fn(&str) -> bool,
}

impl<'a> Iterator for GameTrees<'a> {
    type Item = RawTree<'a>;

    fn next(&mut self) -> Option<RawTree<'a>> {
        if !self.scanner.find_game_tree_start() {
            return None;
        }
        Some(self.scanner.game_tree(self.keep))
    }
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

    /// Reads one game tree starting at its `(`. On an error, stops storing
    /// and skips to the end of the tree (tracking parentheses outside
    /// values) so that the next game in the collection can still be read.
    fn game_tree(&mut self, keep: fn(&str) -> bool) -> RawTree<'a> {
        let open_line = self.line(self.pos);
        let mut game = RawGame::new(self.text);
        if self.text.len() >= OWNED as usize {
            self.pos = self.bytes.len();
            return RawTree { game, error: Some(SyntaxError::TooLarge) };
        }
        let mut depth = 0usize;
        let mut expect = Expect::SequenceStart;
        // The main line is everything before the first `)`: the first
        // variation at each branch is read completely before its siblings.
        let mut on_main_line = true;
        let mut node_values = 0usize;
        let mut error: Option<SyntaxError> = None;
        // After the first error nothing more is stored: what was read
        // before it stays, for readers that go up to the damage.
        let fail = |error: &mut Option<SyntaxError>, e: SyntaxError| {
            error.get_or_insert(e);
        };
        loop {
            self.skip_whitespace();
            let Some(&b) = self.bytes.get(self.pos) else {
                let e = SyntaxError::Truncated { line: open_line };
                fail(&mut error, e);
                return RawTree { game, error };
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
                    if was == Expect::SequenceStart {
                        fail(&mut error, SyntaxError::EmptySequence { line: self.line(at) });
                    }
                    if depth == 0 {
                        return RawTree { game, error };
                    }
                    Ok(())
                }
                b';' => {
                    self.pos += 1;
                    if expect == Expect::AfterVariation {
                        Err(SyntaxError::NodeAfterVariation { line: self.line(at) })
                    } else {
                        expect = Expect::InSequence;
                        node_values = 0;
                        if on_main_line && error.is_none() {
                            // A node after the root that kept nothing is
                            // dropped: reuse its slot.
                            let empty =
                                game.nodes.len() > 1 && game.nodes.last() == Some(&(game.properties.len() as u32));
                            if !empty {
                                game.nodes.push(game.properties.len() as u32);
                            }
                        }
                        Ok(())
                    }
                }
                b'[' => match self.skip_values() {
                    Ok(_) => Err(SyntaxError::ValueWithoutProperty { line: self.line(at) }),
                    Err(e) => {
                        fail(&mut error, e);
                        self.pos = self.bytes.len();
                        return RawTree { game, error };
                    }
                },
                b if b.is_ascii_alphabetic() => {
                    let ident = self.identifier(&mut game);
                    let store = on_main_line
                        && error.is_none()
                        && expect == Expect::InSequence
                        && (game.nodes.len() == 1 || keep(game.piece(ident)));
                    let first_value = game.values.len() as u32;
                    let read = self.values(&mut game, store, &mut node_values);
                    if read.as_ref().map_or(true, |&count| count == 0 || node_values > MAX_NODE_VALUES) {
                        // Values of a property that is not stored go too.
                        game.values.truncate(first_value as usize);
                    }
                    match read {
                        Err(e) => {
                            fail(&mut error, e);
                            self.pos = self.bytes.len();
                            return RawTree { game, error };
                        }
                        Ok(_) if expect != Expect::InSequence => Err(SyntaxError::PropertyOutsideNode {
                            ident: game.piece(ident).to_string(),
                            line: self.line(at),
                        }),
                        Ok(0) => Err(SyntaxError::PropertyWithoutValue {
                            ident: game.piece(ident).to_string(),
                            line: self.line(at),
                        }),
                        Ok(_) if node_values > MAX_NODE_VALUES => {
                            Err(SyntaxError::NodeTooLarge { line: self.line(at) })
                        }
                        Ok(_) => {
                            if store {
                                game.properties.push(StoredProperty { ident, first_value });
                            }
                            Ok(())
                        }
                    }
                }
                _ => {
                    let found = self.text[at..].chars().next().expect("at < len");
                    self.pos += found.len_utf8();
                    Err(SyntaxError::UnexpectedChar { found, line: self.line(at) })
                }
            };
            if let Err(e) = step {
                fail(&mut error, e);
            }
        }
    }

    /// Reads a property identifier, dropping lower-case letters (`FF[3]`'s
    /// `AddBlack` is `AB`).
    fn identifier(&mut self, game: &mut RawGame) -> Piece {
        let start = self.pos;
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_alphabetic() {
            self.pos += 1;
        }
        let ident = &self.bytes[start..self.pos];
        if ident.iter().all(u8::is_ascii_uppercase) {
            Piece { start: start as u32, end: self.pos as u32 }
        } else {
            game.own(ident.iter().filter(|b| b.is_ascii_uppercase()).map(|&b| b as char).collect())
        }
    }

    /// Reads the `[...]` values that follow, possibly none, with whitespace
    /// between them (`AB[pd]\n[dp]`), storing them in `game` when `store`;
    /// returns how many there were.
    fn values(&mut self, game: &mut RawGame, store: bool, node_values: &mut usize) -> Result<usize, SyntaxError> {
        let mut count = 0;
        loop {
            self.skip_whitespace();
            if self.bytes.get(self.pos) != Some(&b'[') {
                return Ok(count);
            }
            let value = self.value(game, store)?;
            count += 1;
            *node_values += 1;
            // Past the limit nothing more is stored (the node is refused).
            if store && *node_values <= MAX_NODE_VALUES {
                game.values.push(value);
            }
        }
    }

    /// Skips `[...]` values (found where no property stands).
    fn skip_values(&mut self) -> Result<usize, SyntaxError> {
        let mut scratch = RawGame::new(self.text);
        self.values(&mut scratch, false, &mut 0)
    }

    /// Reads one value from its `[` to the matching unescaped `]`, resolving
    /// escapes: `\x` is `x`, and a backslash before a line break (a soft
    /// line break) removes both. A value with no escape stays a span of the
    /// text; one is written out only when it is stored.
    fn value(&mut self, game: &mut RawGame, store: bool) -> Result<Piece, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        let first = self.pos;
        let mut out: Option<String> = None;
        let mut start = self.pos;
        loop {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(SyntaxError::UnterminatedValue { line: self.line(open) });
            };
            match b {
                b']' => {
                    let end = self.pos;
                    self.pos += 1;
                    return Ok(match out {
                        None => Piece { start: first as u32, end: end as u32 },
                        Some(mut out) => {
                            out.push_str(&self.text[start..end]);
                            game.own(out)
                        }
                    });
                }
                b'\\' => {
                    if store {
                        out.get_or_insert_with(String::new).push_str(&self.text[start..self.pos]);
                    }
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
                    } else if let Some(out) = out.as_mut() {
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

    /// Every node's properties as (identifier, values).
    type Plain = Vec<Vec<(String, Vec<String>)>>;

    fn plain(game: &RawGame) -> Plain {
        game.nodes()
            .map(|n| n.properties().map(|p| (p.ident().to_string(), p.values().map(String::from).collect())).collect())
            .collect()
    }

    fn prop(ident: &str, values: &[&str]) -> (String, Vec<String>) {
        (ident.into(), values.iter().map(|v| v.to_string()).collect())
    }

    fn keep_all(_: &str) -> bool {
        true
    }

    fn trees(text: &str) -> Vec<Result<Plain, SyntaxError>> {
        game_trees(text, keep_all).map(|t| t.whole().map(|g| plain(&g))).collect()
    }

    fn one(text: &str) -> Result<Plain, SyntaxError> {
        let mut games = trees(text);
        assert_eq!(games.len(), 1, "{text}");
        games.pop().unwrap()
    }

    #[test]
    fn main_line_takes_first_variation_only() {
        let game = one("(;SZ[9];B[aa](;W[bb];B[cc](;W[dd])(;W[ee]))(;W[ff]))").unwrap();
        let moves: Vec<_> = game.iter().skip(1).map(|n| n[0].1[0].as_str()).collect();
        assert_eq!(moves, ["aa", "bb", "cc", "dd"]);
    }

    #[test]
    fn skips_text_around_and_between_games() {
        let text = "\u{feff}banner (not sgf)\n(;GM[1]) --- \n( ; B[aa])\n---\n";
        let games = trees(text);
        assert_eq!(games.len(), 2);
        assert_eq!(games[0].as_ref().unwrap(), &vec![vec![prop("GM", &["1"])]]);
        assert_eq!(games[1].as_ref().unwrap(), &vec![vec![prop("B", &["aa"])]]);
        assert!(trees("no game here (at all)").is_empty());
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
    fn after_the_root_only_kept_properties_and_their_nodes_remain() {
        let keep_moves = |ident: &str| ident == "B" || ident == "W";
        let game = game_trees("(;GM[1]C[root];C[x];B[aa]C[y]TM[3];;W[b\\]]LB[cc:1])", keep_moves).next().unwrap();
        assert_eq!(
            plain(&game.whole().unwrap()),
            vec![vec![prop("GM", &["1"]), prop("C", &["root"])], vec![prop("B", &["aa"])], vec![prop("W", &["b]"])]]
        );
    }

    #[test]
    fn truncation_is_reported() {
        assert_eq!(one("(;B[aa];W[bb]"), Err(SyntaxError::Truncated { line: 1 }));
        assert_eq!(one("\n(;B[aa];W[b"), Err(SyntaxError::UnterminatedValue { line: 2 }));
        assert_eq!(one("(;C[ends in escape\\"), Err(SyntaxError::UnterminatedValue { line: 1 }));
    }

    #[test]
    fn damaged_trees_keep_what_came_before_the_damage() {
        let read = |text: &str| {
            let tree = game_trees(text, keep_all).next().unwrap();
            (plain(&tree.game), tree.error.unwrap())
        };
        let (game, error) = read("(;SZ[9]\n;B[aa];W[bb]AB[c");
        assert_eq!(game, vec![vec![prop("SZ", &["9"])], vec![prop("B", &["aa"])], vec![prop("W", &["bb"])]]);
        assert_eq!(error, SyntaxError::UnterminatedValue { line: 2 });
        let (game, error) = read("(;B[aa];W[bb]#;B[cc])");
        assert_eq!(game, vec![vec![prop("B", &["aa"])], vec![prop("W", &["bb"])]]);
        assert_eq!(error, SyntaxError::UnexpectedChar { found: '#', line: 1 });
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
        let games = trees("(;B[aa] % (;W[bb]) [x] )(;W[cc])");
        assert_eq!(games.len(), 2);
        assert!(matches!(games[0], Err(SyntaxError::UnexpectedChar { found: '%', .. })));
        assert_eq!(games[1].as_ref().unwrap(), &vec![vec![prop("W", &["cc"])]]);
    }

    #[test]
    fn a_node_past_the_value_limit_is_refused() {
        let text = format!("(;SZ[19]{};B[aa])", "XX[1]".repeat(MAX_NODE_VALUES + 1));
        assert_eq!(one(&text), Err(SyntaxError::NodeTooLarge { line: 1 }));
        let text = format!("(;SZ[19]XX{})", "[1]".repeat(MAX_NODE_VALUES - 1));
        assert_eq!(one(&text).unwrap()[0][1].1.len(), MAX_NODE_VALUES - 1);
    }

    #[test]
    fn deep_games_need_no_stack() {
        let text = format!("({})", ";B[aa];W[bb]".repeat(50_000));
        let handle = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || game_trees(&text, keep_all).next().unwrap().whole().unwrap().len());
        assert_eq!(handle.unwrap().join().unwrap(), 100_000);
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
