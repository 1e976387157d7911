//! Running a trained net on game positions, many at a time, and naming
//! where an agent's nets come from.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};

use crate::features::Symmetry;
use crate::go::{Game, Move, Vertex};
use crate::nn::{weights, Model, Output, BOARD, MOVES, POINTS};

/// A net ready to evaluate positions: planes in, move probabilities or a
/// win probability out. Positions are batched into one forward pass, which
/// is where nets get their speed.
pub struct NetEval {
    model: Model,
    /// Where the net was loaded from, for names and messages.
    source: String,
    /// Whether batches are padded to a few sizes
    /// ([`crate::nn::inputs::pads_on`]).
    pad: bool,
}

impl NetEval {
    /// Wraps a model already in memory.
    pub fn new(model: Model, source: impl Into<String>) -> NetEval {
        let pad = crate::nn::inputs::pads_on(model.device());
        NetEval { model, source: source.into(), pad }
    }

    /// Loads the checkpoint at `path` (a folder or a weights file in one)
    /// and checks that it gives `want`.
    pub fn load(path: &Path, device: &Device, want: Output) -> Result<NetEval> {
        NetEval::checked(weights::load(path, device)?, path.display().to_string(), want)
    }

    /// Loads the net `source` names and checks that it gives `want`.
    pub fn load_source(source: &NetSource, device: &Device, want: Output) -> Result<NetEval> {
        match source {
            NetSource::File(path) => NetEval::load(path, device, want),
            NetSource::BuiltIn { bytes, .. } => {
                let name = source.to_string();
                NetEval::checked(weights::load_bytes(bytes, &name, device)?, name, want)
            }
        }
    }

    /// `model` from `source`, when it gives `want`.
    fn checked(model: Model, source: String, want: Output) -> Result<NetEval> {
        if model.output() != want {
            let what = |o: Output| match o {
                Output::MoveLogProbs => "a move net (policy or playout)",
                Output::WinProb => "a value net",
            };
            bail!("{source}: is {}, but {} is needed here", what(model.output()), what(want));
        }
        Ok(NetEval::new(model, source))
    }

    /// The net itself: a trainer that plays with a net and learns from
    /// its games (`train-rl`) updates its weights in place.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// What the net gives.
    pub fn output(&self) -> Output {
        self.model.output()
    }

    /// Where it was loaded from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The input tensor (rows, planes, 19, 19) of `games`, each from its
    /// side to move, in the net's feature set, seen through `symmetry`;
    /// on a GPU padded with empty rows to one of a few batch sizes
    /// ([`NetEval::pad`]): cut the output to `games.len()` rows.
    fn input(&self, games: &[&Game], symmetry: Symmetry) -> Result<Tensor> {
        let n = games.len();
        let rows = if self.pad { crate::nn::inputs::padded_rows(n) } else { n };
        self.input_as(games, symmetry, crate::nn::inputs::packed_on(self.model.device()), rows)
    }

    /// [`NetEval::input`] in `rows` rows (at least the games), the planes
    /// copied as bits (`packed`, for a GPU) or as floats.
    fn input_as(&self, games: &[&Game], symmetry: Symmetry, packed: bool, rows: usize) -> Result<Tensor> {
        let features = self.model.features();
        if let Some(game) = games.iter().find(|g| g.size() != BOARD) {
            bail!("the nets play on {BOARD}x{BOARD} only, not {}x{}", game.size(), game.size());
        }
        let rows = rows.max(games.len());
        let device = self.model.device();
        if packed {
            // As bits, unpacked on the device: a 32nd of the bytes to copy.
            let to = symmetry.permutation(BOARD);
            let per_position = features.planes() * POINTS.div_ceil(64);
            let mut words = vec![0u64; rows * per_position];
            for (game, chunk) in games.iter().zip(words.chunks_exact_mut(per_position)) {
                features.encode(game).permuted_words_into(&to, chunk);
            }
            return Ok(crate::nn::inputs::planes_from_bits(&words, (rows, features.planes(), BOARD), device)?);
        }
        let per_position = features.planes() * POINTS;
        let mut data = vec![0f32; rows * per_position];
        // The symmetry applied as the bits are unpacked: one pass, one
        // permutation a batch (it was a second pass over the floats and a
        // permutation a position).
        let to = (symmetry != Symmetry::IDENTITY).then(|| symmetry.permutation(BOARD));
        for (game, chunk) in games.iter().zip(data.chunks_exact_mut(per_position)) {
            match &to {
                None => features.encode(game).unpack_into(chunk),
                Some(to) => features.encode(game).unpack_permuted_into(to, chunk),
            }
        }
        Ok(Tensor::from_vec(data, (rows, features.planes(), BOARD, BOARD), device)?)
    }

    /// Move probabilities (362 each: points in row-major order, then pass)
    /// for the side to move in each of `games`. Occupied points get 0.
    pub fn move_probs(&self, games: &[&Game]) -> Result<Vec<Vec<f32>>> {
        self.move_probs_seen(games, Symmetry::IDENTITY)
    }

    /// [`NetEval::move_probs`] of the positions turned by `symmetry`, each
    /// probability mapped back to the point of the position it belongs to
    /// (the raw output a researcher compares across frameworks).
    pub fn move_probs_seen(&self, games: &[&Game], symmetry: Symmetry) -> Result<Vec<Vec<f32>>> {
        if games.is_empty() {
            return Ok(Vec::new());
        }
        debug_assert_eq!(self.output(), Output::MoveLogProbs);
        let x = self.input(games, symmetry)?;
        let probs = self.model.forward(&x, false)?.narrow(0, 0, games.len())?.exp()?;
        let probs: Vec<Vec<f32>> = probs.to_vec2().context("reading the move net's output")?;
        debug_assert!(probs.iter().all(|p| p.len() == MOVES));
        if symmetry == Symmetry::IDENTITY {
            return Ok(probs);
        }
        // Move `m` of the position is move `apply_label(m)` of its image.
        Ok(probs.iter().map(|p| (0..MOVES).map(|m| p[symmetry.apply_label(m, BOARD)]).collect()).collect())
    }

    /// [`NetEval::move_probs`] of `game` averaged over the board's 8
    /// symmetries: 8 passes of the net for a steadier prior (a residual
    /// policy's top-1 went from 45.6% to 47.3%, docs/results/strength.md).
    pub fn move_probs_averaged(&self, game: &Game) -> Result<Vec<f32>> {
        let mut sum = vec![0f32; MOVES];
        for s in 0..8 {
            for (total, p) in sum.iter_mut().zip(self.move_probs_seen(&[game], Symmetry::new(s))?.remove(0)) {
                *total += p;
            }
        }
        Ok(sum.into_iter().map(|p| p / 8.0).collect())
    }

    /// The probability that the side to move wins, for each of `games`.
    pub fn win_probs(&self, games: &[&Game]) -> Result<Vec<f32>> {
        self.win_probs_seen(games, Symmetry::IDENTITY)
    }

    /// [`NetEval::win_probs`] of the positions turned by `symmetry`.
    pub fn win_probs_seen(&self, games: &[&Game], symmetry: Symmetry) -> Result<Vec<f32>> {
        Ok(self.value_heads(games, symmetry, false)?.0)
    }

    /// Whether the net predicts ownership beside the value, and so the margin
    /// of [`NetEval::win_probs_and_margins_seen`].
    pub fn predicts_ownership(&self) -> bool {
        self.model.arch().learns_ownership()
    }

    /// [`NetEval::win_probs_seen`], and for each position the area margin
    /// its ownership head predicts for the side to move: the sum of the
    /// ownership over the board (own points less the opponent's, no komi).
    /// Errors for a net without an ownership head.
    pub fn win_probs_and_margins_seen(&self, games: &[&Game], symmetry: Symmetry) -> Result<(Vec<f32>, Vec<f32>)> {
        if !self.predicts_ownership() {
            bail!("{}: has no ownership head, so predicts no margin (a policy-value-ownership net does)", self.source);
        }
        let (values, margins) = self.value_heads(games, symmetry, true)?;
        Ok((values, margins.unwrap_or_default()))
    }

    /// The value head's output and, with `margins`, the ownership head's
    /// summed over the board (the symmetry leaves a sum unchanged).
    fn value_heads(&self, games: &[&Game], symmetry: Symmetry, margins: bool) -> Result<(Vec<f32>, Option<Vec<f32>>)> {
        if games.is_empty() {
            return Ok((Vec::new(), margins.then(Vec::new)));
        }
        debug_assert_eq!(self.output(), Output::WinProb);
        let (x, n) = (self.input(games, symmetry)?, games.len());
        let read = "reading the value net's output";
        if !margins {
            return Ok((self.model.forward(&x, false)?.narrow(0, 0, n)?.flatten_all()?.to_vec1().context(read)?, None));
        }
        let (values, ownership) = self.model.forward_with_ownership(&x, false)?;
        let ownership = ownership.with_context(|| format!("{}: gave no ownership", self.source))?;
        let margins = ownership.narrow(0, 0, n)?.sum(1)?.to_vec1().context(read)?;
        Ok((values.narrow(0, 0, n)?.flatten_all()?.to_vec1().context(read)?, Some(margins)))
    }
}

/// Where a net comes from.
#[derive(Clone, Debug)]
pub enum NetSource {
    /// A checkpoint folder or a weights file in one.
    File(PathBuf),
    /// Weights built into the program: the shipped net `nets/{file}`.
    BuiltIn { file: &'static str, bytes: &'static [u8] },
}

impl PartialEq for NetSource {
    /// Built-in nets are told apart by their file, not their bytes.
    fn eq(&self, other: &NetSource) -> bool {
        match (self, other) {
            (NetSource::File(a), NetSource::File(b)) => a == b,
            (NetSource::BuiltIn { file: a, .. }, NetSource::BuiltIn { file: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl NetSource {
    /// The bytes of its weights file.
    pub fn bytes(&self) -> Result<std::borrow::Cow<'static, [u8]>> {
        match self {
            NetSource::File(path) => {
                let file = weights::resolve(path)?;
                let bytes =
                    crate::bounded_read::read_at_most(&file, crate::bounded_read::WEIGHTS_BYTES, "a weights file")
                        .with_context(|| format!("reading {}", file.display()))?;
                Ok(std::borrow::Cow::Owned(bytes))
            }
            NetSource::BuiltIn { bytes, .. } => Ok(std::borrow::Cow::Borrowed(bytes)),
        }
    }

    /// The net as a resumed run checks it: the CRC-32 of its file, so
    /// that another net put at the same path (a checkpoint folder still
    /// training) is not taken for the one the run began with, while the
    /// same net under another name (built in, or its file) is the same.
    pub fn fingerprint(&self) -> Result<String> {
        Ok(format!("crc32 {:08x}", crc32fast::hash(&self.bytes()?)))
    }
}

impl std::fmt::Display for NetSource {
    /// The path, or `built-in FILE` for a net built into the program.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            NetSource::File(path) => write!(f, "{}", path.display()),
            NetSource::BuiltIn { file, .. } => write!(f, "built-in {file}"),
        }
    }
}

impl serde::Serialize for NetSource {
    /// A path as text; a built-in net as the file it was built from,
    /// `nets/FILE`, as match records named the shipped nets before they
    /// were built in (so those records still tell the same agent).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            NetSource::File(path) => serializer.collect_str(&path.display()),
            NetSource::BuiltIn { file, .. } => serializer.collect_str(&format_args!("nets/{file}")),
        }
    }
}

/// The net an agent is given in one role.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum NetChoice {
    /// None named: the role's default net, if any ([`DefaultNets`]).
    #[default]
    Default,
    /// `none`: no net in this role.
    Off,
    /// This net.
    Net(NetSource),
}

impl NetChoice {
    /// `none` turns the role off; anything else is a checkpoint's path.
    pub fn named(path: &Path) -> NetChoice {
        match path.as_os_str() == "none" {
            true => NetChoice::Off,
            false => NetChoice::Net(NetSource::File(path.to_path_buf())),
        }
    }

    /// The net chosen, if any.
    pub fn source(&self) -> Option<&NetSource> {
        match self {
            NetChoice::Net(source) => Some(source),
            _ => None,
        }
    }

    /// The default's net where none is named (`none` stays none).
    pub fn or(self, default: Option<&NetSource>) -> NetChoice {
        match (self, default) {
            (NetChoice::Default, Some(net)) => NetChoice::Net(net.clone()),
            (choice, _) => choice,
        }
    }
}

impl serde::Serialize for NetChoice {
    /// The net, or null.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.source().serialize(serializer)
    }
}

/// The nets agents get in the roles their specs leave unnamed: those named
/// on the command line, else the shipped ones.
#[derive(Clone, Debug, Default)]
pub struct DefaultNets {
    pub policy: Option<NetSource>,
    pub value: Option<NetSource>,
    pub playout: Option<NetSource>,
    /// The net that chooses MCTS's root children where the agent plays
    /// the default policy (a root net chooses in the policy's place, so an
    /// agent given a policy of its own keeps it at the root).
    pub root_policy: Option<NetSource>,
}

/// The raw output of the nets for one position under one symmetry.
#[derive(Clone, Debug)]
pub struct RawOutput {
    pub symmetry: Symmetry,
    /// Move probabilities, row-major from A19, then pass; `None` where the
    /// move is illegal. `None` without a policy net.
    pub policy: Option<Vec<Option<f32>>>,
    /// The side to move's win probability; `None` without a value net.
    pub value: Option<f32>,
}

/// The nets' output for `game` (its side to move) seen through `symmetry`,
/// mapped back onto the position's own points.
pub fn raw_output(
    game: &Game,
    policy: Option<&NetEval>,
    value: Option<&NetEval>,
    symmetry: Symmetry,
) -> Result<RawOutput> {
    let policy = match policy {
        Some(net) => {
            let probs = net.move_probs_seen(&[game], symmetry)?.remove(0);
            let size = game.size();
            let color = game.to_move();
            Some(
                probs
                    .iter()
                    .enumerate()
                    .map(|(i, &p)| {
                        let mv = if i == size * size { Move::Pass } else { Move::Play(Vertex::from_index(i, size)) };
                        game.is_legal(color, mv).then_some(p)
                    })
                    .collect(),
            )
        }
        None => None,
    };
    let value = value.map(|net| net.win_probs_seen(&[game], symmetry)).transpose()?.map(|mut v| v.remove(0));
    Ok(RawOutput { symmetry, policy, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::go::{Color, Move, Rules};
    use crate::nn::{Arch, Model};
    use candle_core::Device;

    /// Batches padded to a GPU's few sizes give every position what it
    /// gets alone in an unpadded batch: move probabilities, win
    /// probabilities and ownership margins, for 37 positions (64 rows).
    #[test]
    fn padded_batches_give_each_position_its_own_outputs() {
        let mut games = vec![Game::new(19, Rules::CHINESE)];
        for (i, at) in ["D4", "Q16", "C16", "D17", "R3", "S3", "Q3", "R4", "C4"].iter().cycle().take(36).enumerate() {
            let mut next = games.last().unwrap().clone();
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            // Points repeat: a taken one is skipped for a pass.
            let mv = Move::parse_gtp(at, 19).unwrap();
            if next.play(color, mv).is_err() {
                next.play(color, Move::Pass).unwrap();
            }
            games.push(next);
        }
        let games: Vec<&Game> = games.iter().collect();
        assert_eq!((games.len(), crate::nn::inputs::padded_rows(games.len())), (37, 64));
        let close = |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-6);
        for arch in [Arch::Policy, Arch::PolicyValueOwnership] {
            // The same seed, the same weights.
            let net = || NetEval::new(Model::new(arch, FeatureSet::Seed, &Device::Cpu, 3).unwrap(), "untrained");
            let (plain, padded) = (net(), NetEval { pad: true, ..net() });
            assert!(!plain.pad, "no padding on the CPU");
            for s in [0, 5] {
                let symmetry = Symmetry::new(s);
                if plain.output() == Output::MoveLogProbs {
                    let (a, b) = (
                        plain.move_probs_seen(&games, symmetry).unwrap(),
                        padded.move_probs_seen(&games, symmetry).unwrap(),
                    );
                    assert_eq!(b.len(), games.len());
                    assert!(a.iter().zip(&b).all(|(a, b)| close(a, b)), "{arch:?} move probabilities");
                } else {
                    let (av, am) = plain.win_probs_and_margins_seen(&games, symmetry).unwrap();
                    let (bv, bm) = padded.win_probs_and_margins_seen(&games, symmetry).unwrap();
                    assert!(close(&av, &bv) && close(&am, &bm), "{arch:?} values {av:?} {bv:?}");
                    assert!(close(&plain.win_probs(&games).unwrap(), &padded.win_probs(&games).unwrap()));
                }
            }
        }
    }

    /// The planes copied as bits (as to a GPU, unpacked there) are the
    /// planes copied as floats: for both feature sets, every symmetry, and
    /// positions of either colour to move.
    #[test]
    fn inputs_as_bits_are_the_inputs_as_floats() {
        let mut games = vec![Game::new(19, Rules::CHINESE)];
        for (i, at) in ["D4", "Q16", "C16", "D17", "R3", "S3", "Q3", "R4", "C4"].into_iter().enumerate() {
            let mut next = games.last().unwrap().clone();
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            next.play(color, Move::parse_gtp(at, 19).unwrap()).unwrap();
            games.push(next);
        }
        let games: Vec<&Game> = games.iter().skip(7).collect();
        for features in [FeatureSet::Seed, FeatureSet::Extended] {
            let net = NetEval::new(Model::new(Arch::Policy, features, &Device::Cpu, 1).unwrap(), "untrained");
            for s in 0..8 {
                let symmetry = Symmetry::new(s);
                let values = |packed| -> Vec<f32> {
                    let x = net.input_as(&games, symmetry, packed, games.len()).unwrap();
                    assert_eq!(x.dims(), [games.len(), features.planes(), BOARD, BOARD]);
                    x.flatten_all().unwrap().to_vec1().unwrap()
                };
                let floats = values(false);
                assert!(floats.iter().filter(|&&v| v == 1.0).count() > 1000, "planes with something on them");
                assert!(values(true) == floats, "{features:?} under {symmetry:?}");
            }
        }
    }
}
