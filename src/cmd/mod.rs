//! Subcommands. Each file parses its arguments and calls the library.

mod bench;

use clap::{Parser, Subcommand};

/// Teach a computer to play Go the way AlphaGo's supervised stage did.
#[derive(Parser)]
#[command(name = "go-train", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Bench(bench::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(args) => bench::run(args),
    }
}
