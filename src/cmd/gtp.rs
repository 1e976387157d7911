//! `go-train gtp`: a GTP engine on stdin/stdout.

use anyhow::{Context, Result};
use clap::Parser;

use go_train::go::{Board, Rules};
use go_train::gtp::Engine;
use go_train::nn;
use go_train::search::{AgentKind, AgentSpec, LeafEval, Selection};

/// Play Go over the Go Text Protocol (version 2) on stdin and stdout, for
/// Sabaki, Lizzie, GoGui, gomill, GnuGo's twogtp and other controllers. Logs
/// go to stderr only.
///
/// Live analysis for GUIs: `lz-analyze`, `kata-analyze` (`ownership true`,
/// `rootInfo true`), Sabaki's `analyze` and their `genmove_analyze` forms
/// stream the search until the next command; `kata-raw-nn` prints the
/// nets' raw output; GoGui's `gogui-analyze_commands`, `kgs-rules`,
/// `gomill-cpu_time` and more (docs/analysis.md).
///
/// The engine is the random agent, the policy net (its best legal move),
/// the playout net, or MCTS (policy-net priors and top-k expansion, playout
/// net rollouts, value-net leaves; without nets it expands every move and
/// values leaves by stone count). By default: mcts when --value is given,
/// policy when --policy is, playout when --playout only, random otherwise.
/// With no engine and no net named, MCTS with the nets shipped in `nets/`
/// (or `GO_TRAIN_NETS`) plays, in the search that measured strongest with
/// them: PUCT, value-net leaves with no rollout, mixed with random
/// playouts as the board settles, 800 iterations, tactics on, the shipped
/// residual policy choosing the root's children (README, Playing
/// strength); with some nets
/// named, the shipped ones stand in for the others (`--value` alone: MCTS
/// on the shipped policy with those value leaves); with an engine and no
/// net, the engine plays without nets.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train gtp                        # MCTS with the shipped nets (nets/)
  go-train gtp --policy checkpoints/policy
  go-train gtp --value checkpoints/value   # MCTS with the shipped policy and playout nets, this value net
  go-train gtp --engine mcts --policy checkpoints/policy --value checkpoints/value --playout checkpoints/playout
  go-train gtp --engine mcts --iterations 800 --selection puct --time 5 --policy checkpoints/policy
  go-train gtp --expand 8             # wider search: more candidate moves in lz-analyze/kata-analyze
  go-train gtp --root-policy none     # the shipped search without the residual policy at its root
  gogui-twogtp -black 'go-train gtp --policy checkpoints/policy' -white 'gnugo --mode gtp --level 10'
    (gogui-twogtp comes with GoGui, https://github.com/Remi-Coulom/gogui; go-train eval --match does the same)")]
pub struct Args {
    /// random, policy, playout or mcts.
    #[arg(long)]
    engine: Option<AgentKind>,
    #[command(flatten)]
    nets: super::NetPaths,
    /// MCTS iterations per move [default: 200; 800 with the shipped nets].
    #[arg(long)]
    iterations: Option<u32>,
    /// MCTS: a second policy net that chooses the root's children alone: a
    /// stronger net too slow to expand every node; none for none [default:
    /// nets/resnet-policy.safetensors with the shipped nets].
    #[arg(long, value_name = "NET|none")]
    root_policy: Option<std::path::PathBuf>,
    /// MCTS: children per expanded node, the policy's top k [default: 2].
    #[arg(long, short = 'k')]
    expand: Option<usize>,
    /// MCTS: children per expanded node where the opponent is to move
    /// [default: as --expand].
    #[arg(long)]
    expand_replies: Option<usize>,
    /// MCTS: moves per rollout [default: 5; 0 with the shipped nets].
    #[arg(long)]
    rollout_depth: Option<usize>,
    /// MCTS exploration constant [default: 1.4 for ucb, 2.0 for puct].
    #[arg(long)]
    c: Option<f32>,
    /// MCTS (puct): first-play urgency reduction, 0 to 1: an unvisited
    /// move is valued as its parent less this times the square root of the
    /// prior already visited [default: 0].
    #[arg(long, value_name = "R", value_parser = go_train::search::spec::parse_fpu_reduction)]
    fpu: Option<f32>,
    /// MCTS selection: ucb or puct [default: ucb; puct with the shipped nets].
    #[arg(long)]
    selection: Option<Selection>,
    /// MCTS leaf evaluation: value or stones [default: value with --value].
    #[arg(long)]
    leaf: Option<LeafEval>,
    /// MCTS leaves evaluated together [default: 8].
    #[arg(long)]
    batch: Option<usize>,
    /// MCTS: also expand every move that captures or saves a string in
    /// atari, beyond the policy's top k: on or off [default: off; on with
    /// the shipped nets].
    #[arg(long, value_name = "on|off", value_parser = go_train::search::spec::parse_switch)]
    tactics: Option<bool>,
    /// MCTS: weight of random playouts in leaf values, scaled by how
    /// settled the board is, 0 to 1 (AlphaGo's λ) [default: 0; 1 with the
    /// shipped nets].
    #[arg(long, value_name = "λ")]
    mix: Option<f32>,
    /// MCTS: random playouts per leaf with --mix [default: 8].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mix_playouts: Option<usize>,
    /// MCTS: the --mix playouts capture a string the last move left in
    /// atari or save one of their own first, as MoGo's did: on or off
    /// [default: off].
    #[arg(long, value_name = "on|off", value_parser = go_train::search::spec::parse_switch)]
    mix_tactics: Option<bool>,
    /// MCTS: weight of the score in leaf values beside the win probability,
    /// 0 to 1: what the leaf's side gained in the area margin the value
    /// net's ownership head predicts (KataGo's score utility) [default: 0].
    #[arg(long, value_name = "W")]
    score: Option<f32>,
    /// MCTS: show the nets each batch of leaves through a random one of
    /// the board's 8 symmetries (random), or as it is (identity)
    /// [default: identity].
    #[arg(long, value_name = "random|identity", value_parser = go_train::search::spec::parse_random_symmetry)]
    symmetry: Option<bool>,
    /// Seconds per move at most (a GTP clock may shorten it).
    #[arg(long)]
    time: Option<f64>,
    /// Policy/playout engines: 0 plays the most likely move, above 0 samples.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Seed for every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Board size at start.
    #[arg(long, default_value_t = 19)]
    size: usize,
    /// Komi at start.
    #[arg(long, default_value_t = 7.5)]
    komi: f32,
    /// Rules: chinese, japanese, aga, nz or tromp-taylor.
    #[arg(long, default_value = "chinese")]
    rules: String,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Threads for the nets (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Describe each move choice on stderr.
    #[arg(long, short)]
    verbose: bool,
}

pub fn run(mut args: Args) -> Result<()> {
    // Named nothing: the shipped nets, on the board they play, in the
    // search that measured strongest with them (README, Playing strength).
    let mut tuned = false;
    if args.engine.is_none() && args.nets.is_empty() && args.size == nn::BOARD {
        args.nets = super::NetPaths::shipped();
        if args.nets.policy.is_some() {
            args.engine = Some(AgentKind::Mcts);
            tuned = true;
        }
    }
    let kind = args.engine.unwrap_or(match (&args.nets.policy, &args.nets.value, &args.nets.playout) {
        (_, Some(_), _) => AgentKind::Mcts,
        (Some(_), None, _) => AgentKind::Policy,
        (None, None, Some(_)) => AgentKind::Playout,
        (None, None, None) => AgentKind::Random,
    });
    // Named nothing but the engine: an engine of its own (MCTS without nets
    // plays any board). Named some nets: the shipped ones stand in for the
    // others.
    if kind != AgentKind::Random && !args.nets.is_empty() {
        args.nets = args.nets.or_shipped(args.size);
    }
    // Unset flags keep the spec's defaults: the seed design's (MctsConfig),
    // or the tuned search when the shipped nets play by default.
    let defaults = if tuned { AgentSpec::new(kind).tuned() } else { AgentSpec::new(kind) };
    let spec = AgentSpec {
        policy: args.nets.policy.clone(),
        root_policy: super::root_policy(args.root_policy.clone(), tuned),
        value: args.nets.value.clone(),
        playout: args.nets.playout.clone(),
        temperature: args.temperature,
        iterations: args.iterations.unwrap_or(defaults.iterations),
        expand: args.expand.unwrap_or(defaults.expand),
        expand_replies: args.expand_replies.or(defaults.expand_replies),
        rollout_depth: args.rollout_depth.unwrap_or(defaults.rollout_depth),
        c: args.c,
        fpu_reduction: args.fpu.unwrap_or(defaults.fpu_reduction),
        selection: args.selection.unwrap_or(defaults.selection),
        leaf: args.leaf,
        batch: args.batch.unwrap_or(defaults.batch),
        tactics: args.tactics.unwrap_or(defaults.tactics),
        mix: args.mix.unwrap_or(defaults.mix),
        mix_playouts: args.mix_playouts.unwrap_or(defaults.mix_playouts),
        mix_tactics: args.mix_tactics.unwrap_or(defaults.mix_tactics),
        score: args.score.unwrap_or(defaults.score),
        random_symmetry: args.symmetry.unwrap_or(defaults.random_symmetry),
        time: args.time,
        seed: args.seed,
        ..defaults
    };
    let mut rules = Rules::by_name(&args.rules).with_context(|| format!("unknown rules {:?}", args.rules))?;
    rules.komi = args.komi;
    if !Board::valid_size(args.size) {
        anyhow::bail!("--size {}: boards are 2 to 25 points a side", args.size);
    }
    go_train::nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    let agent = spec.build(&device)?;
    if !agent.supports_size(args.size) {
        anyhow::bail!("--size {}: {} plays {b}x{b} only", args.size, agent.name(), b = nn::BOARD);
    }
    let size = args.size;
    eprintln!("go-train gtp: {}", agent.name());
    let mut engine = Engine::new(agent, rules, size);
    engine.set_verbose(args.verbose);
    // An engine without a tree search of its own (a net alone) analyzes
    // with MCTS on the same nets, valued by the value net when there is one.
    if kind != AgentKind::Mcts && !args.nets.is_empty() {
        let leaf = if args.nets.value.is_some() { LeafEval::Value } else { LeafEval::Stones };
        let selection = args.selection.unwrap_or(Selection::Puct);
        engine.set_analysis_search(AgentSpec { leaf: Some(leaf), selection, ..spec }.build_mcts(&device)?);
    }
    let stdin = std::io::BufReader::new(std::io::stdin());
    engine.run(stdin, std::io::stdout().lock()).context("talking GTP on stdin/stdout")
}
