//! Reads every game record of the real datasets (`GO_TRAIN_DATASETS`, by
//! default `../shared/datasets`) and checks what their README says. The
//! counts were verified independently with Python's sgfmill 1.1.1 (parse
//! every file, replay the main line on `sgfmill.boards`, and for the
//! superko cases track every earlier position); where go-train reads more
//! than sgfmill does, the test says so.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use go_train::go::{IllegalMove, Rules};
use go_train::sgf::{
    parse_game, read_file, write_game, written_value, GameError, GameRecord, ParsedGame, ReplayError, SgfError,
    SyntaxError,
};
use rayon::prelude::*;

/// Every `.sgf` file of the collection in `dir`, read in parallel, keyed by
/// its path relative to `dir`.
fn read_collection(dir: &Path) -> BTreeMap<String, Result<Vec<ParsedGame>, SgfError>> {
    let files: Vec<PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|entry| entry.expect("collection folder readable").into_path())
        .filter(|path| path.extension().is_some_and(|e| e == "sgf"))
        .collect();
    files
        .into_par_iter()
        .map(|path| {
            let name = path.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            (name, read_file(&path))
        })
        .collect()
}

/// The records of files that read, with each file's name; panics on any
/// unreadable game not in `unreadable_games`.
fn records<'a>(
    files: &'a BTreeMap<String, Result<Vec<ParsedGame>, SgfError>>,
    unreadable_games: &[&str],
) -> Vec<(&'a str, &'a GameRecord)> {
    let mut records = Vec::new();
    for (name, games) in files {
        let Ok(games) = games else { continue };
        for game in games {
            match game {
                Ok(record) => records.push((name.as_str(), record)),
                Err(e) => assert!(unreadable_games.contains(&name.as_str()), "{name}: {e}"),
            }
        }
    }
    records
}

/// The games that stop at an illegal move under `rules`: name → error.
fn illegal_games(records: &[(&str, &GameRecord)], rules: Rules) -> BTreeMap<String, ReplayError> {
    records.par_iter().filter_map(|(name, record)| record.replay(rules).err().map(|e| (name.to_string(), e))).collect()
}

/// Writing each record then reading it back gives the same record.
fn assert_round_trips(records: &[(&str, &GameRecord)]) {
    records.par_iter().for_each(|(name, record)| {
        let text = write_game(record);
        let read = parse_game(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(read, GameRecord { index_in_file: 0, ..(*record).clone() }, "{name}\n{text}");
    });
}

fn assert_illegal(found: &BTreeMap<String, ReplayError>, expected: &[(&str, &str)], reason: IllegalMove) {
    let names: Vec<&str> = found.keys().map(String::as_str).collect();
    let expected_names: Vec<&str> = expected.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, expected_names);
    for (name, message) in expected {
        let err = &found[*name];
        assert_eq!(err.to_string(), *message, "{name}");
        assert!(matches!(err, ReplayError::IllegalMove { reason: r, .. } if *r == reason), "{name}");
    }
}

#[test]
fn kgs_6d() {
    let Some(dir) = common::collection("kgs-6d") else { return };
    let files = read_collection(&dir);
    assert_eq!(files.len(), 36_692);
    for (name, games) in &files {
        let games = games.as_ref().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(games.len(), 1, "{name}");
    }
    let records = records(&files, &[]);
    assert!(records
        .iter()
        .all(|(_, r)| r.size == 19 && r.extra_properties.iter().all(|p| !p.to_string().starts_with("DT["))));
    let handicapped = records.iter().filter(|(_, r)| r.handicap.unwrap_or(0) >= 2).count();
    assert_eq!(handicapped, 15_571);
    // Five of them never placed their stones: free placement (Chinese
    // rules) in games that stopped after at most one move.
    let without_stones = records.iter().filter(|(_, r)| r.handicap.unwrap_or(0) >= 2 && r.setup.is_empty()).count();
    assert_eq!(without_stones, 5);
    assert_eq!(records.iter().filter(|(_, r)| r.result.is_none()).count(), 500);
    assert_eq!(records.iter().filter(|(_, r)| r.moves.is_empty()).count(), 52);
    assert_eq!(records.iter().filter(|(_, r)| r.date.is_some_and(|d| d.year == 2003)).count(), 7_582);
    assert_round_trips(&records);

    // No game breaks simple ko (sgfmill's replay checks only occupied
    // points), but eight repeat an earlier whole-board position, which
    // Chinese rules forbid: KGS games are mostly under Japanese rules.
    let superko = illegal_games(&records, Rules::CHINESE);
    assert_illegal(
        &superko,
        &[
            ("KGS2002/2002-02-16-8.sgf", "move 352 (B S1): repeats an earlier position (superko)"),
            ("KGS2003/2003-02-03-5.sgf", "move 108 (B S8): repeats an earlier position (superko)"),
            ("KGS2003/2003-09-20-29.sgf", "move 188 (W E1): repeats an earlier position (superko)"),
            ("KGS2003/2003-11-15-12.sgf", "move 301 (B E16): repeats an earlier position (superko)"),
            ("kgs-19-2006/2006-11-12-28.sgf", "move 141 (W K15): repeats an earlier position (superko)"),
            ("kgs-19-2015/2015-07-21-16.sgf", "move 217 (W E10): repeats an earlier position (superko)"),
            ("kgs-19-2017-02-new/2017-02-18-10.sgf", "move 297 (B A9): repeats an earlier position (superko)"),
            ("kgs-19-2017-04-new/2017-04-14-5.sgf", "move 246 (W A18): repeats an earlier position (superko)"),
        ],
        IllegalMove::Superko,
    );
    for name in superko.keys() {
        let (_, record) = records.iter().find(|(n, _)| n == name).unwrap();
        assert!(record.replay(Rules::JAPANESE).is_ok(), "{name} under simple ko");
    }
}

#[test]
fn gnugo_regression() {
    let Some(dir) = common::collection("gnugo-regression") else { return };
    let files = read_collection(&dir);
    assert_eq!(files.len(), 1_761);
    let failed: BTreeMap<&str, String> =
        files.iter().filter_map(|(name, games)| games.as_ref().err().map(|e| (name.as_str(), e.to_string()))).collect();
    assert_eq!(
        failed,
        BTreeMap::from([
            (
                "regression/games/owl42.sgf",
                "malformed SGF: truncated: the text ends inside the game tree opened on line 1".to_string()
            ),
            ("regression/games/pending/nightmare.sgf", "not SGF: no game tree \"(;\" found".to_string()),
        ])
    );
    assert!(matches!(files["regression/games/owl42.sgf"], Err(SgfError::Malformed(SyntaxError::Truncated { .. }))));
    assert_eq!(files["regression/games/reading10.sgf"].as_ref().unwrap().len(), 2);

    // sgfmill reads this game, taking the first of `B[tt]W[tt]` in one node;
    // go-train refuses a node with two moves.
    let buzco = &files["regression/games/buzco1.sgf"].as_ref().unwrap()[0];
    assert_eq!(buzco.as_ref().unwrap_err(), &GameError::TwoMoves { number: 266 });
    let records = records(&files, &["regression/games/buzco1.sgf"]);
    assert_eq!(records.len(), 1_759);

    let count_size = |size| records.iter().filter(|(_, r)| r.size == size).count();
    assert_eq!((count_size(19), count_size(13), count_size(9)), (1_109, 228, 411));
    assert_eq!(records.iter().filter(|(_, r)| r.moves.is_empty()).count(), 550);
    assert_eq!(records.iter().filter(|(_, r)| !r.setup.is_empty()).count(), 575);
    assert_eq!(records.iter().filter(|(_, r)| r.result.is_none()).count(), 1_069);
    let twice = |r: &GameRecord| r.moves.windows(2).any(|w| w[0].color == w[1].color);
    assert_eq!(records.iter().filter(|(_, r)| twice(r)).count(), 14);

    // The five files that are not UTF-8 declare no charset, so they are
    // read as Windows-1252: right for the Latin-1 ones, wrong (but
    // harmless) for 9handicap.sgf, whose `PW` is GB2312 for 白.
    let root_text = |name: &str| {
        let record = files[name].as_ref().unwrap()[0].as_ref().unwrap();
        let extras = record.extra_properties.iter().map(written_value);
        let names = [&record.black, &record.white].into_iter().flatten().cloned();
        extras.chain(names).collect::<Vec<_>>().join("\n")
    };
    assert!(root_text("regression/games/egc2001/tg-gg.sgf").contains("Fichier SGF créé par TurboGo"));
    assert!(root_text("regression/games/tg-gg.sgf").contains("Fichier SGF créé par TurboGo"));
    let nine_handicap = files["regression/games/9handicap.sgf"].as_ref().unwrap()[0].as_ref().unwrap();
    assert_eq!(nine_handicap.white.as_deref(), Some("°×"));
    // These two have their other bytes in move comments, which records do
    // not keep: they must read, that is all.
    for name in ["regression/games/nicklas/nicklas12.sgf", "regression/games/trevor/trevor_42.sgf"] {
        assert!(files[name].as_ref().unwrap()[0].is_ok(), "{name}");
    }

    // Every readable game is legal under simple ko.
    assert!(illegal_games(&records, Rules::JAPANESE).is_empty());
    assert_round_trips(&records);
}

#[test]
fn pro_1941_1997() {
    let Some(dir) = common::collection("pro-1941-1997") else { return };
    let files = read_collection(&dir);
    assert_eq!(files.len(), 596);
    let records = records(&files, &[]);
    assert_eq!(records.len(), 596);
    // sgfmill cannot read move 4 of these two (`W[oq\n]`, a line break
    // inside the value); go-train trims it and the games replay.
    for name in ["hon-50-2-mgt.sgf", "hon-51-3-mgt.sgf"] {
        let (_, record) = records.iter().find(|(n, _)| *n == name).unwrap();
        assert!(record.moves.len() > 100 && record.replay(Rules::JAPANESE).is_ok(), "{name}");
    }
    let twice = |r: &GameRecord| r.moves.windows(2).any(|w| w[0].color == w[1].color);
    assert_eq!(records.iter().filter(|(_, r)| twice(r)).count(), 29);
    // All dated before 2000, in a dozen free-text forms; nine have no DT.
    assert!(records.iter().all(|(_, r)| r.date.is_none_or(|d| d.year < 2000)));
    assert_eq!(records.iter().filter(|(_, r)| r.date.is_none()).count(), 9);
    assert_round_trips(&records);
    // The same five moves onto occupied points, at the same move numbers,
    // as sgfmill's replay finds.
    assert_illegal(
        &illegal_games(&records, Rules::JAPANESE),
        &[
            ("M-65-5.sgf", "move 228 (W D11): point is occupied"),
            ("M-77-1-mgt.sgf", "move 177 (W H14): point is occupied"),
            ("M-77-2-mgt.sgf", "move 138 (W R3): point is occupied"),
            ("M-77-4-mgt.sgf", "move 150 (B A6): point is occupied"),
            ("T-22-4-mgt.sgf", "move 278 (B S4): point is occupied"),
        ],
        IllegalMove::Occupied,
    );
}

#[test]
fn kombilo_tests() {
    let Some(dir) = common::collection("kombilo-tests") else { return };
    let files = read_collection(&dir);
    assert_eq!(files.len(), 37);
    let records = records(&files, &[]);
    assert_eq!(records.len(), 43);
    assert_eq!(records.iter().filter(|(name, _)| name.ends_with("contlist.sgf")).count(), 7);
    assert_eq!(records.iter().filter(|(_, r)| r.result.is_none()).count(), 8);
    assert!(illegal_games(&records, Rules::JAPANESE).is_empty());
    assert_round_trips(&records);
}

/// The longest games parse and replay on a thread with rayon's 2 MiB stack
/// (the reader has no recursion; this keeps it so).
#[test]
fn longest_games_fit_a_worker_stack() {
    let Some(root) = common::datasets_holding(&["kombilo-tests", "kgs-6d"]) else { return };
    let longest = ["kombilo-tests/tests-sgfs/under-the-stones.sgf", "kgs-6d/kgs-19-2017-04-new/2017-04-10-71.sgf"];
    let moves = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            longest.map(|name| {
                let games = read_file(&root.join(name)).unwrap();
                let record = games[0].as_ref().unwrap();
                let game = record.replay(Rules::JAPANESE).unwrap_or_else(|e| panic!("{name}: {e}"));
                game.move_count()
            })
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(moves, [1311, 472]);
}
