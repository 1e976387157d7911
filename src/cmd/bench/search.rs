//! `go-train bench search`: how long MCTS takes a move, with the nets it
//! plays with, on positions of a real game, to compare search settings at
//! equal time: measured on one machine with the settings interleaved position by
//! position, so a machine that slows down mid-run slows all of them alike.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use go_train::bounds::{count_flag, Domain};
use go_train::search::{AgentKind, AgentSpec};

use crate::cmd::nets::NetPaths;
use crate::cmd::review::read_game;

#[derive(clap::Args)]
pub struct SearchArgs {
    /// A game to take the positions from (one the nets never trained on).
    #[arg(long, default_value = "../shared/datasets/kgs-6d/kgs-19-2017-06-new/2017-06-01-13.sgf")]
    sgf: PathBuf,
    /// Which game of a collection (0 for the first).
    #[arg(long, default_value_t = 0, value_parser = count_flag::<usize>(crate::cmd::INDEX))]
    index: usize,
    /// An MCTS agent to time, as `eval --match` names it; repeat the flag
    /// for more [default: the seed design's search with PUCT, the tuned
    /// search without the residual policy at its root, and the search
    /// `go-train gtp` plays, with it].
    #[arg(long = "agent")]
    agents: Vec<String>,
    /// A position every this many moves.
    #[arg(long, default_value_t = 10, value_parser = count_flag::<usize>(Domain::Count { min: 1, max: 1000 }))]
    every: usize,
    #[command(flatten)]
    nets: NetPaths,
}

/// The searches the README compares when none is named: the last is what
/// `go-train gtp` plays (the one before it without the residual root,
/// left out where there is none).
const DEFAULT_AGENTS: [&str; 3] = ["mcts:preset=seed,selection=puct", "mcts:root-policy=none", "mcts"];

pub fn run(args: SearchArgs) -> Result<()> {
    // A collection's game is named by its place in every message: game 0
    // of 3,200 once read as the whole file.
    let read = read_game(&args.sgf, args.index)?;
    let (record, game_name) = (read.record, read.name);
    let rules = record.rules();
    if record.size != go_train::nn::BOARD {
        let size = record.size;
        bail!("{game_name}: a {size}x{size} game, and the nets play on 19x19 only");
    }
    // The position after every `every`-th move, the last one's included
    // unless the game is over there: no player searches a finished game
    // (the search of one reached as its end ended at once, and flattered
    // every agent's speed).
    let positions: Vec<_> = (args.every..=record.moves.len())
        .step_by(args.every)
        .map(|n| record.replay_until(rules, n).with_context(|| format!("{game_name}: move {n}")))
        .filter(|game| !game.as_ref().is_ok_and(|g| g.is_over()))
        .collect::<Result<_>>()?;
    if positions.is_empty() {
        bail!("{game_name}: fewer than {} moves before the game's end, no position to search", args.every);
    }
    let defaults = args.nets.defaults(go_train::nn::BOARD, None, true)?;
    let named: Vec<&str> = match args.agents.is_empty() {
        true if defaults.root_policy.is_none() => vec![DEFAULT_AGENTS[0], DEFAULT_AGENTS[2]],
        true => DEFAULT_AGENTS.to_vec(),
        false => args.agents.iter().map(String::as_str).collect(),
    };
    let agents = named
        .iter()
        .map(|name| {
            let spec = name.parse::<AgentSpec>().with_context(|| format!("agent {name}"))?;
            // Any other kind would be timed as the search its settings make.
            if spec.kind != AgentKind::Mcts {
                bail!("agent {name}: bench search times tree searches only (give mcts agents)");
            }
            Ok((name.to_string(), spec.with_default_nets(&defaults)))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut searches = agents
        .iter()
        .map(|(name, spec)| spec.build_mcts(&Device::Cpu).with_context(|| format!("agent {name}")))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<&String> = agents.iter().map(|(name, _)| name).collect();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0).max(5);
    println!(
        "{game_name}: {} positions (every {} moves), one search each, agents interleaved",
        positions.len(),
        args.every
    );
    let mut totals = vec![(0.0f64, 0u64); searches.len()];
    for game in &positions {
        for (search, total) in searches.iter_mut().zip(&mut totals) {
            // Each search runs all its iterations anew: a subtree kept
            // from the last position would add visits, not save work.
            let start = Instant::now();
            let report = search.search(game, None)?;
            total.0 += start.elapsed().as_secs_f64();
            total.1 += report.iterations as u64;
        }
    }
    println!("{:<width$} {:>10} {:>14}", "agent", "s/move", "iterations/s");
    for (name, (seconds, iterations)) in names.iter().zip(totals) {
        println!("{name:<width$} {:>10.3} {:>14.0}", seconds / positions.len() as f64, iterations as f64 / seconds);
    }
    Ok(())
}
