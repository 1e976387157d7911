//! The ownership target: who owns each point when the game ends, for
//! every position of the game (KataGo's auxiliary ownership target).
//!
//! A value net that learns from results gets one bit per position, and
//! positions of one game share it; the final ownership gives 361 labels
//! per position, most of them telling which groups live and which die,
//! what a result only implies. Labels come from the game's last position
//! through random playouts ([`Ownership::estimate`], the estimate go-train
//! scores finished games with): settled points in a game played out, a
//! rough reading in a resigned one.
//!
//! Stored as [`OWNERSHIP_PLANES`] label planes after each record's input
//! planes, from the side to move: its points, then its opponent's. A point
//! the playouts leave in doubt (seki, or an open fight at a resignation) is
//! in neither plane.

use super::shard::{Block, Layout, OWNERSHIP_PLANES};
use crate::features::PackedPlanes;
use crate::go::{Color, Game};
use crate::search::ownership::Ownership;

/// Playouts per game: the judgement of a clearly settled point does not
/// change with more, and a game costs a few milliseconds.
pub const PLAYOUTS: usize = 64;

/// A point is owned when one colour holds it in at least this share of
/// the playouts.
const SETTLED: f32 = 2.0 / 3.0;

/// The final owner of each point of `last` (row-major), `None` where the
/// playouts leave it in doubt; `seed` makes it reproducible.
pub fn final_owners(last: &Game, seed: u64) -> Vec<Option<Color>> {
    let ownership = Ownership::estimate(last, PLAYOUTS, seed);
    let points = last.board().size() * last.board().size();
    (0..points)
        .map(|i| match ownership.share(i, Color::Black) {
            b if b >= SETTLED => Some(Color::Black),
            b if b <= 1.0 - SETTLED => Some(Color::White),
            _ => None,
        })
        .collect()
}

/// The label planes of `owners` for `to_move`, packed as a shard stores them.
pub fn label_words(owners: &[Option<Color>], size: usize, to_move: Color) -> Vec<u64> {
    let mut planes = PackedPlanes::new(size, OWNERSHIP_PLANES);
    for (i, owner) in owners.iter().enumerate() {
        match owner {
            Some(c) if *c == to_move => planes.set(0, i),
            Some(_) => planes.set(1, i),
            None => {}
        }
    }
    planes.words().to_vec()
}

/// Writes the label planes of every record of `block` (a whole game, whose
/// records were pushed with zeroed label planes): record `i` seen by
/// `to_move[i]`.
pub fn fill_labels(block: &mut Block, layout: Layout, owners: &[Option<Color>], to_move: &[Color]) {
    let record = layout.planes_bytes();
    let inputs = layout.planes * layout.plane_words() * 8;
    let [black, white] = [Color::Black, Color::White].map(|c| label_words(owners, layout.board_size, c));
    for (i, &color) in to_move.iter().enumerate() {
        let words = if color == Color::Black { &black } else { &white };
        let at = i * record + inputs;
        let out = &mut block.planes[at..at + words.len() * 8];
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// The label planes of a record as targets for a net: per point
/// (row-major, under the permutation `to` of its symmetry), 1.0 where the
/// side to move owns it at the end, -1.0 where its opponent does, 0.0
/// where neither. `words` are the record's label words.
pub fn targets_into(words: &[u64], size: usize, to: &[u16], out: &mut [f32]) {
    let planes = PackedPlanes::from_words(size, OWNERSHIP_PLANES, words.to_vec())
        .expect("a record holds OWNERSHIP_PLANES label planes");
    for i in 0..size * size {
        let t = &mut out[to[i] as usize];
        *t = if planes.get(0, i) {
            1.0
        } else if planes.get(1, i) {
            -1.0
        } else {
            0.0
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Move, Rules, Vertex};

    /// A 5×5 game where Black walls off the left two columns and White
    /// the right two, the middle column empty between them.
    fn walled_game() -> Game {
        let mut game = Game::new(5, Rules::CHINESE);
        for row in 0..5 {
            game.play(Color::Black, Move::Play(Vertex::new(1, row))).unwrap();
            game.play(Color::White, Move::Play(Vertex::new(3, row))).unwrap();
        }
        game
    }

    #[test]
    fn walled_areas_belong_to_their_walls_and_the_side_to_move_sees_its_own_first() {
        let game = walled_game();
        let owners = final_owners(&game, 1);
        let at = |col: usize, row: usize| owners[row * 5 + col];
        for row in 0..5 {
            assert_eq!(at(0, row), Some(Color::Black));
            assert_eq!(at(1, row), Some(Color::Black));
            assert_eq!(at(3, row), Some(Color::White));
            assert_eq!(at(4, row), Some(Color::White));
        }
        let identity: Vec<u16> = (0..25).collect();
        let mut seen_by_white = vec![9.0; 25];
        targets_into(&label_words(&owners, 5, Color::White), 5, &identity, &mut seen_by_white);
        assert_eq!(seen_by_white[0], -1.0, "Black's corner is the opponent's for White");
        assert_eq!(seen_by_white[4], 1.0, "White's corner is White's own");
        assert!(seen_by_white.iter().all(|&t| t == 1.0 || t == -1.0 || t == 0.0));
    }

    #[test]
    fn fill_labels_writes_each_records_label_planes_and_leaves_its_inputs() {
        let game = walled_game();
        let owners = final_owners(&game, 1);
        let layout = Layout { board_size: 5, planes: 3, ownership: true };
        let inputs = vec![u64::MAX; 3 * layout.plane_words()];
        let zeros = vec![0u64; OWNERSHIP_PLANES * layout.plane_words()];
        let mut block = Block::default();
        for i in 0..2u16 {
            block.push(&[inputs.clone(), zeros.clone()].concat(), i, -1, i);
        }
        fill_labels(&mut block, layout, &owners, &[Color::Black, Color::White]);
        for (i, color) in [Color::Black, Color::White].into_iter().enumerate() {
            let words = block.planes_of(i, layout);
            assert_eq!(&words[..inputs.len()], &inputs[..]);
            assert_eq!(&words[inputs.len()..], &label_words(&owners, 5, color)[..]);
        }
    }
}
