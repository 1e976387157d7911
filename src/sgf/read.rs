//! Reading files: bytes to text, text to game trees, trees to records.

use std::path::Path;

use thiserror::Error;

use sgf_parse::{go::Prop, GameTree, ParseOptions, SgfNode};

use super::decode::decode;
use super::record::{written_value, GameError, GameRecord};
use super::split::{game_trees, SyntaxError, TreeText};

/// One game tree of a file: its record, or why it has none.
pub type ParsedGame = Result<GameRecord, GameError>;

/// Why a file (or one game of it) cannot be read. File paths are the
/// caller's to add.
#[derive(Debug, Error)]
pub enum SgfError {
    /// The file cannot be read at all. The I/O error is in the message and
    /// not a `source`: with both, an error chain printed it twice.
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    /// No game tree (`(;`) anywhere in the text.
    #[error("not SGF: no game tree \"(;\" found")]
    NotSgf,
    /// Every game tree in the text is malformed (e.g. truncated): the
    /// first one's reason.
    #[error("malformed SGF: {0}")]
    Malformed(SyntaxError),
    /// One game of the file cannot be read (see [`parse_game`]).
    #[error("game {index}: {reason}")]
    Game {
        /// Its position in the file, from 0.
        index: usize,
        /// Why (in the message, not a `source`, for the reason above).
        reason: GameError,
    },
}

impl From<std::io::Error> for SgfError {
    fn from(e: std::io::Error) -> SgfError {
        SgfError::Io(e)
    }
}

/// The largest SGF file read: 200 times the largest collection of the
/// datasets (a month of Tygem games, 4.7 MB). A path such as `/dev/zero`
/// would otherwise be read until memory runs out.
pub const MAX_FILE_BYTES: u64 = crate::bounded_read::LIST_BYTES;

/// Reads every game of an SGF file (see [`parse_bytes`]).
pub fn read_file(path: &Path) -> Result<Vec<ParsedGame>, SgfError> {
    parse_bytes(&read_at_most(path, MAX_FILE_BYTES)?)
}

/// Reads an SGF file game by game (see [`visit_str`]): what a reader that
/// keeps a few of the games uses, for a file of millions of empty games
/// (`(;)`, three bytes each) took gigabytes read whole.
pub fn visit_file(path: &Path, visit: impl FnMut(usize, ParsedGame)) -> Result<(), SgfError> {
    visit_str(&decode(&read_at_most(path, MAX_FILE_BYTES)?), visit)
}

/// The bytes of the SGF file `path`, refused past `limit`.
fn read_at_most(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    crate::bounded_read::read_at_most(path, limit, "a file of game records")
}

/// Reads every game tree of SGF bytes in any charset (see `CA`), in file
/// order. A game that cannot be read is an error in its place, so the
/// others survive; the whole fails only when there is no game tree, or
/// none is well-formed.
pub fn parse_bytes(bytes: &[u8]) -> Result<Vec<ParsedGame>, SgfError> {
    parse_str(&decode(bytes))
}

/// [`parse_bytes`] for text already decoded.
pub fn parse_str(text: &str) -> Result<Vec<ParsedGame>, SgfError> {
    let mut records = Vec::new();
    visit_str(text, |_, game| records.push(game))?;
    Ok(records)
}

/// Calls `visit` with each game tree of `text` (its index in the file, and
/// the record or why not) as soon as it is read, so that only one game's
/// nodes are held at a time. The errors are [`parse_bytes`]'s, told once
/// every game has been visited: a caller drops what it kept of them.
pub fn visit_str(text: &str, mut visit: impl FnMut(usize, ParsedGame)) -> Result<(), SgfError> {
    let mut first_error = None;
    let mut any_whole = false;
    let mut trees = 0;
    for (index, tree) in game_trees(text).enumerate() {
        trees += 1;
        let game = match whole_tree(&tree) {
            Ok(root) => {
                any_whole = true;
                GameRecord::from_tree(index, &root)
            }
            Err(GameError::Syntax(e)) => {
                first_error.get_or_insert_with(|| e.clone());
                Err(GameError::Syntax(e))
            }
            Err(e) => {
                any_whole = true;
                Err(e)
            }
        };
        visit(index, game);
    }
    match first_error {
        _ if trees == 0 => Err(SgfError::NotSgf),
        Some(first) if !any_whole => Err(SgfError::Malformed(first)),
        _ => Ok(()),
    }
}

/// A game tree read whole by sgf-parse, or why it cannot be.
fn whole_tree(tree: &TreeText) -> Result<SgfNode<Prop>, GameError> {
    if let Some(damage) = &tree.damage {
        return Err(damage.error.clone().into());
    }
    let strict = ParseOptions { lenient: false, ..ParseOptions::default() };
    match sgf_parse::parse_with_options(tree.text, &strict) {
        Ok(parsed) => go_root(parsed),
        Err(e) => {
            // Strict parsing refuses harmless oddities of real files (a root
            // property given twice, `GM[1]GM[1]`), which the lenient mode
            // reads; but that mode stops quietly at real damage. Its answer
            // is taken when it holds every node the scan counted.
            let lenient = ParseOptions { lenient: true, ..ParseOptions::default() };
            let parsed = sgf_parse::parse_with_options(tree.text, &lenient).unwrap_or_default();
            match parsed.first() {
                Some(GameTree::GoGame(root)) if count_nodes(root) == tree.nodes => go_root(parsed),
                _ => Err(SyntaxError::Grammar { line: tree.line, reason: e.to_string() }.into()),
            }
        }
    }
}

/// Nodes of a tree, in all variations (with a stack: trees are deep).
fn count_nodes(root: &SgfNode<Prop>) -> usize {
    let mut stack = vec![root];
    let mut count = 0;
    while let Some(node) = stack.pop() {
        count += 1;
        stack.extend(node.children());
    }
    count
}

/// The Go game of sgf-parse's answer for one game tree.
fn go_root(parsed: Vec<GameTree>) -> Result<SgfNode<Prop>, GameError> {
    match parsed.into_iter().next() {
        Some(GameTree::GoGame(root)) => Ok(root),
        Some(GameTree::Unknown(root)) => {
            Err(GameError::NotGo(root.get_property("GM").map(written_value).unwrap_or_default()))
        }
        None => Err(GameError::NotGo(String::new())),
    }
}

/// A game read up to its first damage (a malformed node, a bad move value,
/// a truncated file): the moves before it, and what the damage is.
#[derive(Debug)]
pub struct PartialGame {
    pub record: GameRecord,
    /// `None` when the whole game was read.
    pub damage: Option<GameError>,
    /// Nodes off the main line (side variations, read as far as the
    /// damage): the record holds the main line only.
    pub side_nodes: usize,
}

/// Reads every game of an SGF file as far as it goes, as GnuGo does for
/// viewing and `loadsgf` (training reads whole games only: [`read_file`]).
/// A game whose root cannot be read is an error in its place.
pub fn read_file_up_to_damage(path: &Path) -> Result<Vec<Result<PartialGame, GameError>>, SgfError> {
    let bytes = read_at_most(path, MAX_FILE_BYTES)?;
    let text = decode(&bytes);
    let games: Vec<_> = game_trees(&text).enumerate().map(|(index, tree)| tree_up_to_damage(index, &tree)).collect();
    if games.is_empty() {
        return Err(SgfError::NotSgf);
    }
    Ok(games)
}

/// One game tree read by sgf-parse's lenient mode up to the node the scan
/// or strict parsing found damaged.
fn tree_up_to_damage(index: usize, tree: &TreeText) -> Result<PartialGame, GameError> {
    let (text, syntax) = match whole_tree(tree) {
        Ok(root) => {
            let (record, damage) = GameRecord::from_tree_up_to_damage(index, &root)?;
            return Ok(PartialGame { record, damage, side_nodes: side_nodes(&root) });
        }
        Err(GameError::Syntax(e)) => (tree.readable(), e),
        Err(e) => return Err(e),
    };
    // Damage in the root: there is no game to speak of.
    if !text.contains(';') || tree.damage.as_ref().is_some_and(|d| !text[..d.readable].contains(';')) {
        return Err(syntax.into());
    }
    let lenient = ParseOptions { lenient: true, ..ParseOptions::default() };
    let root = go_root(sgf_parse::parse_with_options(text, &lenient).unwrap_or_default())?;
    let (record, damage) = GameRecord::from_tree_up_to_damage(index, &root)?;
    // The syntax error comes first in the file: nodes after it were not read.
    Ok(PartialGame { record, damage: Some(damage.unwrap_or(GameError::Syntax(syntax))), side_nodes: side_nodes(&root) })
}

/// Nodes of a tree that are not on its main line.
fn side_nodes(root: &SgfNode<Prop>) -> usize {
    count_nodes(root) - root.main_variation().count()
}

/// The first game of `text`, for texts known to hold one game (tests, GTP
/// `loadsgf`); its error becomes [`SgfError::Game`].
pub fn parse_game(text: &str) -> Result<GameRecord, SgfError> {
    let first = parse_str(text)?.into_iter().next().expect("parse_str returns at least one game");
    first.map_err(|reason| SgfError::Game { index: 0, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `loadsgf /dev/zero` once read until memory ran out.
    #[test]
    fn a_file_past_the_limit_is_refused_not_read_to_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.sgf");
        std::fs::write(&path, "(;SZ[9];B[aa])").unwrap();
        assert_eq!(read_at_most(&path, 14).unwrap().len(), 14);
        let err = read_at_most(&path, 13).unwrap_err().to_string();
        assert_eq!(err, "larger than 13 bytes, the most a file of game records may hold");
        if Path::new("/dev/zero").exists() {
            // Refused before reading: it once took 7 s and 2 GB to reach the limit.
            let err = read_at_most(Path::new("/dev/zero"), MAX_FILE_BYTES).unwrap_err().to_string();
            assert_eq!(err, "not a file of game records (a device or a folder)");
        }
        let err = read_file(Path::new("/no/such.sgf")).unwrap_err().to_string();
        assert!(err.starts_with("cannot read: "), "{err}");
    }

    #[test]
    fn collections_keep_each_game_in_its_place() {
        let games = parse_str("(;SZ[9];B[aa])\n(;SZ[99])\n(;B[aa] % )\n(;SZ[13];W[bb])").unwrap();
        assert_eq!(games.len(), 4);
        assert_eq!(games[0].as_ref().unwrap().size, 9);
        assert_eq!(games[1].as_ref().unwrap_err().to_string(), "unsupported board size SZ[99] (square, 2 to 25)");
        assert!(matches!(games[2], Err(GameError::Syntax(SyntaxError::UnexpectedChar { found: '%', .. }))));
        assert_eq!(games[3].as_ref().unwrap().index_in_file, 3);
    }

    #[test]
    fn whole_file_errors_name_the_reason() {
        assert_eq!(parse_bytes(b"").unwrap_err().to_string(), "not SGF: no game tree \"(;\" found");
        assert_eq!(parse_bytes(b"just text (really)").unwrap_err().to_string(), "not SGF: no game tree \"(;\" found");
        assert_eq!(
            parse_bytes(b"(;GM[1]\n;B[aa];W[b").unwrap_err().to_string(),
            "malformed SGF: truncated: the text ends inside the property value opened on line 2"
        );
        assert!(matches!(parse_bytes(b"(;B[aa])(;W[bb]"), Ok(games) if games.len() == 2 && games[1].is_err()));
        let missing = read_file(Path::new("/nonexistent/game.sgf")).unwrap_err();
        assert!(missing.to_string().starts_with("cannot read: "), "{missing}");
        let chain = format!("{:#}", anyhow::Error::from(missing));
        assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
    }

    #[test]
    fn parse_game_reports_the_game() {
        let err = parse_game("(;SZ[9];B[zz])").unwrap_err();
        assert_eq!(err.to_string(), "game 0: move 1 (B[zz]): not a point on the 9x9 board");
        // Printed as an error chain (as `go-train` prints errors), the
        // reason comes once.
        let chain = format!("{:#}", anyhow::Error::from(err));
        assert_eq!(chain, "game 0: move 1 (B[zz]): not a point on the 9x9 board");
    }

    #[test]
    fn latin1_bytes_decode() {
        let games = parse_bytes(b"(;PW[M\xfcller]C[cr\xe9\xe9])").unwrap();
        let record = games[0].as_ref().unwrap();
        assert_eq!(record.white.as_deref(), Some("Müller"));
        assert_eq!(crate::sgf::record::tests::extras(record), ["C[créé]"]);
    }

    /// 8 MiB of random bytes: each `(;` starts a game tree and nearly every
    /// byte in one is an error. Counting each error's line from the start
    /// of the text made this minutes of work (quadratic); it is one pass.
    #[test]
    fn garbage_is_read_in_one_pass() {
        use rand::{Rng, SeedableRng};
        let mut bytes = vec![0u8; 8 << 20];
        rand_pcg::Pcg64Mcg::seed_from_u64(5).fill_bytes(&mut bytes);
        match parse_bytes(&bytes) {
            Ok(games) => assert!(games.iter().filter(|g| g.is_err()).count() * 2 > games.len()),
            Err(e) => assert!(matches!(e, SgfError::NotSgf | SgfError::Malformed(_)), "{e}"),
        }
    }

    #[test]
    fn damaged_games_are_read_up_to_the_damage() {
        let dir = tempfile::tempdir().unwrap();
        let read = |text: &str| {
            let path = dir.path().join("game.sgf");
            std::fs::write(&path, text).unwrap();
            let mut games = read_file_up_to_damage(&path).unwrap();
            let whole = read_file(&path).is_ok_and(|g| g[0].is_ok());
            let game = games.remove(0).unwrap();
            assert_eq!(whole, game.damage.is_none(), "training reads take whole games only: {text}");
            game
        };
        let two_moves = read("(;SZ[19];B[pd];W[dp];B[tt]W[tt];B[dd])");
        assert_eq!(two_moves.record.moves.len(), 2);
        assert_eq!(two_moves.damage.unwrap().to_string(), "move 3: one node holds two moves");
        let truncated = read("(;SZ[19]KM[6.5];B[pd];W[dp];B[pp];W[d");
        assert_eq!((truncated.record.moves.len(), truncated.record.komi), (3, Some(6.5)));
        assert!(truncated.damage.unwrap().to_string().starts_with("truncated"));
        let whole = read("(;SZ[9];B[aa];W[bb])");
        assert!(whole.damage.is_none() && whole.record.moves.len() == 2);
    }
}
