//! `go-train selfplay`: games written as SGF one by one into a folder, a
//! stopped run resumed without losing or repeating a game, and the dataset
//! `prepare` makes of the games.
//!
//! The folder holds `selfplay.json` (what makes two runs the same: players,
//! plan, rules, seed), `games/game-NNNNNN.sgf` (each written atomically the
//! moment its game ends, so a file there is a finished game),
//! `games.list` (the games in order, the list `prepare` reads),
//! `dataset/` (with `--value-positions`: shards and manifest, by the same
//! code path as `go-train prepare games.list`) and `summary.json`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::Device;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::engine::{play_games, Finished, PlayConfig, PlayStats};
use super::plan::Plan;
use super::side::Side;
use crate::atomic::{remove_if_present, tmp_path, write_atomic};
use crate::dataset::filter::{GameList, GameRef};
use crate::dataset::prepare::{prepare, PrepareOptions};
use crate::dataset::Manifest;
use crate::go::Color;
use crate::lock::Lock;
use crate::progress::Progress;
use crate::sgf::{read_file, write_game, GameResult, WinBy};

/// The run's description, which `--resume` must match.
const IDENTITY: &str = "selfplay.json";
/// The folder of game records.
const GAMES: &str = "games";
/// The game list `prepare` reads.
const LIST: &str = "games.list";
/// The dataset's folder.
const DATASET: &str = "dataset";
const SUMMARY: &str = "summary.json";

/// Everything `go-train selfplay` needs besides its sides.
#[derive(Clone, Debug)]
pub struct SelfPlayOptions {
    /// The run's folder.
    pub out: PathBuf,
    /// Games in all (a resumed run plays those not yet in `out`).
    pub games: usize,
    pub play: PlayConfig,
    pub plan: Plan,
    /// Each side as named (its spec and settings, its nets' paths), in the
    /// order of the sides: for the summary.
    pub players: Vec<String>,
    /// What identifies each side but its nets, which `nets` identifies by
    /// their files: saved in `selfplay.json`, so that a resume naming the
    /// same files otherwise (`./p.safetensors`, its full path), or a net
    /// no side plays with, is the same run.
    pub identities: Vec<String>,
    /// The nets the sides play with, each with its file's checksum
    /// ([`crate::search::NetSource::fingerprint`]): another net put at a
    /// path the run named is another run.
    pub nets: Vec<String>,
    /// The dataset to prepare from the games (`None`: SGF files only).
    /// Its board size is the games'; its list, `out/games.list`.
    pub dataset: Option<PrepareOptions>,
    /// Keep the games of a stopped run of the same settings in `out`.
    pub resume: bool,
    /// Replace what a run left in `out`.
    pub force: bool,
}

/// What makes two runs the same: the games they play.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct RunIdentity {
    players: Vec<String>,
    plan: Plan,
    size: usize,
    komi: f32,
    max_moves: usize,
    scoring_playouts: usize,
    seed: u64,
    /// Absent from a run's file written before nets were checked: taken
    /// on trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nets: Option<Vec<String>>,
}

impl RunIdentity {
    fn of(options: &SelfPlayOptions) -> RunIdentity {
        let game = &options.play.game;
        RunIdentity {
            players: options.identities.clone(),
            plan: options.plan,
            size: game.size,
            komi: game.komi,
            max_moves: game.max_moves,
            scoring_playouts: game.ownership_playouts,
            seed: options.play.seed,
            nets: Some(options.nets.clone()),
        }
    }
}

/// What a run reports, over all the games in its folder.
#[derive(Clone, Debug, Serialize)]
pub struct SelfPlaySummary {
    pub players: Vec<String>,
    pub games: usize,
    pub black_wins: usize,
    pub white_wins: usize,
    pub draws: usize,
    /// Wins of the first side named (A), with colours alternating.
    pub a_wins: Option<usize>,
    /// Games ended by two passes or the move limit (counted), by
    /// resignation, by forfeit.
    pub counted: usize,
    pub resigned: usize,
    pub forfeits: usize,
    pub mean_moves: f64,
    /// This run's games and speed (a resumed run's own part).
    pub this_run: PlayStats,
    /// The dataset's positions by split, when one was made.
    pub dataset: Option<Manifest>,
}

/// Plays the games of `options` between `sides` that `out` does not hold
/// yet, writes each as SGF, then the list, the dataset and the summary.
pub fn selfplay(sides: &[Side], options: &SelfPlayOptions, device: &Device) -> Result<SelfPlaySummary> {
    if options.games == 0 {
        bail!("--games must be at least 1");
    }
    options.plan.check_max_moves(options.play.game.max_moves)?;
    for side in sides {
        side.check_board(&options.play.game, device)?;
    }
    let _lock = Lock::create_folder(&options.out, "a self-play run (--out) is a folder of games")?;
    ready_folder(options)?;
    // The run's description first: a folder it is not in holds no run.
    let identity = serde_json::to_string_pretty(&RunIdentity::of(options))?;
    write_atomic(&options.out.join(IDENTITY), identity.as_bytes())?;
    let games_dir = options.out.join(GAMES);
    std::fs::create_dir_all(&games_dir).with_context(|| format!("creating {}", games_dir.display()))?;

    let finished = finished_games(&options.out, options.games);
    let pending: Vec<usize> = (0..options.games).filter(|&i| !finished[i]).collect();
    let progress = Progress::new("selfplay", options.games as u64, "games");
    progress.resume_from((options.games - pending.len()) as u64);
    let names: Vec<&str> = sides.iter().map(Side::name).collect();
    let write = |done: Finished| -> Result<()> {
        let path = game_path(&options.out, done.index);
        write_atomic(&path, write_game(&record(&done, &names)).as_bytes())?;
        progress.inc(1);
        Ok(())
    };
    let played = play_games(sides, &options.plan, &pending, &options.play, device, &write);
    progress.finish();
    let stats = played.with_context(|| {
        let kept = finished_games(&options.out, options.games).into_iter().filter(|&f| f).count();
        format!("{kept} finished games are kept in {}: --resume plays the others", options.out.display())
    })?;

    let list = GameList((0..options.games).map(|i| GameRef { file: game_path(&options.out, i), index: 0 }).collect());
    let list_path = options.out.join(LIST);
    write_atomic(&list_path, list.to_text(&list_path).as_bytes())?;
    let dataset = match &options.dataset {
        None => None,
        Some(prepare_options) => {
            let prepare_options =
                PrepareOptions { board_size: options.play.game.size, force: true, ..prepare_options.clone() };
            let progress = Progress::new("dataset", options.games as u64, "games");
            let (manifest, _) = prepare(&list_path, &options.out.join(DATASET), &prepare_options, &progress)?;
            Some(manifest)
        }
    };
    let summary = summarize(options, stats, dataset)?;
    write_atomic(&options.out.join(SUMMARY), serde_json::to_string_pretty(&summary)?.as_bytes())?;
    Ok(summary)
}

/// The file of game `index`.
pub fn game_path(out: &Path, index: usize) -> PathBuf {
    out.join(GAMES).join(format!("game-{index:06}.sgf"))
}

/// Which of the first `games` games `out` holds, from one listing of its
/// games folder: a test per game took minutes before a run of millions
/// started.
fn finished_games(out: &Path, games: usize) -> Vec<bool> {
    let mut finished = vec![false; games];
    for entry in std::fs::read_dir(out.join(GAMES)).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(index) = game_index(&name.to_string_lossy()).filter(|&i| i < games) else { continue };
        // `game-1.sgf` is not game 1's file, nor is a folder of its name.
        if game_path(out, index).file_name() == Some(name.as_os_str()) && entry.path().is_file() {
            finished[index] = true;
        }
    }
    finished
}

/// The index of a game record's file name ([`game_path`]), if it is one.
fn game_index(name: &str) -> Option<usize> {
    name.strip_prefix("game-")?.strip_suffix(".sgf")?.parse().ok()
}

/// Refuses a folder holding anything without `--resume` or `--force`, and
/// a resumed folder of another run; with `--force`, removes what a run
/// leaves (other files stay); removes temporary files a kill left.
fn ready_folder(options: &SelfPlayOptions) -> Result<()> {
    let out = &options.out;
    let holds_anything = crate::lock::first_entry_of_another(out).is_some();
    // --force once removed games/ and dataset/ of a folder that held no
    // run at all, whatever the user kept there.
    if holds_anything && !out.join(IDENTITY).is_file() {
        bail!(
            "{} is not empty and holds no self-play run ({IDENTITY} is missing): give an empty or new --out \
             (--force replaces a self-play run only)",
            out.display()
        );
    }
    if holds_anything && !options.resume && !options.force {
        bail!(
            "{} is not empty: --resume to finish the run it holds, or another --out ({})",
            out.display(),
            force_deletes(out)
        );
    }
    if options.force {
        remove_game_records(&out.join(GAMES))?;
        return [DATASET, IDENTITY, LIST, SUMMARY].iter().try_for_each(|name| remove_if_present(&out.join(name)));
    }
    if options.resume {
        let path = out.join(IDENTITY);
        // A description that cannot be read is no licence to skip the
        // checks below: it would let another run's settings write over it.
        if let Some(text) = crate::atomic::read_if_present(&path, "the run's description")? {
            let theirs: RunIdentity = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a self-play run's description", path.display()))?;
            let mut ours = RunIdentity::of(options);
            if theirs.nets.is_none() {
                ours.nets = None;
            }
            // A run's file written while it named players with their nets'
            // paths.
            if theirs.players == options.players {
                ours.players = options.players.clone();
            }
            if theirs != ours {
                // Each setting that differs, by name, rather than both runs whole.
                let (theirs, ours) = (serde_json::to_value(&theirs)?, serde_json::to_value(&ours)?);
                let differ: Vec<String> = ours
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(key, value)| theirs.get(key.as_str()) != Some(value))
                    .map(|(key, value)| {
                        format!(
                            "{key} {value} here, {} in the run",
                            theirs.get(key.as_str()).unwrap_or(&serde_json::Value::Null)
                        )
                    })
                    .collect();
                bail!(
                    "{} holds another run ({}): give the same settings ({})",
                    out.display(),
                    differ.join("; "),
                    force_deletes(out)
                );
            }
            // A resume with fewer games would write a list and a dataset
            // without the games past them, as if never played.
            let past = (std::fs::read_dir(out.join(GAMES)).into_iter().flatten().flatten())
                .filter_map(|e| game_index(&e.file_name().to_string_lossy()))
                .filter(|&index| index >= options.games)
                .max();
            if let Some(last) = past {
                bail!(
                    "{} holds game {} (game-{last:06}.sgf), past --games {}: give --games {} or more ({})",
                    out.display(),
                    last + 1,
                    options.games,
                    last + 1,
                    force_deletes(out)
                );
            }
            // Resumed with other dataset settings, the dataset of the
            // games played so far would be made again otherwise, silently.
            if let (Some(dataset), Ok(existing)) = (&options.dataset, Manifest::read(&out.join(DATASET))) {
                let prepared = PrepareOptions { board_size: options.play.game.size, ..dataset.clone() };
                let differ =
                    existing.settings_differences(&prepared.settings(), prepared.features, prepared.board_size);
                if !differ.is_empty() {
                    bail!(
                        "{} holds the positions of the games played so far, prepared otherwise ({}): resume with \
                         the run's --value-positions, --features, --split and --ownership, or remove it",
                        out.join(DATASET).display(),
                        differ.join("; ")
                    );
                }
            }
            // Resumed without --value-positions, the dataset of the games
            // played before would stay, silently short of the new ones.
            if options.dataset.is_none() && out.join(DATASET).join(crate::dataset::MANIFEST).is_file() {
                bail!(
                    "{} holds the positions of the games played so far: resume with the run's --value-positions \
                     (and --features, --ownership) to make it again with every game, or remove it",
                    out.join(DATASET).display()
                );
            }
        }
        // A kill mid-write leaves a temporary file, never a game record.
        if let Ok(entries) = std::fs::read_dir(out.join(GAMES)) {
            for entry in entries.flatten() {
                let is_file = entry.file_type().is_ok_and(|t| t.is_file());
                if is_file && entry.file_name().to_string_lossy().ends_with(".tmp") {
                    std::fs::remove_file(entry.path())
                        .with_context(|| format!("removing {}", entry.path().display()))?;
                }
            }
        }
    }
    Ok(())
}

/// Removes the game records in `games` and the temporary files of their
/// writes, then the folder if nothing else is left in it: a file of the
/// user's there stays (`--force` once removed the folder whole).
fn remove_game_records(games: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(games) else { return Ok(()) };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if game_index(name.strip_suffix(".tmp").unwrap_or(&name)).is_some() {
            remove_if_present(&entry.path())?;
        }
    }
    // Refused while something else is there, which stays.
    let _ = std::fs::remove_dir(games);
    Ok(())
}

/// What `--force` would cost, for advice that offers it.
fn force_deletes(out: &Path) -> String {
    let games = (std::fs::read_dir(out.join(GAMES)).into_iter().flatten().flatten())
        .filter(|e| game_index(&e.file_name().to_string_lossy()).is_some())
        .count();
    format!("--force would replace the run, deleting its {games} finished games")
}

/// The SGF record of a finished game: players named after the sides, and
/// under AlphaGo's recipe the position to label marked.
fn record(done: &Finished, names: &[&str]) -> crate::sgf::GameRecord {
    let name = |color: Color| match done.value_position {
        Some(u) => {
            let before = done.plan.random_move.map_or(0, |r| r.before);
            format!("{} to move {}, a random move {u}, then {}", names[before], u - 1, names[done.plan.side(color)])
        }
        None => names[done.plan.side(color)].to_string(),
    };
    let mut record = done.outcome.record(&name(Color::Black), &name(Color::White));
    if let Some(u) = done.value_position {
        record.mark_value_position(u);
    }
    record
}

/// The summary of the games in the folder, read back from their records
/// (a resumed run's earlier games included).
fn summarize(options: &SelfPlayOptions, this_run: PlayStats, dataset: Option<Manifest>) -> Result<SelfPlaySummary> {
    struct Game {
        winner: Option<Color>,
        by: Option<WinBy>,
        moves: usize,
        a_black: bool,
    }
    let games: Vec<Game> = (0..options.games)
        .into_par_iter()
        .map(|i| {
            let path = game_path(&options.out, i);
            let record = read_file(&path).ok().and_then(|games| games.into_iter().next()?.ok()).with_context(|| {
                format!(
                    "{}: not a readable game record (remove it, and --resume plays that game again)",
                    path.display()
                )
            })?;
            let (winner, by) = match record.result {
                Some(GameResult::Win { winner, by }) => (Some(winner), Some(by)),
                _ => (None, None),
            };
            Ok(Game { winner, by, moves: record.moves.len(), a_black: options.plan.a_plays(i, Color::Black) })
        })
        .collect::<Result<_>>()?;
    let count = |f: &dyn Fn(&Game) -> bool| games.iter().filter(|g| f(g)).count();
    let black_wins = count(&|g| g.winner == Some(Color::Black));
    let white_wins = count(&|g| g.winner == Some(Color::White));
    let resigned = count(&|g| matches!(g.by, Some(WinBy::Resignation)));
    let forfeits = count(&|g| matches!(g.by, Some(WinBy::Forfeit)));
    let a_wins = match options.plan {
        Plan::Alternate { .. } => {
            Some(count(&|g| g.winner == Some(if g.a_black { Color::Black } else { Color::White })))
        }
        Plan::AlphaGoValue { .. } => None,
    };
    Ok(SelfPlaySummary {
        players: options.players.clone(),
        games: games.len(),
        black_wins,
        white_wins,
        draws: games.len() - black_wins - white_wins,
        a_wins,
        counted: games.len() - resigned - forfeits,
        resigned,
        forfeits,
        mean_moves: games.iter().map(|g| g.moves as f64).sum::<f64>() / games.len().max(1) as f64,
        this_run,
        dataset,
    })
}

/// The temporary name a game record is written under (for tests of
/// resuming after a kill).
pub fn game_tmp_path(out: &Path, index: usize) -> PathBuf {
    tmp_path(&game_path(out, index))
}
