//! One search configuration everywhere: the nets built into the program
//! wherever it runs, the same search whichever nets are named, and every
//! numeric option refused by name and range when out of it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::BIN;

/// `go-train` (the program at `bin`) run in `folder` on `stdin`, with
/// `GO_TRAIN_NETS` set to `nets` or unset.
fn run_in(bin: &Path, folder: &Path, nets: Option<&Path>, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(bin);
    command.args(args).current_dir(folder).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    match nets {
        Some(nets) => command.env("GO_TRAIN_NETS", nets),
        None => command.env_remove("GO_TRAIN_NETS"),
    };
    let mut child = command.spawn().expect("start go-train");
    // A command refused up front may exit before reading its input.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

/// The checkout's `nets/`.
fn checkout_nets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nets")
}

/// The settings line `go-train gtp` starts with.
fn settings_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr.lines().find_map(|l| l.strip_prefix("go-train gtp: ")).unwrap_or_else(|| panic!("{stderr}")).to_string()
}

/// A copy of the program in a folder of its own, run from another folder
/// with no `GO_TRAIN_NETS` (as after `cargo install`, or from a GUI),
/// plays with the shipped nets: its raw net outputs, the policy, value,
/// playout and residual nets, are those of the checkout's `nets/` files.
#[test]
fn a_copied_program_plays_the_shipped_nets_from_any_folder() {
    let installed = tempfile::tempdir().unwrap();
    let bin = installed.path().join("go-train");
    if std::fs::hard_link(BIN, &bin).is_err() {
        std::fs::copy(BIN, &bin).unwrap();
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let nets = checkout_nets();
    // The residual policy at the root and the value net; then the policy
    // net at the root and the playout net's own move.
    let sessions: [(&[&str], &str); 2] = [
        (&["gtp", "--threads", "1"], "play b q16\nkata-raw-nn 0\nquit\n"),
        (
            &["gtp", "--threads", "1", "--engine", "playout", "--root-policy", "none"],
            "play b q16\nkata-raw-nn 0\ngenmove w\nquit\n",
        ),
    ];
    for (args, script) in sessions {
        let built_in = run_in(&bin, elsewhere.path(), None, args, script);
        let files = run_in(Path::new(BIN), checkout, Some(&nets), args, script);
        let (line, file_line) = (settings_line(&built_in), settings_line(&files));
        let answers = String::from_utf8(built_in.stdout).unwrap();
        assert!(answers.contains("policy\n") && answers.contains("whiteWin"), "{answers}");
        assert_eq!(answers, String::from_utf8(files.stdout).unwrap(), "{args:?}");
        for file in ["policy", "value", "playout"] {
            assert!(line.contains(&format!("{file}=built-in {file}.safetensors")), "{line}");
            let path = nets.join(format!("{file}.safetensors"));
            assert!(file_line.contains(&format!("{file}={}", path.display())), "{file_line}");
        }
        assert_eq!(line.contains("root-policy=built-in resnet-policy.safetensors"), !args.contains(&"none"), "{line}");
    }
    // An empty GO_TRAIN_NETS still means no shipped nets.
    let empty = run_in(&bin, elsewhere.path(), Some(Path::new("")), &["gtp", "--engine", "policy"], "quit\n");
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("needs a net: give --policy"));
    // A folder that is not there is refused: a misspelt one played on
    // with no nets at all.
    let missing = elsewhere.path().join("nest");
    let out = run_in(&bin, elsewhere.path(), Some(&missing), &["gtp"], "genmove b\nquit\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains(&format!("GO_TRAIN_NETS={}: no such folder", missing.display())));
    assert!(out.stdout.is_empty(), "{stderr}");
}

/// Naming a net changes that net alone: the search stays the tuned one.
/// Naming an engine keeps the shipped nets.
#[test]
fn naming_a_net_or_an_engine_keeps_the_search_and_the_other_nets() {
    let folder = tempfile::tempdir().unwrap();
    let value = checkout_nets().join("value.safetensors");
    let gtp = |args: &[&str]| run_in(Path::new(BIN), folder.path(), None, args, "gomill-describe_engine\nquit\n");
    let plain = gtp(&["gtp"]);
    let named = gtp(&["gtp", "--value", value.to_str().unwrap()]);
    let (plain_line, named_line) = (settings_line(&plain), settings_line(&named));
    assert!(plain_line.starts_with("mcts, preset tuned: iterations=800 "), "{plain_line}");
    assert_eq!(
        named_line.replace(&format!("value={}", value.display()), "value=built-in value.safetensors"),
        plain_line
    );
    // gomill-describe_engine answers the same line.
    let described = String::from_utf8(named.stdout).unwrap();
    assert_eq!(described, format!("= go-train {}\n{named_line}\n\n= \n\n", env!("GO_TRAIN_LONG_VERSION")));

    let policy = settings_line(&gtp(&["gtp", "--engine", "policy"]));
    assert!(policy.starts_with("policy, preset tuned:") && policy.contains("policy=built-in policy.safetensors"));
    let seed = settings_line(&gtp(&["gtp", "--preset", "seed", "--iterations", "300"]));
    assert!(seed.starts_with(
        "mcts, preset seed: iterations=300 expand=2 expand-replies=2 root-expand=2 rollout-depth=5 c=1.4"
    ));
}

/// A stopped match of the tuned search with the shipped nets, recorded
/// when those nets were files in `nets/`, still resumes as the same match
/// from the built-in nets, under either spelling of the agent; another
/// search is another match.
#[test]
fn a_recorded_match_of_the_shipped_search_resumes_from_the_built_in_nets() {
    let Some(gnugo) = common::gnugo() else { return };
    let record = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/matches/rootresnet-vs-gnugo10-s32");
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&record).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
    let resume = |a: &str| {
        let args = ["eval", "--match", a, &format!("{gnugo} --mode gtp --level 10"), "--games", "40", "--seed", "32"];
        let out_dir = copy.path().to_str().unwrap();
        run_in(Path::new(BIN), checkout, None, &[&args[..], &["--resume", "--json", "--out", out_dir]].concat(), "")
    };
    let long = "mcts:preset=seed,selection=puct,rollout=0,iterations=800,tactics=on,mix=1,\
                root-policy=nets/resnet-policy.safetensors";
    for a in ["mcts", long] {
        let out = resume(a);
        assert!(out.status.success(), "{a}: {}", String::from_utf8_lossy(&out.stderr));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((summary["games"].as_u64(), summary["a_wins"].as_u64()), (Some(40), Some(30)), "{a}");
    }
    let other = resume("mcts:iterations=400");
    assert!(String::from_utf8_lossy(&other.stderr).contains("holds another match"));
}

/// Every numeric option of the play-side commands refuses a value outside
/// its range (NaN and infinities too) before any net is loaded, naming the
/// option and what to give; search settings alike as flags, as agent
/// spec keys and as keys of a settings file.
#[test]
fn bad_numbers_are_refused_with_the_option_and_its_range() {
    let folder = tempfile::tempdir().unwrap();
    let config = folder.path().join("search.toml");
    std::fs::write(&config, "iterations = 400\nmix = 2.5\n").unwrap();
    let config = config.to_str().unwrap();
    let config_spec = format!("mcts:config={config}");
    let game = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/matches/rootresnet-vs-gnugo10-s32/game-0000.sgf");
    let game = game.to_str().unwrap();
    let count = |min: u64, max: u64| format!("give a whole number from {min} to {max}");
    let all_iterations = count(1, u32::MAX as u64);
    let weight = "give a number from 0 to 1".to_string();
    let cases: Vec<(Vec<&str>, &str, String)> = vec![
        (vec!["gtp", "--iterations", "0"], "--iterations", all_iterations.clone()),
        (vec!["gtp", "--expand", "0"], "--expand", count(1, 362)),
        (vec!["gtp", "-k", "363"], "--expand", count(1, 362)),
        (vec!["gtp", "--expand-replies", "-2"], "--expand-replies", "give auto or a whole number from 1 to 362".into()),
        (vec!["gtp", "--rollout-depth", "1001"], "--rollout-depth", count(0, 1000)),
        (vec!["gtp", "--c", "-1"], "--c", "give auto or a number from 0 to 100".into()),
        (vec!["gtp", "--c", "inf"], "--c", "give auto or a number from 0 to 100".into()),
        (vec!["gtp", "--fpu", "NaN"], "--fpu", weight.clone()),
        (vec!["gtp", "--batch", "0"], "--batch", count(1, 4096)),
        (vec!["gtp", "--mix", "1.5"], "--mix", weight.clone()),
        (vec!["gtp", "--mix", "nan"], "--mix", weight.clone()),
        (vec!["gtp", "--mix-playouts", "0"], "--mix-playouts", count(1, 1000)),
        (vec!["gtp", "--score", "-0.5"], "--score", weight.clone()),
        (vec!["gtp", "--time", "0"], "--time", "give none or a number above 0, up to 1000000".into()),
        (vec!["gtp", "--time", "inf"], "--time", "give none or a number above 0, up to 1000000".into()),
        (vec!["gtp", "--seed=-1"], "--seed", "give a whole number from 0".into()),
        (vec!["gtp", "--size", "1"], "--size", count(2, 25)),
        (vec!["gtp", "--size", "26"], "--size", count(2, 25)),
        (vec!["gtp", "--komi", "nan"], "--komi", "give a number from -1000 to 1000".into()),
        (vec!["gtp", "--komi=-inf"], "--komi", "give a number from -1000 to 1000".into()),
        (vec!["gtp", "--temperature", "-1"], "--temperature", "give a number from 0 to 100".into()),
        (vec!["gtp", "--threads", "0"], "--threads", count(1, 4096)),
        (vec!["gtp", "--search-config", config], "mix = 2.5", weight.clone()),
        (vec!["analysis", "--iterations", "0"], "--iterations", all_iterations.clone()),
        (vec!["analysis", "--visits", "0"], "--iterations", all_iterations.clone()),
        (vec!["analysis", "--threads", "0"], "--threads", count(1, 4096)),
        (vec!["analysis", "--search-config", config], "mix = 2.5", weight.clone()),
        (vec!["eval", "--data", "x", "--batch", "0"], "--batch", count(1, 8192)),
        // Once accepted, and the evaluation died for want of memory.
        (vec!["eval", "--data", "x", "--batch", "100000"], "--batch", count(1, 8192)),
        (vec!["eval", "--data", "x", "--limit=-1"], "--limit", "give a whole number from 0".into()),
        (vec!["eval", "--data", "x", "--mix", "2"], "--mix", weight.clone()),
        (vec!["eval", "--data", "x", "--mix-playouts", "0"], "--mix-playouts", count(1, 1000)),
        (vec!["eval", "--data", "x", "--baseline-positions=-1"], "--baseline-positions", count(0, 100_000_000)),
        (vec!["eval", "--match", "random", "random", "--games", "0"], "--games", count(1, 1_000_000)),
        (vec!["eval", "--match", "random", "random", "--size", "30"], "--size", count(2, 25)),
        (
            vec!["eval", "--match", "random", "random", "--komi", "inf"],
            "--komi",
            "give a number from -1000 to 1000".into(),
        ),
        (vec!["eval", "--match", "random", "random", "--max-moves", "0"], "--max-moves", count(1, 1_000_000)),
        (vec!["eval", "--match", "random", "random", "--parallel", "0"], "--parallel", count(1, 4096)),
        (vec!["eval", "--match", "random", "random", "--seed", "x"], "--seed", "give a whole number from 0".into()),
        // A negative number given apart from its option is the option's
        // value, refused by its range, not an "unexpected argument".
        (vec!["eval", "--match", "random", "random", "--gtp-timeout", "-1"], "--gtp-timeout", "above 0".into()),
        (vec!["gtp", "--seed", "-1"], "--seed", "give a whole number from 0".into()),
        (vec!["raw-nn", game, "--move", "-3"], "--move", count(0, u32::MAX as u64)),
        (vec!["eval", "--match", "mcts:iterations=0", "random"], "iterations=0", all_iterations.clone()),
        (vec!["eval", "--match", "random", "mcts:mix=nan"], "mix=nan", weight.clone()),
        (vec!["eval", "--match", "mcts:time=-1", "random"], "time=-1", "give none or a number above 0".into()),
        (vec!["eval", "--match", "policy:temperature=inf", "random"], "temperature=inf", "from 0 to 100".into()),
        (vec!["eval", "--match", &config_spec, "random"], "mix = 2.5", weight.clone()),
        (vec!["review", game, "--index=-1"], "--index", count(0, u32::MAX as u64)),
        (vec!["review", game, "--swings", "1001"], "--swings", count(0, 1000)),
        (vec!["raw-nn", game, "--move=-3"], "--move", count(0, u32::MAX as u64)),
        (vec!["raw-nn", game, "--symmetry", "8"], "--symmetry", "give all or a whole number from 0 to 7".into()),
        (vec!["show", game, "--move", "1e3"], "--move", count(0, u32::MAX as u64)),
        (vec!["bench", "playouts", "--size", "1"], "--size", count(2, 25)),
        (vec!["bench", "playouts", "--seconds", "0"], "--seconds", "give a number above 0, up to 1000000".into()),
        (vec!["bench", "playouts", "--seconds", "nan"], "--seconds", "give a number above 0, up to 1000000".into()),
        (vec!["bench", "playouts", "--playouts", "0"], "--playouts", "give a whole number from 1".into()),
        (vec!["bench", "reader", "--data", "x", "--threads", "0"], "--threads", count(1, 4096)),
        (vec!["bench", "reader", "--data", "x", "--seconds", "-1"], "--seconds", "give a number above 0".into()),
        (vec!["bench", "prepare", "--threads", "0"], "--threads", count(1, 4096)),
        (vec!["bench", "train", "--batch", "100,0"], "--batch", count(1, 1 << 20)),
        (vec!["bench", "train", "--seconds", "inf"], "--seconds", "give a number above 0".into()),
        (vec!["bench", "train", "--lr", "0"], "--lr", "give a number above 0".into()),
        (vec!["bench", "search", "--every", "0"], "--every", count(1, 1000)),
    ];
    for (args, name, reason) in cases {
        let out = run_in(Path::new(BIN), folder.path(), None, &args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(name) && stderr.contains(&reason), "{args:?}: {stderr}");
        // Refused before anything was played, searched or written.
        assert!(out.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
    }
}
