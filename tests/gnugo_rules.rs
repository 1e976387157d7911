//! The rules engine against GnuGo, the reference peer, on real games.
//!
//! Every game of `kgs-6d` (36,692 games, handicap games included) is replayed
//! by go-train and loaded by GnuGo over GTP (`loadsgf`); at the end of each
//! game the stones of both colours and the capture counts must be identical.
//! Set `GO_TRAIN_GNUGO_GAMES=N` to compare only every k-th game (N in all).
//!
//! A second test checks the identity between area and territory scoring
//! (see `go::scoring`) on finished real games, with GnuGo's own verdict on
//! which stones are dead.

mod common;

use std::path::{Path, PathBuf};

use go_train::go::{Color, Count, Game, Move, Point, Vertex};
use go_train::gtp::GtpClient;
use go_train::sgf::{read_file, GameRecord, GameResult, WinBy};

/// Our replay of the first game in `path`.
fn replay(path: &Path) -> Result<(GameRecord, Game), String> {
    let games = read_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let record = games.into_iter().next().ok_or("no game")?.map_err(|e| e.to_string())?;
    let game = record.replay(record.rules()).map_err(|e| e.to_string())?;
    Ok((record, game))
}

fn stones(game: &Game, color: Color) -> Vec<String> {
    let b = game.board();
    let mut v: Vec<String> =
        b.points().filter(|&p| b.color_at(p) == Some(color)).map(|p| b.vertex(p).to_gtp(b.size())).collect();
    v.sort();
    v
}

fn sorted_words(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.split_whitespace().map(|w| w.to_ascii_uppercase()).collect();
    v.sort();
    v
}

/// Compares go-train and GnuGo on `files`; returns the differences found.
fn compare(files: &[PathBuf], gnugo: &str) -> Vec<String> {
    let mut engine = GtpClient::spawn(&format!("{gnugo} --mode gtp")).expect("start gnugo");
    let mut differences = Vec::new();
    for path in files {
        let (_, game) = match replay(path) {
            Ok(g) => g,
            Err(e) => {
                differences.push(format!("{}: go-train cannot replay: {e}", path.display()));
                continue;
            }
        };
        if let Err(e) = engine.send(&format!("loadsgf {}", path.display())) {
            differences.push(format!("{}: gnugo cannot load: {e}", path.display()));
            continue;
        }
        for color in Color::BOTH {
            let theirs = sorted_words(&engine.send(&format!("list_stones {color}")).unwrap());
            let ours = stones(&game, color);
            if theirs != ours {
                differences
                    .push(format!("{}: {color} stones differ: gnugo {theirs:?}, go-train {ours:?}", path.display()));
            }
            let theirs: u32 = engine.send(&format!("captures {color}")).unwrap().parse().unwrap();
            let ours = game.board().captures(color);
            if theirs != ours {
                differences.push(format!("{}: captures by {color}: gnugo {theirs}, go-train {ours}", path.display()));
            }
        }
    }
    differences
}

#[test]
fn final_positions_match_gnugo_on_every_kgs_game() {
    let Some(gnugo) = common::gnugo() else { return };
    let Some(mut files) = common::sgf_files("kgs-6d") else { return };
    if let Some(n) = std::env::var("GO_TRAIN_GNUGO_GAMES").ok().and_then(|n| n.parse::<usize>().ok()) {
        let step = (files.len() / n.max(1)).max(1);
        files = files.into_iter().step_by(step).collect();
    }
    assert!(files.len() >= 1000, "the proof needs at least 1,000 games, found {}", files.len());
    // One GnuGo per core: loading is GnuGo's cost, and it is single-threaded.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(4);
    let chunk = files.len().div_ceil(threads);
    let differences: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = files.chunks(chunk).map(|part| s.spawn(|| compare(part, &gnugo))).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    eprintln!("compared {} games with GnuGo: {} differences", files.len(), differences.len());
    assert!(
        differences.is_empty(),
        "{} differences, first ones:\n{}",
        differences.len(),
        differences[..differences.len().min(10)].join("\n")
    );
}

#[test]
fn area_and_territory_margins_differ_by_stones_placed_on_finished_games() {
    let Some(gnugo) = common::gnugo() else { return };
    let Some(files) = common::sgf_files("kgs-6d") else { return };
    let mut engine = GtpClient::spawn(&format!("{gnugo} --mode gtp --level 0")).unwrap();
    let mut checked = 0;
    // Games decided by counting (both passed, a margin in RE) end in a
    // position where dead stones are few and unambiguous.
    for path in files.iter().step_by(97) {
        let Ok((record, game)) = replay(path) else { continue };
        let counted = matches!(record.result, Some(GameResult::Win { by: WinBy::Points(_), .. }));
        if !counted || game.consecutive_passes() < 2 {
            continue;
        }
        engine.send(&format!("loadsgf {}", path.display())).unwrap();
        let dead_answer = engine.send("final_status_list dead").unwrap();
        let board = game.board();
        let dead: Vec<Point> = dead_answer
            .split_whitespace()
            .map(|v| board.point(Vertex::parse_gtp(v, board.size()).expect("gnugo vertex")))
            .collect();
        let count = Count::new(board, &dead);
        // Stones placed, counted from the record itself (setup + moves).
        let mut placed = [0i32; 2];
        for (_, c) in record.setup.iter().chain(record.later_setup.iter().flat_map(|(_, s)| s)) {
            if let Some(c) = c {
                placed[c.index()] += 1;
            }
        }
        for m in &record.moves {
            if let Move::Play(_) = m.mv {
                placed[m.color.index()] += 1;
            }
        }
        assert_eq!(placed, game.stones_placed().map(|n| n as i32), "{}", path.display());
        assert_eq!(
            count.area_margin() - count.territory_margin(),
            placed[0] - placed[1],
            "{}: area {} territory {} placed {placed:?}",
            path.display(),
            count.area_margin(),
            count.territory_margin()
        );
        checked += 1;
        if checked == 40 {
            break;
        }
    }
    eprintln!("identity checked on {checked} finished games");
    assert!(checked >= 20, "too few finished games found ({checked})");
}
