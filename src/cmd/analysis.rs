//! `go-train analysis`: KataGo's JSON analysis engine protocol on stdin
//! and stdout.

use anyhow::{Context, Result};
use clap::Parser;

use go_train::gtp::analysis_engine::AnalysisEngine;
use go_train::nn;
use go_train::search::{AgentKind, AgentSpec, LeafEval};

/// Answer KataGo's JSON analysis queries on stdin (KaTrain, scripts).
///
/// Analyses positions for tools over KataGo's
/// JSON analysis protocol: one query per line on stdin, one response per
/// analysed turn on stdout, several queries in flight, answered in order.
/// The search is MCTS with the shipped nets, or the nets named, in the
/// settings `go-train gtp` plays with (PUCT, value-net leaves with no
/// rollout mixed with random playouts as the board settles, tactics on,
/// the shipped residual policy choosing the root's children when the
/// policy is the shipped one);
/// `maxVisits` in a query sets its iterations. See
/// docs/analysis.md for the fields understood.
#[derive(Parser)]
#[command(after_help = "Examples:
  echo '{\"id\":\"a\",\"moves\":[[\"B\",\"Q16\"],[\"W\",\"D4\"]],\"rules\":\"chinese\",\"komi\":7.5,\"boardXSize\":19,\"boardYSize\":19,\"analyzeTurns\":[1,2],\"maxVisits\":100}' | go-train analysis
  go-train analysis --policy checkpoints/policy --value checkpoints/value-pv --visits 400")]
pub struct Args {
    #[command(flatten)]
    nets: super::NetPaths,
    /// A second policy net that chooses the root's children alone; none
    /// for none [default: nets/resnet-policy.safetensors with the shipped
    /// policy].
    #[arg(long, value_name = "NET|none")]
    root_policy: Option<std::path::PathBuf>,
    /// Iterations per position when a query gives no maxVisits [default:
    /// 800, as `go-train gtp` plays].
    #[arg(long)]
    visits: Option<u32>,
    /// Children per expanded node, the policy's top k [default: 2, as genmove].
    #[arg(long, short = 'k')]
    expand: Option<usize>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Threads for the nets (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the rollouts.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(args: Args) -> Result<()> {
    let root_policy = super::root_policy(args.root_policy, args.nets.policy.is_none());
    let nets = args.nets.or_shipped(nn::BOARD);
    let defaults = AgentSpec::new(AgentKind::Mcts).tuned();
    let spec = AgentSpec {
        leaf: Some(if nets.value.is_some() { LeafEval::Value } else { LeafEval::Stones }),
        policy: nets.policy,
        root_policy,
        value: nets.value,
        playout: nets.playout,
        iterations: args.visits.unwrap_or(defaults.iterations).max(1),
        expand: args.expand.unwrap_or(defaults.expand),
        seed: args.seed,
        ..defaults
    };
    nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    let search = spec.build_mcts(&device)?;
    let stdin = std::io::BufReader::new(std::io::stdin());
    AnalysisEngine::new(search).run(stdin, std::io::stdout().lock()).context("answering queries on stdin/stdout")
}
