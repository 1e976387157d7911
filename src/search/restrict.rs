//! Moves a search may not consider, or the only ones it may: KataGo's
//! `avoidMoves` and `allowMoves` (analysis engine), for one player down to
//! a depth of the tree.

use crate::go::{Color, Move};

/// One rule on the moves of `player` at tree depths below `until_depth`
/// (depth 0: the root's own moves; `until_depth` 1 restricts only those).
#[derive(Clone, Debug, PartialEq)]
pub struct MoveFilter {
    pub player: Color,
    pub moves: Vec<Move>,
    /// Only `moves` are searched (`allowMoves`), rather than all but them
    /// (`avoidMoves`).
    pub allow: bool,
    pub until_depth: u32,
}

impl MoveFilter {
    /// Whether this rule lets `player` play `mv` at `depth`.
    pub fn permits(&self, player: Color, depth: u32, mv: Move) -> bool {
        if player != self.player || depth >= self.until_depth {
            return true;
        }
        self.moves.contains(&mv) == self.allow
    }
}

/// Refuses rules KataGo refuses: two `allow`s for one player (together
/// they would leave no move) and an `allow` of no moves.
pub fn check(filters: &[MoveFilter]) -> Result<(), String> {
    if filters.iter().any(|f| f.allow && f.moves.is_empty()) {
        return Err("an allow of no moves leaves nothing to search".into());
    }
    for color in [Color::Black, Color::White] {
        if filters.iter().filter(|f| f.allow && f.player == color).count() > 1 {
            return Err(format!("more than one allow for {color}"));
        }
    }
    Ok(())
}

/// Whether every rule of `filters` lets `player` play `mv` at `depth`.
pub fn permitted(filters: &[MoveFilter], player: Color, depth: u32, mv: Move) -> bool {
    filters.iter().all(|f| f.permits(player, depth, mv))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::Vertex;

    #[test]
    fn a_rule_binds_its_player_above_its_depth_only() {
        let c3 = Move::Play(Vertex { x: 2, y: 2 });
        let d4 = Move::Play(Vertex { x: 3, y: 3 });
        let avoid = MoveFilter { player: Color::Black, moves: vec![c3], allow: false, until_depth: 2 };
        assert!(!avoid.permits(Color::Black, 0, c3) && !avoid.permits(Color::Black, 1, c3));
        assert!(avoid.permits(Color::Black, 2, c3), "from its depth on");
        assert!(avoid.permits(Color::White, 0, c3), "the other player");
        assert!(avoid.permits(Color::Black, 0, d4) && avoid.permits(Color::Black, 0, Move::Pass));
        let allow = MoveFilter { allow: true, ..avoid.clone() };
        assert!(allow.permits(Color::Black, 0, c3) && !allow.permits(Color::Black, 0, d4));
        assert!(!permitted(&[avoid.clone(), allow.clone()], Color::Black, 0, c3), "both rules must agree");
        assert_eq!(check(&[avoid.clone(), allow.clone()]), Ok(()));
        let second = MoveFilter { moves: vec![d4], ..allow.clone() };
        assert!(check(&[allow.clone(), second]).unwrap_err().contains("more than one allow"));
        let other_player = MoveFilter { player: Color::White, ..allow.clone() };
        assert_eq!(check(&[allow.clone(), other_player]), Ok(()));
        let nothing = MoveFilter { moves: vec![], ..allow };
        assert!(check(&[nothing]).unwrap_err().contains("no moves"));
        assert_eq!(check(&[MoveFilter { moves: vec![], ..avoid }]), Ok(()), "avoiding nothing is harmless");
    }
}
