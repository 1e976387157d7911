//! `go-train show`: the position of a game record after N moves.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Parser;
use serde_json::json;

use go_train::bounds::count_flag;
use go_train::go::{Color, Game};
use go_train::sgf::{read_file_up_to_damage, GameError, GameRecord, PartialGame};

/// Print the position of SGF game records after N moves.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train show game.sgf                 # board at the end of the game
  go-train show game.sgf --move 50       # board after 50 moves
  go-train show --json datasets/         # one JSON object per game, every *.sgf under the folder")]
pub struct Args {
    /// SGF files, or folders searched for *.sgf.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Show the position after this many moves (default: the end).
    #[arg(long = "move", value_name = "N", value_parser = count_flag::<usize>(super::MOVES))]
    moves: Option<usize>,
    /// One JSON object per game, one per line.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let files = super::sgf_files(&args.paths)?;
    let mut out = super::NamedStdout::lock();
    // Every game is shown, or its error reported, before the command fails:
    // a script must see from the exit code that something went wrong.
    let (mut games_seen, mut bad_games, mut unreadable) = (0usize, 0usize, 0usize);
    for found in &files {
        let file = match found {
            Ok(file) => file,
            Err(e) => {
                report_unreadable(&mut out, e.path.as_deref(), &e.reason, args.json)?;
                unreadable += 1;
                continue;
            }
        };
        let games = match read_file_up_to_damage(file) {
            Ok(games) => games,
            Err(e) => {
                report_unreadable(&mut out, Some(file), &e.to_string(), args.json)?;
                unreadable += 1;
                continue;
            }
        };
        for (index, game) in games.into_iter().enumerate() {
            games_seen += 1;
            let ok = match game {
                Ok(PartialGame { record, damage, .. }) => {
                    show_game(&mut out, file, &record, damage.as_ref(), args.moves, args.json)?
                }
                Err(e) => report_bad_game(&mut out, file, index, &e.to_string(), args.json).map(|_| false)?,
            };
            bad_games += usize::from(!ok);
        }
    }
    out.flush()?;
    if unreadable + bad_games > 0 {
        bail!(
            "{unreadable} of {} files could not be read, {bad_games} of {games_seen} games not shown as asked \
             (each is named above, with why)",
            files.len()
        );
    }
    Ok(())
}

/// The game after `moves` moves (or at its end), stopping before an illegal
/// move: the position reached, and the error if there was one.
fn replay(record: &GameRecord, moves: Option<usize>) -> (Option<Game>, Option<String>) {
    match record.replay_until_legal(record.rules(), moves.unwrap_or(usize::MAX)) {
        Ok((game, stopped)) => (Some(game), stopped.map(|e| e.to_string())),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Shows one game, read up to `damage` when it has one; returns whether
/// the position asked for was reached without error.
fn show_game(
    out: &mut impl Write,
    file: &Path,
    record: &GameRecord,
    damage: Option<&GameError>,
    moves: Option<usize>,
    json: bool,
) -> Result<bool> {
    let (game, mut error) = replay(record, moves);
    // Past the damage the record says nothing: say where it stopped.
    if let Some(damage) = damage.filter(|_| moves.is_none_or(|n| n > record.moves.len())) {
        error.get_or_insert_with(|| format!("read up to move {}, then: {damage}", record.moves.len()));
    }
    // The end shown for a move past it would read as that move's position.
    if let Some(n) = moves.filter(|&n| n > record.moves.len()) {
        error.get_or_insert_with(|| format!("--move {n}, but the game has {} moves", record.moves.len()));
    }
    let replayed = error.is_none();
    if json {
        let value = match &game {
            Some(g) => {
                let b = g.board();
                let stones = |c: Color| -> Vec<String> {
                    b.points().filter(|&p| b.color_at(p) == Some(c)).map(|p| b.vertex(p).to_gtp(b.size())).collect()
                };
                json!({
                    "file": file.display().to_string(),
                    "game": record.index_in_file,
                    "size": b.size(),
                    "moves": g.move_count(),
                    "black": stones(Color::Black),
                    "white": stones(Color::White),
                    "captures": {"black": b.captures(Color::Black), "white": b.captures(Color::White)},
                    "to_move": g.to_move().letter().to_string(),
                    "error": error,
                })
            }
            None => json!({
                "file": file.display().to_string(), "game": record.index_in_file, "size": record.size,
                "moves": 0, "black": [], "white": [], "captures": {"black": 0, "white": 0},
                "to_move": null, "error": error,
            }),
        };
        writeln!(out, "{value}")?;
        return Ok(replayed);
    }
    writeln!(out, "{} (game {})", file.display(), record.index_in_file)?;
    for (name, value) in properties(record) {
        writeln!(out, "  {name:<8} {value}")?;
    }
    if let Some(g) = &game {
        writeln!(out, "  after {} of {} moves, {} to move", g.move_count(), record.moves.len(), g.to_move())?;
        writeln!(
            out,
            "  captures: black took {}, white took {}",
            g.board().captures(Color::Black),
            g.board().captures(Color::White)
        )?;
        writeln!(out)?;
        write!(out, "{}", super::diagram(g))?;
    }
    if let Some(e) = error {
        writeln!(out, "  error: {e}")?;
    }
    writeln!(out)?;
    Ok(replayed)
}

/// The record's properties worth showing, as (name, value).
fn properties(r: &GameRecord) -> Vec<(&'static str, String)> {
    let player = |name: &Option<String>, rank: &Option<String>| match (name, rank) {
        (Some(n), Some(r)) => Some(format!("{n} ({r})")),
        (Some(n), None) => Some(n.clone()),
        (None, Some(r)) => Some(format!("? ({r})")),
        (None, None) => None,
    };
    let mut v = vec![("size", format!("{0}x{0}", r.size))];
    let optional = [
        ("black", player(&r.black, &r.black_rank)),
        ("white", player(&r.white, &r.white_rank)),
        ("date", r.date.as_ref().map(|d| d.to_string())),
        ("result", r.result.as_ref().map(|x| x.to_string())),
        ("komi", r.komi.map(|k| k.to_string())),
        ("handicap", r.handicap.map(|h| h.to_string())),
        ("rules", r.rules.clone()),
    ];
    v.extend(optional.into_iter().filter_map(|(k, x)| x.map(|x| (k, x))));
    v
}

/// A file, or an entry of a folder, that could not be read (`file` is
/// `None` only where not even walkdir knew the path).
fn report_unreadable(out: &mut impl Write, file: Option<&Path>, reason: &str, json: bool) -> Result<()> {
    let name = file.map(|f| f.display().to_string());
    if json {
        writeln!(out, "{}", json!({"file": name, "game": null, "error": reason}))?;
    } else {
        match name {
            Some(name) => writeln!(out, "{name}: error: {reason}\n")?,
            None => writeln!(out, "error: {reason}\n")?,
        }
    }
    Ok(())
}

fn report_bad_game(out: &mut impl Write, file: &Path, index: usize, reason: &str, json: bool) -> Result<()> {
    if json {
        writeln!(out, "{}", json!({"file": file.display().to_string(), "game": index, "error": reason}))?;
    } else {
        writeln!(out, "{} (game {index}): error: {reason}\n", file.display())?;
    }
    Ok(())
}
