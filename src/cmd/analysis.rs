//! `go-train analysis`: KataGo's JSON analysis engine protocol on stdin
//! and stdout.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

use go_train::bounds::{self, count_flag};
use go_train::gtp::analysis_engine::AnalysisEngine;
use go_train::nn;
use go_train::search::{AgentKind, AgentSpec};

use super::nets::NetPaths;
use super::search_flags::SearchFlags;

/// Answer KataGo's JSON analysis queries on stdin (KaTrain, scripts).
///
/// Analyses positions for tools over KataGo's
/// JSON analysis protocol: one query per line on stdin, one response per
/// analysed turn on stdout, several queries in flight, answered in order.
/// The search is MCTS with the nets named and the shipped ones for the
/// others, in the settings `go-train gtp` plays with (--preset tuned
/// unless told otherwise, the shipped residual policy choosing the root's
/// children when the policy is the shipped one); its settings are printed
/// on stderr at start. `maxVisits` in a query sets its iterations. See
/// docs/reference/analysis-engine.md for the fields understood.
#[derive(Parser)]
#[command(after_help = "Examples:
  echo '{\"id\":\"a\",\"moves\":[[\"B\",\"Q16\"],[\"W\",\"D4\"]],\"rules\":\"chinese\",\"komi\":7.5,\"boardXSize\":19,\"boardYSize\":19,\"analyzeTurns\":[1,2],\"maxVisits\":100}' | go-train analysis
  go-train analysis --policy checkpoints/policy --value checkpoints/value-pv --iterations 400")]
pub struct Args {
    #[command(flatten)]
    nets: NetPaths,
    /// A second policy net that chooses the root's children alone; none
    /// for none [default: the shipped nets/resnet-policy.safetensors with
    /// the shipped policy].
    #[arg(long, value_name = "NET|none")]
    root_policy: Option<PathBuf>,
    #[command(flatten)]
    search: SearchFlags,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Threads for the nets (default: one per core).
    #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
    threads: Option<usize>,
}

pub fn run(args: Args) -> Result<()> {
    let (preset, search) = args.search.0.resolve()?;
    let spec = AgentSpec { preset, search, ..AgentSpec::new(AgentKind::Mcts) }.with_default_nets(&args.nets.defaults(
        nn::BOARD,
        args.root_policy.as_deref(),
        true,
    )?);
    nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    let search = spec.build_mcts(&device)?;
    go_train::say!("go-train analysis: {}", spec.describe());
    let stdin = std::io::BufReader::new(std::io::stdin());
    AnalysisEngine::new(search).run(stdin, std::io::stdout().lock()).context("answering queries on stdin/stdout")
}
