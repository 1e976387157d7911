//! Shared helpers of the integration tests: where the real game records and
//! GnuGo are, and skipping (loudly) when they are not.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The folder of real game records: `GO_TRAIN_DATASETS`, else
/// `../shared/datasets` beside the checkout.
pub fn datasets() -> Option<PathBuf> {
    let dir = std::env::var_os("GO_TRAIN_DATASETS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("SKIPPED: no real game records at {} (set GO_TRAIN_DATASETS)", dir.display());
        None
    }
}

/// Every `*.sgf` file under `datasets/<collection>`, sorted.
pub fn sgf_files(collection: &str) -> Option<Vec<PathBuf>> {
    let root = datasets()?.join(collection);
    let mut files: Vec<PathBuf> = walkdir::WalkDir::new(&root)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|x| x.eq_ignore_ascii_case("sgf")))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no SGF files under {}", root.display());
    Some(files)
}

/// The GnuGo binary: `GO_TRAIN_GNUGO`, `/usr/games/gnugo` or `gnugo` on PATH.
pub fn gnugo() -> Option<String> {
    let candidates = [std::env::var("GO_TRAIN_GNUGO").ok(), Some("/usr/games/gnugo".into()), Some("gnugo".into())];
    for c in candidates.into_iter().flatten() {
        let ok = std::process::Command::new(&c).arg("--version").output().is_ok_and(|o| o.status.success());
        if ok {
            return Some(c);
        }
    }
    eprintln!("SKIPPED: gnugo not found (apt-get install -y gnugo, or set GO_TRAIN_GNUGO)");
    None
}

/// The `--device` the tests train and evaluate on: `GO_TRAIN_TEST_DEVICE`
/// (`cuda` on a GPU machine, with a CUDA build), else `cpu`.
pub fn test_device() -> String {
    std::env::var("GO_TRAIN_TEST_DEVICE").unwrap_or_else(|_| "cpu".into())
}

/// Runs `go-train args...`.
pub fn go_train(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_go-train")).args(args).output().unwrap()
}

/// What a run printed, stdout then stderr.
pub fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Runs `go-train args...`, which must succeed.
pub fn ok(args: &[&str]) -> std::process::Output {
    let out = go_train(args);
    assert!(out.status.success(), "go-train {args:?} failed:\n{}", text(&out));
    out
}

/// Runs `go-train args...`, which must fail; what it printed.
pub fn fails(args: &[&str]) -> String {
    let out = go_train(args);
    assert!(!out.status.success(), "go-train {args:?} should have failed:\n{}", text(&out));
    text(&out)
}

/// A temporary path as text.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}
