//! The 8 symmetries of the square (the dihedral group D4), applied alike to
//! feature planes and move labels so that a rotated position keeps its
//! right answer.

use super::PackedPlanes;
use crate::go::Vertex;

/// One of the 8 symmetries: bit 0 mirrors columns, bit 1 mirrors rows, bit
/// 2 transposes (after the mirrors). `Symmetry(0)` is the identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Symmetry(u8);

impl Symmetry {
    pub const IDENTITY: Symmetry = Symmetry(0);

    /// All eight, identity first.
    pub fn all() -> impl Iterator<Item = Symmetry> {
        (0..8).map(Symmetry)
    }

    /// Symmetry number `n` (0..8).
    pub fn new(n: u8) -> Symmetry {
        assert!(n < 8, "there are 8 symmetries");
        Symmetry(n)
    }

    pub fn number(self) -> u8 {
        self.0
    }

    /// Where `v` goes on a board of `size`.
    #[inline]
    pub fn apply(self, v: Vertex, size: usize) -> Vertex {
        let (mut x, mut y) = (v.x as usize, v.y as usize);
        if self.0 & 1 != 0 {
            x = size - 1 - x;
        }
        if self.0 & 2 != 0 {
            y = size - 1 - y;
        }
        if self.0 & 4 != 0 {
            std::mem::swap(&mut x, &mut y);
        }
        Vertex::new(x, y)
    }

    /// The symmetry that undoes this one.
    pub fn inverse(self) -> Symmetry {
        // A transpose after mirrors equals the transpose before the mirrors
        // swapped: invert by swapping the two mirror bits.
        if self.0 & 4 != 0 {
            Symmetry(4 | (self.0 & 1) << 1 | (self.0 & 2) >> 1)
        } else {
            self
        }
    }

    /// Maps a policy label (row-major point, or `size²` for pass).
    #[inline]
    pub fn apply_label(self, label: usize, size: usize) -> usize {
        if label >= size * size {
            label
        } else {
            self.apply(Vertex::from_index(label, size), size).index(size)
        }
    }

    /// `table[i]` is where point `i` goes (row-major indices).
    pub fn permutation(self, size: usize) -> Vec<u16> {
        (0..size * size).map(|i| self.apply_label(i, size) as u16).collect()
    }

    /// Applies the symmetry to f32 planes (`planes × size²`, plane-major),
    /// writing into `out`.
    pub fn apply_f32(self, input: &[f32], out: &mut [f32], size: usize) {
        let n = size * size;
        assert_eq!(input.len(), out.len());
        assert_eq!(input.len() % n, 0);
        let perm = self.permutation(size);
        for (src, dst) in input.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
            for (i, &v) in src.iter().enumerate() {
                dst[perm[i] as usize] = v;
            }
        }
    }

    /// Applies the symmetry to packed planes.
    pub fn apply_packed(self, planes: &PackedPlanes) -> PackedPlanes {
        let mut words = vec![0u64; planes.planes() * planes.words_per_plane()];
        planes.permuted_words_into(&self.permutation(planes.size()), &mut words);
        PackedPlanes::from_words(planes.size(), planes.planes(), words).expect("same shape")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::go::{Color, ColoredMove, Game, Move, Rules};

    #[test]
    fn the_eight_are_distinct_bijections_with_inverses() {
        let size = 5;
        let mut images = std::collections::HashSet::new();
        for s in Symmetry::all() {
            let perm = s.permutation(size);
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..25).collect::<Vec<u16>>(), "{s:?} is a bijection");
            images.insert(perm);
            for i in 0..25 {
                assert_eq!(s.inverse().apply_label(s.apply_label(i, size), size), i, "{s:?}");
            }
            assert_eq!(s.apply_label(25, size), 25, "pass is fixed");
        }
        assert_eq!(images.len(), 8);
    }

    #[test]
    fn encoding_a_transformed_game_equals_transforming_its_planes() {
        // A short real-looking opening with a capture, played both ways.
        let moves = ["D4", "E4", "E5", "A1", "E3", "A2", "F4", "pass", "J9", "C3", "D5", "D3"];
        for (s, features) in Symmetry::all().flat_map(|s| FeatureSet::ALL.map(|f| (s, f))) {
            let encode = |g: &Game| features.encode(g);
            let mut g = Game::new(9, Rules::CHINESE);
            let mut t = Game::new(9, Rules::CHINESE);
            let mut color = Color::Black;
            for m in moves {
                let mv = Move::parse_gtp(m, 9).unwrap();
                let tm = match mv {
                    Move::Play(v) => Move::Play(s.apply(v, 9)),
                    other => other,
                };
                g.play(color, mv).unwrap();
                t.play(color, tm).unwrap();
                color = color.opponent();
                assert_eq!(s.apply_packed(&encode(&g)), encode(&t), "{s:?} {features} after {m}");
                let mut f = vec![0.0; features.planes() * 81];
                s.apply_f32(&encode(&g).unpack(), &mut f, 9);
                assert_eq!(f, encode(&t).unpack());
                encode(&g).unpack_permuted_into(&s.permutation(9), &mut f);
                assert_eq!(f, encode(&t).unpack(), "{s:?} while unpacking");
                let label = ColoredMove { color, mv }.mv.policy_index(9).unwrap();
                assert_eq!(s.apply_label(label, 9), tm.policy_index(9).unwrap());
            }
        }
    }
}
