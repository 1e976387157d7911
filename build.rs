//! Names the commit go-train is built from, so that a result can name the
//! program that made it: `go-train --version` and the analysis engine's
//! `query_version` show it.
//!
//! Sets `GO_TRAIN_COMMIT` (the full hash, or empty when unknown) and
//! `GO_TRAIN_LONG_VERSION` ("0.1.0 (commit 29092df12ab3)", with
//! ", modified" when the files built differ from the commit's). The hash
//! comes from git in a checkout, or from the `.cargo_vcs_info.json` that
//! `cargo package` writes into a published crate.

use std::path::Path;
use std::process::Command;

/// What the binary is built from, for "modified": the rest of the tree
/// (docs, scripts) does not change the program.
const BUILT_FROM: [&str; 5] = ["src", "nets", "build.rs", "Cargo.toml", "Cargo.lock"];

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&manifest_dir);
    let (commit, modified) = match git(dir, &["rev-parse", "HEAD"]) {
        Some(commit) => {
            watch_head(dir);
            for path in BUILT_FROM {
                println!("cargo:rerun-if-changed={path}");
            }
            let mut diff = Command::new("git");
            diff.current_dir(dir).args(["diff", "--quiet", "HEAD", "--"]).args(BUILT_FROM);
            // Exit status 1 is "differs"; anything else (no git) says nothing.
            let modified = diff.status().ok().and_then(|s| s.code()) == Some(1);
            (commit, modified)
        }
        None => (published_commit(dir).unwrap_or_default(), false),
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let long_version = match (commit.get(..12), modified) {
        (Some(short), false) => format!("{version} (commit {short})"),
        (Some(short), true) => format!("{version} (commit {short}, modified)"),
        (None, _) => version,
    };
    println!("cargo:rustc-env=GO_TRAIN_COMMIT={commit}");
    println!("cargo:rustc-env=GO_TRAIN_LONG_VERSION={long_version}");
}

/// What `git args` prints in `dir`, trimmed; `None` outside a checkout or
/// without git.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").current_dir(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Runs this script again when HEAD moves: a commit, a checkout, a gc that
/// packs the branch's ref. Not the index, which `git status` rewrites, and
/// every rewrite would rebuild the crate.
fn watch_head(dir: &Path) {
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        // Only what exists: cargo runs the script on every build for a
        // path that does not (and `packed-refs` often does not).
        let path = git(dir, &["rev-parse", "--git-path", &name]).map(|p| dir.join(p));
        if let Some(path) = path.filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// The hash `cargo package` recorded, as `"sha1": "…"` in
/// `.cargo_vcs_info.json`.
fn published_commit(dir: &Path) -> Option<String> {
    let info = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let rest = &info[info.find("\"sha1\"")? + "\"sha1\"".len()..];
    let hash: String = rest.trim_start_matches([':', ' ', '"']).chars().take_while(char::is_ascii_hexdigit).collect();
    (hash.len() == 40).then_some(hash)
}
