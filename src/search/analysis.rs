//! What a tree search thinks of a position, for live analysis (GTP's
//! `lz-analyze`/`kata-analyze`, the GUIs that draw them) and reviews.

use crate::go::{Color, Move};

/// The search as it stands at one moment, from the side to move's view.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The side to move at the root.
    pub to_move: Color,
    /// Completed simulations through the root.
    pub visits: u32,
    /// The root's mean value for `to_move` (`None` before its first visit).
    pub winrate: Option<f32>,
    /// The root's children, most visited first (the prior breaks ties).
    pub moves: Vec<MoveInfo>,
}

/// One candidate move at the root.
#[derive(Clone, Debug)]
pub struct MoveInfo {
    pub mv: Move,
    pub visits: u32,
    /// Mean value of its simulations for the side to move (`None`: unvisited).
    pub winrate: Option<f32>,
    /// The policy net's probability of the move (equal shares without one).
    pub prior: f32,
    /// The move, then the most visited reply at each ply after it.
    pub pv: Vec<Move>,
    /// The visits of each move of `pv` (KataGo's `pvVisits`).
    pub pv_visits: Vec<u32>,
}

impl MoveInfo {
    /// A lower confidence bound on the win rate, as Leela Zero reports one
    /// to rank moves: the mean less 1.96 standard errors. Values here are
    /// win probabilities, whose spread the tree does not record, so the
    /// Bernoulli variance `w·(1 − w)` stands in for it (the largest a
    /// value in 0..1 with that mean can have). A win probability has no
    /// bound below 0, so a wide interval stops there, as Leela Zero's and
    /// KataGo's do. An unvisited move gets 0.
    pub fn lcb(&self) -> f32 {
        self.lower_bound(|w| w)
    }

    /// [`MoveInfo::lcb`] on the opponent's win rate `1 − w`, whose
    /// spread is the same.
    pub fn opponent_lcb(&self) -> f32 {
        self.lower_bound(|w| 1.0 - w)
    }

    fn lower_bound(&self, mean: impl Fn(f32) -> f32) -> f32 {
        match self.winrate {
            Some(w) if self.visits > 0 => lower_confidence_bound(mean(w), w, self.visits),
            _ => 0.0,
        }
    }
}

/// `mean` less 1.96 standard errors of `visits` values of Bernoulli
/// variance `w·(1 − w)`, kept within 0..1: [`MoveInfo::lcb`]'s bound, and
/// the one the search's `lcb` setting chooses its move by.
pub(crate) fn lower_confidence_bound(mean: f32, w: f32, visits: u32) -> f32 {
    (mean - 1.96 * (w * (1.0 - w) / visits.max(1) as f32).sqrt()).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass of `visits` visits at win rate `w`.
    fn info(visits: u32, w: f32) -> MoveInfo {
        MoveInfo { mv: Move::Pass, visits, winrate: Some(w), prior: 0.1, pv: vec![], pv_visits: vec![] }
    }

    #[test]
    fn the_bound_tightens_with_visits_and_never_passes_the_mean() {
        let (few, many) = (info(4, 0.6).lcb(), info(400, 0.6).lcb());
        assert!(few < many && many < 0.6, "{few} {many}");
        assert!((many - (0.6 - 1.96 * (0.24f32 / 400.0).sqrt())).abs() < 1e-6);
        assert_eq!(MoveInfo { winrate: None, ..info(0, 0.5) }.lcb(), 0.0);
    }

    #[test]
    fn the_bound_stays_within_a_probability() {
        // One visit at 0.2: 0.2 − 1.96·0.4 would be −0.58.
        assert_eq!(info(1, 0.2).lcb(), 0.0);
        assert_eq!(info(1, 0.8).opponent_lcb(), 0.0);
        let wide = info(2, 0.7);
        assert!((wide.opponent_lcb() - 0.0).abs() < 1e-6, "{}", wide.opponent_lcb());
        let tight = info(400, 0.6);
        assert!((tight.opponent_lcb() - (0.4 - 1.96 * (0.24f32 / 400.0).sqrt())).abs() < 1e-6);
        for (visits, w) in [(1, 0.0), (1, 1.0), (3, 0.5), (1000, 0.999)] {
            let m = info(visits, w);
            assert!((0.0..=1.0).contains(&m.lcb()) && (0.0..=1.0).contains(&m.opponent_lcb()), "{visits} {w}");
        }
    }
}
