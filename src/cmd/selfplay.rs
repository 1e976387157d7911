//! `go-train selfplay`: games between two players, or one against itself,
//! many at once, as SGF and optionally as a dataset.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::bounds::{self, count_flag, real_flag};
use go_train::dataset::prepare::PrepareOptions;
use go_train::dataset::{Split, SplitFractions, ValueSampling};
use go_train::eval::arena::GameConfig;
use go_train::features::FeatureSet;
use go_train::gtp::GtpTimeouts;
use go_train::nn::{self as nn, Output};
use go_train::search::ownership::DEFAULT_PLAYOUTS;
use go_train::search::{DefaultNets, NetEval, NetSource};
use go_train::selfplay::{selfplay, Plan, PlayConfig, SelfPlayOptions, SelfPlaySummary, Side};

/// Play games between two players (or one against itself), many at once,
/// the move nets evaluated in batches across games, and write every game as
/// SGF; with --value-positions, also a dataset of their positions.
///
/// A player is an agent spec as `eval --match` takes it (`policy`,
/// `policy:temperature=0.5`, `playout`, `random`, `mcts:iterations=200`)
/// or a GTP engine's command line; nets the spec does not name come from
/// --policy/--value/--playout, else the shipped ones. Policy and playout
/// agents are evaluated in batches across games; other players play one
/// move at a time, one player per game. Colours alternate: --agent is
/// Black in even-numbered games.
///
/// --value-positions alphago plays AlphaGo's value-data recipe instead of
/// the players: per game a move number U is drawn from 1 to 450, the SL
/// policy plays moves 1 to U−1 (sampled at temperature 1), move U is
/// uniformly random among the legal points, and the RL policy (sampled)
/// plays to the end; the position after move U is marked in the SGF (root
/// property VP) and is the game's one record in the dataset, labelled with
/// the outcome. When the SL policy would end the game before move U (a
/// second pass), the random move is played there instead. per-game:K,
/// all and final write every position of the games, K (all, the last)
/// with a value label, as `prepare --value` does.
///
/// Games end by two passes, a resignation (GTP engines) or --max-moves;
/// counted games are scored by area, Chinese rules, dead stones judged by
/// random playouts as match referees judge them. Each game is written
/// atomically the moment it ends; --resume plays only the games missing,
/// and the same --seed gives the same games, to the byte, whatever --batch
/// and --threads (on the CPU).
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train selfplay --games 1000 --out selfplay/policy   # the shipped policy against itself, temperature 1
  go-train selfplay --games 1000 --out selfplay/policy --resume   # after a kill
  go-train selfplay --games 400 --out selfplay/rl-vs-sl --agent policy:policy=checkpoints/rl/best.safetensors,temperature=1 --opponent policy:temperature=1
  go-train selfplay --games 20000 --out selfplay/value --value-positions alphago --ownership   # the shipped SL and RL policies
  go-train selfplay --games 20000 --out selfplay/value2 --value-positions alphago --rl-policy checkpoints/rl/best.safetensors
  go-train selfplay --games 2000 --out selfplay/pg --value-positions per-game:1 --ownership
  go-train selfplay --games 20 --out selfplay/mcts --agent mcts:iterations=100 --opponent '/usr/games/gnugo --mode gtp --level 1' --batch 1
  go-train selfplay --games 4096 --out selfplay/gpu --device cuda --batch 512   # a CUDA build: a worker a core")]
pub struct Args {
    /// Games to play (a resumed run plays those its folder lacks).
    #[arg(long, value_parser = count_flag::<usize>(bounds::GAMES))]
    games: usize,
    /// Folder for the games, the list, the dataset and summary.json.
    #[arg(long)]
    out: PathBuf,
    /// The first player (Black in even-numbered games).
    #[arg(long, default_value = "policy:temperature=1")]
    agent: String,
    /// The second player [default: --agent, playing itself].
    #[arg(long)]
    opponent: Option<String>,
    #[command(flatten)]
    nets: super::nets::NetPaths,
    /// Write a dataset of the games' positions (DIR/dataset): alphago (the
    /// recipe above, one labelled position a game), or per-game:K, all or
    /// final (every position, those labelled with the outcome).
    #[arg(long, value_name = "alphago|per-game:K|all|final")]
    value_positions: Option<String>,
    /// alphago: the SL policy, which plays the moves before the random one
    /// [default: --policy, else the shipped policy].
    #[arg(long)]
    sl_policy: Option<PathBuf>,
    /// alphago: the RL policy, which plays from the random move on
    /// [default: --policy, else the shipped nets/rl-policy.safetensors].
    #[arg(long)]
    rl_policy: Option<PathBuf>,
    /// The dataset's input planes: seed (15) or extended (52).
    #[arg(long, default_value = "extended")]
    features: FeatureSet,
    /// Give every position of the dataset its game's final ownership (for
    /// policy-value-ownership nets).
    #[arg(long)]
    ownership: bool,
    /// The dataset's fractions of games for train, validation and test.
    #[arg(long, default_value = "0.8,0.1,0.1")]
    split: SplitFractions,
    /// Board size (the nets play 19x19 only).
    #[arg(long, default_value_t = 19, value_parser = count_flag::<usize>(bounds::BOARD_SIZE))]
    size: usize,
    /// Komi (area scoring).
    #[arg(long, default_value_t = 7.5, value_parser = real_flag::<f32>(bounds::KOMI))]
    komi: f32,
    /// Moves after which a game is scored as it stands.
    #[arg(long, default_value_t = 500, value_parser = count_flag::<usize>(bounds::MAX_MOVES))]
    max_moves: usize,
    /// Random playouts that judge the dead stones of a counted game.
    #[arg(long, default_value_t = DEFAULT_PLAYOUTS, value_parser = count_flag::<usize>(bounds::SCORING_PLAYOUTS))]
    scoring_playouts: usize,
    /// Seeds every game (its moves, its players, its scoring) and the
    /// dataset's split.
    #[arg(long, default_value_t = 1, value_parser = count_flag::<u64>(bounds::SEED))]
    seed: u64,
    /// Games each thread keeps going at once: the batch of a net's forward
    /// pass (fewer when the games are fewer than threads × batch, so that
    /// every thread has some).
    #[arg(long, default_value_t = 32, value_parser = count_flag::<usize>(bounds::PARALLEL))]
    batch: usize,
    /// Worker threads, each with its own games [default: one per core].
    #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
    threads: Option<usize>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Seconds a GTP engine has to answer a command; one that does not
    /// forfeits the game. A game's setup gets at least the default.
    #[arg(long, value_name = "SECONDS", default_value_t = GtpTimeouts::DEFAULT_SECONDS)]
    gtp_timeout: f64,
    /// Keep the games a stopped run (same players and settings, its nets
    /// known by their files' contents) wrote to --out, and play only the
    /// others.
    #[arg(long, conflicts_with = "force")]
    resume: bool,
    /// Replace a run in --out: its games, dataset and summary go; other
    /// files stay.
    #[arg(long)]
    force: bool,
    /// The summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// What --value-positions asks for.
enum ValuePositions {
    AlphaGo,
    Sampled(ValueSampling),
}

impl std::str::FromStr for ValuePositions {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<ValuePositions> {
        Ok(match s {
            "alphago" => ValuePositions::AlphaGo,
            // The mark is what alphago writes.
            "marked" => bail!("--value-positions marked: use alphago, whose games mark their position"),
            // Not the sampling's own message: it offers `marked`.
            _ => ValuePositions::Sampled(s.parse().map_err(|_: String| {
                anyhow::anyhow!("--value-positions {s}: use alphago, all, final or per-game:K (K ≥ 1)")
            })?),
        })
    }
}

pub fn run(args: Args) -> Result<()> {
    let value_positions: Option<ValuePositions> = args.value_positions.as_deref().map(str::parse).transpose()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The global pool prepares the dataset; each self-play worker runs its
    // nets on a pool of its own.
    nn::init_threads(None)?;
    let device = nn::device(&args.device)?;
    let nets = args.nets.defaults(args.size, None, true)?;
    let Sides { sides, players, identities, nets, plan } = match value_positions {
        Some(ValuePositions::AlphaGo) => alphago_sides(&args, &nets, &device)?,
        _ => match_sides(&args, &nets, &device)?,
    };
    let value = match value_positions {
        None => None,
        Some(ValuePositions::AlphaGo) => Some(ValueSampling::Marked),
        Some(ValuePositions::Sampled(sampling)) => Some(sampling),
    };
    let options = SelfPlayOptions {
        out: args.out.clone(),
        games: args.games,
        play: PlayConfig {
            game: GameConfig {
                size: args.size,
                komi: args.komi,
                max_moves: args.max_moves,
                ownership_playouts: args.scoring_playouts,
            },
            seed: args.seed,
            threads: args.threads.unwrap_or(cores),
            batch: args.batch,
        },
        plan,
        players,
        identities,
        nets,
        dataset: value.map(|value| PrepareOptions {
            features: args.features,
            seed: args.seed,
            split: args.split,
            value,
            default_rules: "chinese".into(),
            ownership: args.ownership,
            ..PrepareOptions::default()
        }),
        resume: args.resume,
        force: args.force,
    };
    let (threads, batch) = options.play.workers(args.games);
    go_train::say!(
        "selfplay: {} on {}x{}, komi {}, {} games, {threads} threads of up to {batch} games, load average {}",
        options.players.join(" against "),
        args.size,
        args.size,
        args.komi,
        args.games,
        load_average()
    );
    let summary = selfplay(&sides, &options, &device)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary, &args.out);
    }
    go_train::say!("load average {}", load_average());
    Ok(())
}

/// The sides, and who plays when.
struct Sides {
    sides: Vec<Side>,
    /// As named, for the summary.
    players: Vec<String>,
    /// As the run's description names them, without their nets.
    identities: Vec<String>,
    /// Their nets' fingerprints.
    nets: Vec<String>,
    plan: Plan,
}

/// --agent against --opponent (itself when not given).
fn match_sides(args: &Args, nets: &DefaultNets, device: &candle_core::Device) -> Result<Sides> {
    if args.sl_policy.is_some() || args.rl_policy.is_some() {
        bail!("--sl-policy and --rl-policy name the policies of --value-positions alphago");
    }
    let texts: Vec<&str> = match &args.opponent {
        Some(opponent) if *opponent != args.agent => vec![&args.agent, opponent],
        _ => vec![&args.agent],
    };
    let timeouts = GtpTimeouts::for_commands(args.gtp_timeout).context("--gtp-timeout")?;
    let mut sides = Vec::new();
    let (mut players, mut identities, mut fingerprints) = (Vec::new(), Vec::new(), Vec::new());
    for (text, flag) in texts.iter().zip(["--agent", "--opponent"]) {
        let spec = super::nets::player_spec(text, nets, args.size).with_context(|| format!("{flag} {text:?}"))?;
        let named = |settings: Option<String>| match settings {
            Some(settings) => format!("{}:{settings}", spec.label()),
            None => spec.label(),
        };
        players.push(named(spec.settings()));
        identities.push(named(spec.settings_but_nets()));
        fingerprints.extend(spec.net_fingerprints().with_context(|| format!("{flag} {text:?}"))?);
        sides.push(Side::build(spec, device, timeouts).with_context(|| format!("{flag} {text:?}"))?);
    }
    let plan = Plan::Alternate { a: 0, b: sides.len() - 1 };
    Ok(Sides { sides, players, identities, nets: fingerprints, plan })
}

/// AlphaGo's recipe: the SL and RL policies, sampled at temperature 1.
fn alphago_sides(args: &Args, nets: &DefaultNets, device: &candle_core::Device) -> Result<Sides> {
    if args.opponent.is_some() || args.agent != "policy:temperature=1" {
        bail!("--value-positions alphago plays --sl-policy and --rl-policy, not --agent or --opponent");
    }
    let size = args.size;
    if size != nn::BOARD {
        bail!(
            "--value-positions alphago cannot play on {size}x{size} (--size {size}): its policies are nets, and the \
             nets play {b}x{b} only",
            b = nn::BOARD
        );
    }
    let policy = |named: &Option<PathBuf>, default: Option<NetSource>, flag: &str| -> Result<NetSource> {
        (named.clone().map(NetSource::File).or(default))
            .with_context(|| format!("give {flag} (no shipped policy here)"))
    };
    // The shipped RL policy plays the end of the games unless a policy of
    // one's own is named.
    let rl_default = match args.nets.judging.policy {
        Some(_) => nets.policy.clone(),
        None => super::nets::shipped_net("rl-policy.safetensors").or_else(|| nets.policy.clone()),
    };
    let sources = [
        policy(&args.sl_policy, nets.policy.clone(), "--sl-policy")?,
        policy(&args.rl_policy, rl_default, "--rl-policy")?,
    ];
    let mut sides = Vec::new();
    let (mut players, mut identities, mut fingerprints) = (Vec::new(), Vec::new(), Vec::new());
    let sl_fingerprint = sources[0].fingerprint().context("the SL policy")?;
    for (source, role) in sources.iter().zip(["SL", "RL"]) {
        let fingerprint = source.fingerprint().with_context(|| format!("the {role} policy"))?;
        // One net, however its paths are spelt, plays both parts.
        if role == "RL" && fingerprint == sl_fingerprint {
            break;
        }
        let net =
            NetEval::load_source(source, device, Output::MoveLogProbs).with_context(|| format!("the {role} policy"))?;
        players.push(format!("{role} policy {source}"));
        identities.push(format!("{role} policy"));
        fingerprints.push(format!("{role} policy: {fingerprint}"));
        sides.push(Side::net(format!("{role} policy {source} (temperature 1)"), Arc::new(net), 1.0));
    }
    let plan = Plan::AlphaGoValue { sl: 0, rl: sides.len() - 1 };
    Ok(Sides { sides, players, identities, nets: fingerprints, plan })
}

/// The machine's load, from /proc/loadavg: what the speed figures ran beside.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn print_summary(s: &SelfPlaySummary, out: &std::path::Path) {
    println!("players: {}", s.players.join(" | "));
    println!(
        "games {}: Black won {}, White won {}, draws {}; {} counted, {} resigned, {} forfeits; {:.0} moves a game",
        s.games, s.black_wins, s.white_wins, s.draws, s.counted, s.resigned, s.forfeits, s.mean_moves
    );
    if let (Some(a), [first, second]) = (s.a_wins, s.players.as_slice()) {
        let rate = 100.0 * a as f64 / s.games.max(1) as f64;
        println!("{first} won {a} of {} against {second} ({rate:.1}%)", s.games);
    }
    let r = &s.this_run;
    if r.games > 0 {
        println!(
            "this run: {} games in {:.1} s: {:.2} games/s ({:.0} an hour), {:.0} moves/s, {:.0} net positions/s in \
             {} forward passes ({:.1} positions each); {:.1} CPU seconds: {:.2} games and {:.0} net positions a \
             CPU-second",
            r.games,
            r.seconds,
            r.games as f64 / r.seconds,
            3600.0 * r.games as f64 / r.seconds,
            r.moves as f64 / r.seconds,
            r.net_positions as f64 / r.seconds,
            r.forward_passes,
            r.net_positions as f64 / r.forward_passes.max(1) as f64,
            r.cpu_seconds,
            r.games as f64 / r.cpu_seconds,
            r.net_positions as f64 / r.cpu_seconds,
        );
    }
    if let Some(manifest) = &s.dataset {
        let split = |split: Split| &manifest.splits[&split];
        println!(
            "dataset {}: {} positions ({} with value) in train, {} in validation, {} in test",
            out.join("dataset").display(),
            split(Split::Train).positions,
            split(Split::Train).value_positions,
            split(Split::Validation).positions,
            split(Split::Test).positions
        );
        for (reason, n) in &manifest.dropped {
            println!("  dropped: {n} games ({reason})");
        }
    }
    println!("games in {}", out.join("games").display());
}
