//! Running a whole match: games in parallel, SGF files as they finish, a
//! summary with the win rate, its 95% interval and the Elo difference.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::player::PlayerSpec;
use super::referee::{play_game, EndReason, GameConfig, GameOutcome};
use super::stats::{elo_difference, wilson_interval, Z95};
use crate::atomic::write_atomic;
use crate::go::{Color, Move};
use crate::gtp::{GtpClient, GtpTimeouts};
use crate::progress::Progress;
use crate::sgf::{write_game, GameResult};

/// Everything a match needs.
#[derive(Clone, Debug)]
pub struct MatchConfig {
    /// Player A (Black in even-numbered games).
    pub a: PlayerSpec,
    /// Player B.
    pub b: PlayerSpec,
    /// Games to play.
    pub games: usize,
    /// Board, komi, move limit, scoring.
    pub game: GameConfig,
    /// Games played at once.
    pub parallel: usize,
    /// Folder for the SGF files, `games.jsonl` and `summary.json`.
    pub out: PathBuf,
    /// Seeds the agents and the scoring: game `i` a seed of its own mixed
    /// from both ([`game_seed`]).
    pub seed: u64,
    /// A GnuGo command line whose `final_score` is compared with ours on
    /// every game that ended by two passes or the move limit.
    pub cross_check: Option<String>,
    /// Keep the games already finished in `out` (a stopped match of the
    /// same players and settings) and play only the others.
    pub resume: bool,
    /// Replace the match in `out`, once the players have started.
    pub force: bool,
    /// How long GTP engines (players and the cross-check) have to answer;
    /// a player that does not answer in time forfeits the game, and the
    /// next game starts a fresh engine.
    pub gtp_timeouts: GtpTimeouts,
}

/// What makes two runs the same match, saved as `match.json` so that
/// `--resume` can refuse to mix games of another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct MatchIdentity {
    a: String,
    b: String,
    size: usize,
    komi: f32,
    max_moves: usize,
    seed: u64,
    /// The settings of A and of B where they are go-train agents
    /// ([`PlayerSpec::settings`]): `a` names the kind alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a_settings: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b_settings: Option<String>,
    /// The nets A and B play with, each with its file's checksum: another
    /// net put at a path the match named is another match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nets: Option<[Vec<String>; 2]>,
}

impl MatchIdentity {
    fn of(config: &MatchConfig) -> Result<MatchIdentity> {
        Ok(MatchIdentity {
            a: config.a.label(),
            b: config.b.label(),
            size: config.game.size,
            komi: config.game.komi,
            max_moves: config.game.max_moves,
            seed: config.seed,
            a_settings: config.a.settings(),
            b_settings: config.b.settings(),
            nets: Some([config.a.net_fingerprints()?, config.b.net_fingerprints()?]),
        })
    }

    /// Whether `self` is the match `saved` describes. A match.json written
    /// before the agents' settings (or their nets' checksums) were saved in
    /// it names less, and what it does not name is taken on trust.
    fn is(&self, saved: &MatchIdentity) -> bool {
        let ours = MatchIdentity {
            a_settings: saved.a_settings.as_ref().and(self.a_settings.clone()),
            b_settings: saved.b_settings.as_ref().and(self.b_settings.clone()),
            nets: saved.nets.as_ref().and(self.nets.clone()),
            ..self.clone()
        };
        ours == *saved
    }
}

/// One game of a match, as reported.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GameSummary {
    /// From 0.
    pub index: usize,
    /// The SGF file.
    pub file: String,
    /// Whether A played Black.
    pub a_black: bool,
    /// `a`, `b` or `draw`.
    pub winner: String,
    /// The result as SGF writes it (`B+12.5`, `W+R`, `B+F`).
    pub result: String,
    pub reason: EndReason,
    /// Moves played, passes included.
    pub moves: usize,
    /// Seconds A and B spent choosing moves.
    pub seconds: [f64; 2],
    /// Why a forfeit happened.
    pub error: Option<String>,
    /// GnuGo's `final_score` of the same game, when cross-checked.
    pub gnugo_score: Option<String>,
    /// Whether GnuGo names the same winner.
    pub gnugo_agrees: Option<bool>,
}

/// The outcome of a match.
#[derive(Clone, Debug, Serialize)]
pub struct MatchSummary {
    pub a: String,
    pub b: String,
    pub games: usize,
    pub a_wins: usize,
    pub b_wins: usize,
    pub draws: usize,
    /// A's wins with Black and with White.
    pub a_wins_by_color: [usize; 2],
    /// Games lost by forfeit (illegal move, engine failure), by A and by B.
    pub forfeits: [usize; 2],
    /// A's score (wins plus half the draws) over the games.
    pub a_win_rate: f64,
    /// Its 95% Wilson interval.
    pub a_win_rate_95: (f64, f64),
    /// The Elo difference A − B the win rate implies, and its interval
    /// (infinite at a rate of 0 or 1).
    pub elo: f64,
    pub elo_95: (f64, f64),
    /// Games compared with GnuGo's `final_score`, and how many agreed.
    pub cross_checked: usize,
    pub cross_check_agreed: usize,
    pub mean_moves: f64,
    /// Mean seconds per move of A and of B.
    pub seconds_per_move: [f64; 2],
    pub details: Vec<GameSummary>,
}

/// Plays the match, writing into `config.out` (created if needed), and
/// reports each finished game to `progress`.
pub fn run_match(config: &MatchConfig, device: &Device, progress: &Progress) -> Result<MatchSummary> {
    // Two matches in one folder once mixed their games and their logs.
    let _lock = crate::lock::Lock::create_folder(&config.out, "a match is a folder")?;
    let (games, others) = sgf_files(&config.out)?;
    let a_match = [IDENTITY_FILE, LOG_FILE].iter().any(|f| config.out.join(f).is_file());
    if let Some(other) = others.first() {
        anyhow::bail!(
            "{}: holds games that are no match's ({}): give another --out",
            config.out.display(),
            other.display()
        );
    }
    // A dataset's or a training run's folder once took a match's games
    // and logs beside its own files.
    if let Some(other) = crate::lock::first_entry_of_another(&config.out).filter(|_| !a_match) {
        anyhow::bail!(
            "{} is not empty and holds no match ({}, and no {IDENTITY_FILE}): give an empty or new --out",
            config.out.display(),
            other.display()
        );
    }
    if a_match && !config.force && !config.resume {
        anyhow::bail!(
            "{} already holds a match: --resume to finish it, --force to replace it, or another --out",
            config.out.display()
        );
    }
    // Start each player and set up a game once up front, so that a missing
    // checkpoint, a wrong engine command, a board size a player refuses or
    // an engine that never answers stops the match now, not every game, and
    // before --force has removed anything.
    // Reports and SGF files name an agent in full, its nets and settings:
    // two policy nets were once both "policy".
    let mut names = [config.a.label(), config.b.label()];
    for (k, (spec, name)) in [(&config.a, "player A"), (&config.b, "player B")].into_iter().enumerate() {
        let mut player = spec.build(device, config.seed, config.gtp_timeouts).context(name)?;
        player.new_game(config.game.size, config.game.komi).context(name)?;
        if let Some(full) = player.agent_name() {
            names[k] = full;
        }
    }
    if let Some(command) = &config.cross_check {
        check_cross_check(command, config).with_context(|| format!("--cross-check `{command}`"))?;
    }
    if config.force {
        let ours = [IDENTITY_FILE, LOG_FILE, SUMMARY_FILE].map(|f| config.out.join(f));
        for path in games.iter().chain(ours.iter().filter(|p| p.is_file())) {
            fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        }
    }

    // Once: it reads every net's file for its checksum.
    let identity = MatchIdentity::of(config)?;
    let done = if config.resume { finished_games(config, &identity)? } else { Vec::new() };
    write_atomic(&config.out.join(IDENTITY_FILE), serde_json::to_string_pretty(&identity)?.as_bytes())?;
    // The log holds the finished games (a line torn by a kill is dropped),
    // then each new one as it ends.
    let log_path = config.out.join(LOG_FILE);
    let kept: String = done.iter().map(|g| serde_json::to_string(g).map(|l| l + "\n")).collect::<Result<_, _>>()?;
    write_atomic(&log_path, kept.as_bytes())?;
    let log = Mutex::new(
        fs::OpenOptions::new()
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?,
    );
    let pending: Vec<usize> = (0..config.games).filter(|i| !done.iter().any(|g| g.index == *i)).collect();
    progress.resume_from(done.len() as u64);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<GameSummary>> = Mutex::new(done);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..config.parallel.clamp(1, pending.len().max(1)) {
            scope.spawn(|| loop {
                let Some(&index) = pending.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
                if first_error.lock().map_or(true, |e| e.is_some()) {
                    return;
                }
                match play_one(config, device, index, &names) {
                    Ok(summary) => {
                        if let Ok(mut log) = log.lock() {
                            let line = serde_json::to_string(&summary).unwrap_or_default();
                            let _ = writeln!(log, "{line}").and_then(|_| log.flush());
                        }
                        progress.set_message(format!("last: game {} {}", index, summary.result));
                        progress.inc(1);
                        results.lock().expect("no panics while holding the lock").push(summary);
                    }
                    Err(e) => {
                        let mut slot = first_error.lock().expect("no panics while holding the lock");
                        slot.get_or_insert(e.context(format!("game {index}")));
                        return;
                    }
                }
            });
        }
    });
    progress.finish();
    // The games that finished are summarised even when the match stopped
    // on an error: their SGF files and log lines are already written.
    let mut details = results.into_inner().unwrap_or_default();
    details.sort_by_key(|g| g.index);
    let summary = summarize(names, details);
    let path = config.out.join(SUMMARY_FILE);
    write_atomic(&path, serde_json::to_string_pretty(&summary)?.as_bytes())?;
    if let Some(e) = first_error.into_inner().unwrap_or(None) {
        let kept = format!("the {} finished games are in {}", summary.games, config.out.display());
        return Err(e.context(kept));
    }
    Ok(summary)
}

/// The games of a stopped match in `config.out` that can be kept: logged
/// in `games.jsonl` with their SGF file present. Refuses a folder that
/// holds another match.
fn finished_games(config: &MatchConfig, ours: &MatchIdentity) -> Result<Vec<GameSummary>> {
    let identity_path = config.out.join(IDENTITY_FILE);
    // A match begun by a go-train that wrote no match.json: its log is
    // taken on trust, as the user asked for it.
    let theirs: Option<MatchIdentity> = match fs::read_to_string(&identity_path) {
        Ok(text) => Some(
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a match description", identity_path.display()))?,
        ),
        Err(_) => None,
    };
    if let Some(theirs) = theirs.filter(|theirs| !ours.is(theirs)) {
        // The same match but for a net's checksum: say which, not the whole.
        if ours.is(&MatchIdentity { nets: ours.nets.clone(), ..theirs.clone() }) {
            anyhow::bail!(
                "{}: a net of this match has changed since it began (then {:?}, now {:?}): name the nets it began \
                 with, or give another --out",
                config.out.display(),
                theirs.nets,
                ours.nets
            );
        }
        use crate::differences::{differences, shown};
        let differ: Vec<String> = differences(&theirs, ours)
            .into_iter()
            .map(|(key, there, here)| format!("{key}: {} here, {} there", shown(&here, "none"), shown(&there, "none")))
            .collect();
        anyhow::bail!(
            "{} holds another match ({}): give another --out, or --force to replace it",
            config.out.display(),
            differ.join("; ")
        );
    }
    // A log that cannot be read is not an empty one: its games would be
    // played again over their records.
    let log = crate::atomic::read_if_present(&config.out.join(LOG_FILE), "the match's log")?.unwrap_or_default();
    let mut done: Vec<GameSummary> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<GameSummary>(line).ok())
        .filter(|g| config.out.join(game_file(g.index)).is_file())
        .collect();
    done.sort_by_key(|g| g.index);
    done.dedup_by_key(|g| g.index);
    // Kept, not dropped: a finished game left out of the log was played
    // again, and its file replaced, by the next resume with more games.
    if let Some(past) = done.iter().find(|g| g.index >= config.games) {
        anyhow::bail!(
            "{} holds game {}, past --games {}: resume with --games {} or more, or give another --out",
            config.out.display(),
            past.index,
            config.games,
            done.last().map_or(0, |g| g.index + 1)
        );
    }
    Ok(done)
}

/// What a match writes in its folder beside its games.
const IDENTITY_FILE: &str = "match.json";
const LOG_FILE: &str = "games.jsonl";
const SUMMARY_FILE: &str = "summary.json";

/// The SGF file of game `index`.
fn game_file(index: usize) -> String {
    format!("game-{index:04}.sgf")
}

/// The SGF files in `dir`: those named as a match names its games
/// (`game-0012.sgf`), which `--force` removes, and any others, which are
/// not the match's to touch (`--force` once removed every SGF file).
fn sgf_files(dir: &std::path::Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let entries = fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let sgf: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("sgf")))
        .collect();
    Ok(sgf.into_iter().partition(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.strip_prefix("game-")
            .and_then(|n| n.strip_suffix(".sgf"))
            .is_some_and(|n| n.len() >= 4 && n.bytes().all(|b| b.is_ascii_digit()))
    }))
}

/// The seed of game `index` of a match seeded by `seed`: mixed, so that
/// matches of seeds 1 and 3 share no game (as `seed + index`, game 2 of
/// the one was game 0 of the other).
fn game_seed(seed: u64, index: usize) -> u64 {
    use crate::go::zobrist::mix;
    mix(seed ^ mix(index as u64 ^ 0x4D41_5443))
}

/// Plays game `index` and writes its SGF.
fn play_one(config: &MatchConfig, device: &Device, index: usize, names: &[String; 2]) -> Result<GameSummary> {
    let seed = game_seed(config.seed, index);
    let mut a = config.a.build(device, seed, config.gtp_timeouts).context("starting player A")?;
    let mut b = config.b.build(device, seed, config.gtp_timeouts).context("starting player B")?;
    let a_black = index.is_multiple_of(2);
    let outcome = if a_black {
        play_game(a.as_mut(), b.as_mut(), &config.game, seed)
    } else {
        play_game(b.as_mut(), a.as_mut(), &config.game, seed)
    };
    drop((a, b)); // ends external engines before the next game starts
    let (a_name, b_name) = (format!("A: {}", names[0]), format!("B: {}", names[1]));
    let record = if a_black { outcome.record(&a_name, &b_name) } else { outcome.record(&b_name, &a_name) };
    let file = config.out.join(game_file(index));
    write_atomic(&file, write_game(&record).as_bytes())?;

    let a_color = if a_black { Color::Black } else { Color::White };
    let winner = match outcome.winner {
        None => "draw",
        Some(c) if c == a_color => "a",
        Some(_) => "b",
    };
    let (gnugo_score, gnugo_agrees) = match (&config.cross_check, outcome.reason) {
        (Some(command), EndReason::Passes | EndReason::MoveLimit) => {
            // A failed cross-check is a missing comparison, not a lost game.
            // A count it cannot read is a failed cross-check too: it was
            // taken for a disagreement (and, in a drawn game, agreement).
            let read =
                gnugo_final_score(command, &outcome, config).and_then(|theirs| match GameResult::parse(&theirs) {
                    GameResult::Win { winner, .. } => Ok((theirs, Some(winner))),
                    GameResult::Draw => Ok((theirs, None)),
                    _ => anyhow::bail!("final_score answered {theirs:?}, not a result"),
                });
            match read {
                Ok((theirs, winner)) => (Some(theirs), Some(winner == outcome.winner)),
                Err(e) => {
                    crate::say!("game {index}: cross-check with `{command}` failed, left out: {e:#}");
                    (None, None)
                }
            }
        }
        _ => (None, None),
    };
    let [black_seconds, white_seconds] = outcome.seconds;
    Ok(GameSummary {
        index,
        file: file.display().to_string(),
        a_black,
        winner: winner.to_string(),
        result: record.result.map(|r| r.to_string()).unwrap_or_default(),
        reason: outcome.reason,
        // Moves played, passes included: a resignation is none.
        moves: outcome.game.moves().filter(|m| m.mv != Move::Resign).count(),
        seconds: if a_black { [black_seconds, white_seconds] } else { [white_seconds, black_seconds] },
        error: outcome.error,
        gnugo_score,
        gnugo_agrees,
    })
}

/// The cross-check engine, started on an empty board of `size`.
fn start_cross_check(command: &str, size: usize, config: &MatchConfig) -> Result<GtpClient> {
    let mut gnugo = GtpClient::spawn_with(command, config.gtp_timeouts)?;
    gnugo.send_setup(&format!("boardsize {size}"))?;
    gnugo.send_setup("clear_board")?;
    gnugo.send_setup(&format!("komi {}", config.game.komi))?;
    Ok(gnugo)
}

/// Starts the cross-check engine once before the games: one that cannot
/// start, or cannot count, was found only game by game, and the whole
/// match was played with no comparison and a status of 0.
fn check_cross_check(command: &str, config: &MatchConfig) -> Result<()> {
    let mut gnugo = start_cross_check(command, config.game.size, config)?;
    let known = gnugo.send_setup("known_command final_score")?;
    anyhow::ensure!(known.trim() == "true", "it does not know `final_score` (known_command answered {known:?})");
    Ok(())
}

/// GnuGo's `final_score` of the game's final position, its moves replayed
/// into a fresh engine.
fn gnugo_final_score(command: &str, outcome: &GameOutcome, config: &MatchConfig) -> Result<String> {
    let mut gnugo = start_cross_check(command, outcome.game.size(), config)?;
    let size = outcome.game.size();
    for m in outcome.game.moves().filter(|m| m.mv != Move::Resign) {
        gnugo.send(&format!("play {} {}", m.color.letter(), m.mv.to_gtp(size)))?;
    }
    Ok(gnugo.send("final_score")?)
}

fn summarize(names: [String; 2], details: Vec<GameSummary>) -> MatchSummary {
    let games = details.len();
    let count = |f: &dyn Fn(&GameSummary) -> bool| details.iter().filter(|g| f(g)).count();
    let a_wins = count(&|g| g.winner == "a");
    let b_wins = count(&|g| g.winner == "b");
    let draws = games - a_wins - b_wins;
    let score = a_wins as f64 + 0.5 * draws as f64;
    let n = games as f64;
    let rate = if games > 0 { score / n } else { 0.5 };
    let (lo, hi) = wilson_interval(score, n, Z95);
    let forfeit_by = |loser: &str| count(&|g| g.reason == EndReason::Forfeit && g.winner != loser);
    let moves: usize = details.iter().map(|g| g.moves).sum();
    let mut seconds = [0.0; 2];
    details.iter().for_each(|g| (0..2).for_each(|i| seconds[i] += g.seconds[i]));
    // Each side makes about half the moves.
    let per_side_moves = (moves as f64 / 2.0).max(1.0);
    MatchSummary {
        a: names[0].clone(),
        b: names[1].clone(),
        games,
        a_wins,
        b_wins,
        draws,
        a_wins_by_color: [count(&|g| g.winner == "a" && g.a_black), count(&|g| g.winner == "a" && !g.a_black)],
        forfeits: [forfeit_by("a"), forfeit_by("b")],
        a_win_rate: rate,
        a_win_rate_95: (lo, hi),
        elo: elo_difference(rate),
        elo_95: (elo_difference(lo), elo_difference(hi)),
        cross_checked: count(&|g| g.gnugo_agrees.is_some()),
        cross_check_agreed: count(&|g| g.gnugo_agrees == Some(true)),
        mean_moves: if games > 0 { moves as f64 / n } else { 0.0 },
        seconds_per_move: [seconds[0] / per_side_moves, seconds[1] / per_side_moves],
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(a_settings: Option<&str>) -> MatchIdentity {
        MatchIdentity {
            a: "mcts".into(),
            b: "gnugo --level 10".into(),
            size: 19,
            komi: 7.5,
            max_moves: 1083,
            seed: 31,
            a_settings: a_settings.map(String::from),
            b_settings: None,
            nets: Some([vec!["policy: crc32 3b7f4ea1".into()], Vec::new()]),
        }
    }

    #[test]
    fn a_match_is_told_by_its_agents_settings_and_an_older_record_by_their_kinds() {
        let ours = identity(Some("iterations=800"));
        assert!(ours.is(&identity(Some("iterations=800"))));
        assert!(!ours.is(&identity(Some("iterations=400"))));
        assert!(!ours.is(&identity(Some(""))), "default settings are settings too");
        // A match.json from before the settings were saved (most matches
        // in docs/matches, played up to 2026-11-26) names the kinds alone.
        let older: MatchIdentity = serde_json::from_str(
            r#"{"a": "mcts", "b": "gnugo --level 10", "size": 19, "komi": 7.5, "max_moves": 1083, "seed": 31}"#,
        )
        .unwrap();
        assert!(ours.is(&older));
        assert!(!ours.is(&MatchIdentity { seed: 32, ..older }));
        // Another net at the same path is another match; a record without
        // the nets' checksums takes them on trust.
        let other_net =
            MatchIdentity { nets: Some([vec!["policy: crc32 00000000".into()], Vec::new()]), ..ours.clone() };
        assert!(!ours.is(&other_net));
        assert!(ours.is(&MatchIdentity { nets: None, ..ours.clone() }));
    }
}
