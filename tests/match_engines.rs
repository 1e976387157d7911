//! Matches against GTP engines that fail: one that goes silent after a
//! few moves, one that crashes, one silent from the start, and one left
//! waiting when the match is killed. Each engine is a small Python script
//! that logs its process id, so the tests can see which engines were
//! started and that none outlives the match.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A GTP engine that answers every command (`pass` to `genmove`) until
/// its genmove number STOP_AFTER + 1, then exits with status 3 (`crash`),
/// dies of SIGSEGV as GnuGo 3.8 does on some positions (`segfault`), or
/// sleeps for an hour reading and answering nothing, deaf to the end of
/// its input (`silent`), or resigns (`resign`). With `garbage` it answers
/// `final_score` with no result; with `nocount` it does not know it. It
/// logs `start PID` and, when it fails, `HOW PID` to LOG.
const ENGINE: &str = r#"import os, signal, sys, time
stop_after, how, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def note(what):
    with open(log, "a") as f:
        f.write(f"{what} {os.getpid()}\n")
note("start")
played = 0
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    answer = ""
    if words[0] == "final_score" and how == "garbage":
        answer = "X+banana"
    if words[0] == "known_command":
        answer = "false" if how == "nocount" else "true"
    if words[0] == "genmove":
        if played == stop_after and how == "resign":
            note(how)
            print("= resign\n", flush=True)
            continue
        if played == stop_after:
            note(how)
            if how == "crash":
                sys.exit(3)
            if how == "segfault":
                os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(3600)
        played += 1
        answer = "pass"
    print(f"= {answer}\n", flush=True)
    if words[0] == "quit":
        break
"#;

/// Writes the engine script in `dir`; returns its command line and log.
fn engine(dir: &Path, stop_after: usize, how: &str) -> (String, PathBuf) {
    let script = dir.join("engine.py");
    std::fs::write(&script, ENGINE).unwrap();
    let log = dir.join("engine.log");
    (format!("python3 {} {stop_after} {how} {}", script.display(), log.display()), log)
}

/// The process ids the log names with `what` (`start` or a way to fail).
fn logged(log: &Path, what: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| l.strip_prefix(what)?.trim().parse().ok()).collect()
}

/// Whether process `pid` is gone (a zombie no one has reaped yet counts:
/// it runs nothing).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits for `done`, failing the test after `limit`: a bound on a hang,
/// not a measure of speed.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: still not after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a match to its end, killing it (and failing) if it hangs.
fn finish(child: Child) -> Output {
    let pid = child.id();
    let (send, receive) = channel();
    std::thread::spawn(move || send.send(child.wait_with_output()));
    match receive.recv_timeout(Duration::from_secs(300)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the match hung");
        }
    }
}

/// `go-train eval --match random ENGINE` on 9x9, with `extra` arguments.
fn start_match(engine: &str, out: &Path, extra: &[&str]) -> Child {
    common::go_train(&["eval", "--match", "random", engine, "--size", "9", "--parallel", "1", "--json", "--out"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Plays two games against an engine failing after five moves; checks
/// that each is B's forfeit with every one of `reasons` in games.jsonl and
/// the SGF, each against a fresh engine, and that no engine is left running.
fn two_forfeits(how: &str, reasons: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (engine, log) = engine(dir.path(), 5, how);
    let out = dir.path().join("match");
    let output = finish(start_match(&engine, &out, &["--games", "2", "--gtp-timeout", "2"]));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["games"], 2);
    assert_eq!(summary["forfeits"], serde_json::json!([0, 2]), "{summary}");
    let logged_games: Vec<Value> = std::fs::read_to_string(out.join("games.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged_games.len(), 2);
    for game in &logged_games {
        assert_eq!((&game["reason"], &game["winner"]), (&"forfeit".into(), &"a".into()), "{game}");
        let error = game["error"].as_str().unwrap();
        assert!(reasons.iter().all(|r| error.contains(r)) && error.contains("genmove"), "{error}");
        assert!(game["moves"].as_u64().unwrap() >= 10, "five moves each at least: {game}");
        let sgf = std::fs::read_to_string(game["file"].as_str().unwrap()).unwrap();
        assert!(sgf.contains("+F]") && reasons.iter().all(|r| sgf.contains(r)), "{sgf}");
    }
    // One engine to check the match can start, then a fresh one a game.
    let started = logged(&log, "start");
    assert_eq!(started.len(), 3, "{started:?}");
    assert_eq!(logged(&log, how).len(), 2);
    assert!(started.iter().all(|&pid| gone(pid)), "engines left running: {started:?}");
}

#[test]
fn an_engine_silent_after_five_moves_forfeits_each_game_and_the_match_goes_on() {
    two_forfeits("silent", &["did not answer"]);
}

#[test]
fn an_engine_that_crashes_forfeits_each_game_and_the_match_goes_on() {
    two_forfeits("crash", &["stopped answering", "it exited with status 3"]);
}

#[test]
fn an_engine_killed_by_a_signal_forfeits_with_the_signal_named() {
    two_forfeits("segfault", &["stopped answering", "it was killed by signal 11 (SIGSEGV)"]);
}

#[test]
fn a_silent_engine_dies_with_the_process_group_it_started() {
    // The engine behind a shell wrapper that does not `exec` it: killing
    // the wrapper alone left it running.
    let dir = tempfile::tempdir().unwrap();
    let (engine, log) = engine(dir.path(), 0, "silent");
    let wrapper = dir.path().join("wrapper.sh");
    std::fs::write(&wrapper, format!("{engine}\n")).unwrap();
    let output = finish(start_match(
        &format!("sh {}", wrapper.display()),
        &dir.path().join("match"),
        &["--games", "1", "--gtp-timeout", "1"],
    ));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["forfeits"], serde_json::json!([0, 1]), "{summary}");
    let silent = logged(&log, "silent");
    assert_eq!(silent.len(), 1);
    wait_for("the silent engine killed", Duration::from_secs(30), || gone(silent[0]));
}

#[test]
fn engines_die_with_a_match_killed_by_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, log) = engine(dir.path(), 0, "silent");
    let mut child = start_match(&engine, &dir.path().join("match"), &["--games", "1", "--gtp-timeout", "600"]);
    // The match waits on the engine's first genmove, for ten minutes.
    wait_for("the engine asked for a move", Duration::from_secs(120), || !logged(&log, "silent").is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
    let silent = logged(&log, "silent")[0];
    wait_for("the engine killed with the match", Duration::from_secs(30), || gone(silent));
}

/// Ctrl-C, `kill` or a closed terminal stop a match as the signal would,
/// and every engine dies with it: the engine behind a shell wrapper, busy
/// thinking (deaf to its input), once outlived the match, the kernel
/// killing only the wrapper.
#[test]
fn engines_behind_a_wrapper_die_with_a_match_stopped_by_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let (engine, log) = engine(dir.path(), 0, "silent");
        let wrapper = dir.path().join("wrapper.sh");
        std::fs::write(&wrapper, format!("{engine}\n")).unwrap();
        let engine = format!("sh {}", wrapper.display());
        let mut child = start_match(&engine, &dir.path().join("match"), &["--games", "1", "--gtp-timeout", "600"]);
        wait_for("the engine asked for a move", Duration::from_secs(120), || !logged(&log, "silent").is_empty());
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "stopped as the signal stops a process: {status:?}");
        let silent = logged(&log, "silent")[0];
        wait_for("the engine killed with the match", Duration::from_secs(30), || gone(silent));
    }
}

#[test]
fn an_engine_silent_from_the_start_stops_the_match_before_its_games() {
    use go_train::eval::arena::{run_match, GameConfig, MatchConfig, PlayerSpec};
    use go_train::gtp::GtpTimeouts;
    let dir = tempfile::tempdir().unwrap();
    let silent = dir.path().join("silent.py");
    // Silent from its first command: `boardsize` gets no answer.
    std::fs::write(&silent, "import time\ntime.sleep(3600)\n").unwrap();
    let config = MatchConfig {
        a: PlayerSpec::parse("random").unwrap(),
        b: PlayerSpec::parse(&format!("python3 {}", silent.display())).unwrap(),
        games: 2,
        game: GameConfig { size: 9, komi: 7.5, max_moves: 243, ownership_playouts: 8 },
        parallel: 1,
        out: dir.path().join("match"),
        seed: 1,
        cross_check: None,
        resume: false,
        force: false,
        // A game's setup gets its own, longer, wait: here one second.
        gtp_timeouts: GtpTimeouts { command: Duration::from_secs(1), startup: Duration::from_secs(1) },
    };
    let progress = go_train::progress::Progress::hidden();
    let error = run_match(&config, &candle_core::Device::Cpu, &progress).expect_err("the match cannot start");
    let message = format!("{error:#}");
    assert!(message.contains("player B") && message.contains("did not answer `boardsize 9` within 1 s"), "{message}");
    assert!(!dir.path().join("match/game-0000.sgf").exists());
    // Nor can one that answers nothing but nonsense, without end.
    let config = MatchConfig { b: PlayerSpec::parse("yes").unwrap(), ..config };
    let error = run_match(&config, &candle_core::Device::Cpu, &progress).expect_err("the match cannot start");
    let message = format!("{error:#}");
    assert!(message.contains("player B") && message.contains("boardsize 9"), "{message}");
    assert!(!dir.path().join("match/game-0000.sgf").exists());
}

/// The lines of a match's games.jsonl.
fn games_logged(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("games.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A resignation is no move (it was counted as one), and a cross-check
/// engine's count that is no result is a failed cross-check (it was
/// counted as a disagreement).
#[test]
fn a_resignation_is_no_move_and_an_unreadable_count_is_no_disagreement() {
    let dir = tempfile::tempdir().unwrap();
    let (resigner, checker) = (dir.path().join("resigner"), dir.path().join("checker"));
    std::fs::create_dir(&resigner).unwrap();
    std::fs::create_dir(&checker).unwrap();
    let (resigns, _) = engine(&resigner, 2, "resign");
    let out = dir.path().join("resigned");
    let output = finish(start_match(&resigns, &out, &["--games", "2"]));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for game in games_logged(&out) {
        assert_eq!(game["reason"], "resignation", "{game}");
        let sgf = std::fs::read_to_string(game["file"].as_str().unwrap()).unwrap();
        let played = sgf.matches(";B[").count() + sgf.matches(";W[").count();
        assert_eq!(game["moves"], played as u64, "{game}: {sgf}");
    }

    let (passes, _) = engine(&resigner, usize::MAX, "never");
    let (garbage, _) = engine(&checker, usize::MAX, "garbage");
    let out = dir.path().join("counted");
    let output = finish(start_match(&passes, &out, &["--games", "1", "--cross-check", &garbage]));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let game = &games_logged(&out)[0];
    assert!(game["reason"] == "passes" || game["reason"] == "move_limit", "{game}");
    assert!(game["gnugo_agrees"].is_null() && game["gnugo_score"].is_null(), "{game}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a result"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A cross-check engine that cannot start, or cannot count, stops the
/// match before its first game: it was found game by game, and the whole
/// match played on with no comparison and a status of 0.
#[test]
fn a_cross_check_engine_that_cannot_start_or_count_stops_the_match_before_its_games() {
    let dir = tempfile::tempdir().unwrap();
    let (player, checker) = (dir.path().join("player"), dir.path().join("checker"));
    std::fs::create_dir(&player).unwrap();
    std::fs::create_dir(&checker).unwrap();
    let (passes, _) = engine(&player, usize::MAX, "never");
    let (cannot_count, _) = engine(&checker, usize::MAX, "nocount");
    let missing = dir.path().join("no-such-gnugo").display().to_string();
    for (k, (check, says)) in
        [(missing.as_str(), "no-such-gnugo"), (&cannot_count, "does not know `final_score`")].into_iter().enumerate()
    {
        let out = dir.path().join(format!("match-{k}"));
        let output = finish(start_match(&passes, &out, &["--games", "2", "--cross-check", check]));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{check}: {stderr}");
        assert!(stderr.contains("--cross-check") && stderr.contains(says), "{check}: {stderr}");
        assert!(!out.exists(), "{check}: the match's folder was left, empty");
    }
}
