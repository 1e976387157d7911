//! `go-train review`: what the nets think of every move of a game.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::bounds::{count_flag, Domain};
use go_train::eval::review::{biggest_swings, lasting_swing, plot_win_rate, review_game, MoveReview, Review};
use go_train::nn::{self, Output};
use go_train::search::{NetEval, NetSource};
use go_train::sgf::{read_file_up_to_damage, write_annotated, GameRecord, PartialGame};

/// Review a game with the nets: each move's policy rank and win rate.
///
/// For every move: its rank and probability
/// under the policy, the policy's top 3, and Black's win probability
/// before and after it (value net); then the moves that swung the game
/// most, by what of the swing the reply left standing (the value net
/// favours the side that has just moved, so a raw swing is often taken
/// back at once). Writes the game's main line as SGF with these figures as comments, after the
/// game's own (open it in Sabaki; side variations are left out, with a warning), and a plot of Black's win probability
/// over the game (PNG, or SVG for a .svg name). A record with an illegal move is reviewed up to
/// it. Nets not named are the shipped ones.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train review game.sgf                                  # the shipped nets; game.review.sgf, game.review.png
  go-train review game.sgf --policy checkpoints/policy --value checkpoints/value-pv
  go-train review collection.sgf --index 3                  # collection-3.review.sgf, collection-3.review.png
  go-train review game.sgf --plot game.svg --force          # again, over the review before
  go-train review game.sgf --json | jq .rank                # one JSON object per move")]
pub struct Args {
    /// The SGF file.
    game: PathBuf,
    /// Which game of a collection (0 for the first).
    #[arg(long, default_value_t = 0, value_parser = count_flag::<usize>(super::INDEX))]
    index: usize,
    #[command(flatten)]
    nets: super::nets::JudgingNets,
    /// The reviewed SGF [default: GAME's name with .review.sgf, in the
    /// current folder; GAME-INDEX.review.sgf for a game of a collection].
    #[arg(long)]
    out: Option<PathBuf>,
    /// The win-rate plot, .png or .svg [default: --out's name with .png,
    /// GAME.review.png without --out; none without a value net].
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Replace --out and --plot when they exist.
    #[arg(long)]
    force: bool,
    /// Moves listed as the biggest swings: those whose change of their
    /// player's win probability the reply left most of.
    #[arg(long, default_value_t = 5, value_parser = count_flag::<usize>(Domain::Count { min: 0, max: 1000 }))]
    swings: usize,
    /// One JSON object per move on stdout instead of the summary.
    #[arg(long)]
    json: bool,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
}

pub fn run(args: Args) -> Result<()> {
    let GameInFile { record, name, games, damaged, side_nodes } = read_game(&args.game, args.index)?;
    if record.size != nn::BOARD {
        bail!("{}: a {s}x{s} game; the nets play {b}x{b} only", args.game.display(), s = record.size, b = nn::BOARD);
    }
    let nets = args.nets.defaults()?;
    // Each game of a collection its own default names: the review of game
    // 1 once replaced that of game 0.
    // Built as an OsString: a name that is not UTF-8 once lost its odd
    // bytes to U+FFFD and no longer matched the game's.
    let mut stem = args.game.file_stem().map_or("game".into(), std::ffi::OsStr::to_os_string);
    if games > 1 {
        stem.push(format!("-{}", args.index));
    }
    let beside = |suffix: &str| {
        let mut name = stem.clone();
        name.push(suffix);
        PathBuf::from(name)
    };
    let sgf_path = args.out.clone().unwrap_or_else(|| beside(".review.sgf"));
    let png_path = match (&args.plot, &nets.value) {
        (Some(path), Some(_)) => Some(path.clone()),
        (Some(path), None) => bail!("--plot {}: a plot needs a value net (--value is none)", path.display()),
        // Beside the review it draws: named after the game, a second
        // review's plot (another --out) once replaced the first's.
        (None, Some(_)) => Some(match &args.out {
            Some(out) => out.with_extension("png"),
            None => beside(".review.png"),
        }),
        (None, None) => None,
    };
    let outputs = std::iter::once(("--out", &sgf_path)).chain(png_path.as_ref().map(|p| ("--plot", p)));
    for (flag, path) in outputs {
        // Not standard output, as a reader of other tools may expect: a
        // file named "-" once took the review.
        if path.as_os_str() == "-" {
            bail!("{flag} -: review writes files; name one (--json prints the moves on standard output)");
        }
        if super::same_file(path, &args.game) {
            bail!("{flag} {}: that is the game under review; name another file", path.display());
        }
        // Before the review's minutes, not after them.
        if path.is_dir() {
            bail!("{flag} {}: a folder; name a file", path.display());
        }
        go_train::atomic::refuse_special_file(path).with_context(|| flag.to_string())?;
        if path.exists() && !args.force {
            bail!(
                "{flag} {}: exists (a review written before?); --force replaces it, or name another file",
                path.display()
            );
        }
    }
    if let Some(png_path) = &png_path {
        if super::same_file(&sgf_path, png_path) {
            bail!("--out and --plot both name {}: give each its own file", sgf_path.display());
        }
        go_train::plot::check_plot_path("--plot", png_path)?;
    }
    nn::init_threads(None)?;
    let device = nn::device(&args.device)?;
    let load = |net: &Option<NetSource>, want| net.as_ref().map(|n| NetEval::load_source(n, &device, want)).transpose();
    let policy = load(&nets.policy, Output::MoveLogProbs)?;
    let value = load(&nets.value, Output::WinProb)?;
    let Review { moves: reviews, stopped: stopped_early } =
        review_game(&record, record.rules(), policy.as_ref(), value.as_ref())?;
    let game_name = format!("{}: game {}", args.game.display(), args.index);
    if let Some(stopped) = &stopped_early {
        if reviews.is_empty() {
            bail!("{game_name}: {stopped}: no move to review");
        }
        go_train::say!("warning: {game_name}: {stopped}; reviewed the {} moves before it", reviews.len());
    }
    // A setup-only problem file once wrote an empty review and succeeded.
    if reviews.is_empty() {
        bail!("{game_name}: no move to review (the record has none)");
    }

    // Written from the record, the review holds the main line only: a
    // reader's own variations, once dropped without a word.
    if side_nodes > 0 {
        let plural = if side_nodes == 1 { "" } else { "s" };
        go_train::say!(
            "warning: {game_name}: reviewed the main line; its side variations ({side_nodes} node{plural}) are not in {}",
            sgf_path.display()
        );
    }
    let comments: Vec<String> = reviews.iter().map(MoveReview::comment).collect();
    go_train::atomic::write_atomic(&sgf_path, write_annotated(&record, &comments).as_bytes())
        .with_context(|| format!("writing {}", sgf_path.display()))?;
    let swings = biggest_swings(&reviews, args.swings);
    let mut written = vec![sgf_path.display().to_string()];
    if let Some(png_path) = &png_path {
        let players =
            format!("{} (B) vs {} (W)", record.black.as_deref().unwrap_or("?"), record.white.as_deref().unwrap_or("?"));
        let title = format!("{players}, {}: Black's win probability", result_text(&record));
        match plot_win_rate(&reviews, &swings, &title, png_path) {
            Ok(()) => written.push(png_path.display().to_string()),
            // The review is written; the plot asked for is not, which is a failure.
            Err(e) => bail!("cannot draw {}: {e:#} (the review is in {})", png_path.display(), sgf_path.display()),
        }
    }
    if args.json {
        for review in &reviews {
            println!("{}", serde_json::to_string(review)?);
        }
        go_train::say!("written: {}", written.join(", "));
        return Ok(());
    }
    // Damage past an illegal move is not where the review stopped.
    let damaged = damaged && stopped_early.is_none();
    print_summary(&name, &record, &reviews, &swings, damaged);
    println!("written: {}", written.join(", "));
    Ok(())
}

/// A game of a file, as [`read_game`] reads it.
pub struct GameInFile {
    pub record: GameRecord,
    /// The file's name, and the game's place in it when it holds more
    /// than one: "a.sgf (game 1 of 3200)".
    pub name: String,
    /// Games in the file.
    pub games: usize,
    /// Whether the record is damaged after its last move read.
    pub damaged: bool,
    /// Nodes of the game's side variations, which the record leaves out.
    pub side_nodes: usize,
}

/// Game `index` of the file, read up to any damage (with a warning).
pub fn read_game(path: &Path, index: usize) -> Result<GameInFile> {
    let games = read_file_up_to_damage(path).with_context(|| format!("{}", path.display()))?;
    let count = games.len();
    let game = games.into_iter().nth(index).with_context(|| {
        let range = if count > 1 { format!(": --index 0 to {}", count - 1) } else { String::new() };
        format!("{}: no game {index} (it holds {count}{range})", path.display())
    })?;
    let PartialGame { record, damage, side_nodes } =
        game.with_context(|| format!("{}: game {index}", path.display()))?;
    if let Some(damage) = &damage {
        go_train::say!("warning: {}: read up to move {}, then: {damage}", path.display(), record.moves.len());
    }
    let name = match count {
        1 => path.display().to_string(),
        _ => format!("{} (game {index} of {count})", path.display()),
    };
    Ok(GameInFile { record, name, games: count, damaged: damage.is_some(), side_nodes })
}

fn result_text(record: &GameRecord) -> String {
    record.result.as_ref().map_or("no result".to_string(), |r| r.to_string())
}

fn print_summary(name: &str, record: &GameRecord, reviews: &[MoveReview], swings: &[&MoveReview], damaged: bool) {
    // A damaged record's result is that of a game longer than the moves read.
    let cut = if damaged { " (the record is damaged after them)" } else { "" };
    println!("{name}: {} moves{cut}, {}", reviews.len(), result_text(record));
    let ranked: Vec<usize> = reviews.iter().filter_map(|r| r.rank).collect();
    if !ranked.is_empty() {
        let share = |k: usize| 100.0 * ranked.iter().filter(|&&r| r <= k).count() as f64 / ranked.len() as f64;
        println!(
            "policy: the move played was its first choice {:.1}% of the time, in its top 3 {:.1}%",
            share(1),
            share(3)
        );
    }
    if !swings.is_empty() {
        println!("biggest swings that the reply left standing (Black's win probability):");
        for r in swings {
            let (before, after) = (r.black_before.unwrap_or(0.0), r.black_after.unwrap_or(0.0));
            println!(
                "  move {:>3} {} {:<4} {:5.1}% -> {:5.1}%  ({} {:+.1}, {:+.1} standing){}",
                r.number,
                if r.color == go_train::go::Color::Black { "B" } else { "W" },
                r.mv,
                100.0 * before,
                100.0 * after,
                r.color,
                100.0 * r.swing().unwrap_or(0.0),
                100.0 * lasting_swing(reviews, r.number - 1).unwrap_or(0.0),
                r.top.first().map_or(String::new(), |(m, _)| format!("; the policy liked {m}")),
            );
        }
    }
}
