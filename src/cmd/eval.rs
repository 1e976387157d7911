//! `go-train eval`: how trained nets score on held-out positions
//! (`--data`) and in games (`--match`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::bounds::{self, count_flag, real_flag, Domain};
use go_train::dataset::{Dataset, Split};
use go_train::eval::arena::{run_match, GameConfig, MatchConfig, MatchSummary};
use go_train::eval::baseline::OwnershipBaseline;
use go_train::eval::positions::{baseline_by_phase, check_inputs, evaluate_by_phase, mixed_by_phase, Report};
use go_train::gtp::GtpTimeouts;
use go_train::nn::{self as nn, weights};
use go_train::progress::Progress;
use go_train::search::ownership::LeafMix;
use go_train::search::NetChoice;

use super::search_flags::setting_flag;

/// Measure trained nets on held-out positions or in games.
///
/// With --data: loss, top-1 and top-5 accuracy (move nets) or squared error
/// and accuracy (value nets) on a split of a dataset, overall and by game
/// phase, and the evaluation speed, of each net named (--policy, --value,
/// --playout: the shipped nets are defaults of --match only).
///
/// With --match A B: games between two players, colours alternating. A
/// player is a go-train agent (random, policy, playout, mcts, optionally
/// with settings: `mcts:iterations=400`, `mcts:preset=seed,selection=puct`,
/// `mcts:config=search.toml`, `policy:temperature=1`; MCTS plays the tuned
/// search unless the spec says otherwise, as `go-train gtp` does; nets come
/// from --policy/--value/--playout unless the spec names them, and from the
/// shipped ones for the rest, with the residual policy at MCTS's root where
/// the policy is the shipped one; the settings' keys are the names of `go-train
/// gtp`'s search flags) or any GTP engine's command line (`gnugo --mode gtp
/// --level 10`, quoted as in a shell where a path has spaces). Games are
/// refereed under Chinese rules and scored by area, dead stones found by
/// random-playout ownership. Every game is saved as SGF in --out; the
/// summary gives wins, the win rate with a 95% interval and the Elo
/// difference.
#[derive(Parser)]
// The nets' shared help names the shipped defaults, which only --match takes.
#[command(mut_arg("policy", |a| a.help("Policy net [--match: default the shipped nets/policy.safetensors]")))]
#[command(mut_arg("value", |a| a.help("Value net (MCTS leaf evaluation) [--match: default the shipped nets/value.safetensors]")))]
#[command(mut_arg("playout", |a| a.help("Fast playout net [--match: default the shipped nets/playout.safetensors]")))]
// One of the two, named together when neither is given (a bare `eval`
// once asked for --data alone).
#[command(group = clap::ArgGroup::new("what").required(true))]
#[command(after_help = "Examples:
  go-train eval --data datasets/kgs --policy checkpoints/policy
  go-train eval --data datasets/kgs-value --value checkpoints/value --split validation
  go-train eval --data datasets/kgs --playout checkpoints/playout/last/weights.safetensors --json
  go-train eval --match mcts '/usr/games/gnugo --mode gtp --level 10' --games 40   # as go-train gtp plays
  go-train eval --match mcts '/usr/games/gnugo --mode gtp --level 10' --games 40 --resume   # after a kill
  go-train eval --match mcts:iterations=400 mcts:preset=seed --games 20
  go-train eval --match policy random --policy checkpoints/policy --games 100
  go-train eval --match mcts policy --policy checkpoints/policy --value checkpoints/value --playout checkpoints/playout
  go-train eval --match policy '/usr/games/gnugo --mode gtp --level 10' --policy checkpoints/policy --games 20
  go-train eval --match mcts:leaf=stones,iterations=400 '/usr/games/gnugo --mode gtp --level 1' --size 9 --games 10")]
pub struct Args {
    /// Dataset folder (evaluate on positions).
    #[arg(long, group = "what")]
    data: Option<PathBuf>,
    /// Play a match between two players A and B.
    #[arg(long = "match", num_args = 2, value_names = ["A", "B"], id = "players", group = "what")]
    players: Option<Vec<String>>,
    /// Match: games to play.
    #[arg(long, conflicts_with = "data", default_value_t = 10, value_parser = count_flag::<usize>(GAMES))]
    games: usize,
    /// Match: board size (nets play 19x19 only).
    #[arg(long, conflicts_with = "data", default_value_t = 19, value_parser = count_flag::<usize>(bounds::BOARD_SIZE))]
    size: usize,
    /// Match: komi.
    #[arg(long, conflicts_with = "data", default_value_t = 7.5, value_parser = real_flag::<f32>(bounds::KOMI))]
    komi: f32,
    /// Match: moves after which a game is scored as it stands [default: 3 x size²].
    #[arg(long, conflicts_with = "data", value_parser = count_flag::<usize>(bounds::MAX_MOVES))]
    max_moves: Option<usize>,
    /// Match: games played at once [default: one per core].
    #[arg(long, conflicts_with = "data", value_parser = count_flag::<usize>(bounds::PARALLEL))]
    parallel: Option<usize>,
    /// Match: folder for the SGF files, games.jsonl and summary.json.
    #[arg(long, conflicts_with = "data", default_value = "matches/latest")]
    out: PathBuf,
    /// Match: replace the games already in --out.
    #[arg(long, conflicts_with_all = ["resume", "data"])]
    force: bool,
    /// Match: keep the games a stopped match (same players and settings)
    /// finished in --out, and play only the others.
    #[arg(long, conflicts_with = "data")]
    resume: bool,
    /// Match: seeds the agents and the scoring.
    #[arg(long, conflicts_with = "data", default_value_t = 1, value_parser = count_flag::<u64>(bounds::SEED))]
    seed: u64,
    /// Match: compare our score of each counted game with this engine's
    /// final_score, e.g. '/usr/games/gnugo --mode gtp --chinese-rules'.
    #[arg(long, conflicts_with = "data")]
    cross_check: Option<String>,
    /// Match: seconds a GTP engine has to answer a command; one that does
    /// not forfeits the game. A game's setup gets at least the default.
    #[arg(long, conflicts_with = "data", value_name = "SECONDS", default_value_t = GtpTimeouts::DEFAULT_SECONDS)]
    gtp_timeout: f64,
    /// Which split.
    #[arg(long, conflicts_with = "players", default_value = "test")]
    split: Split,
    #[command(flatten)]
    nets: super::nets::NetPaths,
    /// Positions at most (0: the whole split).
    #[arg(long, conflicts_with = "players", default_value_t = 0, value_parser = count_flag::<u64>(Domain::Count { min: 0, max: u64::MAX }))]
    limit: u64,
    /// Positions per batch, 1 to 8192.
    #[arg(long, conflicts_with = "players", default_value_t = 500, value_parser = count_flag::<usize>(BATCH))]
    batch: usize,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Value nets: fit the ownership baseline (random-playout area margin
    /// through a logistic) on this many train positions, drawn across the
    /// split with a fixed seed, and score it on the same positions as the
    /// net; 0 leaves it out.
    #[arg(long, conflicts_with = "players", default_value_t = 4000, value_parser = count_flag::<usize>(BASELINE_POSITIONS))]
    baseline_positions: usize,
    /// Value nets: also score the net mixed with random playouts as MCTS
    /// leaves mix them (`mix=λ`): (1 − λ)·net + λ·(share of playouts won),
    /// λ from 0 to 1.
    #[arg(long, conflicts_with = "players", value_name = "λ", value_parser = setting_flag::<f32>("mix"))]
    mix: Option<f32>,
    /// Random playouts per position for --mix.
    #[arg(long, conflicts_with = "players", requires = "mix", default_value_t = 8, value_parser = setting_flag::<usize>("mix-playouts"))]
    mix_playouts: usize,
    /// Random playouts for --mix that answer ataris (`mix-tactics=on`).
    #[arg(long, conflicts_with = "players")]
    mix_tactics: bool,
    /// Average each prediction over the 8 symmetries of the board (8x slower).
    #[arg(long, conflicts_with = "players")]
    symmetries: bool,
    /// One JSON object per net (or the match summary) on stdout.
    #[arg(long)]
    json: bool,
}

/// Games a match plays at most.
const GAMES: Domain = Domain::Count { min: 1, max: 1_000_000 };
/// Positions a forward pass evaluates. Each costs about 0.7 MB on a CPU
/// with the extended planes (2.3 GB at 2,000, 4.4 GB at 5,000): a batch
/// of 100,000, once accepted, died for want of memory.
const BATCH: Domain = Domain::Count { min: 1, max: 8_192 };
/// Train positions the ownership baseline is fitted on.
const BASELINE_POSITIONS: Domain = Domain::Count { min: 0, max: 100_000_000 };

pub fn run(args: Args) -> Result<()> {
    if let Some(players) = &args.players {
        return run_match_command(&args, players);
    }
    let Some(data) = &args.data else { bail!("give --data DIR or --match A B") };
    let n = &args.nets;
    // `none` names no net here as everywhere (it was read as a file).
    let named = |p: &&PathBuf| matches!(NetChoice::named(p), NetChoice::Net(_));
    let nets: Vec<(&str, &PathBuf)> =
        [("policy", &n.judging.policy), ("value", &n.judging.value), ("playout", &n.playout)]
            .into_iter()
            .filter_map(|(k, p)| Some((k, p.as_ref().filter(named)?)))
            .collect();
    if nets.is_empty() {
        bail!(
            "name at least one net to score: --policy, --value or --playout (with --data no net is taken by default)"
        );
    }
    if args.mix.is_some() {
        if !nets.iter().any(|(role, _)| *role == "value") {
            bail!("--mix mixes a value net's predictions with random playouts: give --value");
        }
    } else if args.mix_tactics {
        bail!("--mix-tactics chooses the playouts --mix mixes in: give --mix");
    }
    go_train::nn::init_threads(None)?;
    let device = nn::device(&args.device)?;
    let dataset = Dataset::open(data)?;
    // Scores of nothing read as perfect ones (loss 0) and exited 0.
    let counts = dataset.manifest().splits.get(&args.split).cloned().unwrap_or_default();
    let scored = |role: &str| if role == "value" { counts.value_positions } else { counts.positions };
    if let Some((role, _)) = nets.iter().find(|(role, _)| scored(role) == 0) {
        let what = if *role == "value" { "positions with a value label" } else { "positions" };
        let held: Vec<String> = Split::ALL
            .iter()
            .filter_map(|s| dataset.manifest().splits.get(s).map(|c| format!("{s} {}", c.positions)))
            .collect();
        bail!(
            "{}: its {} split holds no {what} for the {role} net to be scored on (positions by split: {}); \
             name another --split",
            data.display(),
            args.split,
            held.join(", ")
        );
    }
    // Every net loaded and checked before the first is evaluated: a bad
    // second one would otherwise fail after minutes of the first.
    let mut loaded = Vec::new();
    for (role, path) in nets {
        let file = weights::resolve(path)?;
        let model = weights::load(&file, &device)?;
        let wanted = if role == "value" { nn::Output::WinProb } else { nn::Output::MoveLogProbs };
        if model.output() != wanted {
            bail!("{}: a {} net, which --{role} cannot take", file.display(), model.arch());
        }
        check_inputs(&model, &dataset).with_context(|| format!("--{role} {}", file.display()))?;
        loaded.push((role, file, model));
    }
    // Fitted before any net is scored: a split it cannot be fitted on
    // once failed after the value net's minutes, its report lost.
    let fitted = match loaded.iter().any(|(role, _, _)| *role == "value") && args.baseline_positions > 0 {
        true => Some(OwnershipBaseline::fit(&dataset, args.baseline_positions)?),
        false => None,
    };
    // A setting as given (`0.3`, not the f32's `0.30000001192092896`).
    let mix_as_given = args.mix.map(|m| m.to_string().parse::<f64>().unwrap_or(m as f64));
    for (role, file, model) in loaded {
        if let Some(note) = go_train::eval::positions::trained_on_note(&file, &dataset, args.split)? {
            go_train::say!("{note}");
        }
        let report = evaluate_by_phase(&model, &dataset, args.split, args.batch, args.limit, args.symmetries)?;
        // A value net is measured against a predictor that learns nothing
        // of Go, on the same positions.
        let baseline = match fitted.filter(|_| role == "value") {
            Some(fitted) => Some((fitted, baseline_by_phase(&fitted, &dataset, args.split, args.batch, args.limit)?)),
            None => None,
        };
        let mixed = match (role, args.mix) {
            ("value", Some(lambda)) => {
                let setting = LeafMix { lambda, playouts: args.mix_playouts, tactical: args.mix_tactics };
                Some(mixed_by_phase(&model, &dataset, args.split, args.batch, args.limit, setting, args.symmetries)?)
            }
            _ => None,
        };
        if args.json {
            let value = serde_json::json!({
                "net": role, "checkpoint": file.display().to_string(), "arch": model.arch().to_string(),
                "features": model.features(), "data": data.display().to_string(), "split": args.split,
                "limit": args.limit, "symmetries": args.symmetries, "report": report,
                "ownership_baseline": baseline.as_ref().map(|(f, r)| serde_json::json!({
                    "slope": f.slope, "white": f.white, "bias": f.bias, "fitted_on": f.fitted_on, "report": r})),
                "mixed": mixed.as_ref().map(|r| serde_json::json!({
                    "mix": mix_as_given, "playouts": args.mix_playouts, "tactics": args.mix_tactics, "report": r})),
            });
            println!("{value}");
        } else {
            print_report(&format!("{role} net"), &file.display().to_string(), args.split, &report);
            if let Some((fitted, r)) = &baseline {
                let what = format!(
                    "ownership baseline (σ({:.4}·margin {:+.3}·white {:+.3}), fitted on {} train positions)",
                    fitted.slope, fitted.white, fitted.bias, fitted.fitted_on
                );
                print_report(&what, "random playouts", args.split, r);
            }
            if let Some(r) = &mixed {
                let what = format!(
                    "value net mixed with {} random playouts{} (λ = {})",
                    args.mix_playouts,
                    if args.mix_tactics { " answering ataris" } else { "" },
                    args.mix.unwrap_or(0.0)
                );
                print_report(&what, &file.display().to_string(), args.split, r);
            }
        }
    }
    Ok(())
}

fn print_report(what: &str, source: &str, split: Split, r: &Report) {
    if r.overall.positions == 0 {
        println!("{what} {source} on {split}: no positions to score");
        return;
    }
    println!(
        "{what} {source} on {split}: {} positions, {:.0} positions/s",
        r.overall.positions, r.positions_per_second
    );
    let line = |name: &str, s: &go_train::eval::positions::Scores| match (s.top1, s.top5, s.accuracy) {
        (Some(t1), Some(t5), _) => println!(
            "  {name:<14} loss {:.4}  top-1 {:>5.1}%  top-5 {:>5.1}%  ({} positions)",
            s.loss,
            100.0 * t1,
            100.0 * t5,
            s.positions
        ),
        _ => println!(
            "  {name:<14} MSE {:.4} (constant 0.5: 0.25)  accuracy {:>5.1}%  mean {:.3} (won {:.3})  ({} positions)",
            s.loss,
            100.0 * s.accuracy.unwrap_or(0.0),
            s.mean_prediction.unwrap_or(0.0),
            s.mean_outcome.unwrap_or(0.0),
            s.positions
        ),
    };
    line("all", &r.overall);
    for (name, s) in r.phases.iter().chain(&r.sides) {
        line(name, s);
    }
}

fn run_match_command(args: &Args, players: &[String]) -> Result<()> {
    // Agents without nets take the named ones, and for those not named
    // the shipped ones on the board those play.
    let nets = args.nets.defaults(args.size, None, true)?;
    let spec = |text: &str, player: &str| {
        super::nets::player_spec(text, &nets, args.size).with_context(|| format!("player {player}"))
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parallel = args.parallel.unwrap_or(cores);
    // Each game's nets run on one thread: games, not layers, are the
    // parallel work here.
    go_train::nn::init_threads(Some(1))?;
    let device = nn::device(&args.device)?;
    let config = MatchConfig {
        a: spec(&players[0], "A")?,
        b: spec(&players[1], "B")?,
        games: args.games,
        game: GameConfig {
            size: args.size,
            komi: args.komi,
            max_moves: args.max_moves.unwrap_or(3 * args.size * args.size),
            ownership_playouts: go_train::search::ownership::DEFAULT_PLAYOUTS,
        },
        parallel,
        out: args.out.clone(),
        seed: args.seed,
        cross_check: args.cross_check.clone(),
        resume: args.resume,
        force: args.force,
        gtp_timeouts: GtpTimeouts::for_commands(args.gtp_timeout).context("--gtp-timeout")?,
    };
    go_train::say!(
        "match: A = {}, B = {}, {} games on {}x{}, komi {}, {} at once",
        players[0],
        players[1],
        args.games,
        args.size,
        args.size,
        args.komi,
        parallel
    );
    let progress = Progress::new("match", args.games as u64, "games");
    let summary = run_match(&config, &device, &progress)?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_match(&summary, &args.out);
    }
    Ok(())
}

fn print_match(s: &MatchSummary, out: &std::path::Path) {
    let pct = |x: f64| 100.0 * x;
    println!("A: {}\nB: {}", s.a, s.b);
    println!(
        "games {}: A won {} ({} as Black, {} as White), B won {}, draws {}",
        s.games, s.a_wins, s.a_wins_by_color[0], s.a_wins_by_color[1], s.b_wins, s.draws
    );
    println!(
        "A's win rate {:.1}% (95% interval {:.1}%–{:.1}%), Elo A − B {:+.0} (95% interval {:+.0} to {:+.0})",
        pct(s.a_win_rate),
        pct(s.a_win_rate_95.0),
        pct(s.a_win_rate_95.1),
        s.elo + 0.0, // no "-0"
        s.elo_95.0 + 0.0,
        s.elo_95.1 + 0.0
    );
    if s.forfeits.iter().any(|&f| f > 0) {
        println!("forfeits: A {}, B {} (reasons in games.jsonl and each SGF's comment)", s.forfeits[0], s.forfeits[1]);
    }
    if s.cross_checked > 0 {
        println!(
            "scoring agrees with the cross-check engine on {} of {} counted games",
            s.cross_check_agreed, s.cross_checked
        );
    }
    let per_move = |seconds: f64| {
        if seconds < 0.1 {
            format!("{:.2} ms", 1000.0 * seconds)
        } else {
            format!("{seconds:.2} s")
        }
    };
    println!(
        "{:.0} moves per game; time per move: A {}, B {}",
        s.mean_moves,
        per_move(s.seconds_per_move[0]),
        per_move(s.seconds_per_move[1])
    );
    println!("games in {}", out.display());
}
