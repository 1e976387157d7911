//! `go-train gtp` as controllers see it: a scripted session with malformed
//! lines, `loadsgf`/`list_stones`/`captures` against GnuGo on real games,
//! and go-train's engine playing GnuGo through the match referee.

mod common;

use std::io::Write;
use std::path::Path;

use go_train::gtp::GtpClient;

use common::BIN;

/// Runs `go-train gtp ARGS` on `script` and returns the answers (each
/// without its final empty line), and what it wrote to stderr.
fn session(args: &[&str], script: &str) -> (Vec<String>, String) {
    // The random engine unless a test names one: a bare `go-train gtp`
    // plays the shipped nets, 19x19 only.
    let engine: &[&str] = if args.contains(&"--engine") { &[] } else { &["--engine", "random"] };
    let mut child = common::piped(&["gtp"]).args(engine).args(args).spawn().expect("start go-train gtp");
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "go-train gtp failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("GTP output is UTF-8");
    assert!(stdout.ends_with("\n\n"), "every answer ends with an empty line: {stdout:?}");
    let answers = stdout.trim_end_matches('\n').split("\n\n").map(str::to_string).collect();
    (answers, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn scripted_session_answers_every_line_as_gtp_says() {
    // (line sent, answer expected; None: no answer for this line)
    let script: &[(&str, Option<&str>)] = &[
        ("protocol_version", Some("= 2")),
        ("1 name", Some("=1 go-train")),
        ("# a comment line gets no answer", None),
        ("", None),
        ("2 known_command genmove", Some("=2 true")),
        ("known_command frobnicate", Some("= false")),
        ("frobnicate", Some("? unknown command")),
        ("42", Some("?42 missing command")),
        ("boardsize 9", Some("= ")),
        ("boardsize 30", Some("? unacceptable size")),
        ("boardsize nine", Some("? boardsize not an integer")),
        ("komi abc", Some("? komi not a float")),
        ("komi 6.5", Some("= ")),
        ("play b e5", Some("= ")),
        ("play w e5", Some("? illegal move")),
        ("play x e5", Some("? invalid color or coordinate")),
        ("play b z9", Some("? invalid color or coordinate")),
        // Once read as A1: Rust's integer parser takes a sign and zeros.
        ("play b a+1", Some("? invalid color or coordinate")),
        ("play b a01", Some("? invalid color or coordinate")),
        ("play b", Some("? invalid color or coordinate")),
        ("play w\td5   # tab and comment", Some("= ")),
        ("\u{1}play b c3\u{7}", Some("= ")),
        ("list_stones black", Some("= E5 C3")),
        ("list_stones white", Some("= D5")),
        ("list_stones", Some("? invalid color")),
        ("captures black", Some("= 0")),
        ("undo", Some("= ")),
        ("list_stones black", Some("= E5")),
        ("fixed_handicap 2", Some("? board not empty")),
        ("clear_board", Some("= ")),
        ("fixed_handicap 10", Some("? invalid handicap")),
        ("fixed_handicap 3", Some("= C7 G7 C3")),
        ("clear_board", Some("= ")),
        ("set_free_handicap a1", Some("? invalid handicap")),
        ("set_free_handicap a1 a1", Some("? repeated vertex")),
        ("set_free_handicap a1 b2", Some("= ")),
        ("undo", Some("? cannot undo")),
        ("clear_board", Some("= ")),
        ("place_free_handicap 12", None), // checked below: 12 distinct vertices
        ("clear_board", Some("= ")),
        // Komi within --komi's bounds (3e38 once scored in 39 digits).
        ("komi 1e30", Some("? komi 1e30: give a number from -1000 to 1000")),
        ("komi -1000.5", Some("? komi -1000.5: give a number from -1000 to 1000")),
        ("final_score", Some("= W+6.5")),
        ("komi 7.5", Some("= ")),
        ("final_score", Some("= W+7.5")),
        ("final_status_list foo", Some("? invalid status")),
        ("final_status_list seki", Some("= ")),
        ("time_settings 10 5", Some("? syntax error")),
        ("time_settings 60 10 5", Some("= ")),
        ("time_left b 30 0", Some("= ")),
        ("time_left purple 30 0", Some("? invalid color")),
        ("genmove purple", Some("? invalid color")),
        ("genmove b", None), // a vertex: checked below
        ("reg_genmove w", None),
        (
            "loadsgf /no/such/file.sgf",
            Some("? cannot open or parse '/no/such/file.sgf': cannot read: No such file or directory (os error 2)"),
        ),
        ("9 quit", Some("=9 ")),
        ("name", None), // after quit: never answered
    ];
    let text: String = script.iter().map(|(line, _)| format!("{line}\n")).collect();
    let (answers, stderr) = session(&["--seed", "3"], &text);
    let expected: Vec<(&str, Option<&str>)> =
        script.iter().filter(|(line, _)| !matches!(*line, "" | "name") && !line.starts_with('#')).copied().collect();
    assert_eq!(answers.len(), expected.len(), "one answer per command up to quit: {answers:#?}");
    for ((line, want), got) in expected.iter().zip(&answers) {
        match want {
            Some(want) => assert_eq!(got, want, "answer to {line:?}"),
            None if line.starts_with("place_free_handicap") => {
                let stones: std::collections::HashSet<&str> = got.trim_start_matches("= ").split(' ').collect();
                assert_eq!(stones.len(), 12, "{got}");
            }
            None => {
                let vertex = got.strip_prefix("= ").unwrap_or_else(|| panic!("{line}: {got}"));
                assert!(vertex == "pass" || go_train::go::Vertex::parse_gtp(vertex, 9).is_some(), "{line}: {got}");
            }
        }
    }
    assert!(stderr.starts_with("go-train gtp: random"), "logs go to stderr: {stderr}");
}

#[test]
fn list_commands_and_known_command_agree_and_cover_the_issue() {
    let (answers, _) = session(&[], "list_commands\n");
    let listed: Vec<&str> = answers[0].trim_start_matches("= ").lines().collect();
    for required in [
        "protocol_version",
        "name",
        "version",
        "known_command",
        "list_commands",
        "quit",
        "boardsize",
        "clear_board",
        "komi",
        "play",
        "genmove",
        "undo",
        "showboard",
        "fixed_handicap",
        "place_free_handicap",
        "set_free_handicap",
        "final_score",
        "final_status_list",
        "time_settings",
        "time_left",
        "loadsgf",
        "printsgf",
        "list_stones",
        "captures",
        "kgs-genmove_cleanup",
        "reg_genmove",
    ] {
        assert!(listed.contains(&required), "{required} missing from list_commands");
    }
    let script: String = listed.iter().map(|c| format!("known_command {c}\n")).collect();
    let (answers, _) = session(&[], &script);
    assert!(answers.iter().all(|a| a == "= true"), "{answers:?}");
}

#[test]
fn commands_that_need_a_search_or_nets_are_offered_only_with_them() {
    let script = "known_command kata-analyze\nknown_command kata-raw-nn\nknown_command gogui-value\n\
                  known_command kata-genmove_analyze\nlist_commands\ngogui-analyze_commands\n";
    // Random play: no search at all.
    let (answers, _) = session(&[], script);
    assert_eq!(answers[..4], ["= false", "= false", "= false", "= true"], "{answers:?}");
    assert!(!answers[4].lines().any(|c| c.ends_with("analyze") && !c.contains("genmove")), "{}", answers[4]);
    assert_eq!(answers[5], "= gfx/Ownership/gogui-ownership");
    // MCTS on a board the nets do not play: a search, no nets.
    let (answers, _) = session(&["--engine", "mcts", "--size", "9"], script);
    assert_eq!(answers[..4], ["= true", "= false", "= false", "= true"], "{answers:?}");
    assert!(answers[4].lines().any(|c| c == "lz-analyze") && !answers[4].contains("kata-raw-nn"), "{}", answers[4]);
}

#[test]
fn showboard_printsgf_and_a_replayed_game_agree() {
    let (answers, _) =
        session(&["--seed", "5"], "boardsize 7\nplay b d4\ngenmove w\ngenmove b\nshowboard\nprintsgf\nfinal_score\n");
    assert!(answers[4].starts_with("= \n   A B C D E F G"), "{}", answers[4]);
    let sgf = answers[5].trim_start_matches("= ");
    let games = go_train::sgf::parse_str(sgf).unwrap();
    let record = games.into_iter().next().unwrap().unwrap();
    assert_eq!(record.size, 7);
    assert_eq!(record.moves.len(), 3);
    let game = record.replay(go_train::go::Rules::CHINESE).unwrap();
    // The board diagram shows the replayed stones.
    let stones = game.board().stone_counts();
    assert_eq!(answers[4].matches('X').count() - 1, stones[0] as usize, "{}", answers[4]); // minus the legend's X
    let score = answers[6].trim_start_matches("= ");
    assert!(score.starts_with("B+") || score.starts_with("W+") || score == "0", "{score}");
}

#[test]
fn rules_that_forbid_a_played_move_are_refused_so_printsgf_stays_readable() {
    // Black's A3 takes its own A1 and A2 off the board: a suicide, which
    // Tromp-Taylor allows and Japanese rules do not.
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("game.sgf");
    let script = format!(
        "boardsize 9\nkgs-rules tt\nplay b a1\nplay w b1\nplay b a2\nplay w b2\nplay b e5\nplay w b3\n\
         play b e6\nplay w a4\nplay b a3\nkgs-rules japanese\nkata-set-rules nz\nprintsgf {}\nclear_board\nloadsgf {}\nlist_stones black\n",
        saved.display(),
        saved.display()
    );
    let (answers, _) = session(&[], &script);
    assert_eq!(answers[10], "= ", "Tromp-Taylor allows the suicide");
    assert_eq!(answers[11], "? the rules stay: move 9, black A3, is illegal under these rules: suicide (japanese)");
    assert_eq!(answers[12], "= ", "New Zealand rules allow it");
    assert_eq!(answers[15], "= white", "the saved game loads back, White to move");
    assert_eq!(answers[16], "= E6 E5", "the suicide took A1, A2 and A3 off the board");
}

#[test]
fn loadsgf_list_stones_and_captures_agree_with_gnugo_on_real_games() {
    let (Some(files), Some(gnugo)) = (common::sgf_files("kgs-6d"), common::gnugo()) else { return };
    let mut theirs = GtpClient::spawn(&format!("{gnugo} --mode gtp")).unwrap();
    let mut ours = GtpClient::spawn(&format!("{BIN} gtp --engine random")).unwrap();
    let step = files.len() / 60;
    let mut compared = 0;
    for (i, path) in files.iter().step_by(step.max(1)).take(60).enumerate() {
        // The whole game, and a cut part-way that lands on various moves.
        for cut in [String::new(), format!(" {}", 20 + 37 * i % 200)] {
            let command = format!("loadsgf {}{cut}", path.display());
            let (a, b) = (theirs.send(&command), ours.send(&command));
            match (&a, &b) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{command}: side to move"),
                _ => panic!("{command}: gnugo {a:?}, go-train {b:?}"),
            }
            for query in ["list_stones black", "list_stones white", "captures black", "captures white"] {
                assert_eq!(theirs.send(query).unwrap(), ours.send(query).unwrap(), "{command}: {query}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 120);
}

#[test]
fn go_train_engines_play_complete_games_against_gnugo() {
    let Some(gnugo) = common::gnugo() else { return };
    let dir = tempfile::tempdir().unwrap();
    // go-train's GTP engine (MCTS with random playouts: no nets on a
    // board the shipped ones cannot play) as the external engine A,
    // against GnuGo at level 0 on 9x9: both go through the referee's GTP
    // client, so this is the engine as Sabaki or gomill would drive it.
    let a = format!("{BIN} gtp --engine mcts --size 9 --iterations 150 --rollout-depth 200 --seed 2");
    let b = format!("{gnugo} --mode gtp --level 0");
    let out = common::go_train(&["eval", "--match", &a, &b, "--size", "9", "--games", "2"])
        .args(["--parallel", "2", "--json", "--out"])
        .arg(dir.path())
        .args(["--cross-check", &format!("{gnugo} --mode gtp --chinese-rules")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["games"], 2);
    assert_eq!(summary["forfeits"], serde_json::json!([0, 0]), "{summary}");
    for game in summary["details"].as_array().unwrap() {
        let path = game["file"].as_str().unwrap();
        let record = go_train::sgf::read_file(std::path::Path::new(path)).unwrap().remove(0).unwrap();
        assert_eq!(record.size, 9);
        // A is go-train, whichever colour it had.
        let a_name = if game["a_black"] == true { &record.black } else { &record.white };
        assert!(a_name.as_deref().is_some_and(|n| n.starts_with("A: go-train")), "{path}: {a_name:?}");
        // Every move of the record is legal under the referee's rules.
        let replayed = record.replay(go_train::go::Rules { komi: 7.5, ..go_train::go::Rules::CHINESE });
        let replayed = replayed.unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(replayed.move_count(), game["moves"].as_u64().unwrap() as usize);
        assert!(record.result.is_some());
        assert!(game["moves"].as_u64().unwrap() > 20, "{game}");
    }
}

#[test]
fn handicap_placement_matches_gnugo() {
    let Some(gnugo) = common::gnugo() else { return };
    let mut theirs = GtpClient::spawn(&format!("{gnugo} --mode gtp")).unwrap();
    let mut ours = GtpClient::spawn(&format!("{BIN} gtp --engine random")).unwrap();
    for size in [7, 9, 13, 19] {
        for n in 2..=10 {
            let mut answers = Vec::new();
            for engine in [&mut theirs, &mut ours] {
                engine.send(&format!("boardsize {size}")).unwrap();
                engine.send("clear_board").unwrap();
                answers.push(engine.send(&format!("fixed_handicap {n}")).map_err(|_| "refused"));
            }
            assert_eq!(answers[0], answers[1], "fixed_handicap {n} on {size}x{size}");
        }
    }
}

#[test]
fn final_score_names_gnugos_winner_on_most_finished_real_games() {
    // Real games that ended by counting still hold their dead stones (the
    // players agreed on them and stopped). go-train finds dead stones by
    // random-playout ownership, GnuGo by its own life-and-death reading:
    // they should name the same winner on nearly every game.
    let (Some(files), Some(gnugo)) = (common::sgf_files("kgs-6d"), common::gnugo()) else { return };
    // GnuGo's final_score reads the whole board: 256 s on one of these
    // games on a quiet machine.
    let hour = go_train::gtp::GtpTimeouts::for_commands(3600.0).unwrap();
    let mut theirs = GtpClient::spawn_with(&format!("{gnugo} --mode gtp --chinese-rules"), hour).unwrap();
    let mut ours = GtpClient::spawn(&format!("{BIN} gtp --engine random")).unwrap();
    let counted = files.iter().step_by(61).filter(|path| {
        let text = String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
        let by_points = text.contains("RE[B+") || text.contains("RE[W+");
        by_points && !text.contains("+R") && !text.contains("+T") && !text.contains("AB[")
    });
    let (mut games, mut agree) = (0, 0);
    for path in counted.take(40) {
        let load = format!("loadsgf {}", path.display());
        if theirs.send(&load).is_err() || ours.send(&load).is_err() {
            continue;
        }
        let (a, b) = (theirs.send("final_score").unwrap(), ours.send("final_score").unwrap());
        games += 1;
        agree += (a.chars().next() == b.chars().next()) as usize;
    }
    assert!(games >= 35, "only {games} finished games found");
    assert!(agree * 100 >= games * 85, "go-train names GnuGo's winner in only {agree} of {games} games");
    eprintln!("final_score: same winner as GnuGo in {agree} of {games} finished kgs-6d games");
}

/// Two games of the 800-iteration matches against GnuGo (kept in
/// `docs/matches/`) end with a Black group and three White stones inside
/// it sharing their last two liberties: a seki, where both live. In game
/// 21 of seed 31, twenty Black stones: GnuGo counts B+13.5. The judging
/// playouts let White fill a shared liberty (an L of 4 stones in atari)
/// and then rarely captured at once, so go-train counted the twenty dead
/// and W+28.5 until the playouts that count games refused to put such a
/// four in atari (docs/results/strength.md). In game 36 of seed 32, twelve Black
/// stones in the top-left corner with White's A19-C19 inside: here GnuGo
/// is the one that counts them dead (W+60.5, `final_status_list seki`
/// empty); alive, they and their 2 shared liberties take 26 points off
/// White's count: W+34.5.
#[test]
fn final_score_counts_a_seki_with_stones_inside_as_alive() {
    let cases = [
        ("iter800-vs-gnugo10-s31/game-0021.sgf", &["D9", "G6", "D8", "F8"][..], "B+13.5"),
        ("iter800-vs-gnugo10-s32/game-0036.sgf", &["D19", "A17", "D14", "A19", "C19"][..], "W+34.5"),
    ];
    for (file, seki, count) in cases {
        let game = format!("{}/docs/matches/{file}", env!("CARGO_MANIFEST_DIR"));
        let mut ours = GtpClient::spawn(&format!("{BIN} gtp --engine random")).unwrap();
        ours.send(&format!("loadsgf {game}")).unwrap();
        let dead = ours.send("final_status_list dead").unwrap();
        let dead: Vec<&str> = dead.split_whitespace().collect();
        for stone in seki {
            assert!(!dead.contains(stone), "{file}: {stone} is in the seki but judged dead: {dead:?}");
        }
        assert_eq!(ours.send("final_score").unwrap(), count, "{file}");
    }
}

#[test]
fn match_errors_name_the_player_and_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let run = |a: &str, b: &str| {
        let out = common::go_train(&["eval", "--match", a, b, "--games", "1", "--size", "9", "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{a} vs {b} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("random", "/no/such/engine --mode gtp");
    assert!(err.contains("player B") && err.contains("/no/such/engine"), "{err}");
    // A bare `eval` names both things it does (it once asked for --data alone).
    let err = common::fails(&["eval"]);
    assert!(err.contains("<--data <DATA>|--match <A> <B>>"), "{err}");
    // On the nets' board without nets, the net is what is missing.
    let out = common::go_train(&["eval", "--match", "policy", "random", "--games", "1", "--out"])
        .arg(dir.path())
        .env("GO_TRAIN_NETS", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("player A") && err.contains("--policy"), "{err}");
    // On another board it is the board (the net was named as missing).
    let err = run("policy", "random");
    assert!(err.contains("player A") && err.contains("cannot play on 9x9") && !err.contains("give --policy"), "{err}");
    let err = run("mcts:depth=3", "random");
    assert!(err.contains("unknown agent setting \"depth\""), "{err}");
    // The engine says the same (it once asked for a net, and then refused
    // the board of the net it was given).
    for engine in ["policy", "playout"] {
        let out = common::go_train(&["gtp", "--engine", engine, "--size", "9"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("cannot play on 9x9") && !err.contains("give --"), "{err}");
    }
    // Nothing was written for a match that could not start.
    assert!(!dir.path().join("game-0000.sgf").exists());
}

#[test]
fn a_command_line_over_the_limit_is_refused_unread_and_the_session_goes_on() {
    // 64 kB is the most a line holds; the refusal keeps the command's id.
    let script = format!("12 name {}\n13 name\n", "x".repeat(100_000));
    let (answers, _) = session(&[], &script);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers[0].starts_with("?12 ") && answers[0].contains("65536"),
        "{}",
        &answers[0][..80.min(answers[0].len())]
    );
    assert_eq!(answers[1], "=13 go-train");
}

#[test]
fn a_handicap_game_saved_with_printsgf_loads_back_with_white_to_move() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("handicap.sgf");
    let f = file.display();
    let (answers, _) = session(
        &[],
        &format!("boardsize 9\nfixed_handicap 3\nprintsgf {f}\nclear_board\nloadsgf {f}\nlist_stones black\n"),
    );
    assert_eq!(answers[4], "= white", "{answers:?}");
    assert_eq!(answers[5], "= C7 G7 C3");
    // Written elsewhere, with `HA` and no `PL`: White is to move, as GnuGo
    // answers.
    std::fs::write(&file, "(;GM[1]FF[4]SZ[19]KM[0.5]HA[2]AB[pd][dp])").unwrap();
    let (answers, _) = session(&[], &format!("loadsgf {f}\n"));
    assert_eq!(answers[0], "= white", "{answers:?}");
    // Setup stones no game reaches (White's corner block without a
    // liberty), once loaded and then scored as alive, are refused.
    std::fs::write(&file, "(;GM[1]FF[4]SZ[19]AW[aa][ab][ba][bb]AB[ac][bc][ca][cb])").unwrap();
    let (answers, _) = session(&[], &format!("loadsgf {f}\nlist_stones white\n"));
    assert!(answers[0].starts_with("? ") && answers[0].contains("without a liberty"), "{answers:?}");
    assert_eq!(answers[1], "= ", "the board stays as it was: {answers:?}");
    // A file that is not SGF is refused with the reason.
    std::fs::write(&file, "not a game record").unwrap();
    let (answers, _) = session(&[], &format!("loadsgf {f}\n"));
    assert!(answers[0].starts_with(&format!("? cannot open or parse '{f}': ")), "{answers:?}");
}

#[test]
fn printsgf_names_the_rule_set_so_a_game_legal_under_it_loads_back() {
    let dir = tempfile::tempdir().unwrap();
    // Black's A1 takes the last liberty of its own A1-A2 string, which
    // captures nothing: legal under Tromp-Taylor (suicide), not under
    // Chinese rules, which the file once named.
    let file = dir.path().join("tt.sgf");
    let f = file.display();
    let script = format!(
        "play b A2\nplay w A3\nplay w B2\nplay w B1\nplay b A1\nprintsgf {f}\nclear_board\nloadsgf {f}\nlist_stones black\n"
    );
    let (answers, stderr) = session(&["--size", "9", "--rules", "tromp-taylor"], &script);
    assert!(!stderr.contains("without them"), "the random engine has no nets to go without: {stderr}");
    // Started on 9x9, MCTS has no nets for the session: it says so, as a
    // GUI moving on to 19x19 would otherwise not know.
    let (_, stderr) = session(
        &["--size", "9", "--engine", "mcts"],
        "boardsize 19
",
    );
    assert!(stderr.contains("--size 9: the nets play 19x19 only"), "{stderr}");
    assert_eq!(answers[4], "= ", "suicide is legal: {answers:?}");
    assert_eq!(answers[7], "= white", "{answers:?}");
    assert_eq!(answers[8], "= ", "the suicide took Black's stones off: {answers:?}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("RU[Tromp-Taylor]"));
    // New Zealand rules keep their name too (with it their superko).
    let file = dir.path().join("nz.sgf");
    let (answers, _) = session(&["--size", "9", "--rules", "nz"], &format!("play b E5\nprintsgf {}\n", file.display()));
    assert_eq!(answers[1], "= ");
    assert!(std::fs::read_to_string(&file).unwrap().contains("RU[NZ]"));
}

/// A file damaged at a later node (two moves in one node, as GnuGo's
/// regression files have; a truncated file) loads up to the damage, as
/// GnuGo loads it; `loadsgf FILE N` works for N before the damage and is
/// refused past it, naming where the file stops.
#[test]
fn loadsgf_reads_up_to_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("two-moves.sgf", "(;SZ[19];B[pd];W[dp];B[pp];W[tt]B[tt];B[dd])"),
        ("truncated.sgf", "(;SZ[19];B[pd];W[dp];B[pp];W[dd]C[cut of"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let f = file.display();
        let (answers, log) =
            session(&[], &format!("loadsgf {f}\nlist_stones black\nloadsgf {f} 3\nlist_stones white\nloadsgf {f} 6\n"));
        assert_eq!(answers[0], if name == "two-moves.sgf" { "= white" } else { "= black" }, "{name}: {answers:?}");
        assert_eq!(answers[1], "= Q16 Q4", "{name}");
        assert_eq!(answers[2], "= black", "{name}");
        assert_eq!(answers[3], "= D4", "{name}");
        assert!(answers[4].starts_with(&format!("? {f}: readable up to move ")), "{name}: {answers:?}");
        assert!(log.contains("read up to move"), "{name}: {log}");
    }
}

/// A bare `go-train gtp` plays MCTS with the shipped nets (here a folder
/// of untrained ones named by `GO_TRAIN_NETS`), which load from their
/// weights files alone; a net named alone keeps the others; a board the
/// nets cannot play is refused up front.
#[test]
fn a_bare_engine_plays_the_shipped_nets() {
    use go_train::features::FeatureSet;
    use go_train::nn::{weights, Arch, Model};
    let dir = tempfile::tempdir().unwrap();
    for (name, arch) in [("policy", Arch::Policy), ("playout", Arch::Playout)] {
        let model = Model::new(arch, FeatureSet::Extended, &candle_core::Device::Cpu, 1).unwrap();
        weights::save(&dir.path().join(format!("{name}.safetensors")), &model, None).unwrap();
    }
    let run = |args: &[&str]| {
        let mut child = common::piped(&["gtp"]).args(args).env("GO_TRAIN_NETS", dir.path()).spawn().unwrap();
        // An engine that refuses its arguments may exit before reading a
        // line (a broken pipe here, under load): its exit status and
        // stderr are what the test reads then.
        let _ = child.stdin.take().unwrap().write_all(b"genmove b\nquit\n");
        child.wait_with_output().unwrap()
    };
    let out = run(&["--iterations", "16"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    let named = stderr.lines().find(|l| l.starts_with("go-train gtp:")).unwrap_or_default();
    assert!(named.contains("mcts, preset tuned: iterations=16 ") && named.contains("selection=puct"), "{stderr}");
    assert!(named.contains(&format!("policy={}", dir.path().join("policy.safetensors").display())), "{stderr}");
    assert!(stdout.starts_with("= ") && !stdout.starts_with("= pass"), "{stdout}");
    // Naming one net keeps the shipped ones for the others: a value net
    // alone makes MCTS with the shipped policy and its value leaves.
    let elsewhere = tempfile::tempdir().unwrap();
    let value = elsewhere.path().join("my-value.safetensors");
    let model = Model::new(Arch::PolicyValue, FeatureSet::Extended, &candle_core::Device::Cpu, 1).unwrap();
    weights::save(&value, &model, None).unwrap();
    let out = run(&["--iterations", "16", "--value", value.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let named = stderr.lines().find(|l| l.starts_with("go-train gtp:")).unwrap_or_default();
    assert!(named.contains("mcts") && named.contains("policy.safetensors") && named.contains("my-value"), "{stderr}");
    // The nets play 19x19 only: a policy engine on 9x9 is refused, naming the size.
    let out = run(&[
        "--engine",
        "policy",
        "--policy",
        dir.path().join("policy.safetensors").to_str().unwrap(),
        "--size",
        "9",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size 9"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A match stopped part-way (here: a game's SGF and log line gone, a torn
/// last line, as a kill leaves them) goes on with `--resume`: the finished
/// games are kept as they are, only the missing one is played, and as it
/// is seeded by its number it comes out the same. Another match's folder
/// is refused, down to the players' settings.
#[test]
fn a_stopped_match_resumes_with_the_missing_games_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("match");
    let run = |a: &str, extra: &[&str]| {
        common::go_train(&[
            "eval",
            "--match",
            a,
            "random",
            "--games",
            "6",
            "--size",
            "9",
            "--parallel",
            "2",
            "--json",
            "--out",
        ])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap()
    };
    let first = run("random", &[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let game = |i: usize| std::fs::read_to_string(out.join(format!("game-{i:04}.sgf"))).unwrap();
    let before: Vec<String> = (0..6).map(game).collect();
    let log = std::fs::read_to_string(out.join("games.jsonl")).unwrap();
    let kept: String = log.lines().filter(|l| !l.contains("\"index\":3,")).map(|l| format!("{l}\n")).collect();
    std::fs::write(out.join("games.jsonl"), format!("{kept}{{\"index\":3,\"fi")).unwrap();
    std::fs::remove_file(out.join("game-0003.sgf")).unwrap();
    let modified = |i: usize| std::fs::metadata(out.join(format!("game-{i:04}.sgf"))).unwrap().modified().unwrap();
    let untouched: Vec<_> = [0, 1, 2, 4, 5].iter().map(|&i| modified(i)).collect();

    let refused = run("random", &[]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--resume"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // Another kind of agent, and the same kind with other settings (a
    // seed that plays other games), are other matches.
    // The refusal names the settings that differ, not both records whole.
    for (other, named) in
        [("mcts:iterations=4", "a: \"mcts\" here, \"random\" there"), ("random:seed=7", "a_settings: ")]
    {
        let other = run(other, &["--resume"]);
        let err = String::from_utf8_lossy(&other.stderr);
        assert!(err.contains("holds another match") && err.contains(named) && !err.contains("MatchIdentity"), "{err}");
    }

    let resumed = run("random", &["--resume"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(summary["games"], 6);
    assert_eq!((0..6).map(game).collect::<Vec<_>>(), before, "the replayed game is the same game");
    assert_eq!([0, 1, 2, 4, 5].iter().map(|&i| modified(i)).collect::<Vec<_>>(), untouched, "finished games kept");
    let log = std::fs::read_to_string(out.join("games.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 6);
    assert!(log.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()), "{log}");
}

/// A match folder is the match's alone: `--force` removes nothing before
/// the players have started, and nothing that is not the match's; a
/// resume with fewer games keeps the games past them, and one whose log
/// cannot be read is refused; a folder in use is refused; matches of other
/// seeds share no game. (`--force` once emptied
/// the folder before finding a misspelt agent, and took any SGF file in it;
/// a smaller `--games` dropped finished games from the log, to be played
/// again over their files; seeds 1 and 3 played the same games.)
#[test]
fn a_match_keeps_to_its_own_folder_and_games() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &Path, extra: &[&str]| {
        let args = ["eval", "--match", "random", "random", "--size", "5", "--parallel", "1", "--json", "--out"];
        common::go_train(&args).arg(out).args(extra).output().unwrap()
    };
    let text = |o: &std::process::Output| common::text(o);
    let out = dir.path().join("m");
    let first = run(&out, &["--games", "4"]);
    assert!(first.status.success(), "{}", text(&first));
    let files = |d: &Path| {
        let mut names: Vec<String> =
            std::fs::read_dir(d).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let before = files(&out);
    for bad in [&["--games", "4", "--force", "--gtp-timeout", "0"][..], &["--games", "4", "--force", "--seed", "x"]] {
        let refused = run(&out, bad);
        assert!(!refused.status.success(), "{bad:?}");
        assert_eq!(files(&out), before, "{bad:?}: the match is still there");
    }
    let refused = run(&out, &["--games", "2", "--resume"]);
    assert!(!refused.status.success() && text(&refused).contains("--games 4 or more"), "{}", text(&refused));
    assert_eq!(std::fs::read_to_string(out.join("games.jsonl")).unwrap().lines().count(), 4, "the log is whole");
    // A log that cannot be read was once taken for an empty one: every
    // game played again over its record.
    let log = std::fs::read(out.join("games.jsonl")).unwrap();
    std::fs::write(out.join("games.jsonl"), b"\xff\xfe").unwrap();
    let refused = run(&out, &["--games", "6", "--resume"]);
    assert!(!refused.status.success() && text(&refused).contains("cannot read"), "{}", text(&refused));
    assert!(text(&refused).contains("games.jsonl"), "{}", text(&refused));
    assert_eq!(files(&out), before, "nothing played over the match");
    std::fs::write(out.join("games.jsonl"), log).unwrap();

    // A folder of someone's games is no match to replace.
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::copy(out.join("game-0000.sgf"), mine.join("kept.sgf")).unwrap();
    let refused = run(&mine, &["--games", "1", "--force"]);
    assert!(!refused.status.success() && text(&refused).contains("no match's"), "{}", text(&refused));
    assert!(mine.join("kept.sgf").is_file());
    // Nor is another command's folder, a dataset's (a match once wrote
    // its games and logs beside the shards).
    let dataset = dir.path().join("dataset");
    std::fs::create_dir_all(&dataset).unwrap();
    std::fs::write(dataset.join("manifest.json"), "{}").unwrap();
    let refused = run(&dataset, &["--games", "1"]);
    let said = text(&refused);
    assert!(
        !refused.status.success()
            && said.contains("is not empty and holds no match (")
            && said.contains("manifest.json"),
        "{said}"
    );
    for written in ["match.json", "games.jsonl", "summary.json", "game-0000.sgf"] {
        assert!(!dataset.join(written).exists(), "{written} written beside the manifest");
    }

    {
        let _held = go_train::lock::Lock::folder(&out).unwrap();
        let refused = run(&out, &["--games", "6", "--resume"]);
        assert!(!refused.status.success() && text(&refused).contains("in use"), "{}", text(&refused));
    }
    let forced = run(&out, &["--games", "2", "--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert_eq!(files(&out).iter().filter(|f| f.ends_with(".sgf")).count(), 2, "{:?}", files(&out));

    let games = |out: &Path| -> Vec<String> {
        (0..4).map(|i| std::fs::read_to_string(out.join(format!("game-{i:04}.sgf"))).unwrap()).collect()
    };
    let (one, three) = (dir.path().join("s1"), dir.path().join("s3"));
    assert!(run(&one, &["--games", "4", "--seed", "1"]).status.success());
    assert!(run(&three, &["--games", "4", "--seed", "3"]).status.success());
    let (one, three) = (games(&one), games(&three));
    assert!(one[2..].iter().all(|g| !three.contains(g)), "seeds 1 and 3 play other games");

    // Two policy nets are named apart in the summary and the games (both
    // were once "policy").
    let rl = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/rl-policy.safetensors");
    let out = dir.path().join("named");
    let b = format!("policy:policy={rl}");
    let args = ["eval", "--match", "policy", &b, "--games", "1", "--max-moves", "2", "--json", "--out"];
    let named = common::go_train(&args).arg(&out).output().unwrap();
    assert!(named.status.success(), "{}", text(&named));
    let summary: serde_json::Value = serde_json::from_slice(&named.stdout).unwrap();
    assert!(summary["b"].as_str().unwrap().contains("rl-policy.safetensors"), "{summary}");
    assert!(summary["a"].as_str().unwrap().contains("built-in policy.safetensors"), "{summary}");
    assert!(std::fs::read_to_string(out.join("game-0000.sgf")).unwrap().contains("rl-policy.safetensors"));
}

/// `printsgf PIPE` once waited for a reader of the named pipe and the
/// engine answered nothing more; it is refused, and the session goes on.
#[test]
fn printsgf_to_a_named_pipe_is_refused_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("pipe");
    assert!(std::process::Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    let (answers, _) = session(&[], &format!("play b d4\nprintsgf {}\nname\n", pipe.display()));
    assert!(answers[1].starts_with("? cannot write") && answers[1].contains("pipe"), "{answers:?}");
    assert_eq!(answers[2], "= go-train", "{answers:?}");
}
