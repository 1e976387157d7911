//! Shared helpers of the integration tests: the go-train program, and the
//! references they check against (the real game records, GnuGo, sgfmill, a
//! C++ compiler), each `None` after a line saying what is missing, or a
//! failure with `GO_TRAIN_REQUIRE_DATA=1` (`go_train::test_references`).
// Each test file uses some of these: what one leaves unused is no fault.
#![allow(dead_code, unused_imports)]

use std::process::{Command, Output, Stdio};

pub use go_train::test_references::{collection, cxx_compiler, datasets_holding, gnugo, sgf_files, sgfmill};

/// The go-train program cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_go-train");

/// `go-train args...`, to add to and run.
pub fn go_train(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    command
}

/// `go-train args...` with its stdin, stdout and stderr piped, to spawn
/// and talk to.
pub fn piped(args: &[&str]) -> Command {
    let mut command = go_train(args);
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    command
}

/// Runs `go-train args...` to its end, whatever its exit status.
pub fn run(args: &[&str]) -> Output {
    go_train(args).output().expect("go-train runs")
}

/// Runs `go-train args...` and returns its output, failing the test with
/// its stderr unless it succeeds.
pub fn run_ok(args: &[&str]) -> Output {
    let out = run(args);
    assert!(out.status.success(), "go-train {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// What a run printed, stdout then stderr.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `p` as the `&str` an argument list takes (temporary paths are UTF-8).
pub fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// The `--device` the tests train and evaluate on: `GO_TRAIN_TEST_DEVICE`
/// (`cuda` on a GPU machine, with a CUDA build), else `cpu`.
pub fn test_device() -> String {
    std::env::var("GO_TRAIN_TEST_DEVICE").unwrap_or_else(|_| "cpu".into())
}

/// Runs `go-train args...`, which must fail; what it printed.
pub fn fails(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "go-train {args:?} should have failed:\n{}", text(&out));
    text(&out)
}

/// The commit the tested source is checked out at (`git rev-parse HEAD`),
/// which the build names (`build.rs`); `None`, after saying so, outside a
/// git checkout or without git.
pub fn checkout_commit() -> Option<String> {
    let out = Command::new("git").current_dir(env!("CARGO_MANIFEST_DIR")).args(["rev-parse", "HEAD"]).output();
    match out {
        Ok(out) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        _ => {
            eprintln!("skipped: the source is not a git checkout, so its build names no commit");
            None
        }
    }
}
