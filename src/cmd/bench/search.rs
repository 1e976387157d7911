//! `go-train bench search`: how long MCTS takes a move, with the nets it
//! plays with, on positions of a real game. The match figures compare
//! search settings "at equal time"; this is where those times come from,
//! measured on one machine with the settings interleaved position by
//! position, so a machine that slows down mid-run slows all of them alike.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use go_train::search::AgentSpec;

use crate::cmd::review::read_game;
use crate::cmd::NetPaths;

#[derive(clap::Args)]
pub struct SearchArgs {
    /// A game to take the positions from (one the nets never trained on).
    #[arg(long, default_value = "../shared/datasets/kgs-6d/kgs-19-2017-06-new/2017-06-01-13.sgf")]
    sgf: PathBuf,
    /// An MCTS agent to time, as `eval --match` names it; repeat the flag
    /// for more [default: the seed's settings with PUCT, the tuned search,
    /// and the tuned search with the shipped residual policy at its root
    /// that `go-train gtp` plays].
    #[arg(long = "agent")]
    agents: Vec<String>,
    /// A position every this many moves.
    #[arg(long, default_value_t = 10)]
    every: usize,
    #[command(flatten)]
    nets: NetPaths,
}

/// The searches the README compares when none is named (the last also
/// with the shipped root policy, when there is one).
const DEFAULT_AGENTS: [&str; 2] =
    ["mcts:selection=puct", "mcts:selection=puct,rollout=0,iterations=800,tactics=on,mix=1"];

pub fn run(args: SearchArgs) -> Result<()> {
    if args.every == 0 {
        bail!("--every 0: give a positive number of moves");
    }
    let record = read_game(&args.sgf, 0)?;
    let rules = record.rules();
    let positions: Vec<_> = (args.every..record.moves.len())
        .step_by(args.every)
        .map(|n| record.replay_until(rules, n).with_context(|| format!("{}: move {n}", args.sgf.display())))
        .collect::<Result<_>>()?;
    if positions.is_empty() {
        bail!("{}: fewer than {} moves, no position to search", args.sgf.display(), args.every);
    }
    let mut agents = args
        .agents
        .iter()
        .map(|name| Ok((name.clone(), name.parse::<AgentSpec>().with_context(|| format!("agent {name}"))?)))
        .collect::<Result<Vec<_>>>()?;
    if agents.is_empty() {
        agents = DEFAULT_AGENTS.iter().map(|name| (name.to_string(), name.parse().expect("a valid agent"))).collect();
        // Set on the spec, not written into its text: a path may hold a comma.
        if let Some(net) = crate::cmd::root_policy(None, args.nets.policy.is_none()) {
            let (name, tuned) = agents.last().cloned().expect("default agents");
            let file = net.file_name().map_or(net.display().to_string(), |f| f.to_string_lossy().into_owned());
            agents.push((format!("{name},root-policy={file}"), AgentSpec { root_policy: Some(net), ..tuned }));
        }
    }
    let nets = args.nets.clone().or_shipped(go_train::nn::BOARD);
    let mut searches = agents
        .iter()
        .map(|(name, spec)| {
            spec.clone()
                .with_default_nets(nets.policy.as_ref(), nets.value.as_ref(), nets.playout.as_ref())
                .build_mcts(&Device::Cpu)
                .with_context(|| format!("agent {name}"))
        })
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<&String> = agents.iter().map(|(name, _)| name).collect();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0).max(5);
    println!(
        "{}: {} positions (every {} moves), one search each, agents interleaved",
        args.sgf.display(),
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
