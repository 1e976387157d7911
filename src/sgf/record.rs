//! What a game tree says about one game: its metadata from the root node,
//! its setup stones and the moves of its main line.

use thiserror::Error;

use super::date::GameDate;
use super::result::{GameResult, WinBy};
use sgf_parse::go::{self, Prop};
use sgf_parse::{SgfNode, SgfProp, SimpleText};

use super::split::SyntaxError;
use crate::go::{Board, Color, ColoredMove, Event, Game, Move, Vertex};

/// Stones placed or removed at once (SGF `AB`/`AW`/`AE`): `None` empties
/// the point.
pub type Setup = Vec<(Vertex, Option<Color>)>;

/// The private root property (SGF lets applications add their own) that
/// marks a self-play game's value-training position:
/// [`GameRecord::marked_value_position`].
pub const VALUE_POSITION: &str = "VP";

/// One game as recorded: metadata, setup and the main line's moves.
#[derive(Clone, Debug, PartialEq)]
pub struct GameRecord {
    /// Position of the game tree in its file, from 0 (collections hold
    /// several).
    pub index_in_file: usize,
    /// Board side (`SZ`, 19 when absent).
    pub size: usize,
    /// Komi (`KM`), when given and a number, as meant (see [`fox_komi`]).
    pub komi: Option<f32>,
    /// Whether `KM` was written in Fox's hundredths and read by [`fox_komi`].
    pub komi_in_hundredths: bool,
    /// Handicap stones announced (`HA`); the stones themselves are in
    /// [`GameRecord::setup`].
    pub handicap: Option<u32>,
    /// Result (`RE`), when given.
    pub result: Option<GameResult>,
    /// Date (`DT`), when a year can be read from it.
    pub date: Option<GameDate>,
    /// Rule set as written (`RU`), e.g. `Japanese`.
    pub rules: Option<String>,
    /// Black player's name (`PB`).
    pub black: Option<String>,
    /// White player's name (`PW`).
    pub white: Option<String>,
    /// Black player's rank (`BR`), e.g. `6d`.
    pub black_rank: Option<String>,
    /// White player's rank (`WR`).
    pub white_rank: Option<String>,
    /// Setup of the root node (`AB`, then `AW`, then `AE`, each in file
    /// order, point lists such as `aa:cc` expanded row by row).
    pub setup: Setup,
    /// Who is to move after the setup (`PL` in the root), when said.
    pub player_to_move: Option<Color>,
    /// The main line's moves in order; passes included (`B[]`, and `B[tt]`
    /// on boards up to 19×19). One colour may move twice in a row.
    pub moves: Vec<ColoredMove>,
    /// Setup found in later nodes, keyed by the number of moves played
    /// before it (handicap stones in a node of their own, problem
    /// diagrams).
    pub later_setup: Vec<(usize, Setup)>,
    /// Who is to move, said (`PL`) in a later node, keyed as
    /// [`GameRecord::later_setup`] is: what a problem or a position saved
    /// by GnuGo (`AW…AB…PL[W]` after the moves) tells.
    pub later_to_move: Vec<(usize, Color)>,
    /// The comments (`C`) of the main line's move nodes, keyed by the
    /// move's index in [`GameRecord::moves`]: what a review adds its own
    /// figures to rather than replaces.
    pub move_comments: Vec<(usize, String)>,
    /// Root properties no field above holds (`GN`, `EV`, `PC`, `C`, `TM`,
    /// ..., or a `KM`/`HA`/`DT`/`PL` whose value could not be read, as
    /// sgf-parse's `Invalid`), in file order. Written back by
    /// [`write_game`](super::write_game); [`written_value`] gives their text.
    pub extra_properties: Vec<Prop>,
}

/// Why a game tree cannot be read as a game record.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GameError {
    /// It is not well-formed SGF.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// `GM` names another game.
    #[error("not a game of Go (GM[{0}])")]
    NotGo(String),
    /// `SZ` is not a square board of 2 to 25 points a side.
    #[error("unsupported board size SZ[{0}] (square, 2 to 25)")]
    BadSize(String),
    /// A setup point that is not on the board.
    #[error("{prop}[{value}]: not a point on the {size}x{size} board")]
    BadSetupPoint {
        /// `AB`, `AW` or `AE`.
        prop: String,
        /// The value as written.
        value: String,
        /// Board side.
        size: usize,
    },
    /// A move that is not a point on the board nor a pass.
    #[error("move {number} ({}[{value}]): not a point on the {size}x{size} board", .color.letter())]
    BadMove {
        /// Move number, from 1.
        number: usize,
        /// Who moves.
        color: Color,
        /// The value as written.
        value: String,
        /// Board side.
        size: usize,
    },
    /// A node holding both `B` and `W` (or one of them twice).
    #[error("move {number}: one node holds two moves")]
    TwoMoves {
        /// Number of the first of them, from 1.
        number: usize,
    },
}

impl GameRecord {
    /// An empty record: a `size`×`size` board, no metadata, no moves.
    pub fn new(size: usize) -> GameRecord {
        GameRecord {
            index_in_file: 0,
            size,
            komi: None,
            komi_in_hundredths: false,
            handicap: None,
            result: None,
            date: None,
            rules: None,
            black: None,
            white: None,
            black_rank: None,
            white_rank: None,
            setup: Vec::new(),
            player_to_move: None,
            moves: Vec::new(),
            later_setup: Vec::new(),
            later_to_move: Vec::new(),
            move_comments: Vec::new(),
            extra_properties: Vec::new(),
        }
    }

    /// The record of a game played here (self-play, GTP, matches): its size,
    /// komi, setup, who moves after the setup (`PL`, which handicap stones
    /// make White), the moves, and go-train as the application (`AP`). A
    /// resignation becomes the result (SGF has no move for it); other
    /// results are for the caller to add.
    pub fn from_game(game: &Game) -> GameRecord {
        let mut record = GameRecord::new(game.size());
        record.komi = Some(game.rules().komi);
        record
            .extra_properties
            .push(Prop::AP((SimpleText::from("go-train"), SimpleText::from(env!("CARGO_PKG_VERSION")))));
        for event in game.history() {
            match event {
                Event::Move(ColoredMove { color, mv: Move::Resign }) => {
                    record.result = Some(GameResult::Win { winner: color.opponent(), by: WinBy::Resignation })
                }
                Event::Move(mv) => record.moves.push(*mv),
                Event::Setup(changes) if record.moves.is_empty() && record.later_setup.is_empty() => {
                    record.setup.extend_from_slice(changes)
                }
                Event::Setup(changes) => record.later_setup.push((record.moves.len(), changes.clone())),
            }
        }
        if !record.setup.is_empty() {
            record.player_to_move = Some(record.moves.first().map_or(game.to_move(), |m| m.color));
        }
        // Who moves after a setup between moves, where it is not the player
        // after the last move (a loaded position saved with `PL`, handicap
        // stones placed after two passes): written back as `PL`, or a
        // record read back would give the turn to the other side.
        let mut setups_at: Vec<usize> = record.later_setup.iter().map(|(k, _)| *k).collect();
        setups_at.dedup();
        for k in setups_at {
            let next = record.moves.get(k).map_or(game.to_move(), |m| m.color);
            let after_last = k.checked_sub(1).map_or(Color::Black, |last| record.moves[last].color.opponent());
            if next != after_last {
                record.later_to_move.push((k, next));
            }
        }
        record
    }

    /// Reads the main line of one game tree (sgf-parse's root node).
    pub(crate) fn from_tree(index_in_file: usize, root: &SgfNode<Prop>) -> Result<GameRecord, GameError> {
        match GameRecord::from_tree_up_to_damage(index_in_file, root)? {
            (record, None) => Ok(record),
            (_, Some(damage)) => Err(damage),
        }
    }

    /// Reads the main line of one game tree up to its first bad node (a
    /// bad move value, two moves in one node): the record of the moves
    /// before it, and the error. Fails only when the root cannot be read.
    pub(crate) fn from_tree_up_to_damage(
        index_in_file: usize,
        root: &SgfNode<Prop>,
    ) -> Result<(GameRecord, Option<GameError>), GameError> {
        let size = match root.get_property("SZ") {
            None => 19,
            Some(Prop::SZ((columns, rows))) if columns == rows && Board::valid_size(*columns as usize) => {
                *columns as usize
            }
            Some(Prop::Invalid(_, values)) if values.len() == 1 => parse_size(&values[0])?,
            Some(Prop::SZ((columns, rows))) if columns == rows => return Err(GameError::BadSize(columns.to_string())),
            Some(other) => return Err(GameError::BadSize(written_value(other))),
        };
        let mut record = GameRecord { index_in_file, ..GameRecord::new(size) };
        for prop in root.properties() {
            record.read_root_property(prop);
        }
        for (depth, node) in root.main_variation().enumerate() {
            let setup = match read_setup(node, size) {
                Ok(setup) => setup,
                Err(e) if depth == 0 => return Err(e),
                Err(e) => return Ok((record, Some(e))),
            };
            if depth == 0 {
                record.setup = setup;
            } else {
                if !setup.is_empty() {
                    record.later_setup.push((record.moves.len(), setup));
                }
                // Read only at the root, it once left `loadsgf` answering
                // the wrong colour to move.
                if let Some(color) = node.get_property("PL").and_then(|p| Color::parse(&written_value(p))) {
                    // The last said before a move is the one that counts.
                    let at = record.moves.len();
                    record.later_to_move.retain(|(k, _)| *k != at);
                    record.later_to_move.push((at, color));
                }
            }
            if let Err(e) = record.read_move(node) {
                return Ok((record, Some(e)));
            }
        }
        Ok((record, None))
    }

    /// How many moves end the game when stones are played after them: the
    /// game is over at the second of two consecutive passes, and play after
    /// it is no game to learn from. Only passes after the end (NNGS and IGS
    /// recorded a third) end it all the same: see
    /// [`GameRecord::without_passes_after_end`].
    pub fn play_after_two_passes(&self) -> Option<usize> {
        let end = self.end_of_play();
        self.moves[end..].iter().any(|m| m.mv != Move::Pass).then_some(end)
    }

    /// The number of moves the game is made of: up to the second of the
    /// first two consecutive passes, or all of them.
    pub fn end_of_play(&self) -> usize {
        let two_passes = self.moves.windows(2).position(|w| w[0].mv == Move::Pass && w[1].mv == Move::Pass);
        two_passes.map_or(self.moves.len(), |i| i + 2)
    }

    /// Whether a stone is played before the game's end: a record of passes
    /// only (or of no moves) is no game to learn from.
    pub fn plays_a_stone(&self) -> bool {
        self.moves[..self.end_of_play()].iter().any(|m| m.mv != Move::Pass)
    }

    /// The record without the passes after its end, when it has any: what
    /// a dataset learns from (a third pass would be a position after the
    /// game, labelled).
    pub fn without_passes_after_end(&self) -> Option<GameRecord> {
        let end = self.end_of_play();
        (end < self.moves.len()).then(|| {
            let mut record = self.clone();
            record.moves.truncate(end);
            record.later_setup.retain(|(at, _)| *at <= end);
            record.later_to_move.retain(|(at, _)| *at <= end);
            record.move_comments.retain(|(at, _)| *at < end);
            record
        })
    }

    /// The position of the game marked for value training (a self-play
    /// game of AlphaGo's recipe, `go-train selfplay --value-positions
    /// alphago`): the number of moves played before it, from the root's
    /// private property [`VALUE_POSITION`].
    pub fn marked_value_position(&self) -> Option<usize> {
        self.extra_properties.iter().find_map(|p| match p {
            Prop::Unknown(ident, values) if ident == VALUE_POSITION => values.first()?.trim().parse().ok(),
            _ => None,
        })
    }

    /// Marks the position after `moves` moves for value training
    /// ([`GameRecord::marked_value_position`]), replacing any mark.
    pub fn mark_value_position(&mut self, moves: usize) {
        self.extra_properties.retain(|p| !matches!(p, Prop::Unknown(ident, _) if ident == VALUE_POSITION));
        self.extra_properties.push(Prop::Unknown(VALUE_POSITION.to_string(), vec![moves.to_string()]));
    }

    /// Stores a root property in its field, or among the extras when no
    /// field takes it or its value cannot be read.
    fn read_root_property(&mut self, prop: &Prop) {
        let text = root_text(prop);
        let value = text.as_deref().unwrap_or("").trim();
        let understood = match prop {
            // Rewritten by the writer (FF[4], UTF-8) or read elsewhere.
            Prop::FF(_) | Prop::CA(_) | Prop::GM(_) | Prop::SZ(_) | Prop::AB(_) | Prop::AW(_) | Prop::AE(_) => true,
            Prop::B(_) | Prop::W(_) => true,
            Prop::Invalid(ident, _) | Prop::Unknown(ident, _)
                if matches!(ident.as_str(), "FF" | "CA" | "GM" | "SZ" | "AB" | "AW" | "AE" | "B" | "W") =>
            {
                true
            }
            // An identifier of lower-case letters only (`size[19]`) names
            // nothing SGF knows.
            Prop::Unknown(ident, _) if ident.is_empty() => true,
            _ => match prop.identifier().as_str() {
                "KM" => {
                    let written: Option<f32> = value.parse().ok().filter(|k: &f32| k.is_finite());
                    if self.komi.is_none() {
                        self.komi_in_hundredths = written.is_some_and(|k| fox_komi(k) != k);
                    }
                    // A komi no game is played with (`KM[3e38]`) is no
                    // komi: it was once scored in 39 digits.
                    let meant = written.map(fox_komi).filter(|&k| crate::bounds::KOMI.real_value(k as f64).is_ok());
                    set_first(&mut self.komi, meant)
                }
                "HA" => set_first(&mut self.handicap, value.parse().ok()),
                "PL" => set_first(&mut self.player_to_move, Color::parse(value)),
                "DT" => set_first(&mut self.date, GameDate::parse(value)),
                "RE" => set_first(&mut self.result, (!value.is_empty()).then(|| GameResult::parse(value))),
                "RU" => set_first(&mut self.rules, simple_text(value)),
                "PB" => set_first(&mut self.black, simple_text(value)),
                "PW" => set_first(&mut self.white, simple_text(value)),
                "BR" => set_first(&mut self.black_rank, simple_text(value)),
                "WR" => set_first(&mut self.white_rank, simple_text(value)),
                _ => false,
            },
        };
        // An empty value says nothing: nothing to keep.
        let says_nothing = match prop {
            Prop::Invalid(_, values) | Prop::Unknown(_, values) => values.len() == 1 && value.is_empty(),
            _ => text.is_some() && value.is_empty(),
        };
        if !(understood || says_nothing) {
            self.extra_properties.push(prop.clone());
        }
    }

    /// Appends the node's move, if it has one.
    fn read_move(&mut self, node: &SgfNode<Prop>) -> Result<(), GameError> {
        let number = self.moves.len() + 1;
        let mut moves = node.properties().filter_map(|p| match p {
            Prop::B(mv) => Some((Color::Black, Ok(*mv))),
            Prop::W(mv) => Some((Color::White, Ok(*mv))),
            Prop::Invalid(ident, values) if ident == "B" => Some((Color::Black, Err(values))),
            Prop::Invalid(ident, values) if ident == "W" => Some((Color::White, Err(values))),
            _ => None,
        });
        let Some((color, value)) = moves.next() else { return Ok(()) };
        if moves.next().is_some() {
            return Err(GameError::TwoMoves { number });
        }
        let size = self.size;
        let mv = match value {
            Ok(go::Move::Pass) => Some(Move::Pass),
            // `tt` is a pass up to 19×19.
            Ok(go::Move::Move(go::Point { x: 19, y: 19 })) if size <= 19 => Some(Move::Pass),
            Ok(go::Move::Move(point)) => vertex(point, size).map(Move::Play),
            // What sgf-parse could not read as a move (` aa `, `rp.pm`).
            Err(values) => match values.as_slice() {
                [one] => parse_move(one.trim(), size),
                _ => None,
            },
        };
        let mv = mv.ok_or_else(|| GameError::BadMove {
            number,
            color,
            value: match value {
                Ok(go::Move::Move(point)) => point_text(point),
                Ok(go::Move::Pass) => String::new(),
                Err(values) => values.join("]["),
            },
            size,
        })?;
        self.moves.push(ColoredMove { color, mv });
        let comment = node.properties().find_map(|p| match p {
            Prop::C(text) if !text.text.trim().is_empty() => Some(text.text.clone()),
            _ => None,
        });
        if let Some(comment) = comment {
            self.move_comments.push((number - 1, comment));
        }
        Ok(())
    }
}

/// The single value of a root property whose value go-train reads itself,
/// as written (numbers as sgf-parse read them); `None` for other
/// properties.
fn root_text(prop: &Prop) -> Option<String> {
    Some(match prop {
        Prop::KM(komi) => komi.to_string(),
        Prop::HA(handicap) => handicap.to_string(),
        Prop::PL(sgf_parse::Color::Black) => "B".into(),
        Prop::PL(sgf_parse::Color::White) => "W".into(),
        Prop::DT(t) | Prop::RE(t) | Prop::RU(t) | Prop::PB(t) | Prop::PW(t) | Prop::BR(t) | Prop::WR(t) => {
            t.text.clone()
        }
        Prop::Invalid(_, values) | Prop::Unknown(_, values) => values.first()?.clone(),
        _ => return None,
    })
}

/// A property's values as SGF writes them, escaped, `][` between two
/// (`KM[six]` gives `six`): for messages and reports.
pub fn written_value(prop: &impl SgfProp) -> String {
    let written = prop.to_string();
    let open = written.find('[').map_or(written.len(), |i| i + 1);
    written[open..written.len().max(open + 1) - 1].to_string()
}

/// Komi as meant. Fox writes it in hundredths, and in Chinese games in
/// hundredths of a stone (two points): `KM[650]` is 6.5, `KM[750]` 7.5,
/// `KM[375]` 3.75 stones, 7.5 points. No real komi is 250 or more, so a
/// value from 250 that is a multiple of 25 can only be that (KGS's joke
/// komi of ±100 stays as written, and is out of any even game's range).
pub fn fox_komi(komi: f32) -> f32 {
    if komi < 250.0 || komi % 25.0 != 0.0 {
        komi
    } else if komi < 500.0 {
        komi / 50.0
    } else {
        komi / 100.0
    }
}

/// Sets `slot` to `value` unless it is already set (the first of repeated
/// properties wins). Returns whether the value was read.
fn set_first<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    let read = value.is_some();
    if slot.is_none() {
        *slot = value;
    }
    read
}

/// `19`, or `19:19` (`FF[4]`'s form for rectangles, accepted when square).
fn parse_size(value: &str) -> Result<usize, GameError> {
    let bad = || GameError::BadSize(value.to_string());
    let (columns, rows) = value.split_once(':').unwrap_or((value, value));
    let columns: usize = columns.trim().parse().map_err(|_| bad())?;
    let rows: usize = rows.trim().parse().map_err(|_| bad())?;
    if columns != rows || !Board::valid_size(columns) {
        return Err(bad());
    }
    Ok(columns)
}

/// SimpleText: line breaks and runs of blanks become one space; empty is
/// none.
fn simple_text(value: &str) -> Option<String> {
    let text = value.split_whitespace().collect::<Vec<_>>().join(" ");
    (!text.is_empty()).then_some(text)
}

/// A point `aa`..`yy`; `FF[4]` letters `A`–`Z` count on from 26 and are off
/// any board this crate supports.
fn parse_point(value: &str, size: usize) -> Option<Vertex> {
    let coordinate = |c: u8| match c {
        b'a'..=b'z' => Some((c - b'a') as usize),
        b'A'..=b'Z' => Some((c - b'A') as usize + 26),
        _ => None,
    };
    let &[x, y] = value.as_bytes() else { return None };
    let (x, y) = (coordinate(x)?, coordinate(y)?);
    (x < size && y < size).then(|| Vertex::new(x, y))
}

/// A move value: a point, or a pass written `` or (up to 19×19) `tt`.
fn parse_move(value: &str, size: usize) -> Option<Move> {
    if value.is_empty() || (value == "tt" && size <= 19) {
        return Some(Move::Pass);
    }
    parse_point(value, size).map(Move::Play)
}

/// The node's `AB`, `AW` and `AE` points, in that order, each row by row
/// (sgf-parse holds a list as a set).
fn read_setup(node: &SgfNode<Prop>, size: usize) -> Result<Setup, GameError> {
    let mut setup = Setup::new();
    for (ident, color) in [("AB", Some(Color::Black)), ("AW", Some(Color::White)), ("AE", None)] {
        let bad = |value: String| GameError::BadSetupPoint { prop: ident.to_string(), value, size };
        let mut points = Vec::new();
        for prop in node.properties() {
            match (prop, color) {
                (Prop::AB(set), Some(Color::Black)) | (Prop::AW(set), Some(Color::White)) | (Prop::AE(set), None) => {
                    // Row by row, so that an error names the same point
                    // every time (a set has no order of its own).
                    let mut given: Vec<go::Point> = set.iter().copied().collect();
                    given.sort_by_key(|p| (p.y, p.x));
                    for point in given {
                        points.push(vertex(point, size).ok_or_else(|| bad(point_text(point)))?);
                    }
                }
                // What sgf-parse could not read as a point list (` aa`, a
                // point twice).
                (Prop::Invalid(id, values), _) if id == ident => {
                    for value in values {
                        points.extend(point_list(value.trim(), size).ok_or_else(|| bad(value.clone()))?);
                    }
                }
                _ => {}
            }
        }
        points.sort_by_key(|v| (v.y, v.x));
        setup.extend(points.into_iter().map(|v| (v, color)));
    }
    Ok(setup)
}

/// A point of sgf-parse on a `size`×`size` board.
fn vertex(point: go::Point, size: usize) -> Option<Vertex> {
    ((point.x as usize) < size && (point.y as usize) < size).then(|| Vertex::new(point.x as usize, point.y as usize))
}

/// A point as SGF writes it (`aa`; `A` for 26 on).
fn point_text(point: go::Point) -> String {
    let letter = |c: u8| if c < 26 { (b'a' + c) as char } else { (b'A' + c - 26) as char };
    [letter(point.x), letter(point.y)].into_iter().collect()
}

/// One value of a point list: a point, a rectangle `aa:cc` (either pair of
/// opposite corners), or nothing (an empty list).
fn point_list(value: &str, size: usize) -> Option<Vec<Vertex>> {
    if value.is_empty() {
        return Some(Vec::new());
    }
    let Some((a, b)) = value.split_once(':') else {
        return parse_point(value, size).map(|v| vec![v]);
    };
    let (a, b) = (parse_point(a.trim(), size)?, parse_point(b.trim(), size)?);
    let (xs, ys) = (a.x.min(b.x)..=a.x.max(b.x), a.y.min(b.y)..=a.y.max(b.y));
    Some(ys.flat_map(|y| xs.clone().map(move |x| Vertex { x, y })).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::go::Rules;
    use crate::sgf::parse_game;

    fn v(x: u8, y: u8) -> Vertex {
        Vertex { x, y }
    }

    /// The extra properties as SGF writes them.
    pub(crate) fn extras(record: &GameRecord) -> Vec<String> {
        record.extra_properties.iter().map(|p| p.to_string()).collect()
    }

    fn play(color: Color, x: u8, y: u8) -> ColoredMove {
        ColoredMove { color, mv: Move::Play(v(x, y)) }
    }

    #[test]
    fn reads_metadata() {
        let r = parse_game(
            "(;GM[1]FF[4]SZ[19]PW[Thick]WR[6d]PB[jim]BR[6d]DT[2002-07-17]KM[5.50]RE[W+Resign]\
             RU[Japanese]CA[UTF-8]HA[2]PC[KGS]TM[1050];B[pd];W[dp])",
        )
        .unwrap();
        assert_eq!(r.size, 19);
        assert_eq!(r.komi, Some(5.5));
        assert_eq!(r.handicap, Some(2));
        assert_eq!(r.result, Some(GameResult::parse("W+R")));
        assert_eq!(r.date, GameDate::parse("2002-07-17"));
        assert_eq!(r.rules.as_deref(), Some("Japanese"));
        assert_eq!((r.black.as_deref(), r.black_rank.as_deref()), (Some("jim"), Some("6d")));
        assert_eq!((r.white.as_deref(), r.white_rank.as_deref()), (Some("Thick"), Some("6d")));
        assert_eq!(extras(&r), ["PC[KGS]", "TM[1050]"]);
        assert_eq!(r.moves, vec![play(Color::Black, 15, 3), play(Color::White, 3, 15)]);
    }

    #[test]
    fn defaults_and_unreadable_values() {
        let r = parse_game("(;KM[six]HA[]DT[someday]PB[ a \n b ]RE[])").unwrap();
        assert_eq!((r.size, r.komi, r.handicap, r.date, r.result.clone()), (19, None, None, None, None));
        assert_eq!(r.black.as_deref(), Some("a b"));
        assert_eq!(extras(&r), ["KM[six]", "DT[someday]"]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_game("(;SZ[9])").unwrap().size, 9);
        assert_eq!(parse_game("(;SZ[13:13])").unwrap().size, 13);
        for bad in ["19:13", "1", "26", "nine", ""] {
            let err = parse_game(&format!("(;SZ[{bad}])")).unwrap_err().to_string();
            assert!(err.contains("unsupported board size"), "{bad}: {err}");
        }
    }

    #[test]
    fn passes_and_bad_moves() {
        let r = parse_game("(;SZ[19];B[];W[tt];B[ aa\n])").unwrap();
        assert_eq!(r.moves[0].mv, Move::Pass);
        assert_eq!(r.moves[1].mv, Move::Pass);
        assert_eq!(r.moves[2], play(Color::Black, 0, 0));
        let big = parse_game("(;SZ[21];B[tt])").unwrap();
        assert_eq!(big.moves[0], play(Color::Black, 19, 19));
        let err = parse_game("(;SZ[9];B[aa];W[jj])").unwrap_err().to_string();
        assert_eq!(err, "game 0: move 2 (W[jj]): not a point on the 9x9 board");
        let err = parse_game("(;B[aa];W[rp.pm])").unwrap_err().to_string();
        assert!(err.contains("move 2 (W[rp.pm])"), "{err}");
        let err = parse_game("(;B[aa];B[bb]W[cc])").unwrap_err().to_string();
        assert_eq!(err, "game 0: move 2: one node holds two moves");
    }

    #[test]
    fn setup_lists_expand_and_keep_order() {
        let r = parse_game("(;SZ[5]AW[ee]AB[aa:bc]\n[dd]AE[cc]PL[W];W[ce];B[de]AB[ea];AE[aa])").unwrap();
        let b = Some(Color::Black);
        assert_eq!(
            r.setup,
            vec![
                (v(0, 0), b),
                (v(1, 0), b),
                (v(0, 1), b),
                (v(1, 1), b),
                (v(0, 2), b),
                (v(1, 2), b),
                (v(3, 3), b),
                (v(4, 4), Some(Color::White)),
                (v(2, 2), None)
            ]
        );
        assert_eq!(r.player_to_move, Some(Color::White));
        assert_eq!(r.later_setup, vec![(1, vec![(v(4, 0), b)]), (2, vec![(v(0, 0), None)])]);
        let err = parse_game("(;SZ[5]AB[aa][ff])").unwrap_err().to_string();
        assert_eq!(err, "game 0: AB[ff]: not a point on the 5x5 board");
        // A rectangle past the board's edge named a point of it at random.
        let err = parse_game("(;SZ[9]AB[aa:zz])").unwrap_err().to_string();
        assert_eq!(err, "game 0: AB[ja]: not a point on the 9x9 board");
    }

    #[test]
    fn other_games_are_refused() {
        let err = parse_game("(;GM[2]B[aa])").unwrap_err().to_string();
        assert_eq!(err, "game 0: not a game of Go (GM[2])");
        assert!(parse_game("(;GM[1]GM[1];B[aa])").is_ok());
    }

    #[test]
    fn from_game_keeps_setup_and_moves() {
        let mut game = Game::new(9, Rules::CHINESE);
        game.setup(&[(v(2, 2), Some(Color::Black))]).unwrap();
        game.play(Color::White, Move::Play(v(4, 4))).unwrap();
        game.setup(&[(v(6, 6), Some(Color::Black))]).unwrap();
        game.play(Color::White, Move::Pass).unwrap();
        game.play(Color::Black, Move::Resign).unwrap();
        let r = GameRecord::from_game(&game);
        assert_eq!((r.size, r.komi), (9, Some(7.5)));
        assert_eq!(r.setup, vec![(v(2, 2), Some(Color::Black))]);
        assert_eq!(r.later_setup, vec![(1, vec![(v(6, 6), Some(Color::Black))])]);
        assert_eq!(r.moves, vec![play(Color::White, 4, 4), ColoredMove { color: Color::White, mv: Move::Pass }]);
        assert_eq!(r.result, Some(GameResult::parse("W+R")));
        // After the setup the first move is White's: PL says so.
        assert_eq!(r.player_to_move, Some(Color::White));
    }

    #[test]
    fn fox_komi_is_read_as_meant() {
        let komi = |km: &str| parse_game(&format!("(;KM[{km}];B[aa])")).unwrap().komi;
        assert_eq!(komi("750"), Some(7.5));
        assert_eq!(komi("650"), Some(6.5));
        assert_eq!(komi("375"), Some(7.5));
        assert_eq!(komi("6.5"), Some(6.5));
        assert_eq!(komi("0"), Some(0.0));
        assert_eq!(komi("325"), Some(6.5));
        assert_eq!(komi("-100.00"), Some(-100.0));
        assert_eq!(komi("100"), Some(100.0));
        assert_eq!(komi("251"), Some(251.0));
        for absurd in ["3e38", "1e30", "-1e30", "1000.5"] {
            assert_eq!(komi(absurd), None, "{absurd}");
        }
        assert!(parse_game("(;KM[750])").unwrap().komi_in_hundredths);
        assert!(!parse_game("(;KM[7.5])").unwrap().komi_in_hundredths);
    }

    #[test]
    fn play_after_two_passes_is_found() {
        let after = |moves: &str| parse_game(&format!("(;SZ[9]{moves})")).unwrap().play_after_two_passes();
        assert_eq!(after(";B[aa];W[];B[];W[bb]"), Some(3));
        assert_eq!(after(";B[aa];W[];B[]"), None);
        assert_eq!(after(";B[];W[bb];B[];W[cc]"), None);
        assert_eq!(after(&format!(";B[];W[]{}", ";B[aa];W[]".repeat(500))), Some(2));
        // Passes after the end (a third, as NNGS recorded) end it all the
        // same, and a dataset learns without them.
        assert_eq!(after(";B[aa];W[];B[];W[]"), None);
        assert_eq!(after(&";B[];W[]".repeat(1000)), None);
        let record = parse_game("(;SZ[9];B[aa];W[];B[];W[tt]C[third])").unwrap();
        let trimmed = record.without_passes_after_end().unwrap();
        assert_eq!(trimmed.moves, record.moves[..3]);
        assert!(trimmed.move_comments.is_empty());
        assert!(parse_game("(;SZ[9];B[aa];W[];B[])").unwrap().without_passes_after_end().is_none());
        let plays = |moves: &str| parse_game(&format!("(;SZ[9]{moves})")).unwrap().plays_a_stone();
        assert!(plays(";B[];W[aa];B[];W[]") && plays(";B[aa]"));
        assert!(!plays("") && !plays(";B[];W[]") && !plays(&";B[];W[]".repeat(300)) && !plays(";B[];W[tt]"));
    }
}
