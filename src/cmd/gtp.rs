//! `go-train gtp`: a GTP engine on stdin/stdout.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::bounds::{self, count_flag, real_flag};
use go_train::go::Rules;
use go_train::gtp::Engine;
use go_train::nn;
use go_train::search::{AgentKind, AgentSpec};

use super::nets::NetPaths;
use super::search_flags::SearchFlags;

/// Play Go over the Go Text Protocol (version 2) on stdin and stdout, for
/// Sabaki, Lizzie, GoGui, gomill, GnuGo's twogtp and other controllers. Logs
/// go to stderr only.
///
/// Live analysis for GUIs: `lz-analyze`, `kata-analyze` (`ownership true`,
/// `rootInfo true`, `pvVisits true`), Sabaki's `analyze` and their `genmove_analyze` forms
/// stream the search until the next command; `kata-raw-nn` prints the
/// nets' raw output; GoGui's `gogui-analyze_commands`, `kgs-rules`,
/// `gomill-cpu_time` and more (docs/reference/gtp.md).
///
/// The engine is MCTS unless --engine names another: the random agent, the
/// policy net (its best legal move) or the playout net. Its nets are those
/// named, and for the others the shipped ones, built into go-train
/// (`GO_TRAIN_NETS=DIR` takes them from DIR, empty for none); the residual
/// policy chooses MCTS's root children where the policy is the shipped one.
/// The search is the tuned one (--preset tuned: PUCT, 800 iterations,
/// value-net leaves with no rollout mixed with random playouts as the board
/// settles, tactics on) whatever nets are named; --preset seed gives the
/// seed design's, and --search-config FILE or single flags change any
/// setting. The shipped nets play 19x19, and an engine started with them
/// answers `boardsize N` of another size as unacceptable: start it with
/// --size N, and MCTS plays that board without nets. The effective
/// settings are printed on stderr at start and answered to
/// `gomill-describe_engine`.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train gtp                        # MCTS with the shipped nets, the tuned search
  go-train gtp --value checkpoints/value   # the same search with this value net
  go-train gtp --engine policy        # the shipped policy net alone
  go-train gtp --engine policy --policy checkpoints/policy
  go-train gtp --preset seed --iterations 400 --time 5
  go-train gtp --search-config search.toml   # e.g. iterations = 400 and tactics = false, one a line
  go-train gtp --expand 8             # wider search: more candidate moves in lz-analyze/kata-analyze
  go-train gtp --root-policy none     # the shipped search without the residual policy at its root
  gogui-twogtp -black 'go-train gtp' -white '/usr/games/gnugo --mode gtp --level 10'
    (gogui-twogtp comes with GoGui, https://github.com/Remi-Coulom/gogui; go-train eval --match does the same)")]
pub struct Args {
    /// random, policy, playout or mcts [default: mcts].
    #[arg(long)]
    engine: Option<AgentKind>,
    #[command(flatten)]
    nets: NetPaths,
    /// MCTS: a second policy net that chooses the root's children alone: a
    /// stronger net too slow to expand every node; none for none [default:
    /// the shipped nets/resnet-policy.safetensors with the shipped policy].
    #[arg(long, value_name = "NET|none")]
    root_policy: Option<PathBuf>,
    #[command(flatten)]
    search: SearchFlags,
    /// Policy/playout engines: 0 plays the most likely move, above 0 samples.
    #[arg(long, default_value_t = 0.0, value_parser = real_flag::<f32>(bounds::TEMPERATURE))]
    temperature: f32,
    /// Board size at start.
    #[arg(long, default_value_t = 19, value_parser = count_flag::<usize>(bounds::BOARD_SIZE))]
    size: usize,
    /// Komi at start.
    #[arg(long, default_value_t = 7.5, value_parser = real_flag::<f32>(bounds::KOMI))]
    komi: f32,
    /// Rules: chinese, japanese, aga, nz or tromp-taylor.
    #[arg(long, default_value = "chinese")]
    rules: String,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Threads for the nets (default: one per core).
    #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
    threads: Option<usize>,
    /// Describe each move choice on stderr.
    #[arg(long, short)]
    verbose: bool,
}

pub fn run(args: Args) -> Result<()> {
    let mut rules = Rules::by_name(&args.rules).with_context(|| format!("unknown rules {:?}", args.rules))?;
    rules.komi = args.komi;
    let kind = args.engine.unwrap_or(AgentKind::Mcts);
    // Before the nets are looked for: none is shipped for another board,
    // and the net then missing was named as what was wrong.
    super::nets::check_board_of_net_agent(kind, args.size)?;
    let (preset, search) = args.search.0.resolve()?;
    // The random agent needs no nets: it loads only those named (for
    // analysis commands), never the shipped ones.
    let with_shipped = kind != AgentKind::Random;
    let spec = AgentSpec { preset, search, temperature: args.temperature, ..AgentSpec::new(kind) }
        .with_default_nets(&args.nets.defaults(args.size, args.root_policy.as_deref(), with_shipped)?);
    go_train::nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    let agent = spec.build(&device)?;
    if !agent.supports_size(args.size) {
        bail!("--size {}: {} plays {b}x{b} only", args.size, agent.name(), b = nn::BOARD);
    }
    let description = spec.describe();
    go_train::say!("go-train gtp: {description}");
    if args.size != nn::BOARD && kind != AgentKind::Random {
        // A GUI that moves on to 19x19 later gets no nets back.
        go_train::say!(
            "go-train gtp: --size {}: the nets play {b}x{b} only, so this engine plays without them, on every board, \
             {b}x{b} too",
            args.size,
            b = nn::BOARD
        );
    }
    let mut engine = Engine::new(agent, rules, args.size);
    engine.set_verbose(args.verbose);
    engine.set_description(description);
    // An engine without a tree search of its own (a net alone) analyzes
    // with the same search settings on the same nets.
    if kind != AgentKind::Mcts && spec.has_nets() {
        engine.set_analysis_search(spec.build_mcts(&device)?);
    }
    let stdin = std::io::BufReader::new(std::io::stdin());
    engine.run(stdin, std::io::stdout().lock()).context("talking GTP on stdin/stdout")
}
