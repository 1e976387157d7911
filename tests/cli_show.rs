//! `go-train show` from the command line, on every real game record at hand.

mod common;

use std::collections::HashMap;

use common::{go_train, run};

#[test]
fn show_json_reads_every_record_and_gives_each_bad_game_a_reason() {
    let collections = ["kgs-6d", "pro-1941-1997", "kombilo-tests", "gnugo-regression"];
    let Some(datasets) = common::datasets_holding(&collections) else { return };
    let out = go_train(&["show", "--json"]).arg(&datasets).output().unwrap();
    // Every game is shown, and the exit code says that some could not be.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "unreadable files and bad games must fail the command");
    // One file holds no SGF; a truncated one is read up to where it ends.
    assert!(err.contains("1 of") && err.contains("files could not be read"), "{err}");
    let mut ok: HashMap<String, usize> = HashMap::new();
    let mut bad: HashMap<String, Vec<String>> = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let file = v["file"].as_str().unwrap();
        let collection = file.split("datasets/").nth(1).unwrap().split('/').next().unwrap().to_string();
        match v["error"].as_str() {
            None => {
                *ok.entry(collection).or_default() += 1;
                let size = v["size"].as_u64().unwrap() as usize;
                let stones = v["black"].as_array().unwrap().len() + v["white"].as_array().unwrap().len();
                assert!(stones <= size * size);
                assert!(matches!(v["to_move"].as_str(), Some("B" | "W")), "{line}");
            }
            Some(reason) => {
                assert!(reason.len() > 5, "a bad game needs a reason: {line}");
                bad.entry(collection).or_default().push(reason.to_string());
            }
        }
    }
    // The README of the datasets: kgs-6d has no illegal game under its own
    // (Japanese) rules; pro-1941-1997 has 5 moves onto occupied points.
    assert_eq!(ok["kgs-6d"], 36_692);
    assert!(!bad.contains_key("kgs-6d"), "{:?}", bad.get("kgs-6d"));
    assert_eq!(ok["pro-1941-1997"] + bad["pro-1941-1997"].len(), 596);
    assert_eq!(bad["pro-1941-1997"].len(), 5);
    assert!(bad["pro-1941-1997"].iter().all(|r| r.contains("occupied")), "{:?}", bad["pro-1941-1997"]);
    assert_eq!(ok["kombilo-tests"], 43);
    // gnugo-regression: 1,760 games in 1,761 files, one not SGF, one cut
    // short, one with two moves in a node: both shown up to the damage.
    let g = &bad["gnugo-regression"];
    assert!(g.iter().any(|r| r.contains("truncated")) && g.iter().any(|r| r.contains("not SGF")), "{g:?}");
    assert!(g.iter().any(|r| r == "read up to move 265, then: move 266: one node holds two moves"), "{g:?}");
    assert_eq!(ok["gnugo-regression"] + g.len(), 1_762, "1,760 games + 2 unreadable files");
}

#[test]
fn show_draws_the_board_after_n_moves() {
    let Some(files) = common::sgf_files("kgs-6d") else { return };
    let out = go_train(&["show", "--move", "10"]).arg(&files[0]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("after 10 of"), "{text}");
    assert!(text.contains("   A B C D E F G H J K L M N O P Q R S T"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("19 ") && l.ends_with(" 19")), "{text}");
    // The diagram shows the stones the JSON form lists.
    let board_rows = text.lines().filter(|l| l.len() > 3 && l[..2].trim().parse::<u32>().is_ok());
    let (x, o) = board_rows.fold((0, 0), |(x, o), l| (x + l.matches('X').count(), o + l.matches('O').count()));
    let out = go_train(&["show", "--json", "--move", "10"]).arg(&files[0]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["moves"], 10);
    assert_eq!((x, o), (v["black"].as_array().unwrap().len(), v["white"].as_array().unwrap().len()), "{text}");
}

/// A move past the end once showed the end, exit 0, as if it were that
/// move's position; a device was read up to 1 GiB before it was refused;
/// a folder of links to games was "no SGF files".
#[test]
fn a_move_past_the_end_a_device_and_links_are_said_so() {
    let Some(files) = common::sgf_files("kgs-6d") else { return };
    let moves = go_train_moves(&files[0]);
    let out = go_train(&["show", "--move", &(moves + 1).to_string()]).arg(&files[0]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let said = format!("--move {}, but the game has {moves} moves", moves + 1);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&said), "{err}");
    // The game did replay to its end: the summary says what failed (it
    // said "not replayed to the end").
    assert!(err.contains("1 of 1 games not shown as asked"), "{err}");
    let out = go_train(&["show", "--move", &moves.to_string()]).arg(&files[0]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = run(&["show", "/dev/zero"]);
    let err = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && err.contains("not a file of game records"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&files[0], dir.path().join("linked.sgf")).unwrap();
    let out = go_train(&["show", "--json"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // A broken link beside it has its error line, and the game is shown;
    // the exit code says something failed (it said nothing).
    std::os::unix::fs::symlink(dir.path().join("gone.sgf"), dir.path().join("broken.sgf")).unwrap();
    let out = go_train(&["show", "--json"]).arg(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("1 of 2 files could not be read"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    // Its line names the link in "file", as for any file (it was null).
    let broken = lines.iter().find(|l| l["error"].is_string()).expect(&stdout);
    assert!(broken["file"].as_str().is_some_and(|f| f.ends_with("broken.sgf")), "{stdout}");
}

/// The number of moves `show --json` finds in a game.
fn go_train_moves(file: &std::path::Path) -> usize {
    let out = go_train(&["show", "--json"]).arg(file).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["moves"].as_u64().unwrap() as usize
}

/// `show DIR | head`: the reader stopping is no error (it once ended with
/// "Broken pipe").
#[test]
fn a_reader_that_stops_early_is_no_error() {
    use std::io::{BufRead, BufReader};
    let Some(files) = common::sgf_files("kgs-6d") else { return };
    let folder = files[0].parent().unwrap();
    let mut child = go_train(&["show"])
        .arg(folder)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains(".sgf"), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("Broken pipe"), "{err}");
}

/// `show GAME > /dev/full` (and `raw-nn`, `review`, `dataset info`) once
/// panicked with a backtrace and exit status 101; then `show` said only
/// "No space left on device", naming no output.
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let Some(files) = common::sgf_files("kgs-6d") else { return };
    for command in ["raw-nn", "show"] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = go_train(&[command]).arg(&files[0]).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {err}");
        assert!(err.starts_with("go-train: error: cannot write to standard output: No space left"), "{command}: {err}");
        assert!(!err.contains("panicked"), "{command}: {err}");
    }
}

/// A failure stays one when stderr takes nothing more: the error's own
/// line once panicked on the closed pipe and the run ended with status 0.
#[test]
fn a_failure_with_a_closed_stderr_still_fails() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = go_train(&["show", "no/such/game.sgf"]).stderr(writer).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let out = run(&["show", "no/such/game.sgf"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no/such/game.sgf"), "{err}");
}

#[test]
fn help_has_examples_and_version_is_printed() {
    let out = run(&["show", "--help"]);
    assert!(String::from_utf8(out.stdout).unwrap().contains("Examples:"));
    let out = run(&["--version"]);
    let version = String::from_utf8(out.stdout).unwrap();
    assert!(version.starts_with(&format!("go-train {}", env!("CARGO_PKG_VERSION"))), "{version}");
    if let Some(commit) = common::checkout_commit() {
        assert!(version.contains(&format!("(commit {}", &commit[..12])), "names its commit: {version}");
    }
    // Help that could not be printed once exited 0 having said nothing.
    for args in [&["--help"][..], &["show", "--help"], &["--version"]] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = go_train(args).stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("cannot write to standard output"), "{args:?}: {err}");
    }
}
