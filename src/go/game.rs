//! A game in progress: the board plus everything that depends on history —
//! whose turn it is, superko, passes, undo. (KataGo's `BoardHistory`.)

use super::board::{Board, Cell, IllegalMove, Point};
use super::rules::{KoRule, Rules};
use super::{zobrist, Color, ColoredMove, Move, Vertex};
use thiserror::Error;

/// The earlier positions of a game, for superko. Nearly every test is for
/// a new position, so a 16,384-bit Bloom filter with two bits per key
/// answers most of them in two loads; only on a filter hit are the keys
/// scanned, newest first, where ko repetitions are. With one bit per key,
/// about 1 in 50 tests in a 19×19 playout hit the filter falsely, and
/// their scans cost more than all the other superko tests together.
/// Cheaper to fill and to clone than a hash table for the few hundred
/// positions of a game.
#[derive(Clone)]
struct PositionSet {
    /// The two bits of [`PositionSet::bits`] are set for every key in `keys`.
    filter: Box<[u64; 256]>,
    /// Every key inserted, oldest first.
    keys: Vec<u64>,
}

impl PositionSet {
    fn with_capacity(n: usize) -> PositionSet {
        PositionSet { filter: Box::new([0; 256]), keys: Vec::with_capacity(n) }
    }
    /// The filter's two bits for `key`, as (word, mask) pairs: two disjoint
    /// 14-bit fields of the (uniformly random) Zobrist key.
    #[inline]
    fn bits(key: u64) -> [(usize, u64); 2] {
        [key >> 50, (key >> 36) & 0x3fff].map(|i| ((i >> 6) as usize, 1 << (i & 63)))
    }
    #[inline]
    fn insert(&mut self, key: u64) {
        for (w, b) in Self::bits(key) {
            self.filter[w] |= b;
        }
        self.keys.push(key);
    }
    #[inline]
    fn contains(&self, key: u64) -> bool {
        let [(w0, b0), (w1, b1)] = Self::bits(key);
        // `&`, not `&&`: one branch on the outcome, not two.
        (self.filter[w0] & b0 != 0) & (self.filter[w1] & b1 != 0) && self.keys.iter().rev().any(|&k| k == key)
    }
    fn clear(&mut self) {
        self.filter.fill(0);
        self.keys.clear();
    }
    /// Becomes a copy of `other`, keeping this set's allocations.
    fn copy_from(&mut self, other: &PositionSet) {
        self.filter.copy_from_slice(&other.filter[..]);
        self.keys.clone_from(&other.keys);
    }
}

/// One step of a game's history.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A move by a player.
    Move(ColoredMove),
    /// Setup stones (SGF `AB`/`AW`/`AE`, or placed handicap): `None` clears.
    Setup(Vec<(Vertex, Option<Color>)>),
}

/// A game: rules, the current board, whose turn it is, and the history that
/// superko and undo need.
#[derive(Clone)]
pub struct Game {
    /// The rule set in force.
    rules: Rules,
    /// The current position.
    board: Board,
    /// The position the game started from (undo replays from here). Shared:
    /// games are cloned per playout and per search node, and it never changes.
    start: std::sync::Arc<Board>,
    /// Whose turn it is.
    to_move: Color,
    /// Everything that happened since `start`.
    history: Vec<Event>,
    /// Hashes of earlier positions, for superko (side to move folded in
    /// under situational superko).
    seen: PositionSet,
    /// Whether a stone has left the board since `start` (a capture, a
    /// suicide, or setup). Until one has, every stone move that is not a
    /// suicide adds a stone to all earlier positions' stones, so it cannot
    /// repeat one of them and superko needs no test: in random playouts that
    /// spares the test for the opening moves, before the first capture.
    /// Where suicide is legal a move may itself remove stones, so the test
    /// always runs.
    may_repeat: bool,
    /// Passes in a row at the end of the history.
    consecutive_passes: u32,
    /// Stones each colour has put on the board (moves and setup): the term
    /// that ties area and territory scores together (see `scoring`).
    stones_placed: [u32; 2],
    /// Whether someone resigned.
    resigned: Option<Color>,
}

impl Game {
    /// A new game on an empty board of `size`, Black to move.
    pub fn new(size: usize, rules: Rules) -> Game {
        let board = Board::new(size);
        let mut game = Game {
            rules,
            start: std::sync::Arc::new(board.clone()),
            board,
            to_move: Color::Black,
            history: Vec::new(),
            // Room for a long game up front: growing the set mid-game was a
            // visible cost in playouts.
            seen: PositionSet::with_capacity(3 * size * size),
            may_repeat: false,
            consecutive_passes: 0,
            stones_placed: [0; 2],
            resigned: None,
        };
        game.remember_position();
        game
    }

    /// A new game under `rules` from this one's position: its stones, its
    /// side to move and its simple-ko ban, none of its history. Playouts
    /// start here: the game itself may be over (two passes), and a ko its
    /// last move took must stay banned, or the playouts would take it back
    /// at once for free (the tactical ones, which capture any stone in
    /// atari, every time). Undoing past the start forgets the ban.
    pub fn restarted(&self, rules: Rules) -> Game {
        let board = &self.board;
        let stones: Vec<(Vertex, Option<Color>)> =
            board.points().filter_map(|p| board.color_at(p).map(|c| (board.vertex(p), Some(c)))).collect();
        let mut game = Game::new(board.size(), rules);
        game.setup(&stones).expect("the stones of a board lie on a board of its size");
        game.to_move = self.to_move;
        game.board.set_ko_point(board.ko_point());
        game
    }

    /// Makes room for `moves` more moves, so that a playout or a search
    /// does not reallocate the history as it goes (clones start empty).
    pub fn reserve(&mut self, moves: usize) {
        self.history.reserve(moves);
        self.seen.keys.reserve(moves);
    }

    /// Makes this game a copy of `other`, like `*self = other.clone()`, but
    /// in the buffers this game already has: playouts that restart from one
    /// position allocate nothing after the first.
    pub fn copy_from(&mut self, other: &Game) {
        // Destructured so that a new field cannot be forgotten here.
        let Game {
            rules,
            board,
            start,
            to_move,
            history,
            seen,
            may_repeat,
            consecutive_passes,
            stones_placed,
            resigned,
        } = other;
        self.rules = *rules;
        self.board.copy_from(board);
        self.start.clone_from(start);
        self.to_move = *to_move;
        self.history.clone_from(history);
        self.seen.copy_from(seen);
        self.may_repeat = *may_repeat;
        self.consecutive_passes = *consecutive_passes;
        self.stones_placed = *stones_placed;
        self.resigned = *resigned;
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// Changes komi (GTP `komi`); other rules stay.
    pub fn set_komi(&mut self, komi: f32) {
        self.rules.komi = komi;
    }

    /// Changes the rules (GTP `kgs-rules`) and replays the game under them,
    /// so that the positions a superko rule remembers are the ones it would
    /// have kept from the start; the side to move stays. A game with a move
    /// the new rules forbid (a suicide, a repetition) keeps its rules, and
    /// the answer names the move: a game may not hold a move its own rules
    /// refuse, or its record could not be read back.
    pub fn set_rules(&mut self, rules: Rules) -> Result<(), ForbiddenMove> {
        let mut replayed = self.clone();
        replayed.rules = rules;
        let events = std::mem::take(&mut replayed.history);
        replayed.replay_from_start(events, true)?;
        replayed.to_move = self.to_move;
        *self = replayed;
        Ok(())
    }

    pub fn board(&self) -> &Board {
        &self.board
    }

    pub fn size(&self) -> usize {
        self.board.size()
    }

    pub fn to_move(&self) -> Color {
        self.to_move
    }

    /// Sets whose turn it is (SGF `PL`, or handicap games where White starts).
    pub fn set_to_move(&mut self, color: Color) {
        self.to_move = color;
    }

    pub fn history(&self) -> &[Event] {
        &self.history
    }

    /// The moves played so far, in order, setup excluded.
    pub fn moves(&self) -> impl DoubleEndedIterator<Item = &ColoredMove> + '_ {
        self.history.iter().filter_map(|e| match e {
            Event::Move(m) => Some(m),
            Event::Setup(_) => None,
        })
    }

    /// The last `n` moves, most recent first (for the last-move planes).
    pub fn recent_moves(&self, n: usize) -> impl Iterator<Item = &ColoredMove> + '_ {
        self.moves().rev().take(n)
    }

    /// Number of moves played (passes included, setup excluded).
    pub fn move_count(&self) -> usize {
        self.moves().count()
    }

    /// Whether the game is over: two passes in a row, or a resignation.
    pub fn is_over(&self) -> bool {
        self.consecutive_passes >= 2 || self.resigned.is_some()
    }

    /// This game with its closing passes forgotten, so that play can go
    /// on from its last position: a GUI asks for the analysis of a game
    /// two passes ended, as of any other (KataGo's search never takes its
    /// root for finished). A resignation still ends it.
    pub fn continued(&self) -> Game {
        let mut game = self.clone();
        game.consecutive_passes = 0;
        game
    }

    /// Who resigned, if anyone did.
    pub fn resigned(&self) -> Option<Color> {
        self.resigned
    }

    pub fn consecutive_passes(&self) -> u32 {
        self.consecutive_passes
    }

    /// Stones each colour has placed, `[black, white]`, setup included.
    pub fn stones_placed(&self) -> [u32; 2] {
        self.stones_placed
    }

    fn position_key(&self, stone_hash: u64, to_move: Color) -> u64 {
        match self.rules.ko {
            KoRule::SituationalSuperko if to_move == Color::White => stone_hash ^ zobrist::WHITE_TO_MOVE,
            _ => stone_hash,
        }
    }

    fn remember_position(&mut self) {
        if self.rules.ko != KoRule::Simple {
            let key = self.position_key(self.board.hash(), self.to_move);
            self.seen.insert(key);
        }
    }

    /// Checks a stone move at an on-board point without changing anything.
    #[inline]
    pub fn check_point(&self, p: Point, color: Color) -> Result<(), IllegalMove> {
        let hash = self.board.move_hash(p, color, self.rules.allow_suicide)?;
        if self.repeats(hash, color) {
            return Err(IllegalMove::Superko);
        }
        Ok(())
    }

    /// Whether a move of `color` that creates the stone position `hash`
    /// (from [`Board::move_hash`] or [`Board::move_outcome`]) repeats a
    /// position as the superko rule forbids. Lets a caller that already
    /// holds the hash check legality without computing it again.
    #[inline]
    pub fn repeats(&self, hash: u64, color: Color) -> bool {
        (self.may_repeat || self.rules.allow_suicide)
            && self.rules.ko != KoRule::Simple
            && self.seen.contains(self.position_key(hash, color.opponent()))
    }

    /// Whether `color` may make `mv` now. Never changes the game.
    pub fn check(&self, color: Color, mv: Move) -> Result<(), IllegalMove> {
        match mv {
            Move::Pass | Move::Resign => Ok(()),
            Move::Play(v) if !self.board.contains(v) => Err(IllegalMove::OffBoard),
            Move::Play(v) => self.check_point(self.board.point(v), color),
        }
    }

    pub fn is_legal(&self, color: Color, mv: Move) -> bool {
        self.check(color, mv).is_ok()
    }

    /// Makes a move for `color` if it is legal; the turn passes to the
    /// opponent. Returns the number of stones captured.
    pub fn play(&mut self, color: Color, mv: Move) -> Result<u32, IllegalMove> {
        self.check(color, mv)?;
        Ok(self.play_unchecked(color, mv))
    }

    /// Makes a move already known to be legal (e.g. just checked with
    /// [`Game::check_point`]).
    pub fn play_unchecked(&mut self, color: Color, mv: Move) -> u32 {
        match mv {
            Move::Play(v) => return self.play_point(color, self.board.point(v)),
            Move::Pass => {
                self.consecutive_passes += 1;
                self.board.pass();
            }
            Move::Resign => self.resigned = Some(color),
        }
        self.record(color, mv);
        // Only the side to move changed, which matters to situational
        // superko alone.
        if self.rules.ko == KoRule::SituationalSuperko {
            self.remember_position();
        }
        0
    }

    /// Plays a stone already known to be legal at an on-board point, like
    /// [`Game::play_unchecked`] but for samplers that draw board points
    /// (random playouts): no round trip through a [`Vertex`].
    pub fn play_point(&mut self, color: Color, p: Point) -> u32 {
        self.consecutive_passes = 0;
        self.stones_placed[color.index()] += 1;
        let captured = self.board.play(p, color);
        // A suicide, where allowed, leaves the point empty.
        self.may_repeat |= captured > 0 || self.board.cell(p) == Cell::Empty;
        self.record(color, Move::Play(self.board.vertex(p)));
        self.remember_position();
        captured
    }

    /// Hands the turn over and appends the move to the history.
    #[inline]
    fn record(&mut self, color: Color, mv: Move) {
        self.to_move = color.opponent();
        self.history.push(Event::Move(ColoredMove { color, mv }));
    }

    /// Places setup stones (`Some`) or clears points (`None`) without
    /// captures. Stones placed count towards [`Game::stones_placed`].
    pub fn setup(&mut self, changes: &[(Vertex, Option<Color>)]) -> Result<(), IllegalMove> {
        if changes.iter().any(|(v, _)| !self.board.contains(*v)) {
            return Err(IllegalMove::OffBoard);
        }
        // A string without a liberty is a position no game reaches, which
        // captures (only from one liberty to none) would never take off
        // and scoring would count as alive: refused, as KataGo refuses it.
        // Set up in place (playouts start from a setup: no copy of the
        // board on that path) and taken back on a refusal, which is rare.
        let points = self.setup_points(changes);
        let before: Vec<(Point, Option<Color>)> = points.iter().map(|&(p, _)| (p, self.board.color_at(p))).collect();
        let (ko, placed) = (self.board.ko_point(), self.stones_placed);
        self.count_placements(&points);
        self.board.set_points(&points);
        let board = &self.board;
        let mut touched = points.iter().flat_map(|&(p, _)| std::iter::once(p).chain(board.neighbors(p)));
        if let Some(p) = touched.find(|&p| board.color_at(p).is_some() && board.liberties(p) == 0) {
            let refused = IllegalMove::NoLiberty(board.vertex(p));
            self.board.set_points(&before);
            self.board.set_ko_point(ko);
            self.stones_placed = placed;
            return Err(refused);
        }
        self.may_repeat = true; // setup may clear or replace stones
        self.history.push(Event::Setup(changes.to_vec()));
        self.remember_position();
        Ok(())
    }

    fn setup_points(&self, changes: &[(Vertex, Option<Color>)]) -> Vec<(Point, Option<Color>)> {
        changes.iter().map(|&(v, c)| (self.board.point(v), c)).collect()
    }

    /// Counts setup `points` into [`Game::stones_placed`], before the board
    /// takes them.
    fn count_placements(&mut self, points: &[(Point, Option<Color>)]) {
        for &(p, c) in points {
            // Replacing a stone takes back its placement.
            if let Some(old) = self.board.color_at(p) {
                self.stones_placed[old.index()] -= 1;
            }
            if let Some(c) = c {
                self.stones_placed[c.index()] += 1;
            }
        }
    }

    fn apply_setup(&mut self, changes: &[(Vertex, Option<Color>)]) {
        let points = self.setup_points(changes);
        self.count_placements(&points);
        self.board.set_points(&points);
    }

    /// Takes back the last move (setup events before it stay). Returns the
    /// move, or `None` when no move is left to undo. Replays the game from
    /// its start: a few microseconds per move, and no snapshot per move to
    /// keep in memory.
    pub fn undo(&mut self) -> Option<ColoredMove> {
        let last = self.history.iter().rposition(|e| matches!(e, Event::Move(_)))?;
        if last != self.history.len() - 1 {
            return None; // setup after the last move: nothing to take back safely
        }
        let Some(Event::Move(undone)) = self.history.pop() else { unreachable!() };
        let events = std::mem::take(&mut self.history);
        self.replay_from_start(events, false).expect("moves played under these rules replay under them");
        self.to_move = undone.color;
        Some(undone)
    }

    /// Replays `events` from the start position, each move checked against
    /// the rules when `checked`.
    fn replay_from_start(&mut self, events: Vec<Event>, checked: bool) -> Result<(), ForbiddenMove> {
        self.board = (*self.start).clone();
        self.seen.clear();
        self.may_repeat = false;
        self.consecutive_passes = 0;
        self.stones_placed = [0; 2];
        self.resigned = None;
        self.to_move = Color::Black;
        self.remember_position();
        let mut number = 0;
        for e in events {
            match e {
                Event::Move(m) => {
                    number += 1;
                    if checked {
                        self.check(m.color, m.mv).map_err(|reason| ForbiddenMove {
                            number,
                            color: m.color,
                            name: m.mv.to_gtp(self.size()),
                            reason,
                        })?;
                    }
                    self.play_unchecked(m.color, m.mv);
                }
                Event::Setup(changes) => {
                    self.apply_setup(&changes);
                    self.may_repeat = true;
                    self.history.push(Event::Setup(changes));
                    self.remember_position();
                }
            }
        }
        Ok(())
    }
}

/// A move of a game that other rules forbid.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("move {number}, {color} {name}, is illegal under these rules: {reason}")]
pub struct ForbiddenMove {
    /// 1 for the first move.
    pub number: usize,
    pub color: Color,
    /// The move in GTP form.
    pub name: String,
    pub reason: IllegalMove,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str, size: usize) -> Move {
        Move::parse_gtp(s, size).unwrap()
    }

    #[test]
    fn rules_changed_mid_game_keep_the_position_and_see_its_history() {
        // A ko: Black's F5 takes White's E5; White may not take back at once.
        let mut g = Game::new(9, Rules::JAPANESE);
        let moves = ["D5", "E5", "E4", "F4", "E6", "F6", "A1", "G5", "F5"];
        for (i, m) in moves.iter().enumerate() {
            g.play(if i % 2 == 0 { Color::Black } else { Color::White }, v(m, 9)).unwrap();
        }
        let before = g.board().hash();
        g.set_rules(Rules::CHINESE).unwrap();
        assert_eq!((g.board().hash(), g.to_move(), g.rules().ko), (before, Color::White, KoRule::PositionalSuperko));
        assert_eq!(g.history().len(), moves.len());
        // After two passes the simple ko rule lets White take back, while
        // superko finds the position in what the replay remembered.
        let mut japanese = g.clone();
        japanese.set_rules(Rules::JAPANESE).unwrap();
        for game in [&mut g, &mut japanese] {
            game.play(Color::White, Move::Pass).unwrap();
            game.play(Color::Black, Move::Pass).unwrap();
        }
        assert_eq!(japanese.check(Color::White, v("E5", 9)), Ok(()));
        assert_eq!(g.check(Color::White, v("E5", 9)), Err(IllegalMove::Superko));
    }

    #[test]
    fn rules_that_forbid_a_move_of_the_game_are_refused_and_change_nothing() {
        // Black's A3 takes its own A1 and A2 off the board, a suicide
        // Tromp-Taylor allows.
        let mut g = Game::new(9, Rules::TROMP_TAYLOR);
        for (i, m) in ["A1", "B1", "A2", "B2", "E5", "B3", "E6", "A4", "A3"].iter().enumerate() {
            g.play(if i % 2 == 0 { Color::Black } else { Color::White }, v(m, 9)).unwrap();
        }
        let before = (g.board().hash(), g.to_move(), g.history().len());
        let refused = g.set_rules(Rules::JAPANESE).unwrap_err();
        assert_eq!((refused.number, refused.color, refused.name.as_str()), (9, Color::Black, "A3"));
        assert_eq!(refused.reason, IllegalMove::Suicide);
        assert_eq!(refused.to_string(), "move 9, black A3, is illegal under these rules: suicide");
        assert_eq!((g.board().hash(), g.to_move(), g.history().len()), before);
        assert_eq!(*g.rules(), Rules::TROMP_TAYLOR);
        // Rules that allow it are taken.
        g.set_rules(Rules::NEW_ZEALAND).unwrap();
        assert_eq!(*g.rules(), Rules::NEW_ZEALAND);
    }

    #[test]
    fn a_setup_leaving_a_string_without_a_liberty_is_refused_and_changes_nothing() {
        let at = |name: &str| Vertex::parse_gtp(name, 9).unwrap();
        let white = |name: &str| (at(name), Some(Color::White));
        let black = |name: &str| (at(name), Some(Color::Black));
        let mut g = Game::new(9, Rules::CHINESE);
        g.setup(&[white("A2"), white("B1"), white("J9")]).unwrap();
        let before = (g.board().hash(), g.stones_placed(), g.history().len());
        // Black's A1 would have no liberty; White's J9 none once Black's
        // H9 and J8, which have theirs, take its two.
        assert_eq!(g.setup(&[black("A1")]), Err(IllegalMove::NoLiberty(at("A1"))));
        assert_eq!(g.setup(&[black("H9"), black("J8")]), Err(IllegalMove::NoLiberty(at("J9"))));
        assert_eq!((g.board().hash(), g.stones_placed(), g.history().len()), before);
        // Emptying a point in the same setup gives the stone beside it one.
        g.setup(&[(at("B1"), None), black("A1")]).unwrap();
        assert_eq!(g.board().color_at(g.board().point(at("A1"))), Some(Color::Black));
        assert_eq!(g.stones_placed(), [1, 2]);
    }

    #[test]
    fn a_restarted_game_keeps_the_position_and_its_ko_ban() {
        // Black's F5 has just taken White's E5 in a ko.
        let mut g = Game::new(9, Rules::JAPANESE);
        for (i, m) in ["D5", "E5", "E4", "F4", "E6", "F6", "A1", "G5", "F5"].iter().enumerate() {
            g.play(if i % 2 == 0 { Color::Black } else { Color::White }, v(m, 9)).unwrap();
        }
        let r = g.restarted(Rules::CHINESE);
        assert_eq!(
            (r.board().hash(), r.to_move(), r.rules().ko),
            (g.board().hash(), Color::White, KoRule::PositionalSuperko)
        );
        assert_eq!(r.moves().count(), 0);
        assert_eq!(r.check(Color::White, v("E5", 9)), Err(IllegalMove::Ko));
        // The ban lasts one turn, as in the game it came from.
        let mut r = r;
        r.play(Color::White, v("J9", 9)).unwrap();
        r.play(Color::Black, v("J8", 9)).unwrap();
        assert_eq!(r.check(Color::White, v("E5", 9)), Ok(()));
    }

    #[test]
    fn undo_restores_position_and_turn() {
        let mut g = Game::new(9, Rules::CHINESE);
        let before = g.board().hash();
        g.play(Color::Black, v("E5", 9)).unwrap();
        g.play(Color::White, v("E6", 9)).unwrap();
        assert_eq!(g.undo().unwrap().mv, v("E6", 9));
        assert_eq!(g.to_move(), Color::White);
        assert_eq!(g.undo().unwrap().mv, v("E5", 9));
        assert_eq!(g.board().hash(), before);
        assert_eq!(g.to_move(), Color::Black);
        assert!(g.undo().is_none());
    }
}
