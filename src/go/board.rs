//! The board: stones, strings ("chains") and their exact liberties.
//!
//! Like KataGo's `Board`, this type knows only the position, the simple-ko
//! point and the capture counts; move history, superko and scoring live in
//! [`crate::go::Game`] and [`crate::go::scoring`].
//!
//! Layout: points are indices into a padded one-dimensional array with one
//! border column shared by neighbouring rows and a border row above and
//! below, so the four neighbours of any on-board point are `p ± 1` and
//! `p ± stride` with no bounds tests.
//!
//! Every string keeps its liberties as a bit set over point indices, so the
//! liberty count is always exact (the seed project kept liberty counts that
//! went stale for strings away from the last move). Merging strings is an OR
//! of bit sets; a capture adds the freed points to the neighbouring strings.

pub use super::vertex::MAX_POINTS;
use super::zobrist;
use super::{Color, Vertex, MAX_SIZE};
use thiserror::Error;

mod undo;
pub use undo::Undo;

/// `VERTEX_OF[size][p]`: the vertex of padded point `p` on a board of
/// `size` (meaningless for border points). Built at compile time.
static VERTEX_OF: [[Vertex; MAX_POINTS]; MAX_SIZE + 1] = {
    let mut table = [[Vertex { x: 0, y: 0 }; MAX_POINTS]; MAX_SIZE + 1];
    let mut size = 2;
    while size <= MAX_SIZE {
        let stride = size + 1;
        let mut p = stride;
        while p < (size + 1) * stride {
            let x = p % stride;
            if x >= 1 {
                table[size][p] = Vertex { x: (x - 1) as u8, y: (p / stride - 1) as u8 };
            }
            p += 1;
        }
        size += 1;
    }
    table
};

/// A point as an index into the board's padded array. Only meaningful for
/// the board (size) that produced it: convert with [`Board::point`] and
/// [`Board::vertex`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point(pub u16);

impl Point {
    #[inline]
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// The on-board points of a board, row by row over the padded layout (a
/// plain counter with a skip per row: a `flat_map` of rows kept its inner
/// state in memory, and feature encoding spent a tenth of its time there).
#[derive(Clone, Debug)]
pub struct Points {
    next: usize,
    row_end: usize,
    end: usize,
    stride: usize,
}

impl Iterator for Points {
    type Item = Point;

    #[inline]
    fn next(&mut self) -> Option<Point> {
        if self.next == self.row_end {
            if self.row_end == self.end {
                return None;
            }
            // Over the border point that ends the row and starts the next.
            self.next += 1;
            self.row_end += self.stride;
        }
        let p = Point(self.next as u16);
        self.next += 1;
        Some(p)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let size = self.stride - 1;
        let rows_after = (self.end - self.row_end) / self.stride;
        let n = self.row_end - self.next + rows_after * size;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Points {}

/// What a point of the padded array holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cell {
    Black = 0,
    White = 1,
    Empty = 2,
    Border = 3,
}

impl Cell {
    #[inline]
    fn stone(color: Color) -> Cell {
        match color {
            Color::Black => Cell::Black,
            Color::White => Cell::White,
        }
    }

    /// The colour of a stone, `None` for empty and border points.
    #[inline]
    pub fn color(self) -> Option<Color> {
        match self {
            Cell::Black => Some(Color::Black),
            Cell::White => Some(Color::White),
            _ => None,
        }
    }
}

/// Why a move may not be played.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum IllegalMove {
    #[error("point is not on the board")]
    OffBoard,
    #[error("point is occupied")]
    Occupied,
    #[error("retakes a ko immediately")]
    Ko,
    #[error("repeats an earlier position (superko)")]
    Superko,
    #[error("suicide")]
    Suicide,
    /// Setup only: stones placed so that a string at this point has no
    /// liberty.
    #[error("leaves the string at {0} without a liberty: no game reaches that position")]
    NoLiberty(Vertex),
}

/// The liberty bit sets of all strings, one run of `words` words per root
/// point, sized to the board in use so a 19×19 set is 7 words, not the 11
/// of the largest board: less to OR, count and keep in cache. `words` is
/// one of [`LibSets::WIDTHS`], so that merging (the one loop over whole
/// sets in play) runs an unrolled copy for a width known at compile time:
/// the loop over a run-time width cost two bounds tests per word and a
/// mispredicted exit per merge.
///
/// Invariant: the run of every point that is not the root of a string is
/// empty. A new stone's set then needs no clearing, and a merge empties the
/// set it absorbs as it reads it (a captured string's set is already empty:
/// it had no liberties). Clearing and copying a run of dynamic length were
/// calls to `memset` and `memcpy` on every move of a playout.
#[derive(Clone)]
struct LibSets {
    /// Words per set: enough bits for every padded point of the board.
    words: usize,
    /// `words` words per padded point; only roots' runs may be non-empty.
    bits: Vec<u64>,
}

impl LibSets {
    /// The set widths in use: 2 words up to 9×9, 4 up to 13×13, 7 up to
    /// 19×19 and 11 for the largest boards.
    const WIDTHS: [usize; 4] = [2, 4, 7, MAX_POINTS.div_ceil(64)];

    fn new(points: usize) -> LibSets {
        let words = *Self::WIDTHS.iter().find(|&&w| w * 64 >= points).expect("the widest set holds every board");
        LibSets { words, bits: vec![0; points * words] }
    }
    #[inline]
    fn set(&self, root: usize) -> &[u64] {
        &self.bits[root * self.words..(root + 1) * self.words]
    }
    /// Empties every set.
    fn clear_all(&mut self) {
        self.bits.fill(0);
    }
    /// Adds `p`; true if it was not there.
    #[inline]
    fn insert(&mut self, root: usize, p: usize) -> bool {
        let w = &mut self.bits[root * self.words + (p >> 6)];
        let b = 1u64 << (p & 63);
        let new = *w & b == 0;
        *w |= b;
        new
    }
    /// Adds each point `ps[i]` whose bit `i` of `mask` is set, without
    /// branching on the mask, to the (empty) set of a new string; one slice
    /// of the set, not one bounds test and address computation per point.
    #[inline]
    fn insert_masked(&mut self, root: usize, ps: [usize; 4], mask: u16) {
        let set = &mut self.bits[root * self.words..(root + 1) * self.words];
        for (i, p) in ps.into_iter().enumerate() {
            set[p >> 6] |= ((mask >> i) as u64 & 1) << (p & 63);
        }
    }

    /// Removes `p`; true if it was there.
    #[inline]
    fn remove(&mut self, root: usize, p: usize) -> bool {
        let w = &mut self.bits[root * self.words + (p >> 6)];
        let b = 1u64 << (p & 63);
        let had = *w & b != 0;
        *w &= !b;
        had
    }
    /// `dst |= src` and empties `src` (which stops being a root), returning
    /// the size of the union.
    #[inline]
    fn absorb(&mut self, dst: usize, src: usize) -> u16 {
        // One branch on the width, the same on every move of a game.
        match self.words {
            2 => self.absorb_fixed::<2>(dst, src),
            4 => self.absorb_fixed::<4>(dst, src),
            7 => self.absorb_fixed::<7>(dst, src),
            _ => self.absorb_fixed::<{ Self::WIDTHS[3] }>(dst, src),
        }
    }
    /// [`LibSets::absorb`] for sets of `W == self.words` words.
    #[inline]
    fn absorb_fixed<const W: usize>(&mut self, dst: usize, src: usize) -> u16 {
        // Checked: a wrong width would read and clear other strings' sets.
        assert_eq!(W, self.words);
        let from: [u64; W] = self.bits[src * W..(src + 1) * W].try_into().unwrap();
        self.bits[src * W..(src + 1) * W].fill(0);
        let to: &mut [u64; W] = (&mut self.bits[dst * W..(dst + 1) * W]).try_into().unwrap();
        let mut count = 0;
        for (t, f) in to.iter_mut().zip(from) {
            *t |= f;
            count += t.count_ones() as u16;
        }
        count
    }
    fn count(&self, root: usize) -> u16 {
        self.set(root).iter().map(|w| w.count_ones() as u16).sum()
    }
    /// The lowest point in the set.
    fn first(&self, root: usize) -> Option<usize> {
        self.set(root).iter().enumerate().find(|(_, w)| **w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }
}

/// What a legal stone move would leave: see [`Board::move_outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoveOutcome {
    /// Liberties of the string holding the new stone.
    pub liberties: u32,
    /// Stones of that string.
    pub stones: u32,
    /// Opponent stones captured.
    pub captured: u32,
    /// The stone hash of the position it creates (what superko compares).
    pub hash: u64,
}

/// A string of connected stones of one colour, stored at its root point.
#[derive(Clone, Copy)]
struct Chain {
    /// Number of liberties (the size of its set in `Board::libs`), kept up
    /// to date so atari tests are one comparison.
    lib_count: u16,
    /// Number of stones.
    size: u16,
    /// XOR of the Zobrist keys of its stones: removing the whole string from
    /// a position hash is one XOR, which makes superko tests O(1).
    hash: u64,
}

impl Chain {
    const NONE: Chain = Chain { lib_count: 0, size: 0, hash: 0 };
}

/// A Go position of side 2..=25.
#[derive(Clone)]
pub struct Board {
    /// Side length.
    size: usize,
    /// Distance between vertically adjacent points: `size + 1`.
    stride: usize,
    /// Index offsets of the four directions (up, left, right, down), as
    /// wrapping additions.
    offsets: [usize; 4],
    // The per-point arrays below are inline, sized for the largest board,
    // rather than `Vec`s: a store into a `Vec`'s buffer might, for all the
    // compiler knows, change any field of the board, so `play` reloaded
    // buffer addresses, lengths and `offsets` after nearly every store.
    // Stores into an array field of `self` provably touch that field only.
    /// Content of every padded point (border beyond this board's points).
    cells: [Cell; MAX_POINTS],
    /// For every point, which of its four neighbours (bit `d` for
    /// direction `d`: up, left, right, down) are black, white, empty and
    /// border: four bits per kind, at `4 * (Cell as u8)`. The eye test and
    /// the common legality case become one load, and the neighbour loops
    /// of `play` visit only the neighbours of the kind they need: random
    /// playouts were bound by mispredicted branches in those loops.
    nbr: [u16; MAX_POINTS],
    /// For a stone, the root point of its chain (index into `chains`).
    chain_of: [u16; MAX_POINTS],
    /// For a stone, the next stone of its chain (a circular list).
    next_stone: [u16; MAX_POINTS],
    /// Chain data, valid at root points only.
    chains: [Chain; MAX_POINTS],
    /// Liberty sets of the chains, valid at root points only.
    libs: LibSets,
    /// Every empty on-board point, in no particular order.
    empty: Vec<u16>,
    /// For an empty point, its position in `empty`.
    empty_pos: [u16; MAX_POINTS],
    /// Zobrist hash of the stones (side to move not included).
    hash: u64,
    /// The point the given colour may not play at because it would retake a
    /// ko at once (`None` if there is no such point).
    ko: Option<(Point, Color)>,
    /// Stones captured by Black and by White (prisoners each has taken).
    captures: [u32; 2],
}

impl Board {
    /// An empty board. Panics if `size` is not in `2..=25`; check with
    /// [`Board::valid_size`] first when the size comes from input.
    pub fn new(size: usize) -> Board {
        assert!(Self::valid_size(size), "board size {size} is not in 2..={MAX_SIZE}");
        let stride = size + 1;
        let len = (size + 2) * stride + 1;
        let mut board = Board {
            size,
            stride,
            offsets: [stride.wrapping_neg(), usize::MAX, 1, stride],
            cells: [Cell::Border; MAX_POINTS],
            nbr: [0; MAX_POINTS],
            chain_of: [0; MAX_POINTS],
            next_stone: [0; MAX_POINTS],
            chains: [Chain::NONE; MAX_POINTS],
            libs: LibSets::new(len),
            empty: Vec::with_capacity(size * size),
            empty_pos: [0; MAX_POINTS],
            hash: 0,
            ko: None,
            captures: [0; 2],
        };
        for y in 0..size {
            for x in 0..size {
                let p = board.point(Vertex::new(x, y)).idx();
                board.cells[p] = Cell::Empty;
                board.empty_pos[p] = board.empty.len() as u16;
                board.empty.push(p as u16);
            }
        }
        board.count_neighbours();
        board
    }

    /// Makes this board a copy of `other`, like `*self = other.clone()`, but
    /// in the buffers this board already has.
    pub fn copy_from(&mut self, other: &Board) {
        // Destructured so that a new field cannot be forgotten here.
        let Board {
            size,
            stride,
            offsets,
            cells,
            nbr,
            chain_of,
            next_stone,
            chains,
            libs,
            empty,
            empty_pos,
            hash,
            ko,
            captures,
        } = other;
        self.size = *size;
        self.stride = *stride;
        self.offsets = *offsets;
        self.cells = *cells;
        self.nbr = *nbr;
        self.chain_of = *chain_of;
        self.next_stone = *next_stone;
        self.chains = *chains;
        self.libs.words = libs.words;
        self.libs.bits.clone_from(&libs.bits);
        self.empty.clone_from(empty);
        self.empty_pos = *empty_pos;
        self.hash = *hash;
        self.ko = *ko;
        self.captures = *captures;
    }

    /// Recomputes `nbr` from `cells`.
    fn count_neighbours(&mut self) {
        let points: Vec<Point> = self.points().collect();
        for p in points {
            let mut mask = 0;
            for (d, n) in self.neighbors(p).into_iter().enumerate() {
                mask |= 1 << (4 * self.cells[n.idx()] as u16 + d as u16);
            }
            self.nbr[p.idx()] = mask;
        }
    }

    /// The directions (bits 0–3) in which `p` has a neighbour holding `cell`.
    #[inline]
    fn dirs(&self, p: usize, cell: Cell) -> u16 {
        (self.nbr[p] >> (4 * cell as u16)) & 0xf
    }

    /// The neighbour of `p` in direction `d` (0 up, 1 left, 2 right, 3 down).
    #[inline]
    fn step(&self, p: usize, d: u32) -> usize {
        // A table, not a `match`: the direction is data, and a branch on
        // it is mispredicted.
        p.wrapping_add(self.offsets[d as usize])
    }

    /// Records in its neighbours' masks that `p` changed from `from` to `to`.
    #[inline]
    fn update_neighbours(&mut self, p: usize, from: Cell, to: Cell) {
        for d in 0..4u16 {
            // Seen from the neighbour, `p` lies in the opposite direction.
            let back = 3 - d;
            let n = self.step(p, d as u32);
            self.nbr[n] ^= (1 << (4 * from as u16 + back)) | (1 << (4 * to as u16 + back));
        }
    }

    /// Whether go-train supports a board of this side.
    pub fn valid_size(size: usize) -> bool {
        (2..=MAX_SIZE).contains(&size)
    }

    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// The padded index of a vertex (which must be on this board).
    #[inline]
    pub fn point(&self, v: Vertex) -> Point {
        debug_assert!((v.x as usize) < self.size && (v.y as usize) < self.size);
        Point(((v.y as usize + 1) * self.stride + v.x as usize + 1) as u16)
    }

    /// The vertex of an on-board point.
    #[inline]
    pub fn vertex(&self, p: Point) -> Vertex {
        // A table instead of `p / stride`: a division per move showed in
        // playout profiles.
        VERTEX_OF[self.size][p.idx()]
    }

    /// Whether a vertex lies on this board.
    #[inline]
    pub fn contains(&self, v: Vertex) -> bool {
        (v.x as usize) < self.size && (v.y as usize) < self.size
    }

    /// All on-board points, row by row from the top.
    pub fn points(&self) -> Points {
        let (first, size, stride) = (self.stride + 1, self.size, self.stride);
        let end = if size == 0 { first } else { first + (size - 1) * stride + size };
        Points { next: first, row_end: first + size, end, stride }
    }

    #[inline]
    pub fn cell(&self, p: Point) -> Cell {
        self.cells[p.idx()]
    }

    /// The colour of the stone at `p`, if any.
    #[inline]
    pub fn color_at(&self, p: Point) -> Option<Color> {
        self.cells[p.idx()].color()
    }

    /// The four orthogonal neighbours (some may be border points).
    #[inline]
    pub fn neighbors(&self, p: Point) -> [Point; 4] {
        let (p, s) = (p.0, self.stride as u16);
        [Point(p - s), Point(p - 1), Point(p + 1), Point(p + s)]
    }

    /// The four diagonal neighbours (some may be border points).
    #[inline]
    fn diagonals(&self, p: Point) -> [Point; 4] {
        let (p, s) = (p.0, self.stride as u16);
        [Point(p - s - 1), Point(p - s + 1), Point(p + s - 1), Point(p + s + 1)]
    }

    /// Exact number of liberties of the string at `p` (0 for an empty point).
    #[inline]
    pub fn liberties(&self, p: Point) -> usize {
        if self.cells[p.idx()].color().is_none() {
            return 0;
        }
        self.chains[self.chain_of[p.idx()] as usize].lib_count as usize
    }

    /// What `p` holds and, for a stone, its string's liberties; for any
    /// other point the count is meaningless (a stale string's). Reading it
    /// without asking what the point holds first keeps feature encoding
    /// free of a branch that random stone patterns mispredict.
    #[inline]
    pub fn cell_and_liberties(&self, p: Point) -> (Cell, usize) {
        (self.cells[p.idx()], self.chains[self.chain_of[p.idx()] as usize].lib_count as usize)
    }

    /// Number of stones of the string at `p` (0 for an empty point).
    pub fn string_size(&self, p: Point) -> usize {
        if self.cells[p.idx()].color().is_none() {
            return 0;
        }
        self.chains[self.chain_of[p.idx()] as usize].size as usize
    }

    /// The stones of the string at `p` (empty for an empty point).
    pub fn string_stones(&self, p: Point) -> Vec<Point> {
        if self.cells[p.idx()].color().is_none() {
            return Vec::new();
        }
        let mut out = vec![p];
        let mut s = self.next_stone[p.idx()];
        while s != p.0 {
            out.push(Point(s));
            s = self.next_stone[s as usize];
        }
        out
    }

    /// Whether the stones at `a` and `b` belong to the same string.
    pub fn same_string(&self, a: Point, b: Point) -> bool {
        self.color_at(a).is_some()
            && self.cells[a.idx()] == self.cells[b.idx()]
            && self.chain_of[a.idx()] == self.chain_of[b.idx()]
    }

    /// Zobrist hash of the stones on the board.
    #[inline]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The point `color` may not play at this turn because of simple ko.
    pub fn ko_point(&self) -> Option<(Point, Color)> {
        self.ko
    }

    /// Bans `color` from playing at the point of `ko` this turn, as if a ko
    /// had just been taken: how a position set up from another board keeps
    /// that board's ban ([`crate::go::Game::restarted`]).
    pub(super) fn set_ko_point(&mut self, ko: Option<(Point, Color)>) {
        self.ko = ko;
    }

    /// Stones of the opponent that `color` has captured.
    pub fn captures(&self, color: Color) -> u32 {
        self.captures[color.index()]
    }

    /// Adds prisoners taken outside of play (the SGF and GTP bookkeeping of
    /// a game loaded with known captures). Rarely needed.
    pub fn add_captures(&mut self, color: Color, n: u32) {
        self.captures[color.index()] += n;
    }

    /// Every empty on-board point, in no particular order.
    #[inline]
    pub fn empty_points(&self) -> impl ExactSizeIterator<Item = Point> + '_ {
        self.empty.iter().map(|&p| Point(p))
    }

    /// Number of empty on-board points.
    #[inline]
    pub fn empty_count(&self) -> usize {
        self.empty.len()
    }

    /// The `i`-th empty point (`i < empty_count()`), in the order of
    /// [`Board::empty_points`]: lets samplers draw without copying the list.
    #[inline]
    pub fn empty_point(&self, i: usize) -> Point {
        Point(self.empty[i])
    }

    /// Number of stones of each colour on the board, `[black, white]`.
    pub fn stone_counts(&self) -> [u32; 2] {
        let mut n = [0; 2];
        for p in self.points() {
            if let Some(c) = self.color_at(p) {
                n[c.index()] += 1;
            }
        }
        n
    }

    /// Checks whether `color` may play at `p` under simple ko, and under the
    /// suicide rule unless `allow_suicide`. Superko is the game's business
    /// ([`crate::go::Game::check`]). Never changes the board.
    pub fn check_move(&self, p: Point, color: Color, allow_suicide: bool) -> Result<(), IllegalMove> {
        self.move_hash(p, color, allow_suicide).map(|_| ())
    }

    /// Whether a stone of `color` at the empty point `p` would be left
    /// without liberties after its captures.
    pub fn is_suicide(&self, p: Point, color: Color) -> bool {
        self.move_hash(p, color, false) == Err(IllegalMove::Suicide)
    }

    /// Checks a stone move like [`Board::check_move`] and, when it is legal,
    /// returns the stone hash of the position it would create (what superko
    /// compares) without playing it. One pass over the four neighbours:
    /// this is the inner loop of random playouts.
    #[inline]
    pub fn move_hash(&self, p: Point, color: Color, allow_suicide: bool) -> Result<u64, IllegalMove> {
        match self.cells.get(p.idx()) {
            Some(Cell::Empty) => {}
            Some(Cell::Black | Cell::White) => return Err(IllegalMove::Occupied),
            _ => return Err(IllegalMove::OffBoard),
        }
        if self.ko == Some((p, color)) {
            return Err(IllegalMove::Ko);
        }
        let (pi, own) = (p.idx(), Cell::stone(color));
        let mut hash = self.hash ^ zobrist::STONE[color.index()][pi];
        // The liberty counts of all four neighbours' strings, without a
        // branch per neighbour: which neighbours are stones is data, and a
        // loop over them mispredicted about once a call. Counts read for
        // empty and border neighbours are meaningless and masked out below.
        let (mut in_atari, mut free) = (0u16, 0u16);
        for d in 0..4 {
            let libs = self.chains[self.chain_of[self.step(pi, d)] as usize].lib_count;
            in_atari |= ((libs == 1) as u16) << d;
            free |= ((libs > 1) as u16) << d;
        }
        // Filling an enemy string's last liberty captures it (rare).
        let captures = in_atari & self.dirs(pi, Cell::stone(color.opponent()));
        if captures != 0 {
            let (captured, n) = self.neighbour_roots(pi, captures);
            for &root in &captured[..n] {
                hash ^= self.chains[root as usize].hash;
            }
        }
        // A liberty of its own, a capture, or a friendly string with
        // another liberty to share.
        if self.dirs(pi, Cell::Empty) | captures | (free & self.dirs(pi, own)) != 0 {
            return Ok(hash);
        }
        if !allow_suicide {
            return Err(IllegalMove::Suicide);
        }
        // Suicide removes the new stone and the friendly strings it joins.
        let mut hash = self.hash;
        let (joined, n) = self.neighbour_roots(pi, self.dirs(pi, own));
        for &root in &joined[..n] {
            hash ^= self.chains[root as usize].hash;
        }
        Ok(hash)
    }

    /// Whether `p` is an eye of `color` that a sensible player never fills:
    /// all four neighbours are `color` or off the board, and the opponent
    /// holds at most one diagonal (none on the edge or in the corner).
    #[inline]
    pub fn is_eye(&self, p: Point, color: Color) -> bool {
        if self.dirs(p.idx(), Cell::stone(color)) | self.dirs(p.idx(), Cell::Border) != 0xf {
            return false;
        }
        // Counted without branches: the outcome is data.
        let opp = Cell::stone(color.opponent());
        let (mut bad, mut border) = (0u8, 0u8);
        for d in self.diagonals(p) {
            let c = self.cells[d.idx()];
            bad += (c == opp) as u8;
            border |= (c == Cell::Border) as u8;
        }
        // No enemy diagonal, or one away from the edge.
        bad + border <= 1
    }

    /// Plays a stone of `color` at `p`, capturing as the rules say, and
    /// returns the number of stones captured. The move must have passed
    /// [`Board::check_move`] (a suicide, if allowed, removes the string).
    pub fn play(&mut self, p: Point, color: Color) -> u32 {
        self.play_joining(p, color, |_, _| {})
    }

    /// [`Board::play`], telling `joined` each pair of strings it joins
    /// (the root kept, the root gone), in order.
    #[inline(always)]
    fn play_joining(&mut self, p: Point, color: Color, mut joined: impl FnMut(usize, usize)) -> u32 {
        debug_assert_eq!(self.cells[p.idx()], Cell::Empty, "play on occupied point");
        let pi = p.idx();
        let own = Cell::stone(color);
        let opp = Cell::stone(color.opponent());
        let key = zobrist::STONE[color.index()][pi];
        let (own_dirs, opp_dirs, empty_dirs) = (self.dirs(pi, own), self.dirs(pi, opp), self.dirs(pi, Cell::Empty));
        self.hash ^= key;
        self.cells[pi] = own;
        self.update_neighbours(pi, Cell::Empty, own);
        self.remove_empty(pi);

        // A new one-stone string, then merged with its friendly neighbours.
        self.chain_of[pi] = p.0;
        self.next_stone[pi] = p.0;
        // Unconditional: a branch per empty neighbour is mispredicted.
        self.libs.insert_masked(pi, [0, 1, 2, 3].map(|d| self.step(pi, d)), empty_dirs);
        self.chains[pi] = Chain { lib_count: empty_dirs.count_ones() as u16, size: 1, hash: key };
        let mut root = pi;
        let mut dirs = own_dirs;
        while dirs != 0 {
            let other = self.chain_of[self.step(pi, dirs.trailing_zeros())] as usize;
            dirs &= dirs - 1;
            if other != root {
                let kept = self.merge(root, other);
                joined(kept, root ^ other ^ kept);
                root = kept;
            }
        }
        // `merge` counted the union, where the new stone's point still was.
        if own_dirs != 0 && self.libs.remove(root, pi) {
            self.chains[root].lib_count -= 1;
        }

        // Take the liberty from enemy neighbours; capture those left without.
        let mut captured = 0;
        let mut last_captured = 0;
        let mut dirs = opp_dirs;
        while dirs != 0 {
            let n = self.step(pi, dirs.trailing_zeros());
            dirs &= dirs - 1;
            // A string captured through an earlier direction is empty now.
            if self.cells[n] != opp {
                continue;
            }
            let r = self.chain_of[n] as usize;
            if self.libs.remove(r, pi) {
                self.chains[r].lib_count -= 1;
                if self.chains[r].lib_count == 0 {
                    captured += self.remove_string(r);
                    last_captured = n;
                }
            }
        }
        self.captures[color.index()] += captured;

        let root = self.chain_of[pi] as usize;
        let mine = self.chains[root];
        self.ko = None;
        if mine.lib_count == 0 {
            // Suicide, where the rules allow it: the opponent takes the stones.
            let n = self.remove_string(root);
            self.captures[color.opponent().index()] += n;
        } else if captured == 1 && mine.size == 1 && mine.lib_count == 1 {
            self.ko = Some((Point(last_captured as u16), color.opponent()));
        }
        captured
    }

    /// A pass: only lifts the ko ban.
    pub fn pass(&mut self) {
        self.ko = None;
    }

    /// Puts a setup stone (SGF `AB`/`AW`) or clears a point (`AE`) without
    /// capturing anything, as setup properties require. Strings are rebuilt
    /// afterwards: setup is rare and a full rebuild keeps one code path exact.
    pub fn set_point(&mut self, p: Point, color: Option<Color>) {
        self.set_points(&[(p, color)]);
    }

    /// Several setup changes at once, with one rebuild.
    pub fn set_points(&mut self, changes: &[(Point, Option<Color>)]) {
        for &(p, color) in changes {
            debug_assert_ne!(self.cells[p.idx()], Cell::Border);
            self.cells[p.idx()] = color.map(Cell::stone).unwrap_or(Cell::Empty);
        }
        self.ko = None;
        self.rebuild();
    }

    /// Recomputes strings, liberties, the empty list and the hash from cells.
    fn rebuild(&mut self) {
        self.count_neighbours();
        self.empty.clear();
        self.libs.clear_all();
        self.hash = 0;
        let points: Vec<Point> = self.points().collect();
        for &p in &points {
            let i = p.idx();
            match self.cells[i].color() {
                None => {
                    self.empty_pos[i] = self.empty.len() as u16;
                    self.empty.push(p.0);
                }
                Some(c) => {
                    self.hash ^= zobrist::STONE[c.index()][i];
                    self.chain_of[i] = u16::MAX;
                }
            }
        }
        for &p in &points {
            let i = p.idx();
            if self.cells[i].color().is_none() || self.chain_of[i] != u16::MAX {
                continue;
            }
            // Flood fill the string from its first stone, threading the list.
            let cell = self.cells[i];
            let color = cell.color().unwrap();
            let mut chain = Chain::NONE;
            let mut stack = vec![i];
            self.chain_of[i] = p.0;
            let mut prev = i;
            while let Some(s) = stack.pop() {
                chain.size += 1;
                chain.hash ^= zobrist::STONE[color.index()][s];
                self.next_stone[prev] = s as u16;
                prev = s;
                for n in self.neighbors(Point(s as u16)) {
                    let n = n.idx();
                    if self.cells[n] == Cell::Empty {
                        self.libs.insert(i, n);
                    } else if self.cells[n] == cell && self.chain_of[n] == u16::MAX {
                        self.chain_of[n] = p.0;
                        stack.push(n);
                    }
                }
            }
            self.next_stone[prev] = p.0;
            chain.lib_count = self.libs.count(i);
            self.chains[i] = chain;
        }
    }

    /// Joins two strings of one colour; returns the root kept. The smaller
    /// string is relabelled, so relabelling is O(n log n) over a game.
    fn merge(&mut self, a: usize, b: usize) -> usize {
        let (keep, gone) = if self.chains[a].size >= self.chains[b].size { (a, b) } else { (b, a) };
        let mut s = gone;
        loop {
            self.chain_of[s] = keep as u16;
            s = self.next_stone[s] as usize;
            if s == gone {
                break;
            }
        }
        self.next_stone.swap(keep, gone);
        let g = self.chains[gone];
        let count = self.libs.absorb(keep, gone);
        let k = &mut self.chains[keep];
        k.lib_count = count;
        k.size += g.size;
        k.hash ^= g.hash;
        keep
    }

    /// Lifts the string rooted at `root` off the board, giving its points as
    /// liberties to the strings around; returns the number of stones.
    fn remove_string(&mut self, root: usize) -> u32 {
        let color = self.cells[root].color().expect("string root holds a stone");
        self.hash ^= self.chains[root].hash;
        let mut s = root;
        let mut n_removed = 0;
        loop {
            self.cells[s] = Cell::Empty;
            self.update_neighbours(s, Cell::stone(color), Cell::Empty);
            self.add_empty(s);
            n_removed += 1;
            s = self.next_stone[s] as usize;
            if s == root {
                break;
            }
        }
        // Second pass once all are empty, so stones of the removed string
        // are never mistaken for neighbours.
        let other = Cell::stone(color.opponent());
        loop {
            let mut dirs = self.dirs(s, other);
            while dirs != 0 {
                let r = self.chain_of[self.step(s, dirs.trailing_zeros())] as usize;
                dirs &= dirs - 1;
                if self.libs.insert(r, s) {
                    self.chains[r].lib_count += 1;
                }
            }
            s = self.next_stone[s] as usize;
            if s == root {
                break;
            }
        }
        n_removed
    }

    #[inline]
    fn remove_empty(&mut self, p: usize) {
        let pos = self.empty_pos[p] as usize;
        let last = self.empty.pop().expect("an empty point to fill");
        if pos < self.empty.len() {
            self.empty[pos] = last;
            self.empty_pos[last as usize] = pos as u16;
        }
    }

    #[inline]
    fn add_empty(&mut self, p: usize) {
        self.empty_pos[p] = self.empty.len() as u16;
        self.empty.push(p as u16);
    }

    /// The liberties of the string at `p`, in board order (none for an
    /// empty point).
    pub fn liberty_points(&self, p: Point) -> impl Iterator<Item = Point> + '_ {
        let set: &[u64] =
            if self.cells[p.idx()].color().is_some() { self.libs.set(self.chain_of[p.idx()] as usize) } else { &[] };
        set.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                (bits != 0).then(|| {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    Point((w * 64 + b) as u16)
                })
            })
        })
    }

    /// What a stone of `color` at `p` would leave on the board, without
    /// playing it; `None` when the move is illegal (occupied, simple ko or
    /// suicide). The input features ask this of every empty point: a union of
    /// liberty sets, never a copy of the board (a copy is tens of kilobytes,
    /// and copies were half of `prepare --features extended`'s time).
    pub fn move_outcome(&self, p: Point, color: Color) -> Option<MoveOutcome> {
        let hash = self.move_hash(p, color, false).ok()?;
        let pi = p.idx();
        let own = Cell::stone(color);
        let empty = self.dirs(pi, Cell::Empty);
        let (joined, n_joined) = self.neighbour_roots(pi, self.dirs(pi, own));
        let joined = &joined[..n_joined];
        let (enemies, n_enemies) = self.neighbour_roots(pi, self.dirs(pi, Cell::stone(color.opponent())));
        let enemies = &enemies[..n_enemies];
        // Most moves capture nothing and join one string at most: their
        // liberties are counted without a union of sets, whose zeroing,
        // filling and counting cost `prepare --features extended` about a
        // tenth of its time (docs/results/benchmarks.md, Prepare).
        if n_joined <= 1 && enemies.iter().all(|&r| self.chains[r as usize].lib_count > 1) {
            let Some(&root) = joined.first() else {
                return Some(MoveOutcome { liberties: empty.count_ones(), stones: 1, captured: 0, hash });
            };
            let (chain, set) = (&self.chains[root as usize], self.libs.set(root as usize));
            // `p` is one of the string's liberties; new ones are the empty
            // neighbours it does not have yet.
            let (mut dirs, mut new) = (empty, 0);
            while dirs != 0 {
                let n = self.step(pi, dirs.trailing_zeros());
                dirs &= dirs - 1;
                new += (set[n >> 6] >> (n & 63) & 1 == 0) as u32;
            }
            let liberties = chain.lib_count as u32 - 1 + new;
            return Some(MoveOutcome { liberties, stones: chain.size as u32 + 1, captured: 0, hash });
        }
        // The new string's liberties: the point's empty neighbours and the
        // liberties of the friendly strings it joins, as one bit set.
        let mut union = [0u64; LibSets::WIDTHS[3]];
        let mut dirs = empty;
        while dirs != 0 {
            let n = self.step(pi, dirs.trailing_zeros());
            dirs &= dirs - 1;
            union[n >> 6] |= 1 << (n & 63);
        }
        let mut stones = 1;
        for &root in joined {
            stones += self.chains[root as usize].size as u32;
            for (u, &w) in union.iter_mut().zip(self.libs.set(root as usize)) {
                *u |= w;
            }
        }
        // Enemy strings whose last liberty this is are captured: each of
        // their stones next to the new string becomes a liberty.
        let mut captured = 0;
        for &root in enemies.iter().filter(|&&r| self.chains[r as usize].lib_count == 1) {
            captured += self.chains[root as usize].size as u32;
            let mut stone = root as usize;
            loop {
                let touches = (0..4).any(|d| {
                    let q = self.step(stone, d);
                    q == pi || (self.cells[q] == own && joined.contains(&self.chain_of[q]))
                });
                if touches {
                    union[stone >> 6] |= 1 << (stone & 63);
                }
                stone = self.next_stone[stone] as usize;
                if stone == root as usize {
                    break;
                }
            }
        }
        union[pi >> 6] &= !(1 << (pi & 63));
        let liberties = union[..self.libs.words].iter().map(|w| w.count_ones()).sum();
        Some(MoveOutcome { liberties, stones, captured, hash })
    }

    /// The distinct strings (their roots) among the neighbours of `pi` in
    /// the directions `dirs`, and how many there are.
    #[inline]
    fn neighbour_roots(&self, pi: usize, mut dirs: u16) -> ([u16; 4], usize) {
        let (mut roots, mut n) = ([u16::MAX; 4], 0);
        while dirs != 0 {
            let root = self.chain_of[self.step(pi, dirs.trailing_zeros())];
            dirs &= dirs - 1;
            if !roots[..n].contains(&root) {
                roots[n] = root;
                n += 1;
            }
        }
        (roots, n)
    }

    /// The single liberty of a string in atari, if it has exactly one.
    pub fn atari_liberty(&self, p: Point) -> Option<Point> {
        if self.liberties(p) != 1 {
            return None;
        }
        self.libs.first(self.chain_of[p.idx()] as usize).map(|i| Point(i as u16))
    }

    /// Checks every invariant from scratch (strings, liberties, hash, empty
    /// list). For tests and debugging: O(points).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut fresh = self.clone();
        fresh.rebuild();
        if fresh.nbr != self.nbr {
            return Err("neighbour counts differ from the stones".into());
        }
        if fresh.hash != self.hash {
            return Err("hash differs from the stones".into());
        }
        let mut empties: Vec<u16> = self.empty.clone();
        let mut expected: Vec<u16> = fresh.empty.clone();
        empties.sort_unstable();
        expected.sort_unstable();
        if empties != expected {
            return Err("empty list differs from the empty points".into());
        }
        for p in 0..self.libs.bits.len() / self.libs.words {
            let is_root = self.cells[p].color().is_some() && self.chain_of[p] as usize == p;
            if !is_root && self.libs.set(p).iter().any(|&w| w != 0) {
                return Err(format!("point {p} is no string's root but has liberties"));
            }
        }
        for p in self.points() {
            if self.color_at(p).is_none() {
                if self.empty[self.empty_pos[p.idx()] as usize] != p.0 {
                    return Err(format!("empty_pos wrong at {:?}", self.vertex(p)));
                }
                continue;
            }
            if self.liberties(p) != fresh.liberties(p) || self.string_size(p) != fresh.string_size(p) {
                return Err(format!(
                    "string at {} has {} liberties / {} stones, expected {} / {}",
                    self.vertex(p).to_gtp(self.size),
                    self.liberties(p),
                    self.string_size(p),
                    fresh.liberties(p),
                    fresh.string_size(p)
                ));
            }
            if self.liberties(p) == 0 {
                return Err(format!("string at {} has no liberties", self.vertex(p).to_gtp(self.size)));
            }
            let r = self.chain_of[p.idx()] as usize;
            if self.libs.set(r) != fresh.libs.set(fresh.chain_of[p.idx()] as usize) {
                return Err("liberty set differs".into());
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for y in 0..self.size {
            for x in 0..self.size {
                let c = match self.cell(self.point(Vertex::new(x, y))) {
                    Cell::Black => 'X',
                    Cell::White => 'O',
                    _ => '.',
                };
                write!(f, "{c}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
