//! `go-train raw-nn`: the nets' raw output for one position.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::json;

use go_train::bounds::{count_flag, Domain};
use go_train::features::Symmetry;
use go_train::nn::{self, Output};
use go_train::search::nets::raw_output;
use go_train::search::{NetEval, NetSource};

/// Print the nets' raw output (policy, value) for one position of a game.
///
/// What the nets answer: the policy over
/// all 362 moves (row-major from A19, then pass; null where illegal), the
/// side to move's win probability, and the symmetry the position was seen
/// through — to compare go-train's nets with another framework's on the
/// same input (`gtp`'s `kata-raw-nn` gives the same for the nets its
/// search judges the root with: with the shipped nets, the policy is
/// `nets/resnet-policy.safetensors`, which `--policy` names here). Nets not
/// named are the shipped ones.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train raw-nn game.sgf --move 50 --json
  go-train raw-nn game.sgf --move 50 --symmetry all --policy checkpoints/policy --json")]
pub struct Args {
    /// The SGF file.
    game: PathBuf,
    /// Which game of a collection (0 for the first).
    #[arg(long, default_value_t = 0, value_parser = count_flag::<usize>(super::INDEX))]
    index: usize,
    /// The position after this many moves [default: the end, or the last
    /// move before an illegal one].
    #[arg(long = "move", value_name = "N", value_parser = count_flag::<usize>(super::MOVES))]
    moves: Option<usize>,
    /// 0 to 7, or all.
    #[arg(long, default_value = "0", value_parser = symmetries)]
    symmetry: Symmetries,
    #[command(flatten)]
    nets: super::nets::JudgingNets,
    /// One JSON object per symmetry on stdout (otherwise KataGo's
    /// `kata-raw-nn` text).
    #[arg(long)]
    json: bool,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
}

pub fn run(args: Args) -> Result<()> {
    let record = super::review::read_game(&args.game, args.index)?.record;
    if record.size != nn::BOARD {
        bail!("{}: a {s}x{s} game; the nets play {b}x{b} only", args.game.display(), s = record.size, b = nn::BOARD);
    }
    let mut moves = args.moves.unwrap_or(record.moves.len());
    if moves > record.moves.len() {
        bail!("{}: --move {moves}, but the game has {} moves", args.game.display(), record.moves.len());
    }
    let replayed = record.replay_until_legal(record.rules(), moves);
    let (game, stopped) = replayed.with_context(|| format!("{}", args.game.display()))?;
    if let Some(e) = stopped {
        // The end, by default, is where the legal moves end, as show and
        // review take it; a position asked for past it is none.
        if args.moves.is_some() {
            bail!("{}: {e}: --move {moves} is past it", args.game.display());
        }
        go_train::say!("warning: {}: {e}: the position before it", args.game.display());
        moves = game.move_count();
    }
    let nets = args.nets.defaults()?;
    nn::init_threads(None)?;
    let device = nn::device(&args.device)?;
    let load = |net: &Option<NetSource>, want| net.as_ref().map(|n| NetEval::load_source(n, &device, want)).transpose();
    let (policy, value) = (load(&nets.policy, Output::MoveLogProbs)?, load(&nets.value, Output::WinProb)?);
    for &symmetry in &args.symmetry.0 {
        let raw = raw_output(&game, policy.as_ref(), value.as_ref(), symmetry)?;
        if args.json {
            let line = json!({
                "file": args.game.display().to_string(), "game": args.index, "move": moves,
                "to_move": game.to_move().to_string(), "symmetry": symmetry.number(),
                "policy": raw.policy, "value": raw.value,
                "policy_net": nets.policy.as_ref().map(NetSource::to_string),
                "value_net": nets.value.as_ref().map(NetSource::to_string),
            });
            println!("{line}");
        } else {
            print!("{}", go_train::gtp::extensions::raw_nn_text(&raw, game.to_move(), game.size()));
        }
    }
    Ok(())
}

/// The symmetries `--symmetry` names.
#[derive(Clone)]
struct Symmetries(Vec<Symmetry>);

/// `--symmetry`: one of the 8 (0 to 7), or all of them.
fn symmetries(text: &str) -> Result<Symmetries, String> {
    const ONE: Domain = Domain::Count { min: 0, max: 7 };
    match text.trim() {
        "all" => Ok(Symmetries(Symmetry::all().collect())),
        n => ONE
            .count(n)
            .map(|n| Symmetries(vec![Symmetry::new(n as u8)]))
            .map_err(|_| Domain::Or { word: "all", domain: &ONE }.refusal()),
    }
}
