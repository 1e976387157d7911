//! The seed's 15 feature planes, and the bit-packed form of any feature
//! set's planes.
//!
//! | plane | meaning (from the side to move) |
//! |---|---|
//! | 0 | empty point |
//! | 1 | own stone |
//! | 2 | opponent stone |
//! | 3 | all ones (lets convolutions see the board edge) |
//! | 4–11 | the string on the point has 1, 2, …, 7, 8 or more liberties |
//! | 12–14 | the last, second-last and third-last move (a pass leaves its plane empty) |
//!
//! Liberties come from the board's exact per-string counts, so every string
//! is right at every position, not only those touching the last move.

use crate::go::{Color, Game, Move};

/// Number of the seed's planes: the first planes of every feature set.
pub const PLANES: usize = 15;

const EMPTY: usize = 0;
const OWN: usize = 1;
const OPPONENT: usize = 2;
const ONES: usize = 3;
const LIBERTIES: usize = 4;
const LAST_MOVES: usize = 12;

/// The planes of one position, one bit per point, plane after plane,
/// each plane `words_per_plane` 64-bit words in row-major point order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedPlanes {
    /// Board side.
    size: usize,
    /// Number of planes.
    planes: usize,
    /// `ceil(size² / 64)`.
    words_per_plane: usize,
    /// `planes * words_per_plane` words.
    words: Vec<u64>,
}

impl PackedPlanes {
    /// `planes` all-zero planes for a board of `size`.
    pub fn new(size: usize, planes: usize) -> PackedPlanes {
        let words_per_plane = (size * size).div_ceil(64);
        PackedPlanes { size, planes, words_per_plane, words: vec![0; planes * words_per_plane] }
    }

    /// Rebuilds `planes` planes from their words (as stored in a shard).
    pub fn from_words(size: usize, planes: usize, words: Vec<u64>) -> Option<PackedPlanes> {
        let p = PackedPlanes::new(size, planes);
        (words.len() == p.words.len()).then_some(PackedPlanes { words, ..p })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Number of planes.
    pub fn planes(&self) -> usize {
        self.planes
    }

    /// Words of one plane.
    pub fn words_per_plane(&self) -> usize {
        self.words_per_plane
    }

    /// The packed words, plane after plane.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Sets point `index` (row-major) of `plane`.
    #[inline]
    pub fn set(&mut self, plane: usize, index: usize) {
        self.words[plane * self.words_per_plane + index / 64] |= 1 << (index % 64);
    }

    /// Whether point `index` (row-major) is set in `plane`.
    #[inline]
    pub fn get(&self, plane: usize, index: usize) -> bool {
        self.words[plane * self.words_per_plane + index / 64] >> (index % 64) & 1 != 0
    }

    /// Writes the planes as 0.0/1.0 into `out` (`planes * size²` floats,
    /// plane-major: the NCHW layout of one sample).
    pub fn unpack_into(&self, out: &mut [f32]) {
        self.unpack_placed(out, |i| i);
    }

    /// Like [`PackedPlanes::unpack_into`], point `i` of every plane written
    /// at `to[i]`: a symmetry applied while unpacking (`to` from
    /// [`crate::features::Symmetry::permutation`]) rather than in a second
    /// pass over the floats.
    pub fn unpack_permuted_into(&self, to: &[u16], out: &mut [f32]) {
        assert_eq!(to.len(), self.size * self.size, "a permutation of the board's points");
        self.unpack_placed(out, |i| to[i] as usize);
    }

    /// Zeroes `out`, then writes 1.0 for each set bit, point `i` of a plane
    /// at `place(i)`. Visiting set bits only is several times faster than
    /// visiting every point: the planes hold about 900 set bits of 5,415.
    #[inline(always)]
    fn unpack_placed(&self, out: &mut [f32], place: impl Fn(usize) -> usize) {
        let n = self.size * self.size;
        assert_eq!(out.len(), self.planes * n, "output must hold {} planes of {n} points", self.planes);
        out.fill(0.0);
        for (plane, dst) in out.chunks_exact_mut(n).enumerate() {
            let words = &self.words[plane * self.words_per_plane..(plane + 1) * self.words_per_plane];
            for (w, &word) in words.iter().enumerate() {
                // Bits past the last point would index past the plane (a
                // damaged shard could hold some): ignore them.
                let points = (n - 64 * w).min(64);
                let mut bits = if points == 64 { word } else { word & ((1 << points) - 1) };
                while bits != 0 {
                    dst[place(64 * w + bits.trailing_zeros() as usize)] = 1.0;
                    bits &= bits - 1;
                }
            }
        }
    }

    /// Writes the planes' words into `out` (as many words as the planes
    /// hold), point `i` of every plane moved to `to[i]`: a symmetry
    /// applied without unpacking, for inputs that travel as bits
    /// (`to` from [`crate::features::Symmetry::permutation`]).
    pub fn permuted_words_into(&self, to: &[u16], out: &mut [u64]) {
        let n = self.size * self.size;
        assert_eq!(to.len(), n, "a permutation of the board's points");
        assert_eq!(out.len(), self.words.len(), "output must hold {} words", self.words.len());
        out.fill(0);
        let wpp = self.words_per_plane;
        for (plane, dst) in out.chunks_exact_mut(wpp).enumerate() {
            for (w, &word) in self.words[plane * wpp..(plane + 1) * wpp].iter().enumerate() {
                // As in unpack_placed: bits past the last point are ignored.
                let points = (n - 64 * w).min(64);
                let mut bits = if points == 64 { word } else { word & ((1 << points) - 1) };
                while bits != 0 {
                    let at = to[64 * w + bits.trailing_zeros() as usize] as usize;
                    dst[at / 64] |= 1 << (at % 64);
                    bits &= bits - 1;
                }
            }
        }
    }

    /// The planes as a new `Vec<f32>`.
    pub fn unpack(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.planes * self.size * self.size];
        self.unpack_into(&mut out);
        out
    }
}

/// Writes the seed's 15 planes of the position of `game`, for the side to
/// move, into the first 15 planes of `planes` (for the same board size),
/// clearing every plane first.
pub(crate) fn encode_seed(game: &Game, planes: &mut PackedPlanes) {
    let board = game.board();
    let size = board.size();
    assert_eq!(planes.size, size, "planes are for another board size");
    debug_assert!(planes.planes >= PLANES);
    planes.words.fill(0);
    let wpp = planes.words_per_plane;
    // This is most of `prepare`'s time, so it works in two passes without
    // a branch per point. First one code byte per point: bits 0-1 say
    // own (0), opponent (1), empty (2) or past the board (3), bits 2-4 the
    // string's liberties minus one (meaningless unless a stone).
    let kind: [u8; 4] = match game.to_move() {
        Color::Black => [0, 1, 2, 3],
        Color::White => [1, 0, 2, 3],
    };
    let mut codes = [3u8; CODES];
    for (code, p) in codes.iter_mut().zip(board.points()) {
        let (cell, libs) = board.cell_and_liberties(p);
        *code = kind[cell as usize] | ((libs.clamp(1, 8) - 1) as u8) << 2;
    }
    // Then 64 points at a time, each plane from the code's bits as masks.
    for (w, chunk) in codes[..wpp * 64].chunks_exact(64).enumerate() {
        let bit = |k: u32| gather_bit(chunk, k);
        let (k0, k1) = (bit(0), bit(1));
        let stone = !k1;
        let words = &mut planes.words;
        words[EMPTY * wpp + w] = k1 & !k0;
        words[OWN * wpp + w] = stone & !k0;
        words[OPPONENT * wpp + w] = stone & k0;
        words[ONES * wpp + w] = !(k1 & k0);
        let libs = [bit(2), bit(3), bit(4)];
        for v in 0..8 {
            let select = |b: usize| if v >> b & 1 == 1 { libs[b] } else { !libs[b] };
            words[(LIBERTIES + v) * wpp + w] = stone & select(0) & select(1) & select(2);
        }
    }
    for (age, m) in game.recent_moves(3).enumerate() {
        if let Move::Play(v) = m.mv {
            planes.set(LAST_MOVES + age, v.index(size));
        }
    }
}

/// Code bytes for the largest board, rounded up to whole words.
const CODES: usize = (crate::go::MAX_SIZE * crate::go::MAX_SIZE).div_ceil(64) * 64;

/// Bit `k` of each of 64 bytes, as a 64-bit mask (byte `i` to bit `i`).
/// Eight bytes at a time: the bits are isolated at the bottom of each
/// byte, and one multiplication moves byte `i`'s bit to bit `56 + i`
/// (every partial product lands on its own bit, so nothing carries).
#[inline(always)]
fn gather_bit(bytes: &[u8], k: u32) -> u64 {
    const LOW_BITS: u64 = 0x0101_0101_0101_0101;
    const GATHER: u64 = 0x0102_0408_1020_4080;
    bytes.chunks_exact(8).enumerate().fold(0, |mask, (j, eight)| {
        let word = u64::from_le_bytes(eight.try_into().expect("chunks of 8"));
        mask | ((word >> k & LOW_BITS).wrapping_mul(GATHER) >> 56) << (8 * j)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::go::{Rules, Vertex};

    fn encode(game: &Game) -> PackedPlanes {
        FeatureSet::Seed.encode(game)
    }

    fn at(name: &str) -> usize {
        Vertex::parse_gtp(name, 19).unwrap().index(19)
    }

    #[test]
    fn planes_follow_the_side_to_move_and_exact_liberties() {
        let mut g = Game::new(19, Rules::CHINESE);
        for (c, m) in [(Color::Black, "D4"), (Color::White, "D5"), (Color::Black, "Q16"), (Color::White, "pass")] {
            g.play(c, Move::parse_gtp(m, 19).unwrap()).unwrap();
        }
        // Black to move: Black's stones are "own".
        let p = encode(&g);
        assert!(p.get(OWN, at("D4")) && p.get(OWN, at("Q16")));
        assert!(p.get(OPPONENT, at("D5")) && !p.get(OWN, at("D5")));
        assert!(p.get(EMPTY, at("A1")) && !p.get(EMPTY, at("D4")));
        assert!((0..361).all(|i| p.get(ONES, i)));
        assert!(p.get(LIBERTIES + 2, at("D4")), "D4 has 3 liberties");
        assert!(p.get(LIBERTIES + 3, at("Q16")), "Q16 has 4 liberties");
        assert!(p.get(LIBERTIES + 2, at("D5")), "D5 has 3 liberties");
        // Last move was a pass: plane 12 empty; then Q16 and D5.
        assert!((0..361).all(|i| !p.get(LAST_MOVES, i)));
        assert!(p.get(LAST_MOVES + 1, at("Q16")));
        assert!(p.get(LAST_MOVES + 2, at("D5")));
        // Exactly one liberty plane per stone.
        for i in 0..361 {
            let n = (LIBERTIES..LAST_MOVES).filter(|&pl| p.get(pl, i)).count();
            assert_eq!(n, (!p.get(EMPTY, i)) as usize);
        }
        let f = p.unpack();
        assert_eq!(f.len(), 15 * 361);
        assert_eq!(f[OWN * 361 + at("D4")], 1.0);
        assert_eq!(
            f.iter().filter(|&&x| x == 1.0).count(),
            (0..15).map(|pl| (0..361).filter(|&i| p.get(pl, i)).count()).sum::<usize>()
        );
    }

    #[test]
    fn bits_past_the_last_point_are_ignored() {
        // 9x9: 81 points, two words a plane, the second using 17 bits.
        let words = vec![u64::MAX; PLANES * 2];
        let planes = PackedPlanes::from_words(9, PLANES, words).unwrap();
        assert!(planes.unpack().iter().all(|&x| x == 1.0));
        let mut out = vec![0.0; PLANES * 81];
        let reversed: Vec<u16> = (0..81).rev().collect();
        planes.unpack_permuted_into(&reversed, &mut out);
        assert!(out.iter().all(|&x| x == 1.0));
    }

    #[test]
    fn own_and_opponent_swap_with_the_turn() {
        let mut g = Game::new(9, Rules::CHINESE);
        g.play(Color::Black, Move::parse_gtp("E5", 9).unwrap()).unwrap();
        let white_view = encode(&g);
        g.set_to_move(Color::Black);
        let black_view = encode(&g);
        let e5 = Vertex::parse_gtp("E5", 9).unwrap().index(9);
        assert!(white_view.get(OPPONENT, e5) && black_view.get(OWN, e5));
    }

    /// The planes point by point, as their table above defines them.
    fn encode_point_by_point(game: &Game) -> PackedPlanes {
        let board = game.board();
        let size = board.size();
        let mut p = PackedPlanes::new(size, PLANES);
        for (i, point) in board.points().enumerate() {
            p.set(ONES, i);
            match board.color_at(point) {
                None => p.set(EMPTY, i),
                Some(c) => {
                    p.set(if c == game.to_move() { OWN } else { OPPONENT }, i);
                    p.set(LIBERTIES + board.liberties(point).clamp(1, 8) - 1, i);
                }
            }
        }
        for (age, m) in game.recent_moves(3).enumerate() {
            if let Move::Play(v) = m.mv {
                p.set(LAST_MOVES + age, v.index(size));
            }
        }
        p
    }

    #[test]
    fn packed_encoding_matches_the_point_by_point_definition() {
        use crate::search::random::RandomAgent;
        // Random games fill boards with strings of every liberty count,
        // captures leave stale strings behind empty points, and 5, 9, 19
        // and 25 cover planes of one word, of a part word and of several.
        for (size, seed) in [(5, 1), (9, 2), (19, 3), (25, 4)] {
            let mut game = Game::new(size, Rules::CHINESE);
            let mut agent = RandomAgent::new(seed);
            let mut compared = 0;
            while !game.is_over() && compared < 3 * size * size {
                assert_eq!(encode(&game), encode_point_by_point(&game), "{size}x{size}, move {compared}");
                let mv = agent.select(&game);
                game.play(game.to_move(), mv).unwrap();
                compared += 1;
            }
            assert!(compared > size * size, "{size}x{size}: only {compared} positions");
        }
    }
}
