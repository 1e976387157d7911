//! `go-train bench`: speed measurements that back the figures in the README.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

use go_train::go::{Board, Game, Rules};
use go_train::search::random::{playout, RandomAgent};

mod train;

/// Measure the speed of go-train's parts on this machine.
#[derive(Parser)]
#[command(after_help = "Examples:\n  go-train bench playouts\n  go-train bench playouts --size 9 --seconds 5\n  go-train bench train --net policy --batch 100")]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Random playouts from the empty board until both pass, on one thread.
    Playouts {
        /// Board size.
        #[arg(long, default_value_t = 19)]
        size: usize,
        /// How long to run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Seed of the random agent.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Training speed of the nets: forward, backward and optimizer step on
    /// random planes (30% ones) and random targets, as
    /// shared/bench/torch_seed_nets.py measures PyTorch.
    Train(TrainArgs),
}

#[derive(clap::Args)]
struct TrainArgs {
    /// Which net: policy, playout, value, all (the three), or a residual
    /// net such as resnet-policy:6x64.
    #[arg(long, default_value = "all")]
    net: String,
    /// Samples per training step.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// How long to train each net.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the weights and the data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Playouts { size, seconds, seed } => playouts(size, seconds, seed),
        What::Train(args) => train::run(args),
    }
}

fn playouts(size: usize, seconds: f64, seed: u64) -> Result<()> {
    if !Board::valid_size(size) {
        bail!("--size {size}: board sizes 2 to 25 are supported");
    }
    let mut agent = RandomAgent::new(seed);
    let empty = Game::new(size, Rules::CHINESE);
    let budget = Duration::from_secs_f64(seconds);
    let max_moves = 3 * size * size;
    let (mut games, mut moves, mut limited) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < budget {
        // Check the clock once per batch: Instant::now costs ~20 ns.
        for _ in 0..64 {
            let mut game = empty.clone();
            let stats = playout(&mut game, &mut agent, max_moves);
            games += 1;
            moves += stats.moves as u64;
            limited += stats.hit_limit as u64;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("board {size}x{size}, 1 thread, {secs:.1} s, rules: positional superko, no suicide");
    println!("playouts:       {games}");
    println!("playouts/s:     {:.0}", games as f64 / secs);
    println!("moves/s:        {:.0}", moves as f64 / secs);
    println!("moves/playout:  {:.1}", moves as f64 / games as f64);
    if limited > 0 {
        println!("stopped at the {max_moves}-move limit: {limited}");
    }
    Ok(())
}
