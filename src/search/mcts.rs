//! Monte Carlo tree search as the seed design (and AlphaGo's first paper)
//! describes it.
//!
//! Each iteration:
//! 1. **Select** a path from the root, at each node the child with the best
//!    score: UCB1, `Q + c·sqrt(ln N / n)`, or PUCT with policy priors,
//!    `Q + c·P·sqrt(N) / (1 + n)`.
//! 2. **Expand** the leaf: its children are the policy net's `k` most likely
//!    acceptable moves (legal, not filling an own eye; pass included).
//!    Without a policy net every acceptable move is a child, with equal
//!    priors.
//! 3. **Simulate** a few moves (5 by default) from the leaf with the fast
//!    playout net (or the random agent when there is none).
//! 4. **Evaluate** the position reached with the value net, or by the
//!    stone-count fallback the seed used after its value net overfitted
//!    (area margin with komi, squashed to 0..1).
//! 5. **Back up** the value along the path.
//!
//! The move played is the root's most visited child. Iterations run in
//! batches: a batch selects several leaves at once (a virtual loss on each
//! path spreads them out) so that each net runs once per batch step rather
//! than once per leaf. After a move the subtree under it is kept for the
//! next search when the game went on through moves the tree has.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::{Rng, RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::analysis::{lower_confidence_bound, Analysis, MoveInfo};
use super::config::{LeafEval, MctsConfig, Selection};
use super::net_agent::{choose_move, move_prob, scored_moves};
use super::nets::NetEval;
use super::ownership::LeafMix;
use super::random::RandomAgent;
use super::restrict::{self, MoveFilter};
use super::tactics;
use super::{acceptable_points, Agent};
use crate::features::Symmetry;
use crate::go::{Color, Count, Event, Game, Move, Score};
use crate::nn::BOARD;

/// One node of the tree: the position after `mv`.
#[derive(Clone, Debug)]
struct Node {
    /// The move that leads here from the parent.
    mv: Move,
    /// Who played it; values are from this player's side.
    mover: Color,
    /// The parent's policy probability of `mv`.
    prior: f32,
    /// Completed simulations through this node.
    visits: u32,
    /// Sum of their values for `mover` (a win is 1).
    value_sum: f32,
    /// Simulations in flight through this node, each counted as a loss
    /// until it is backed up.
    in_flight: u32,
    /// Children, once expanded.
    children: Vec<u32>,
    /// Whether `children` has been filled (it may stay empty: no move).
    expanded: bool,
    /// Whether the root policy chose `children` and their priors (a node
    /// kept from an earlier search may have had the policy net's).
    root_priors: bool,
}

impl Node {
    fn new(mv: Move, mover: Color, prior: f32) -> Node {
        Node {
            mv,
            mover,
            prior,
            visits: 0,
            value_sum: 0.0,
            in_flight: 0,
            children: Vec::new(),
            expanded: false,
            root_priors: false,
        }
    }

    /// The mean value for `mover`, in-flight simulations counted as losses.
    fn q(&self) -> Option<f32> {
        let n = self.visits + self.in_flight;
        (n > 0).then(|| self.value_sum / n as f32)
    }
}

/// The tree and the game position at its root.
struct Tree {
    nodes: Vec<Node>,
    root: u32,
    /// The game at the root.
    game: Game,
    /// Black's area margin at the root (no komi), the stone count's zero.
    root_margin: i32,
    /// Black's area margin at the root as the value net's ownership head
    /// predicts it, the score's zero (0 while `score` is off).
    root_lead: f32,
}

/// A leaf chosen in a batch: the path to it and its position.
struct Leaf {
    path: Vec<u32>,
    game: Game,
}

/// The tree-search agent.
pub struct Mcts {
    config: MctsConfig,
    /// How leaves are valued: `config.leaf`, made explicit.
    leaf: LeafEval,
    policy: Option<NetEval>,
    /// A second policy net for the root's children alone ([`Mcts::with_root_policy`]).
    root_policy: Option<NetEval>,
    value: Option<NetEval>,
    playout: Option<NetEval>,
    /// The tree of the last search, kept for reuse.
    tree: Option<Tree>,
    /// Moves the search may not consider ([`Mcts::restrict`]).
    filters: Vec<MoveFilter>,
    /// Rollout moves without a playout net.
    random: RandomAgent,
    rng: Pcg64Mcg,
}

/// What a search found, for logs and tests.
#[derive(Clone, Debug)]
pub struct SearchReport {
    /// The chosen move.
    pub best: Move,
    /// Root children: move, visits, mean value for the side to move, prior.
    pub children: Vec<(Move, u32, f32, f32)>,
    /// Simulations done in this search.
    pub iterations: u32,
    /// Simulations the root already had from an earlier search.
    pub reused: u32,
}

/// Trees past this many nodes are dropped rather than reused (a few hundred
/// MB), so a long game cannot grow memory without bound.
const MAX_NODES: usize = 2_000_000;

impl Mcts {
    /// A search with `config`. A policy net gives priors and top-k
    /// expansion; a playout net drives rollouts; a value net values leaves
    /// (needed when `config.leaf` is [`LeafEval::Value`]).
    pub fn new(
        config: MctsConfig,
        policy: Option<NetEval>,
        value: Option<NetEval>,
        playout: Option<NetEval>,
    ) -> Result<Mcts> {
        config.check()?;
        let leaf = config.leaf_eval(value.is_some());
        if leaf == LeafEval::Value && value.is_none() {
            bail!("MCTS with value-net leaves needs a value net (give one, or use stone-count leaves)");
        }
        if config.mix_tactics && config.mix == 0.0 {
            // As `eval --mix-tactics` without `--mix`: a setting that would do nothing.
            bail!("MCTS mix-tactics=on chooses the playouts mixed into leaves: give mix=λ above 0 as well");
        }
        if config.score > 0.0 {
            match (&value, leaf) {
                (Some(net), LeafEval::Value) if !net.predicts_ownership() => bail!(
                    "MCTS score={}: {} has no ownership head to predict the score (the shipped value net has one)",
                    config.score,
                    net.source()
                ),
                (Some(_), LeafEval::Value) => {}
                _ => {
                    bail!("MCTS score={} reads the value net's ownership head: it needs value-net leaves", config.score)
                }
            }
        }
        let seed = config.seed;
        Ok(Mcts {
            config,
            leaf,
            policy,
            root_policy: None,
            value,
            playout,
            tree: None,
            filters: Vec::new(),
            random: RandomAgent::new(seed ^ 0x9e37_79b9_7f4a_7c15),
            rng: Pcg64Mcg::seed_from_u64(seed),
        })
    }

    /// The same search with the root's children chosen and weighted by
    /// `net` instead of the policy net. The root is evaluated once a move,
    /// every other node once a search, so a net too slow to expand every
    /// node (the residual policy costs 37 times the seed's on a CPU) can
    /// still choose among the moves on the board, where the choice counts.
    pub fn with_root_policy(mut self, net: NetEval) -> Mcts {
        self.root_policy = Some(net);
        self
    }

    /// Searches from `game` and reports what it found; the tree stays for
    /// the next call.
    pub fn search(&mut self, game: &Game, budget: Option<Duration>) -> Result<SearchReport> {
        self.search_observed(game, budget, Some(self.config.iterations), &mut |_| ControlFlow::Continue(()))
    }

    /// [`Mcts::search`] for `iterations` (`None`: until `observe` stops it),
    /// calling `observe` after every batch with the search as it stands (for
    /// live analysis, [`Mcts::analysis`]); it ends the search early by
    /// answering `Break`. A search also ends when its tree is full or the
    /// game at its root was resigned (one two passes ended goes on, as a
    /// GUI asks for its analysis).
    pub fn search_observed(
        &mut self,
        game: &Game,
        budget: Option<Duration>,
        iterations: Option<u32>,
        observe: &mut dyn FnMut(&Mcts) -> ControlFlow<()>,
    ) -> Result<SearchReport> {
        let start = Instant::now();
        // The configured time is a move's: an open-ended search (live
        // analysis) runs until `observe` stops it, or for the budget given.
        let limit = match (iterations.and(self.config.time_limit()), budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.reuse_or_reset(game);
        self.expand_top_by_root_policy()?;
        if self.config.score > 0.0 {
            let lead = self.predicted_black_margin(game)?;
            self.tree.as_mut().expect("a tree exists during a search").root_lead = lead;
        }
        let reused = self.tree.as_ref().map_or(0, |t| t.nodes[t.root as usize].visits);
        let mut done = 0u32;
        while iterations.is_none_or(|i| done < i) {
            // Until the root has children every leaf of a batch would be the
            // root itself: expand it alone first.
            let root_expanded = self.tree.as_ref().is_some_and(|t| t.nodes[t.root as usize].expanded);
            let batch = if root_expanded { self.config.batch } else { 1 };
            let n = iterations.map_or(batch, |i| batch.min((i - done) as usize));
            self.run_batch(n)?;
            done = done.saturating_add(n as u32);
            if limit.is_some_and(|l| start.elapsed() >= l) || observe(self).is_break() {
                break;
            }
            // An open-ended analysis stops where more iterations would
            // only grow memory or repeat a finished game's score.
            let tree = self.tree.as_ref().expect("a tree exists during a search");
            if iterations.is_none() && (tree.nodes.len() >= MAX_NODES || tree.game.is_over()) {
                break;
            }
        }
        Ok(self.report(done, reused))
    }

    /// The search as it stands, seen from the root's side to move: every
    /// root child with its visits, win rate, prior and principal
    /// variation, the move the search plays first, then most visited
    /// first (`None` before any search).
    pub fn analysis(&self) -> Option<Analysis> {
        let tree = self.tree.as_ref()?;
        let root = &tree.nodes[tree.root as usize];
        let mut moves: Vec<MoveInfo> = root
            .children
            .iter()
            .map(|&c| {
                let n = &tree.nodes[c as usize];
                let (pv, pv_visits) = principal_variation(&tree.nodes, c).into_iter().unzip();
                MoveInfo {
                    mv: n.mv,
                    visits: n.visits,
                    winrate: (n.visits > 0).then(|| n.value_sum / n.visits as f32),
                    prior: n.prior,
                    pv,
                    pv_visits,
                }
            })
            .collect();
        moves.sort_by(|a, b| b.visits.cmp(&a.visits).then(b.prior.total_cmp(&a.prior)));
        // The move the search plays comes first, as in KataGo's `order`.
        let ranked: Vec<_> = moves.iter().map(|m| (m.mv, m.visits, m.winrate.unwrap_or(0.0), m.prior)).collect();
        let played = self.played(&ranked).map(|c| c.0);
        if let Some(i) = moves.iter().position(|m| Some(m.mv) == played) {
            let first = moves.remove(i);
            moves.insert(0, first);
        }
        // The root's values are its mover's, the opponent of the side to move.
        let winrate = (root.visits > 0).then(|| 1.0 - root.value_sum / root.visits as f32);
        Some(Analysis { to_move: tree.game.to_move(), visits: root.visits, winrate, moves })
    }

    /// Its settings.
    pub fn config(&self) -> &MctsConfig {
        &self.config
    }

    /// The policy and value nets that judge the root position (for raw net
    /// output): the root policy, when there is one, chooses its children.
    pub fn nets(&self) -> (Option<&NetEval>, Option<&NetEval>) {
        (self.root_policy.as_ref().or(self.policy.as_ref()), self.value.as_ref())
    }

    /// The visits a search from `game` starts with, at most `cap`: those
    /// of the subtree kept from the last search, which is dropped when it
    /// holds more (0 when none is kept). A capped search then answers no
    /// more visits than asked, whatever searched before it.
    pub fn root_visits_within(&mut self, game: &Game, cap: u32) -> u32 {
        self.reuse_or_reset(game);
        let kept = self.tree.as_ref().map_or(0, |t| t.nodes[t.root as usize].visits);
        if kept > cap {
            self.tree = None;
            return 0;
        }
        kept
    }

    /// Restricts the moves of later searches (none: every move again). A
    /// tree grown under other rules is dropped.
    pub fn restrict(&mut self, filters: Vec<MoveFilter>) {
        if filters != self.filters {
            self.tree = None;
            self.filters = filters;
        }
    }

    /// Keeps the subtree for `game` when the game is the tree's root game
    /// plus moves the tree has expanded; otherwise starts a new tree.
    fn reuse_or_reset(&mut self, game: &Game) {
        let continued;
        let ended_by_passes = game.resigned().is_none() && game.is_over();
        let game = if ended_by_passes {
            continued = game.continued();
            &continued
        } else {
            game
        };
        // A tree that reached this position scored it as the game's end.
        let kept = self.tree.take().filter(|_| !ended_by_passes);
        let reusable = kept.and_then(|mut tree| {
            let old = tree.game.history();
            let new = game.history();
            // A new board size (GTP `boardsize` without `clear_board`) has
            // the same empty history as the old board's start.
            let same_start = tree.game.size() == game.size() && tree.game.rules() == game.rules();
            // Under move filters, depths count from the root: a subtree
            // grown below it was filtered for other depths.
            let filtered = !self.filters.is_empty() && new.len() != old.len();
            if filtered || !same_start || new.len() < old.len() || new[..old.len()] != *old {
                return None;
            }
            for event in &new[old.len()..] {
                let Event::Move(m) = event else { return None };
                let node = &tree.nodes[tree.root as usize];
                let child = node.children.iter().copied().find(|&c| {
                    let c = &tree.nodes[c as usize];
                    c.mv == m.mv && c.mover == m.color
                })?;
                tree.root = child;
            }
            // GTP may let a colour move twice, which the tree cannot follow.
            let root_mover = tree.nodes[tree.root as usize].mover;
            (tree.nodes.len() < MAX_NODES && game.to_move() == root_mover.opponent()).then_some(())?;
            tree.game = game.clone();
            tree.root_margin = area_margin(game);
            tree.root_lead = 0.0;
            Some(tree)
        });
        self.tree = Some(reusable.unwrap_or_else(|| {
            // The root's "move" is the opponent's last: values at the root
            // are from their side, as everywhere else.
            let root = Node::new(Move::Pass, game.to_move().opponent(), 1.0);
            Tree { nodes: vec![root], root: 0, game: game.clone(), root_margin: area_margin(game), root_lead: 0.0 }
        }));
    }

    /// One batch: select `n` leaves, simulate and value them together,
    /// expand them, back the values up.
    fn run_batch(&mut self, n: usize) -> Result<()> {
        let mut leaves = Vec::with_capacity(n);
        for _ in 0..n {
            leaves.push(self.select_leaf());
        }
        let games: Vec<&Game> = leaves.iter().map(|l| &l.game).collect();
        // A batch often reaches the same leaf more than once (its rollouts
        // differ); its priors are needed once, and none where the game is over.
        let mut seen = std::collections::HashSet::new();
        let expandable: Vec<bool> = leaves
            .iter()
            .map(|l| !l.game.is_over() && seen.insert(*l.path.last().expect("a path has its root")))
            .collect();
        let depths: Vec<u32> = leaves.iter().map(|l| l.path.len() as u32 - 1).collect();
        // Drawn only when asked for, so that a search without it replays
        // the same random numbers as before it existed.
        let symmetry =
            if self.config.random_symmetry { Symmetry::new(self.rng.random_range(0..8)) } else { Symmetry::IDENTITY };
        let priors = self.priors(&games, &expandable, &depths, symmetry)?;
        let values = self.simulate_and_value(&games, symmetry)?;
        for (((leaf, priors), value), &depth) in leaves.iter().zip(priors).zip(values).zip(&depths) {
            let by_root = self.by_root_policy(depth);
            self.expand(*leaf.path.last().expect("a path has its root"), &leaf.game, priors, by_root);
            self.backup(&leaf.path, &leaf.game, value);
        }
        Ok(())
    }

    /// Walks from the root to a node not yet expanded (or one where the game
    /// is over), adding a virtual loss on the way.
    fn select_leaf(&mut self) -> Leaf {
        let tree = self.tree.as_mut().expect("a tree exists during a search");
        let mut game = tree.game.clone();
        let mut path = vec![tree.root];
        let mut node = tree.root;
        tree.nodes[node as usize].in_flight += 1;
        while tree.nodes[node as usize].expanded && !game.is_over() {
            let Some(child) = best_child(&tree.nodes, node, &self.config) else { break };
            let c = &tree.nodes[child as usize];
            game.play_unchecked(c.mover, c.mv);
            node = child;
            path.push(node);
            tree.nodes[node as usize].in_flight += 1;
        }
        Leaf { path, game }
    }

    /// The priors over the scored moves of each leaf marked `expandable`
    /// (at `depths` below the root) that the move filters permit: the
    /// policy net's, or the root policy's in the levels it expands (each
    /// seeing the boards through `symmetry`), or equal ones. Other leaves
    /// get none.
    fn priors(
        &self,
        games: &[&Game],
        expandable: &[bool],
        depths: &[u32],
        symmetry: Symmetry,
    ) -> Result<Vec<Vec<(Move, f32)>>> {
        let by_root: Vec<bool> = depths.iter().map(|&d| self.by_root_policy(d)).collect();
        let live = |root: bool| -> Vec<&Game> {
            games
                .iter()
                .zip(expandable)
                .zip(&by_root)
                .filter(|((_, &e), &r)| e && r == root)
                .map(|((&g, _), _)| g)
                .collect()
        };
        let probs_of = |net: Option<&NetEval>, games: Vec<&Game>| -> Result<std::vec::IntoIter<Vec<f32>>> {
            Ok(match net {
                Some(net) if !games.is_empty() => net.move_probs_seen(&games, symmetry)?.into_iter(),
                _ => Vec::new().into_iter(),
            })
        };
        let mut probs = probs_of(self.policy.as_ref(), live(false))?;
        let mut root_probs = probs_of(self.root_policy.as_ref(), live(true))?;
        Ok(games
            .iter()
            .zip(expandable)
            .zip(depths.iter().zip(by_root))
            .map(|((g, &expandable), (&depth, root))| match expandable {
                true if root => self.candidates(g, root_probs.next().as_deref(), depth),
                true => self.candidates(g, probs.next().as_deref(), depth),
                false => Vec::new(),
            })
            .collect())
    }

    /// Whether a node `depth` levels below the root is the root policy's to
    /// expand: the search has one, and the node is in its levels.
    fn by_root_policy(&self, depth: u32) -> bool {
        self.root_policy.is_some() && depth < self.config.root_policy_depth
    }

    /// The children to give a node of `game` at `depth` below the root,
    /// with their priors, among the moves the filters permit: the `k` most
    /// likely of a move net's `probs` (and, with tactics, the urgent moves
    /// beyond them), or every acceptable move with equal priors.
    fn candidates(&self, g: &Game, probs: Option<&[f32]>, depth: u32) -> Vec<(Move, f32)> {
        let permitted = |m: &Move| restrict::permitted(&self.filters, g.to_move(), depth, *m);
        let Some(p) = probs else {
            let mut moves: Vec<Move> =
                acceptable_points(g).into_iter().map(|p| Move::Play(g.board().vertex(p))).collect();
            moves.push(Move::Pass);
            moves.retain(permitted);
            if moves.is_empty() {
                moves.push(Move::Pass);
            }
            let prior = 1.0 / moves.len().max(1) as f32;
            return moves.into_iter().map(|m| (m, prior)).collect();
        };
        let mut moves = scored_moves(g, p);
        moves.retain(|(m, _)| permitted(m));
        if moves.is_empty() {
            // The filters left nothing legal (an allowed point taken):
            // passing is always legal, and an answer needs a move.
            return vec![(Move::Pass, 1.0)];
        }
        moves.sort_by(|a, b| b.1.total_cmp(&a.1));
        // Odd depths are the opponent's turn (passes alternate too).
        let k = match (depth, self.config.root_expand, self.config.expand_replies) {
            (0, Some(k), _) => k,
            (d, _, Some(k)) if d % 2 == 1 => k,
            _ => self.config.expand,
        };
        let k = k.max(1).min(moves.len());
        let rest = moves.split_off(k);
        if self.config.tactics {
            let floor = moves.last().map_or(0.0, |m| m.1);
            let urgent = tactics::urgent_points(g);
            moves.extend(rest.into_iter().filter_map(|(m, p)| match m {
                Move::Play(v) if urgent.contains(&g.board().point(v)) => Some((m, p.max(floor))),
                _ => None,
            }));
        }
        moves
    }

    /// Gives the root its children by the root policy net's priors, when
    /// the search has one, and re-weights the expanded nodes of the other
    /// levels it expands. A root kept from the last search was expanded
    /// below it, by the policy net: its children keep their visits and
    /// take the root net's priors, and the root net's candidates it lacks
    /// join them; so do the kept nodes of the levels below, down to
    /// `root-policy-depth`. A node whose children the root net already
    /// chose (the same position searched again) is not evaluated again.
    /// Without a root net, a root wider than the other nodes (`root-expand`)
    /// takes its missing children from the policy net the same way.
    fn expand_top_by_root_policy(&mut self) -> Result<()> {
        let wider_root = self.config.root_expand.is_some_and(|k| k != self.config.expand);
        let net = match (&self.root_policy, &self.policy) {
            (Some(net), _) => net,
            (None, Some(net)) if wider_root => net,
            _ => return Ok(()),
        };
        let tree = self.tree.as_ref().expect("a tree exists during a search");
        if tree.game.is_over() {
            return Ok(());
        }
        // The root, then the expanded nodes of each level the root net
        // expands, each with its position and depth.
        let mut kept: Vec<(u32, Game, u32)> = vec![(tree.root, tree.game.clone(), 0)];
        let mut level = 0;
        while self.by_root_policy(level + 1) {
            let below: Vec<(u32, Game, u32)> = kept
                .iter()
                .filter(|(_, _, depth)| *depth == level)
                .flat_map(|(node, game, _)| tree.nodes[*node as usize].children.iter().map(move |&c| (c, game)))
                .filter(|&(c, _)| tree.nodes[c as usize].expanded)
                .filter_map(|(c, game)| {
                    let child = &tree.nodes[c as usize];
                    let mut game = game.clone();
                    game.play_unchecked(child.mover, child.mv);
                    (!game.is_over()).then_some((c, game, level + 1))
                })
                .collect();
            if below.is_empty() {
                break;
            }
            kept.extend(below);
            level += 1;
        }
        // Those the root net already chose for (the same position searched
        // again, or a level it expanded in the last search) keep its priors.
        kept.retain(|(node, _, _)| !tree.nodes[*node as usize].root_priors);
        let root_first = kept.first().is_some_and(|(_, _, depth)| *depth == 0);
        let (root, below) = kept.split_at(usize::from(root_first));
        let mut probs = Vec::with_capacity(kept.len());
        if let Some((_, game, _)) = root.first() {
            probs.push(if self.config.root_symmetries {
                net.move_probs_averaged(game)?
            } else {
                let symmetry = if self.config.random_symmetry {
                    Symmetry::new(self.rng.random_range(0..8))
                } else {
                    Symmetry::IDENTITY
                };
                net.move_probs_seen(&[game], symmetry)?.remove(0)
            });
        }
        if !below.is_empty() {
            let games: Vec<&Game> = below.iter().map(|(_, game, _)| game).collect();
            probs.extend(net.move_probs_seen(&games, Symmetry::IDENTITY)?);
        }
        for ((node, game, depth), probs) in kept.iter().zip(probs) {
            self.reexpand(*node, game, *depth, &probs);
        }
        Ok(())
    }

    /// Gives `node` (of `game`, `depth` below the root) the children the
    /// root policy's `probs` choose: all of them if it has none yet; else
    /// its children keep their visits and take the net's priors, and the
    /// net's candidates it lacks join them.
    fn reexpand(&mut self, node: u32, game: &Game, depth: u32, probs: &[f32]) {
        let wanted = self.candidates(game, Some(probs), depth);
        let tree = self.tree.as_mut().expect("a tree exists during a search");
        let at = node as usize;
        if !tree.nodes[at].expanded {
            self.expand(node, game, wanted, true);
            return;
        }
        tree.nodes[at].root_priors = true;
        // A candidate's prior may be raised (tactics); any other child's is the net's.
        let prior_of = |mv: Move| wanted.iter().find(|m| m.0 == mv).map_or_else(|| move_prob(game, probs, mv), |m| m.1);
        let children = tree.nodes[at].children.clone();
        for &c in &children {
            let child = &mut tree.nodes[c as usize];
            child.prior = prior_of(child.mv);
        }
        let mover = game.to_move();
        for (mv, prior) in wanted {
            if !children.iter().any(|&c| tree.nodes[c as usize].mv == mv) {
                tree.nodes.push(Node::new(mv, mover, prior));
                let id = tree.nodes.len() as u32 - 1;
                tree.nodes[at].children.push(id);
            }
        }
    }

    /// Plays `rollout_depth` moves from each leaf (all rollouts advance
    /// together, so the playout net sees one batch per step) and values
    /// the positions reached (the value net seeing them through
    /// `symmetry`), each for the player who moved into its leaf.
    fn simulate_and_value(&mut self, leaves: &[&Game], symmetry: Symmetry) -> Result<Vec<f32>> {
        let mut games: Vec<Game> = leaves.iter().map(|&g| g.clone()).collect();
        for _ in 0..self.config.rollout_depth {
            let live: Vec<usize> = (0..games.len()).filter(|&i| !games[i].is_over()).collect();
            if live.is_empty() {
                break;
            }
            let moves: Vec<Move> = match &self.playout {
                Some(net) => {
                    let refs: Vec<&Game> = live.iter().map(|&i| &games[i]).collect();
                    let probs = net.move_probs(&refs)?;
                    live.iter().zip(&probs).map(|(&i, p)| choose_move(&games[i], p, 1.0, &mut self.rng)).collect()
                }
                None => live.iter().map(|&i| self.random.select(&games[i])).collect(),
            };
            for (&i, mv) in live.iter().zip(moves) {
                let color = games[i].to_move();
                games[i].play_unchecked(color, mv);
            }
        }
        // Value each end position for its side to move, then turn it to the
        // side of the leaf's mover.
        let for_side_to_move: Vec<f32> = match (self.leaf, &self.value) {
            (LeafEval::Value, Some(net)) => {
                let mut values: Vec<f32> =
                    games.iter().map(|g| if g.is_over() { final_value(g) } else { 0.0 }).collect();
                let live: Vec<usize> = (0..games.len()).filter(|&i| !games[i].is_over()).collect();
                let refs: Vec<&Game> = live.iter().map(|&i| &games[i]).collect();
                let weight = self.config.score;
                if weight > 0.0 {
                    let root_lead = self.tree.as_ref().map_or(0.0, |t| t.root_lead);
                    let (probs, margins) = net.win_probs_and_margins_seen(&refs, symmetry)?;
                    for ((&i, p), margin) in live.iter().zip(probs).zip(margins) {
                        let to_move = games[i].to_move();
                        let black_gain = black_side(to_move, margin) - root_lead;
                        values[i] = (1.0 - weight) * p + weight * score_value(black_gain, to_move, SCORE_SCALE);
                    }
                } else {
                    for (&i, p) in live.iter().zip(net.win_probs_seen(&refs, symmetry)?) {
                        values[i] = p;
                    }
                }
                values
            }
            _ => {
                let root_margin = self.tree.as_ref().map_or(0, |t| t.root_margin);
                games
                    .iter()
                    .map(|g| if g.is_over() { final_value(g) } else { stone_count_value(g, root_margin) })
                    .collect()
            }
        };
        let for_side_to_move = self.mix_with_playouts(&games, for_side_to_move);
        Ok(leaves
            .iter()
            .zip(&games)
            .zip(for_side_to_move)
            .map(|((leaf, end), v)| if end.to_move() == leaf.to_move() { 1.0 - v } else { v })
            .collect())
    }

    /// AlphaGo's mixed leaf evaluation: each unfinished position's value
    /// for its side to move, blended with the share of random playouts from
    /// it that the side wins. Random playouts count the end of a game, where
    /// a net trained on games decided by resignation is weakest, and take
    /// big groups without two eyes, which a value net may not see.
    fn mix_with_playouts(&mut self, games: &[Game], values: Vec<f32>) -> Vec<f32> {
        let c = &self.config;
        let mix = LeafMix { lambda: c.mix, playouts: c.mix_playouts, tactical: c.mix_tactics };
        if mix.lambda <= 0.0 {
            return values;
        }
        games
            .iter()
            .zip(values)
            .map(|(g, v)| {
                if g.is_over() {
                    return v;
                }
                mix.value(g, v, self.rng.next_u64())
            })
            .collect()
    }

    /// Black's area margin in `game` as the value net's ownership head
    /// predicts it (no komi): the score's zero at the root.
    fn predicted_black_margin(&self, game: &Game) -> Result<f32> {
        let net = self.value.as_ref().context("the score needs a value net")?;
        let (_, margins) = net.win_probs_and_margins_seen(&[game], Symmetry::IDENTITY)?;
        Ok(black_side(game.to_move(), margins[0]))
    }

    /// Gives `node` its children (once; a leaf selected twice in one batch
    /// is expanded by the first).
    fn expand(&mut self, node: u32, game: &Game, priors: Vec<(Move, f32)>, root_priors: bool) {
        let tree = self.tree.as_mut().expect("a tree exists during a search");
        if tree.nodes[node as usize].expanded || game.is_over() {
            return;
        }
        let mover = game.to_move();
        let first = tree.nodes.len() as u32;
        let count = priors.len() as u32;
        tree.nodes.extend(priors.into_iter().map(|(mv, p)| Node::new(mv, mover, p)));
        let n = &mut tree.nodes[node as usize];
        n.children = (first..first + count).collect();
        n.expanded = true;
        n.root_priors = root_priors;
    }

    /// Adds `value` (for the leaf's mover) to every node on `path` and
    /// takes back the virtual losses.
    fn backup(&mut self, path: &[u32], leaf: &Game, value: f32) {
        let tree = self.tree.as_mut().expect("a tree exists during a search");
        let leaf_mover = leaf.to_move().opponent();
        for &i in path {
            let n = &mut tree.nodes[i as usize];
            n.in_flight -= 1;
            n.visits += 1;
            n.value_sum += if n.mover == leaf_mover { value } else { 1.0 - value };
        }
    }

    /// Of root children as (move, visits, win rate, prior), most visited
    /// first, the one the search plays: the first, or by `lcb`'s rule.
    fn played<'a>(&self, children: &'a [(Move, u32, f32, f32)]) -> Option<&'a (Move, u32, f32, f32)> {
        if self.config.lcb {
            by_lower_bound(children)
        } else {
            children.first()
        }
    }

    fn report(&self, iterations: u32, reused: u32) -> SearchReport {
        let tree = self.tree.as_ref().expect("a tree exists after a search");
        let root = &tree.nodes[tree.root as usize];
        let mut children: Vec<(Move, u32, f32, f32)> = root
            .children
            .iter()
            .map(|&c| {
                let c = &tree.nodes[c as usize];
                (c.mv, c.visits, c.q().unwrap_or(0.0), c.prior)
            })
            .collect();
        // Most visited first; the prior breaks ties.
        children.sort_by(|a, b| b.1.cmp(&a.1).then(b.3.total_cmp(&a.3)));
        let best = self.played(&children).map_or(Move::Pass, |c| c.0);
        // Tree moves were legal when expanded in this very position; the
        // check costs nothing and guards the promise.
        let best = if tree.game.is_legal(tree.game.to_move(), best) { best } else { Move::Pass };
        SearchReport { best, children, iterations, reused }
    }
}

/// Of root children sorted most visited first, the one with the highest
/// lower confidence bound on its win rate among those with at least a tenth
/// of the first's visits; on equal bounds the more visited.
fn by_lower_bound(children: &[(Move, u32, f32, f32)]) -> Option<&(Move, u32, f32, f32)> {
    let most = children.first()?.1;
    let bound = |c: &(Move, u32, f32, f32)| lower_confidence_bound(c.2, c.2, c.1);
    children
        .iter()
        .take_while(|c| c.1 > 0 && c.1 as u64 * 10 >= most as u64)
        .fold(None, |best: Option<&(Move, u32, f32, f32)>, c| match best {
            Some(b) if bound(b) >= bound(c) => Some(b),
            _ => Some(c),
        })
        .or(children.first())
}

/// The child of `node` with the best selection score (`None`: no children).
fn best_child(nodes: &[Node], node: u32, config: &MctsConfig) -> Option<u32> {
    let parent = &nodes[node as usize];
    let parent_n = (parent.visits + parent.in_flight).max(1) as f32;
    // An unvisited child under PUCT is valued as its parent is, from the
    // child's side (first-play urgency), less the reduction. The visited
    // prior mass takes a pass over the children: only when it counts.
    let reduction = if config.fpu_reduction > 0.0 && config.selection == Selection::Puct {
        let visited_prior: f32 = parent
            .children
            .iter()
            .map(|&c| &nodes[c as usize])
            .filter(|c| c.visits + c.in_flight > 0)
            .map(|c| c.prior)
            .sum();
        config.fpu_reduction * visited_prior.sqrt()
    } else {
        0.0
    };
    let fpu = 1.0 - parent.q().unwrap_or(0.5) - reduction;
    let (ln_n, sqrt_n) = (parent_n.ln(), parent_n.sqrt());
    let exploration = config.exploration();
    let score = |c: &Node| -> f32 {
        let n = (c.visits + c.in_flight) as f32;
        match config.selection {
            Selection::Ucb => match c.q() {
                // Unvisited children first, the most likely among them.
                None => 1e6 + c.prior,
                Some(q) => q + exploration * (ln_n / n).sqrt(),
            },
            Selection::Puct => c.q().unwrap_or(fpu) + exploration * c.prior * sqrt_n / (1.0 + n),
        }
    };
    // Each child scored once; on equal scores the later child wins, as
    // `max_by` had it.
    parent.children.iter().map(|&c| (c, score(&nodes[c as usize]))).max_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, _)| c)
}

/// Moves from `node` on, each the most visited child of the one before,
/// while they have visits (at most 40: a GUI shows a few), with their
/// visits.
fn principal_variation(nodes: &[Node], mut node: u32) -> Vec<(Move, u32)> {
    let step = |node: u32| (nodes[node as usize].mv, nodes[node as usize].visits);
    let mut pv = vec![step(node)];
    while pv.len() < 40 {
        let next = nodes[node as usize].children.iter().copied().filter(|&c| nodes[c as usize].visits > 0);
        let Some(best) = next.max_by_key(|&c| nodes[c as usize].visits) else { break };
        pv.push(step(best));
        node = best;
    }
    pv
}

/// The value of a finished game for its side to move: 1 win, 0 loss, ½ a
/// draw, by area count with no dead stones (rollouts end with only eyes
/// left, and a tree leaf that ended by two passes is scored as it stands).
fn final_value(game: &Game) -> f32 {
    if let Some(loser) = game.resigned() {
        return if loser == game.to_move() { 0.0 } else { 1.0 };
    }
    let black_lead = Count::new(game.board(), &[]).area_margin() as f32 - game.rules().komi;
    Score { black_lead }.value_for(game.to_move())
}

/// Black's area margin of the position as it stands (no dead stones, no komi).
fn area_margin(game: &Game) -> i32 {
    Count::new(game.board(), &[]).area_margin()
}

/// The seed's stone-count fallback for the side to move: what it gained in
/// area since the root (see [`LeafEval::Stones`]).
fn stone_count_value(game: &Game, root_margin: i32) -> f32 {
    score_value((area_margin(game) - root_margin) as f32, game.to_move(), 5.0)
}

/// Points of predicted margin gained that make a score value of about 0.88
/// ([`MctsConfig::score`]): the value moves most over the few points a
/// capture or a settled corner is worth and saturates past a few tens,
/// where a game is won or lost whatever the exact count. Chosen, not tuned.
const SCORE_SCALE: f32 = 10.0;

/// The value for `to_move` of a change `black_gain` in Black's area margin
/// (points; negative where White gained): ½ for none, towards 1 as the side
/// gains, `0.5 + 0.5·tanh(gain / scale)`.
fn score_value(black_gain: f32, to_move: Color, scale: f32) -> f32 {
    0.5 + 0.5 * (black_side(to_move, black_gain) / scale).tanh()
}

/// A margin given for `side`, turned to Black's (or back: the turn is its
/// own inverse).
fn black_side(side: Color, margin: f32) -> f32 {
    if side == Color::Black {
        margin
    } else {
        -margin
    }
}

impl Agent for Mcts {
    fn genmove(&mut self, game: &Game, budget: Option<Duration>) -> Result<Move> {
        Ok(self.search(game, budget)?.best)
    }

    fn tree_search(&mut self) -> Option<&mut Mcts> {
        Some(self)
    }

    fn supports_size(&self, size: usize) -> bool {
        let uses_nets = [&self.policy, &self.root_policy, &self.value, &self.playout].iter().any(|n| n.is_some());
        !uses_nets || size == BOARD
    }

    fn name(&self) -> String {
        let c = &self.config;
        let root_width = c.root_expand.unwrap_or(c.expand);
        let mut name = format!(
            "mcts {} iterations, {:?} c={}, rollout {}, ",
            c.iterations,
            c.selection,
            c.exploration(),
            c.rollout_depth
        );
        match &self.policy {
            Some(p) => match c.expand_replies {
                Some(r) => name.push_str(&format!("top-{} (replies top-{r}) of {}", c.expand, p.source())),
                None => name.push_str(&format!("top-{} of {}", c.expand, p.source())),
            },
            None => name.push_str("all moves"),
        }
        if self.root_policy.is_none() && self.policy.is_some() && root_width != c.expand {
            name.push_str(&format!(", the root's top-{root_width}"));
        }
        if let Some(r) = &self.root_policy {
            match c.root_policy_depth {
                1 => name.push_str(&format!(", the root's top-{root_width} of {}", r.source())),
                d => name.push_str(&format!(
                    ", the top-{} of {} in the first {d} levels (the root's top-{root_width})",
                    c.expand,
                    r.source()
                )),
            }
            if c.root_symmetries {
                name.push_str(" averaged over the 8 symmetries");
            }
        }
        if let Some(p) = &self.playout {
            name.push_str(&format!(", playout {}", p.source()));
        }
        match (&self.value, self.leaf) {
            (Some(v), LeafEval::Value) => name.push_str(&format!(", value {}", v.source())),
            _ => name.push_str(", stone-count leaves"),
        }
        if c.score > 0.0 {
            name.push_str(&format!(" and its predicted score (weight {})", c.score));
        }
        if c.mix > 0.0 {
            name.push_str(&format!(
                " mixed with {} random playouts{} (λ {}, as the board settles)",
                c.mix_playouts,
                if c.mix_tactics { " answering ataris" } else { "" },
                c.mix
            ));
        }
        if c.fpu_reduction > 0.0 {
            name.push_str(&format!(", first-play urgency reduced by {}", c.fpu_reduction));
        }
        if c.lcb {
            name.push_str(", playing the move whose win rate has the highest lower bound");
        }
        if c.random_symmetry {
            name.push_str(", each batch seen through a random symmetry");
        }
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::go::{Rules, Vertex};
    use crate::nn::{Arch, Model};
    use crate::search::config::Preset;
    use candle_core::Device;

    fn v(s: &str, size: usize) -> Move {
        Move::parse_gtp(s, size).unwrap()
    }

    /// The seed design's settings.
    fn seed_config() -> MctsConfig {
        MctsConfig::preset(Preset::Seed)
    }

    fn stones_config(iterations: u32) -> MctsConfig {
        MctsConfig { iterations, leaf: Some(LeafEval::Stones), ..seed_config() }
    }

    fn random_net(arch: Arch, seed: u64) -> NetEval {
        NetEval::new(Model::new(arch, FeatureSet::Seed, &Device::Cpu, seed).unwrap(), format!("untrained {arch:?}"))
    }

    #[test]
    fn mixed_leaves_count_a_settled_board_that_the_leaf_value_cannot() {
        // Black's stones fill the five left columns, White's the three right
        // ones, with eyes at the odd-odd points and dame between: Black wins
        // whatever White, to move, plays. The stone count only sees what a
        // move gains (a dame point: a little); random playouts from these
        // settled leaves count White's loss.
        let mut game = Game::new(9, Rules::CHINESE);
        let stones: Vec<(Vertex, Option<Color>)> = (0..9)
            .flat_map(|y| (0..9).map(move |x| (x, y)))
            .filter(|&(x, y)| x != 5 && !(x % 2 == 1 && y % 2 == 1))
            .map(|(x, y)| (Vertex::new(x, y), Some(if x < 5 { Color::Black } else { Color::White })))
            .collect();
        game.setup(&stones).unwrap();
        game.set_to_move(Color::White);
        let white_value = |mix: f32| {
            let mut mcts =
                Mcts::new(MctsConfig { mix, mix_playouts: 8, ..stones_config(64) }, None, None, None).unwrap();
            let report = mcts.search(&game, None).unwrap();
            let (visits, sum) = report.children.iter().fold((0, 0.0), |(n, s), c| (n + c.1, s + c.1 as f32 * c.2));
            sum / visits as f32
        };
        let (alone, mixed) = (white_value(0.0), white_value(1.0));
        assert!(alone > 0.3, "stone count alone: {alone}");
        assert!(mixed < 0.2, "mixed with playouts: {mixed}");
    }

    #[test]
    fn the_lower_bound_chooses_among_children_with_a_tenth_of_the_most_visits() {
        let (a, b, c) = (v("A1", 9), v("B1", 9), v("C1", 9));
        // A's 0.55 over 500 visits bounds at 0.506, B's 0.60 over 240 at
        // 0.538; C's 0.9 over 40 would bound higher but has under 50.
        let children = [(a, 500, 0.55, 0.5), (b, 240, 0.60, 0.3), (c, 40, 0.9, 0.2)];
        assert_eq!(by_lower_bound(&children).map(|c| c.0), Some(b));
        let children = [(a, 500, 0.55, 0.5), (b, 240, 0.60, 0.3), (c, 50, 0.9, 0.2)];
        assert_eq!(by_lower_bound(&children).map(|c| c.0), Some(c));
        // Equal bounds keep the more visited; unvisited children the first.
        assert_eq!(by_lower_bound(&[(a, 100, 0.5, 0.1), (b, 100, 0.5, 0.9)]).map(|c| c.0), Some(a));
        assert_eq!(by_lower_bound(&[(a, 0, 0.0, 0.1), (b, 0, 0.0, 0.9)]).map(|c| c.0), Some(a));
        assert_eq!(by_lower_bound(&[]), None);
    }

    #[test]
    fn the_lcb_setting_plays_the_lower_bounds_choice() {
        let game = Game::new(9, Rules::CHINESE);
        let mut config = stones_config(300);
        config.set("lcb", "on").unwrap();
        assert!(config.lcb, "the setting's name turns it on");
        let mut best = Vec::new();
        for lcb in [false, true] {
            let mut mcts = Mcts::new(MctsConfig { lcb, ..config.clone() }, None, None, None).unwrap();
            let report = mcts.search(&game, None).unwrap();
            let expected = if lcb { by_lower_bound(&report.children) } else { report.children.first() };
            assert_eq!(Some(report.best), expected.map(|c| c.0), "lcb={lcb}: {:?}", &report.children[..4]);
            // Analyses list the move played first (KataGo's `order` 0).
            assert_eq!(mcts.analysis().unwrap().moves[0].mv, report.best, "lcb={lcb}");
            best.push(report.best);
        }
        // On this board's many near-equal children the two rules part.
        assert_ne!(best[0], best[1]);
    }

    #[test]
    fn captures_a_big_group_in_atari() {
        // White's four stones on the D column have one liberty left, at D6.
        let mut game = Game::new(9, Rules::CHINESE);
        for (c, m) in [
            (Color::Black, "C2"),
            (Color::White, "D2"),
            (Color::Black, "C3"),
            (Color::White, "D3"),
            (Color::Black, "C4"),
            (Color::White, "D4"),
            (Color::Black, "C5"),
            (Color::White, "D5"),
            (Color::Black, "E2"),
            (Color::White, "H8"),
            (Color::Black, "E3"),
            (Color::White, "H7"),
            (Color::Black, "E4"),
            (Color::White, "G8"),
            (Color::Black, "E5"),
            (Color::White, "G7"),
            (Color::Black, "D1"),
            (Color::White, "J9"),
        ] {
            game.play(c, v(m, 9)).unwrap();
        }
        let mut mcts = Mcts::new(stones_config(300), None, None, None).unwrap();
        let report = mcts.search(&game, None).unwrap();
        assert_eq!(report.best, v("D6", 9), "{:?}", &report.children[..4]);
    }

    /// `--time` once cut GUI analysis off after the seconds of a move.
    #[test]
    fn an_open_ended_search_runs_past_the_time_of_a_move() {
        let config = MctsConfig { time: Some(0.001), batch: 1, ..stones_config(1_000_000) };
        let mut mcts = Mcts::new(config, None, None, None).unwrap();
        let started = Instant::now();
        let mut batches = 0;
        mcts.search_observed(&Game::new(9, Rules::CHINESE), None, None, &mut |_| {
            batches += 1;
            if started.elapsed() > Duration::from_millis(50) {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50), "stopped after {batches} batches");
        // A move's search keeps to it.
        let report = mcts.search(&Game::new(7, Rules::CHINESE), None).unwrap();
        assert!(report.iterations < 1_000_000, "{} iterations", report.iterations);
    }

    #[test]
    fn self_play_on_a_small_board_only_ever_plays_legal_moves() {
        let mut game = Game::new(7, Rules::CHINESE);
        let mut black = Mcts::new(MctsConfig { rollout_depth: 100, ..stones_config(40) }, None, None, None).unwrap();
        let mut white = Mcts::new(
            MctsConfig { selection: Selection::Puct, c: Some(2.0), seed: 9, ..stones_config(40) },
            None,
            None,
            None,
        )
        .unwrap();
        while !game.is_over() && game.move_count() < 300 {
            let color = game.to_move();
            let agent = if color == Color::Black { &mut black } else { &mut white };
            let mv = agent.genmove(&game, None).unwrap();
            if let Move::Play(vx) = mv {
                assert!(!game.board().is_eye(game.board().point(vx), color), "filled its own eye at {vx}");
            }
            game.play(color, mv).unwrap_or_else(|e| panic!("move {}: {e}", game.move_count()));
        }
        assert!(game.is_over(), "the game ends by two passes");
    }

    /// The analysis of a game two passes ended once answered no moves.
    #[test]
    fn a_game_two_passes_ended_is_searched_as_if_play_went_on() {
        let mut game = Game::new(9, Rules::CHINESE);
        for (c, m) in [(Color::Black, "E5"), (Color::White, "pass"), (Color::Black, "pass")] {
            game.play(c, v(m, 9)).unwrap();
        }
        assert!(game.is_over());
        let mut mcts = Mcts::new(stones_config(50), None, None, None).unwrap();
        let report = mcts.search(&game, None).unwrap();
        let visited: u32 = report.children.iter().map(|c| c.1).sum();
        assert!(report.children.len() > 1 && visited >= 40, "{:?}", report.children);
        // So is it after a search that reached it as the end of a game.
        let mut before = game.clone();
        before.undo();
        let mut mcts = Mcts::new(stones_config(200), None, None, None).unwrap();
        mcts.search(&before, None).unwrap();
        let report = mcts.search(&game, None).unwrap();
        let visited: u32 = report.children.iter().map(|c| c.1).sum();
        assert!(report.children.len() > 1 && visited >= 40, "after a search of the move before: {:?}", report.children);
        // A resigned game stays over.
        let mut resigned = Game::new(9, Rules::CHINESE);
        resigned.play(Color::Black, Move::Resign).unwrap();
        let report = mcts.search(&resigned, None).unwrap();
        assert!(report.children.is_empty(), "{:?}", report.children);
    }

    #[test]
    /// GTP `boardsize` without `clear_board` hands the next search an empty
    /// board of another size: the old tree must not be reused (it panicked
    /// with an out-of-bounds point).
    fn a_new_board_size_starts_a_new_tree() {
        let mut mcts = Mcts::new(stones_config(30), None, None, None).unwrap();
        mcts.search(&Game::new(19, Rules::CHINESE), None).unwrap();
        let small = Game::new(9, Rules::CHINESE);
        let report = mcts.search(&small, None).unwrap();
        assert_eq!(report.reused, 0);
        assert!(small.is_legal(Color::Black, report.best), "{:?}", report.best);
    }

    #[test]
    fn tactics_add_the_escape_from_atari_to_the_policys_top_k() {
        // Black's C3-D3 is in atari (last liberty E3, which leads out).
        let mut game = Game::new(19, Rules::CHINESE);
        for (i, m) in ["C3", "C4", "D3", "D4", "Q16", "B3", "Q4", "C2", "D16", "D2"].iter().enumerate() {
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            game.play(color, v(m, 19)).unwrap();
        }
        let escape = v("E3", 19);
        let probs = random_net(Arch::Policy, 1).move_probs(&[&game]).unwrap().remove(0);
        let mut ranked = scored_moves(&game, &probs);
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        assert_ne!(ranked[0].0, escape, "the untrained net happens to rank the escape first: pick another seed");
        let children = |tactics: bool| {
            let config = MctsConfig { expand: 1, tactics, ..stones_config(8) };
            let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None).unwrap();
            let report = mcts.search(&game, None).unwrap();
            report.children.iter().map(|c| (c.0, c.3)).collect::<Vec<_>>()
        };
        assert_eq!(children(false).iter().map(|c| c.0).collect::<Vec<_>>(), vec![ranked[0].0]);
        let with = children(true);
        assert_eq!(with.len(), 2, "{with:?}");
        let (mv, prior) = with.iter().copied().find(|c| c.0 == escape).expect("the escape is a child");
        assert_eq!(mv, escape);
        assert!(prior >= ranked[0].1, "the escape gets at least the k-th move's prior: {with:?}");
    }

    #[test]
    fn random_symmetry_shows_the_policy_net_the_board_through_one_of_the_eight() {
        // An untrained net is no more symmetric than a trained one: the 8
        // views of the empty board give 8 different prior vectors.
        let game = Game::new(19, Rules::CHINESE);
        let views: Vec<Vec<(Move, f32)>> = Symmetry::all()
            .map(|s| scored_moves(&game, &random_net(Arch::Policy, 1).move_probs_seen(&[&game], s).unwrap()[0]))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..8 {
            let config = MctsConfig { expand: 362, batch: 1, random_symmetry: true, seed, ..stones_config(1) };
            let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None).unwrap();
            let report = mcts.search(&game, None).unwrap();
            let mut priors: Vec<(Move, f32)> = report.children.iter().map(|c| (c.0, c.3)).collect();
            priors.sort_by_key(|m| format!("{:?}", m.0));
            let view = views.iter().position(|v| {
                let mut v = v.clone();
                v.sort_by_key(|m| format!("{:?}", m.0));
                v.len() == priors.len() && v.iter().zip(&priors).all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-6)
            });
            seen.insert(view.expect("the priors are the net's through one symmetry"));
        }
        assert!(seen.len() >= 3, "8 searches drew views {seen:?}");
        // Without it the search sees the board as it is.
        let mut mcts = Mcts::new(
            MctsConfig { expand: 362, batch: 1, ..stones_config(1) },
            Some(random_net(Arch::Policy, 1)),
            None,
            None,
        )
        .unwrap();
        let report = mcts.search(&game, None).unwrap();
        let prior = |m: Move| report.children.iter().find(|c| c.0 == m).unwrap().3;
        assert!(views[0].iter().all(|&(m, p)| (prior(m) - p).abs() < 1e-6));
    }

    #[test]
    fn with_a_policy_net_it_expands_the_top_k_and_reuses_the_subtree() {
        let policy = random_net(Arch::Policy, 1);
        let config = MctsConfig { iterations: 24, expand: 3, batch: 4, ..stones_config(24) };
        let mut mcts = Mcts::new(config, Some(policy), None, Some(random_net(Arch::Playout, 2))).unwrap();
        let mut game = Game::new(19, Rules::CHINESE);
        let report = mcts.search(&game, None).unwrap();
        assert_eq!(report.children.len(), 3);
        // The first visit expands the root.
        assert_eq!(report.children.iter().map(|c| c.1).sum::<u32>(), 24 - 1);
        // The children are the net's three most likely acceptable moves.
        let mut chosen: Vec<Move> = report.children.iter().map(|c| c.0).collect();
        chosen.sort_by_key(|m| format!("{m:?}"));
        assert_eq!(top_k(&random_net(Arch::Policy, 1), &game, 3), chosen);
        // Play the chosen move and the reply the tree explored most: the
        // next search starts from the visits already under that reply.
        game.play(Color::Black, report.best).unwrap();
        let tree = mcts.tree.as_ref().unwrap();
        let child = child_by_move(tree, tree.root, report.best);
        let reply = tree.nodes[child as usize].children.iter().copied().max_by_key(|&c| tree.nodes[c as usize].visits);
        if let Some(reply) = reply {
            let (mv, visits) = (tree.nodes[reply as usize].mv, tree.nodes[reply as usize].visits);
            game.play(Color::White, mv).unwrap();
            let next = mcts.search(&game, None).unwrap();
            assert_eq!(next.reused, visits);
        }
    }

    /// The child of `node` reached by `mv`.
    fn child_by_move(tree: &Tree, node: u32, mv: Move) -> u32 {
        tree.nodes[node as usize].children.iter().copied().find(|&c| tree.nodes[c as usize].mv == mv).unwrap()
    }

    /// The moves of `node`'s children, in a fixed order.
    fn child_moves(tree: &Tree, node: u32) -> Vec<Move> {
        let mut moves: Vec<Move> =
            tree.nodes[node as usize].children.iter().map(|&c| tree.nodes[c as usize].mv).collect();
        moves.sort_by_key(|m| format!("{m:?}"));
        moves
    }

    /// The `k` moves `net` ranks first in `game`, in a fixed order.
    fn top_k(net: &NetEval, game: &Game, k: usize) -> Vec<Move> {
        let probs = net.move_probs(&[game]).unwrap().remove(0);
        let mut ranked = scored_moves(game, &probs);
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut top: Vec<Move> = ranked[..k].iter().map(|m| m.0).collect();
        top.sort_by_key(|m| format!("{m:?}"));
        top
    }

    #[test]
    fn a_root_policy_chooses_the_roots_children_and_those_of_a_kept_root() {
        let (policy, root) = (random_net(Arch::Policy, 1), random_net(Arch::Policy, 3));
        let mut game = Game::new(19, Rules::CHINESE);
        assert_ne!(top_k(&policy, &game, 3), top_k(&root, &game, 3), "pick seeds whose nets disagree");
        let config = MctsConfig { expand: 3, batch: 4, ..stones_config(40) };
        let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None).unwrap().with_root_policy(root);
        let root_children = |mcts: &Mcts| {
            let tree = mcts.tree.as_ref().unwrap();
            child_moves(tree, tree.root)
        };
        let report = mcts.search(&game, None).unwrap();
        let root = random_net(Arch::Policy, 3);
        assert_eq!(root_children(&mcts), top_k(&root, &game, 3));
        // Below the root the policy net expands, as without a root net.
        game.play(Color::Black, report.best).unwrap();
        let tree = mcts.tree.as_ref().unwrap();
        let child = child_by_move(tree, tree.root, report.best);
        let replies: Vec<u32> = tree.nodes[child as usize].children.clone();
        assert_eq!(child_moves(tree, child), top_k(&policy, &game, 3));
        // The reply the tree explored most becomes the root: it keeps its
        // visits, and the root net's candidates join its children.
        let reply = replies.iter().copied().max_by_key(|&c| tree.nodes[c as usize].visits).unwrap();
        let (mv, visits) = (tree.nodes[reply as usize].mv, tree.nodes[reply as usize].visits);
        assert!(tree.nodes[reply as usize].expanded, "40 iterations expand the favourite reply");
        game.play(Color::White, mv).unwrap();
        let next = mcts.search(&game, None).unwrap();
        assert_eq!(next.reused, visits);
        let children = root_children(&mcts);
        assert!(top_k(&root, &game, 3).iter().all(|m| children.contains(m)), "{children:?}");
        let probs = root.move_probs(&[&game]).unwrap().remove(0);
        for (mv, _, _, prior) in next.children {
            let p = scored_moves(&game, &probs).into_iter().find(|m| m.0 == mv).unwrap().1;
            assert!((prior - p).abs() < 1e-6, "{mv:?}: prior {prior}, root net {p}");
        }
    }

    #[test]
    fn a_wider_root_takes_the_top_of_its_net_and_widens_a_kept_root() {
        let (policy, root) = (random_net(Arch::Policy, 1), random_net(Arch::Policy, 3));
        let mut config = MctsConfig { expand: 2, batch: 4, ..stones_config(80) };
        config.set("root-expand", "5").unwrap();
        assert_eq!(config.root_expand, Some(5), "the setting's name sets it");
        for with_root_net in [true, false] {
            let root_net = if with_root_net { &root } else { &policy };
            let mut game = Game::new(19, Rules::CHINESE);
            let mut mcts = Mcts::new(config.clone(), Some(random_net(Arch::Policy, 1)), None, None).unwrap();
            if with_root_net {
                mcts = mcts.with_root_policy(random_net(Arch::Policy, 3));
            }
            let report = mcts.search(&game, None).unwrap();
            let tree = mcts.tree.as_ref().unwrap();
            assert_eq!(child_moves(tree, tree.root), top_k(root_net, &game, 5), "root net {with_root_net}");
            // Below the root, nodes keep the width of `expand`.
            game.play(Color::Black, report.best).unwrap();
            let child = child_by_move(tree, tree.root, report.best);
            assert_eq!(child_moves(tree, child), top_k(&policy, &game, 2), "root net {with_root_net}");
            // The most explored reply, two wide, becomes the root: five wide.
            let replies = tree.nodes[child as usize].children.clone();
            let reply = replies.iter().copied().max_by_key(|&c| tree.nodes[c as usize].visits).unwrap();
            assert_eq!(tree.nodes[reply as usize].children.len(), 2, "root net {with_root_net}");
            game.play(Color::White, tree.nodes[reply as usize].mv).unwrap();
            let next = mcts.search(&game, None).unwrap();
            assert!(next.reused > 0, "root net {with_root_net}: the kept reply was visited");
            let children = {
                let tree = mcts.tree.as_ref().unwrap();
                child_moves(tree, tree.root)
            };
            assert!(top_k(root_net, &game, 5).iter().all(|m| children.contains(m)), "{with_root_net}: {children:?}");
        }
    }

    #[test]
    fn a_root_policy_two_levels_deep_chooses_the_replies_and_those_of_a_kept_tree() {
        let (policy, root) = (random_net(Arch::Policy, 1), random_net(Arch::Policy, 3));
        let mut game = Game::new(19, Rules::CHINESE);
        let config = MctsConfig { expand: 3, batch: 4, root_policy_depth: 2, ..stones_config(60) };
        let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None)
            .unwrap()
            .with_root_policy(random_net(Arch::Policy, 3));
        let report = mcts.search(&game, None).unwrap();
        let tree = mcts.tree.as_ref().unwrap();
        assert_eq!(child_moves(tree, tree.root), top_k(&root, &game, 3));
        // Each expanded root child's replies are the root net's; one level
        // further down the policy net expands again.
        let (mut replies_checked, mut below_checked) = (0, 0);
        for &c in &tree.nodes[tree.root as usize].children {
            let (node, mut after) = (&tree.nodes[c as usize], game.clone());
            after.play(node.mover, node.mv).unwrap();
            if !node.expanded {
                continue;
            }
            assert_eq!(child_moves(tree, c), top_k(&root, &after, 3), "replies to {:?}", node.mv);
            assert!(node.root_priors, "marked, so that a later search does not evaluate it again");
            replies_checked += 1;
            for &r in node.children.iter().filter(|&&r| tree.nodes[r as usize].expanded) {
                assert!(!tree.nodes[r as usize].root_priors);
                let mut deeper = after.clone();
                deeper.play(tree.nodes[r as usize].mover, tree.nodes[r as usize].mv).unwrap();
                assert_eq!(child_moves(tree, r), top_k(&policy, &deeper, 3));
                below_checked += 1;
            }
        }
        assert!(replies_checked > 0 && below_checked > 0, "60 iterations expand two levels below the root");
        // Play the chosen move and its most visited reply: the new root's
        // expanded children were expanded by the policy net; the next
        // search gives them the root net's candidates and priors.
        game.play(Color::Black, report.best).unwrap();
        let child = child_by_move(tree, tree.root, report.best);
        let reply = tree.nodes[child as usize].children.iter().copied().max_by_key(|&c| tree.nodes[c as usize].visits);
        let reply = reply.unwrap();
        assert!(tree.nodes[reply as usize].expanded, "60 iterations expand the favourite reply");
        game.play(Color::White, tree.nodes[reply as usize].mv).unwrap();
        let kept: Vec<u32> =
            tree.nodes[reply as usize].children.iter().copied().filter(|&c| tree.nodes[c as usize].expanded).collect();
        assert!(!kept.is_empty(), "the new root keeps an expanded child");
        let kept_policy_moves: Vec<Vec<Move>> = kept
            .iter()
            .map(|&c| {
                let mut after = game.clone();
                after.play(tree.nodes[c as usize].mover, tree.nodes[c as usize].mv).unwrap();
                top_k(&policy, &after, 3)
            })
            .collect();
        mcts.search(&game, None).unwrap();
        let tree = mcts.tree.as_ref().unwrap();
        for (&c, policy_moves) in kept.iter().zip(kept_policy_moves) {
            let mut after = game.clone();
            after.play(tree.nodes[c as usize].mover, tree.nodes[c as usize].mv).unwrap();
            let moves = child_moves(tree, c);
            assert!(policy_moves.iter().all(|m| moves.contains(m)), "kept children stay: {moves:?}");
            assert!(top_k(&root, &after, 3).iter().all(|m| moves.contains(m)), "the root net's join: {moves:?}");
            let probs = root.move_probs(&[&after]).unwrap().remove(0);
            for &g in &tree.nodes[c as usize].children {
                let (mv, prior) = (tree.nodes[g as usize].mv, tree.nodes[g as usize].prior);
                let p = scored_moves(&after, &probs).into_iter().find(|m| m.0 == mv).unwrap().1;
                assert!((prior - p).abs() < 1e-6, "{mv:?}: prior {prior}, root net {p}");
            }
        }
    }

    /// With `root_symmetries`, the root's children take the root policy's
    /// probabilities averaged over the 8 views of the board, which an
    /// untrained net (not equivariant) gives unlike its plain view.
    #[test]
    fn root_symmetries_average_the_root_policy_over_the_eight_views() {
        let root = random_net(Arch::Policy, 3);
        let mut game = Game::new(19, Rules::CHINESE);
        for (color, at) in [(Color::Black, "D4"), (Color::White, "Q16"), (Color::Black, "C16")] {
            game.play(color, v(at, 19)).unwrap();
        }
        let config = MctsConfig { expand: 5, batch: 4, root_symmetries: true, ..stones_config(8) };
        let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None)
            .unwrap()
            .with_root_policy(random_net(Arch::Policy, 3));
        let report = mcts.search(&game, None).unwrap();
        let mut averaged = vec![0f32; crate::nn::MOVES];
        for s in 0..8 {
            let seen = root.move_probs_seen(&[&game], Symmetry::new(s)).unwrap().remove(0);
            averaged.iter_mut().zip(seen).for_each(|(a, p)| *a += p / 8.0);
        }
        let plain = root.move_probs(&[&game]).unwrap().remove(0);
        let prob = |probs: &[f32], mv: Move| scored_moves(&game, probs).into_iter().find(|m| m.0 == mv).unwrap().1;
        assert_eq!(report.children.len(), 5);
        let mut differs = false;
        for (mv, _, _, prior) in report.children {
            // The net's probabilities are near 1/358; its views differ by
            // a few parts in a thousand, rounding by a part in a million.
            assert!(
                (prior - prob(&averaged, mv)).abs() < 1e-8,
                "{mv:?}: prior {prior}, averaged {}",
                prob(&averaged, mv)
            );
            differs |= (prior - prob(&plain, mv)).abs() > 2e-6;
        }
        assert!(differs, "the average differs from the plain view somewhere");
    }

    #[test]
    fn replies_expand_to_their_own_width() {
        // One move of ours, four replies to it, one move again below them.
        let config = MctsConfig { iterations: 40, expand: 1, expand_replies: Some(4), batch: 1, ..stones_config(40) };
        let mut mcts = Mcts::new(config, Some(random_net(Arch::Policy, 1)), None, None).unwrap();
        mcts.search(&Game::new(19, Rules::CHINESE), None).unwrap();
        let tree = mcts.tree.as_ref().unwrap();
        let children = |n: u32| tree.nodes[n as usize].children.clone();
        let ours = children(tree.root);
        assert_eq!(ours.len(), 1);
        let replies = children(ours[0]);
        assert_eq!(replies.len(), 4);
        let below: Vec<usize> =
            replies.iter().filter(|&&r| tree.nodes[r as usize].expanded).map(|&r| children(r).len()).collect();
        assert!(!below.is_empty() && below.iter().all(|&n| n == 1), "{below:?}");
    }

    #[test]
    fn a_reduced_first_play_urgency_keeps_visits_on_the_favourite() {
        // The parent has been visited 100 times, all through its favourite
        // (prior 0.5), which won 45% of them; a move of prior 0.01 is
        // unvisited. Valued as its parent (0.5) it takes the next visit;
        // valued 0.25·√0.5 lower it does not.
        let mut nodes = vec![Node::new(Move::Pass, Color::White, 1.0)];
        nodes[0].visits = 100;
        nodes[0].value_sum = 50.0;
        nodes[0].expanded = true;
        let mut favourite = Node::new(Move::Play(Vertex::new(3, 3)), Color::Black, 0.5);
        favourite.visits = 100;
        favourite.value_sum = 45.0;
        nodes.push(favourite);
        nodes.push(Node::new(Move::Play(Vertex::new(9, 9)), Color::Black, 0.01));
        nodes[0].children = vec![1, 2];
        let config =
            |fpu_reduction| MctsConfig { selection: Selection::Puct, c: Some(2.0), fpu_reduction, ..stones_config(1) };
        assert_eq!(best_child(&nodes, 0, &config(0.0)), Some(2));
        assert_eq!(best_child(&nodes, 0, &config(0.25)), Some(1));
    }

    #[test]
    fn a_time_budget_stops_the_search_early() {
        let game = Game::new(9, Rules::CHINESE);
        let mut mcts = Mcts::new(stones_config(u32::MAX), None, None, None).unwrap();
        let report = mcts.search(&game, Some(Duration::from_millis(100))).unwrap();
        assert!(report.iterations > 0 && report.iterations < u32::MAX);
        assert!(game.is_legal(Color::Black, report.best));
    }

    /// A shipped value net (`value` or `value-tower`); both have an
    /// ownership head.
    fn shipped_value_net(name: &str) -> NetEval {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("nets/{name}.safetensors"));
        NetEval::load(&path, &Device::Cpu, crate::nn::Output::WinProb).unwrap()
    }

    #[test]
    fn the_score_counts_what_a_capture_gains_the_capturer() {
        // White's four stones on the D column have one liberty left, at D6;
        // Black to move captures them there, or plays elsewhere (Q16).
        let mut game = Game::new(19, Rules::CHINESE);
        for (i, m) in
            ["C2", "D2", "C3", "D3", "C4", "D4", "C5", "D5", "E2", "Q4", "E3", "R4", "E4", "Q3", "E5", "R3", "D1"]
                .iter()
                .enumerate()
        {
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            game.play(color, v(m, 19)).unwrap();
        }
        game.set_to_move(Color::Black);
        let after = |m: &str| {
            let mut g = game.clone();
            g.play(Color::Black, v(m, 19)).unwrap();
            g
        };
        let (capture, quiet) = (after("D6"), after("Q16"));
        let Move::Play(d3) = v("D3", 19) else { unreachable!() };
        assert_eq!(capture.board().color_at(capture.board().point(d3)), None, "D6 captures");
        // Each leaf's value for Black, who moved into it.
        let leaf_values = |score: f32| {
            let config = MctsConfig { score, rollout_depth: 0, iterations: 1, ..seed_config() };
            let mut mcts = Mcts::new(config, None, Some(shipped_value_net("value")), None).unwrap();
            mcts.search(&game, None).unwrap();
            let values = mcts.simulate_and_value(&[&capture, &quiet], Symmetry::IDENTITY).unwrap();
            (values[0], values[1])
        };
        // The net already gives most of the captured points to Black before
        // the capture (the string is dead where it stands): the capture
        // gains a few points, the quiet move loses White's tempo.
        let (capture_alone, quiet_alone) = leaf_values(1.0);
        assert!(capture_alone > quiet_alone + 0.15, "score alone: capture {capture_alone}, quiet {quiet_alone}");
        // Half and half lies between the win probability and the score.
        let (win_capture, _) = leaf_values(0.0);
        let (half_capture, _) = leaf_values(0.5);
        assert!((half_capture - 0.5 * (win_capture + capture_alone)).abs() < 1e-4);
    }

    #[test]
    fn the_score_needs_a_value_net_with_an_ownership_head() {
        let config = MctsConfig { score: 0.3, ..seed_config() };
        let err = Mcts::new(config.clone(), None, Some(random_net(Arch::Value, 3)), None).err().unwrap();
        assert!(err.to_string().contains("no ownership head"), "{err}");
        assert!(Mcts::new(MctsConfig { leaf: Some(LeafEval::Stones), ..config.clone() }, None, None, None).is_err());
        assert!(Mcts::new(MctsConfig { score: 1.5, ..config.clone() }, None, Some(shipped_value_net("value")), None)
            .is_err());
        assert!(Mcts::new(config, None, Some(shipped_value_net("value-tower")), None).is_ok());
    }

    #[test]
    fn tactical_playouts_need_a_mix_to_go_into() {
        let config = MctsConfig { leaf: Some(LeafEval::Stones), mix_tactics: true, ..seed_config() };
        let err = Mcts::new(config.clone(), None, None, None).err().unwrap();
        assert!(err.to_string().contains("give mix="), "{err}");
        assert!(Mcts::new(MctsConfig { mix: 1.0, ..config }, None, None, None).is_ok());
    }

    #[test]
    fn value_leaves_need_a_value_net() {
        let value_leaves = MctsConfig { leaf: Some(LeafEval::Value), ..seed_config() };
        assert!(Mcts::new(value_leaves.clone(), None, None, None).is_err());
        let mcts = Mcts::new(value_leaves, None, Some(random_net(Arch::Value, 3)), None).unwrap();
        assert!(!mcts.supports_size(9));
        let _ = Vertex::new(0, 0);
    }
}
