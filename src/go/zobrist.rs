//! Zobrist keys: one random 64-bit key per (colour, point), plus one for the
//! side to move, so that a position's hash is the XOR of the keys of its stones.
//!
//! The keys are computed at compile time from a fixed seed with SplitMix64, so
//! hashes are the same in every build and on every machine.

use super::vertex::MAX_POINTS;

/// One SplitMix64 step: the next state and its output.
pub(crate) const fn splitmix64(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    (state, mix(state))
}

/// SplitMix64's finaliser: spreads 64 bits over 64 bits (also how dataset
/// splits spread a game's hash and a seed).
pub(crate) const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const fn generate() -> [[u64; MAX_POINTS]; 2] {
    let mut keys = [[0u64; MAX_POINTS]; 2];
    let mut state = 0x676F_2D74_7261_696E; // "go-train"
    let mut c = 0;
    while c < 2 {
        let mut p = 0;
        while p < MAX_POINTS {
            let (s, k) = splitmix64(state);
            state = s;
            keys[c][p] = k;
            p += 1;
        }
        c += 1;
    }
    keys
}

/// `STONE[colour][point]`: the key of a stone of that colour on that
/// (padded) point index.
pub static STONE: [[u64; MAX_POINTS]; 2] = generate();

/// XORed into a hash when White is to move (situational superko).
pub const WHITE_TO_MOVE: u64 = splitmix64(0x5349_4445).1;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_and_non_zero() {
        let all: HashSet<u64> = STONE.iter().flatten().copied().chain([WHITE_TO_MOVE]).collect();
        assert_eq!(all.len(), 2 * MAX_POINTS + 1);
        assert!(!all.contains(&0));
    }
}
