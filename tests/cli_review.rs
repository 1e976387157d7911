//! `go-train review` and `go-train raw-nn` on real games with the shipped
//! nets: the reviewed SGF reads back as the same game with the figures in
//! its comments, the plot is a PNG, the raw output is a distribution over
//! the legal moves; bad input is an error naming the file.

mod common;

use go_train::sgf::read_file;

/// A real 19x19 game of kgs-6d (its 2017 files are ordinary even games).
fn real_game() -> Option<std::path::PathBuf> {
    let files = common::sgf_files("kgs-6d")?;
    files.into_iter().find(|f| f.to_string_lossy().contains("2017-06-01-13"))
}

/// Whether `go-train args...` succeeded, and its stdout and stderr.
fn outcome(args: &[&str]) -> (bool, String, String) {
    let out = common::run(args);
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn a_review_annotates_every_move_and_draws_the_game() {
    let Some(game) = real_game() else { return };
    let dir = tempfile::tempdir().unwrap();
    // The plot's folder does not exist yet: it is made, as the SGF's would be.
    let (sgf, png) = (dir.path().join("r.sgf"), dir.path().join("plots/r.png"));
    let (ok, stdout, stderr) =
        outcome(&["review", game.to_str().unwrap(), "--out", sgf.to_str().unwrap(), "--plot", png.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("biggest swings") && stdout.contains("first choice"), "{stdout}");

    let original = read_file(&game).unwrap().remove(0).unwrap();
    let reviewed = read_file(&sgf).unwrap().remove(0).unwrap();
    assert_eq!(reviewed.moves, original.moves, "the same game");
    let text = std::fs::read_to_string(&sgf).unwrap();
    assert_eq!(text.matches("C[Policy").count(), original.moves.len(), "a comment on every move");
    assert_eq!(text.matches("Black wins").count(), original.moves.len());
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"), "the plot is a PNG");

    let (ok, stdout, stderr) = outcome(&[
        "review",
        game.to_str().unwrap(),
        "--out",
        sgf.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
        "--json",
        "--force",
    ]);
    assert!(ok, "{stderr}");
    let moves: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(moves.len(), original.moves.len());
    for m in &moves {
        let rank = m["rank"].as_u64().expect("every played move is legal, so ranked");
        let p = m["probability"].as_f64().unwrap();
        let top: Vec<f64> = m["top"].as_array().unwrap().iter().map(|t| t[1].as_f64().unwrap()).collect();
        assert!(rank >= 1 && top.windows(2).all(|w| w[0] >= w[1]), "{m}");
        assert_eq!(rank == 1, (p - top[0]).abs() < 1e-6, "the first choice has the top probability: {m}");
        let (before, after) = (m["black_before"].as_f64().unwrap(), m["black_after"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&before) && (0.0..=1.0).contains(&after));
    }
    // Each move's "after" is the next one's "before": one curve.
    assert!(moves.windows(2).all(|w| w[0]["black_after"] == w[1]["black_before"]));
}

#[test]
fn raw_output_is_a_distribution_over_the_legal_moves_in_every_symmetry() {
    let Some(game) = real_game() else { return };
    let (ok, stdout, stderr) =
        outcome(&["raw-nn", game.to_str().unwrap(), "--move", "40", "--symmetry", "all", "--json"]);
    assert!(ok, "{stderr}");
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 8);
    let record = read_file(&game).unwrap().remove(0).unwrap();
    let position = record.replay_until(record.rules(), 40).unwrap();
    let board = position.board();
    let mut tops = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(line["symmetry"], n as u64);
        let policy = line["policy"].as_array().unwrap();
        assert_eq!(policy.len(), 362);
        let occupied: Vec<bool> =
            (0..361).map(|i| board.color_at(board.point(go_train::go::Vertex::from_index(i, 19))).is_some()).collect();
        for i in 0..361 {
            assert_eq!(policy[i].is_null(), occupied[i], "point {i}: null exactly where a stone is");
        }
        let sum: f64 = policy.iter().filter_map(|p| p.as_f64()).sum();
        assert!((sum - 1.0).abs() < 0.01, "{sum}");
        let value = line["value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&value));
        let top =
            (0..362).max_by(|&a, &b| policy[a].as_f64().unwrap_or(-1.0).total_cmp(&policy[b].as_f64().unwrap_or(-1.0)));
        tops.push(top.unwrap());
    }
    // Mapped back onto the position, most symmetries agree on the best move
    // (the commonest one: any single symmetry may see another).
    let agree = tops.iter().map(|t| tops.iter().filter(|&u| u == t).count()).max().unwrap();
    assert!(agree >= 4, "symmetries mapped back to the same point: {tops:?}");
}

#[test]
fn bad_input_is_an_error_naming_the_file() {
    let (ok, _, stderr) = outcome(&["review", "/no/such/game.sgf"]);
    assert!(!ok && stderr.contains("/no/such/game.sgf"), "{stderr}");
    let Some(game) = real_game() else { return };
    // Outputs over the game or over each other once wrote a PNG over the
    // SGF under review, and over the reviewed SGF.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("game.sgf");
    std::fs::copy(&game, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let copy = copy.to_str().unwrap();
    let other = dir.path().join("r.sgf");
    let same = dir.path().join("sub/../game.sgf");
    for (flags, says) in [
        (vec!["--plot", copy], "--plot"),
        (vec!["--out", same.to_str().unwrap()], "--out"),
        (vec!["--out", other.to_str().unwrap(), "--plot", other.to_str().unwrap()], "both name"),
        // A folder, found before the review rather than after it.
        (vec!["--out", dir.path().join("sub").to_str().unwrap()], "a folder"),
        (vec!["--out", other.to_str().unwrap(), "--plot", dir.path().join("sub").to_str().unwrap()], "a folder"),
    ] {
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        let (ok, _, stderr) = outcome(&[&["review", copy][..], &flags].concat());
        assert!(!ok && stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert_eq!(std::fs::read(copy).unwrap(), before, "the game is untouched");
    assert!(!other.exists(), "nothing written");
    // A plot that cannot be written is a failure naming it (it was once
    // a warning and exit status 0); the review written is kept.
    let (ok, stdout, stderr) = outcome(&["review", copy, "--out", other.to_str().unwrap(), "--plot", "/proc/no.png"]);
    assert!(!ok && stderr.contains("cannot draw /proc/no.png") && !stdout.contains("no.png"), "{stdout}{stderr}");
    assert!(stderr.contains(&format!("the review is in {}", other.display())) && other.is_file(), "{stderr}");
    // A device is not replaced by a file, --force or not (`--out
    // /dev/null --force`, as root, once replaced /dev/null).
    let (ok, _, stderr) = outcome(&["review", copy, "--out", "/dev/null", "--force", "--value", "none"]);
    assert!(!ok && stderr.contains("--out: /dev/null: a device, pipe or socket, not a file"), "{stderr}");
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(&std::fs::metadata("/dev/null").unwrap().file_type()));
    let (ok, _, stderr) = outcome(&["review", game.to_str().unwrap(), "--index", "5"]);
    assert!(!ok && stderr.contains("no game 5 (it holds 1)"), "{stderr}");
    let (ok, _, stderr) = outcome(&["raw-nn", game.to_str().unwrap(), "--move", "9999"]);
    assert!(!ok && stderr.contains("the game has"), "{stderr}");
    let (ok, _, stderr) = outcome(&["raw-nn", game.to_str().unwrap(), "--symmetry", "9"]);
    assert!(
        !ok && stderr.contains("--symmetry") && stderr.contains("give all or a whole number from 0 to 7"),
        "{stderr}"
    );
}

/// Each game of a collection is reviewed into files of its own, a review
/// written before is replaced only with --force, the plot is the format
/// its name says, and a record with an illegal move is reviewed up to it.
/// (The review of game 1 once replaced game 0's without a word; a `.svg`
/// plot held PNG bytes; one illegal move refused the whole game.)
#[test]
fn reviews_keep_to_their_own_files_and_to_the_legal_moves() {
    let (Some(tygem), Some(pro)) = (common::collection("tygem-9d-2010-2011"), common::sgf_files("pro-1941-1997"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let collection = tygem.join("tygem-9d-2011-09.sgf");
    let review = |args: &[&str]| {
        let out = common::go_train(&[&["review"][..], args, &["--policy", "none", "--device", "cpu"]].concat())
            .current_dir(dir.path())
            .output()
            .unwrap();
        (out.status.success(), common::text(&out))
    };
    let game = common::path(&collection);
    for index in ["0", "1"] {
        let (ok, text) = review(&[game, "--index", index]);
        assert!(ok, "{text}");
    }
    let file = |name: &str| dir.path().join(name);
    let first = std::fs::read(file("tygem-9d-2011-09-0.review.sgf")).unwrap();
    assert_ne!(first, std::fs::read(file("tygem-9d-2011-09-1.review.sgf")).unwrap(), "two games, two reviews");
    assert!(file("tygem-9d-2011-09-0.review.png").is_file() && file("tygem-9d-2011-09-1.review.png").is_file());

    let (ok, text) = review(&[game, "--out", "tygem-9d-2011-09-0.review.sgf", "--index", "1"]);
    assert!(!ok && text.contains("exists") && text.contains("--force"), "{text}");
    assert_eq!(std::fs::read(file("tygem-9d-2011-09-0.review.sgf")).unwrap(), first, "not replaced");
    let (ok, text) = review(&[game, "--force"]);
    assert!(ok, "{text}");

    // The summary says which game of the collection it is; an index past
    // its end says which there are.
    let (ok, text) = review(&[game, "--index", "1", "--out", "one.sgf"]);
    assert!(ok && text.contains("(game 1 of "), "{text}");
    let (ok, text) = review(&[game, "--index", "99999"]);
    assert!(!ok && text.contains("--index 0 to "), "{text}");
    // Without --plot the plot lies beside --out: named after the game, the
    // plot of a second review (another --out) once replaced the first's.
    assert!(file("one.png").is_file(), "the plot beside one.sgf");

    let (ok, text) = review(&[game, "--plot", "win.svg", "--out", "svg.sgf"]);
    assert!(ok, "{text}");
    assert!(std::fs::read_to_string(file("win.svg")).unwrap().starts_with("<svg"), "an SVG plot");
    for flag in ["--out", "--plot"] {
        let (ok, text) = review(&[game, flag, "-", "--force"]);
        assert!(!ok && text.contains(&format!("{flag} -: review writes files")), "{text}");
    }
    assert!(!file("-").exists() && !file("-.png").exists(), "no file named -");
    let (ok, text) = review(&[game, "--plot", "win.jpg", "--out", "jpg.sgf"]);
    assert!(!ok && text.contains("--plot win.jpg"), "{text}");
    let (ok, text) = review(&[game, "--value", "none", "--plot", "none.png", "--out", "none.sgf"]);
    assert!(!ok && text.contains("value net"), "{text}");
    let (ok, text) = review(&[game, "--value", "none", "--out", "neither.sgf"]);
    assert!(!ok && text.contains("--policy none") && text.contains("--value none"), "{text}");
    assert!(!file("jpg.sgf").exists() && !file("none.sgf").exists() && !file("neither.sgf").exists());

    // Move 228 of this professional game is on an occupied point.
    let damaged = pro.iter().find(|f| f.ends_with("M-65-5.sgf")).expect("the collection holds M-65-5.sgf");
    let (ok, text) = review(&[common::path(damaged), "--out", "m.sgf"]);
    assert!(ok && text.contains("move 228") && text.contains("reviewed the 227 moves before it"), "{text}");
    let reviewed = std::fs::read_to_string(file("m.sgf")).unwrap();
    assert_eq!(reviewed.matches("C[Black wins").count(), 227);
    // raw-nn takes the position before it as the end, as review does; one
    // asked for past it is none. (It once refused the game.)
    let raw = common::go_train(&["raw-nn", common::path(damaged), "--json", "--device", "cpu"]).output().unwrap();
    let line: serde_json::Value = serde_json::from_slice(&raw.stdout).unwrap_or_default();
    assert!(raw.status.success() && line["move"] == 227, "{}", common::text(&raw));
    assert!(common::text(&raw).contains("move 228"), "{}", common::text(&raw));
    let err = common::fails(&["raw-nn", common::path(damaged), "--move", "228"]);
    assert!(err.contains("move 228") && err.contains("--move 228 is past it"), "{err}");

    // A damaged record: the summary says its result is of a longer game.
    let whole = std::fs::read(damaged).unwrap();
    std::fs::write(file("cut.sgf"), &whole[..whole.len() * 2 / 3]).unwrap();
    let (ok, text) = review(&["cut.sgf", "--out", "cut.review.sgf"]);
    assert!(ok && text.contains("moves (the record is damaged after them)"), "{text}");
    // A record without moves (a problem's setup) is no review: it once
    // wrote an empty one and succeeded.
    if let Some(problems) = common::sgf_files("gnugo-regression") {
        let setup = problems.iter().find(|f| f.ends_with("games/owl17.sgf")).expect("owl17.sgf in gnugo-regression");
        let (ok, text) = review(&[common::path(setup), "--out", "owl.sgf"]);
        assert!(!ok && text.contains("no move to review"), "{text}");
        assert!(!file("owl.sgf").exists());
    }

    // raw-nn and review search nothing: no playout net to name.
    let err = common::fails(&["raw-nn", game, "--playout", "none"]);
    assert!(err.contains("--playout"), "{err}");
}

/// A reader that stops reading ends the program quietly: `println!` once
/// panicked on the closed pipe, with a backtrace.
#[test]
fn a_closed_stdout_ends_quietly() {
    let Some(game) = real_game() else { return };
    let mut child = common::piped(&["raw-nn", common::path(&game), "--symmetry", "all", "--json"]).spawn().unwrap();
    drop(child.stdin.take());
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("panicked"), "{:?}: {stderr}", out.status);
}

/// A record with side variations is reviewed along its main line, and
/// says that the variations are not in the review (they were dropped
/// without a word); a record without any says nothing of them.
#[test]
fn a_review_says_it_leaves_out_side_variations() {
    let Some(kombilo) = common::collection("kombilo-tests") else { return };
    let file = kombilo.join("tests-sgfs/contlist.sgf");
    let dir = tempfile::tempdir().unwrap();
    let review = |index: &str| {
        let out = common::go_train(&["review", common::path(&file), "--index", index, "--device", "cpu"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        (out.status.success(), common::text(&out))
    };
    // Game 0: B[pp];W[dd], then three variations of Black's third move.
    let (ok, text) = review("0");
    assert!(ok, "{text}");
    assert!(text.contains("side variations (2 nodes) are not in contlist-0.review.sgf"), "{text}");
    let reviewed = go_train::sgf::read_file(&dir.path().join("contlist-0.review.sgf")).unwrap().remove(0).unwrap();
    assert_eq!(reviewed.moves.len(), 3, "the main line: pp, dd, qd");
    let (ok, text) = review("1");
    assert!(ok && !text.contains("side variations"), "{text}");
}

/// A game whose file name is not UTF-8 gets reviews named after it, byte
/// for byte: its odd bytes once became U+FFFD in the review's name.
#[test]
fn a_name_that_is_not_utf8_names_its_review() {
    use std::os::unix::ffi::OsStrExt;
    let Some(game) = real_game() else { return };
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"game-\xff.sgf");
    std::fs::copy(&game, dir.path().join(name)).unwrap();
    let out = common::go_train(&["review", "--policy", "none", "--device", "cpu"])
        .arg(name)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    for review in [&b"game-\xff.review.sgf"[..], b"game-\xff.review.png"] {
        assert!(dir.path().join(std::ffi::OsStr::from_bytes(review)).is_file(), "{}", common::text(&out));
    }
}
