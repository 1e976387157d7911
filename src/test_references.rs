//! Whether the references go-train's tests check against are at hand (the
//! real game records and each collection of them, GnuGo, sgfmill, a C++
//! compiler) and what a test does without one: it skips, printing on stderr
//! what is missing and how to get it, or, with `GO_TRAIN_REQUIRE_DATA=1`
//! (CI sets it), fails saying the same. So a green run on a machine without
//! the data says what it did not check, and CI cannot pass by checking
//! nothing. For the unit and the integration tests alike, hence public
//! behind the `testkit` feature, as [`crate::dataset::testkit`].

use std::ffi::OsString;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Set to 1, a missing reference fails the test rather than skipping it.
pub const REQUIRE: &str = "GO_TRAIN_REQUIRE_DATA";
/// The folder of the game collections (default `../shared/datasets`
/// beside the checkout).
pub const DATASETS: &str = "GO_TRAIN_DATASETS";
/// The GnuGo program (default `/usr/games/gnugo`, else `gnugo` on PATH).
pub const GNUGO: &str = "GO_TRAIN_GNUGO";

const GET_DATASETS: &str = "put the collections docs/guide/datasets.md lists in ../shared/datasets beside \
                            the checkout, or set GO_TRAIN_DATASETS to their folder";

/// Environment variables by name: the process's, or a unit test's own, so
/// that the decisions are tested without changing the process's environment.
type Vars<'a> = &'a dyn Fn(&str) -> Option<OsString>;

fn process_vars(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The value of the variable `name`, unless unset or empty (as a shell's
/// `VAR= cargo test` leaves it).
fn set(vars: Vars, name: &str) -> Option<OsString> {
    vars(name).filter(|value| !value.is_empty())
}

/// A reference that is not at hand.
#[derive(Debug, PartialEq, Eq)]
struct Missing {
    /// What is missing, where it was looked for.
    what: String,
    /// How to get it.
    how: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is missing ({})", self.what, self.how)
    }
}

/// What a test does about a reference.
#[derive(Debug, PartialEq, Eq)]
enum Verdict<T> {
    /// The reference is there: the test runs with it.
    Run(T),
    /// It is not: the test passes without checking, printing this line.
    Skip(String),
    /// It is not and must be, or `GO_TRAIN_REQUIRE_DATA` is not understood:
    /// the test fails with this message.
    Fail(String),
}

fn verdict<T>(found: Result<T, Missing>, vars: Vars) -> Verdict<T> {
    let required = match set(vars, REQUIRE) {
        None => false,
        Some(v) if v == "0" => false,
        Some(v) if v == "1" => true,
        // A typo must not turn CI's failures back into skips.
        Some(v) => {
            return Verdict::Fail(format!("{REQUIRE} is 1 (a missing reference fails) or 0 (it skips), not {v:?}"))
        }
    };
    match found {
        Ok(found) => Verdict::Run(found),
        Err(missing) if required => Verdict::Fail(format!("{missing}; {REQUIRE}=1 makes that a failure")),
        Err(missing) => Verdict::Skip(format!("SKIPPED: {missing}")),
    }
}

/// The reference for the running test, `None` when it skips. (Failures
/// point at the test's line, hence `track_caller` down to here.)
#[track_caller]
fn decide<T>(found: Result<T, Missing>) -> Option<T> {
    // Straight to stderr: the test harness keeps what `eprintln!` prints
    // in a passing test to itself, and a skip must show.
    decide_with(found, &process_vars, &mut std::io::stderr().lock())
}

/// Runs, skips (writing the line and the running test's name to `out`) or
/// fails, as `vars` say.
#[track_caller]
fn decide_with<T>(found: Result<T, Missing>, vars: Vars, out: &mut dyn Write) -> Option<T> {
    match verdict(found, vars) {
        Verdict::Run(found) => Some(found),
        Verdict::Skip(line) => {
            let test = std::thread::current().name().filter(|&name| name != "main").map(|name| format!(" [{name}]"));
            let _ = writeln!(out, "{line}{}", test.unwrap_or_default());
            None
        }
        Verdict::Fail(message) => panic!("{message}"),
    }
}

/// The folder of the game collections: `GO_TRAIN_DATASETS`, else
/// `../shared/datasets` beside the checkout.
fn datasets_dir(vars: Vars) -> PathBuf {
    set(vars, DATASETS)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets"))
}

/// The folder of the game collections, if it holds every one of `names`.
fn find_collections(vars: Vars, names: &[&str]) -> Result<PathBuf, Missing> {
    let root = datasets_dir(vars);
    let missing = |what: String| Missing { what, how: GET_DATASETS.into() };
    if !root.is_dir() {
        let named_by = if set(vars, DATASETS).is_some() { DATASETS } else { "the default" };
        return Err(missing(format!("the folder of game records {} ({named_by})", root.display())));
    }
    match names.iter().find(|name| !root.join(name).is_dir()) {
        Some(absent) => Err(missing(format!("the collection {absent} in {}", root.display()))),
        None => Ok(root),
    }
}

/// Whether `program args...` runs and succeeds.
fn runs(program: &str, args: &[&str]) -> bool {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    command.status().is_ok_and(|status| status.success())
}

/// The GnuGo program that `works`: the one `GO_TRAIN_GNUGO` names (and no
/// other, so that a wrong name is not hidden by another GnuGo), else
/// `/usr/games/gnugo`, else `gnugo` on PATH.
fn find_gnugo(vars: Vars, works: &dyn Fn(&str) -> bool) -> Result<String, Missing> {
    let how = "apt-get install -y gnugo, or set GO_TRAIN_GNUGO to the program".to_string();
    if let Some(named) = set(vars, GNUGO) {
        let named = named.to_string_lossy().into_owned();
        return match works(&named) {
            true => Ok(named),
            false => Err(Missing { what: format!("GnuGo at {named} ({GNUGO})"), how }),
        };
    }
    let found = ["/usr/games/gnugo", "gnugo"].into_iter().find(|&program| works(program));
    found.map(String::from).ok_or(Missing { what: "GnuGo (/usr/games/gnugo, or gnugo on PATH)".into(), how })
}

/// `program` if `program args...` succeeds.
fn find_program(program: &'static str, args: &[&str], what: &str, how: &str) -> Result<&'static str, Missing> {
    match runs(program, args) {
        true => Ok(program),
        false => Err(Missing { what: what.into(), how: how.into() }),
    }
}

/// The folder of the game collections if it holds each of `names`, or
/// `None` (the test skips) after saying which is missing.
#[track_caller]
pub fn datasets_holding(names: &[&str]) -> Option<PathBuf> {
    decide(find_collections(&process_vars, names))
}

/// The folder of the game collection `name` (`kgs-6d`, `tygem-9d-2010-2011`,
/// `gnugo-regression`, `pro-1941-1997`, `kombilo-tests`), or `None`.
#[track_caller]
pub fn collection(name: &str) -> Option<PathBuf> {
    Some(datasets_holding(&[name])?.join(name))
}

/// Every `*.sgf` file of the collection `name`, sorted, or `None`.
#[track_caller]
pub fn sgf_files(name: &str) -> Option<Vec<PathBuf>> {
    let root = collection(name)?;
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

/// The GnuGo program to run, or `None`.
#[track_caller]
pub fn gnugo() -> Option<String> {
    decide(find_gnugo(&process_vars, &|program| runs(program, &["--version"])))
}

/// `python3`, when it imports sgfmill, or `None`.
#[track_caller]
pub fn sgfmill() -> Option<&'static str> {
    decide(find_program("python3", &["-c", "import sgfmill"], "python3 with sgfmill", "pip install sgfmill"))
}

/// The C++ compiler `c++`, or `None`.
#[track_caller]
pub fn cxx_compiler() -> Option<&'static str> {
    decide(find_program("c++", &["--version"], "a C++ compiler (c++)", "apt-get install -y g++"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Variables from a list, none other set.
    fn vars<'a>(set: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| set.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v))
    }

    fn gone() -> Result<u8, Missing> {
        Err(Missing { what: "GnuGo".into(), how: "apt-get install -y gnugo".into() })
    }

    #[test]
    fn a_missing_reference_skips_unless_required() {
        for unset in [&[][..], &[(REQUIRE, "")], &[(REQUIRE, "0")]] {
            assert_eq!(
                verdict(gone(), &vars(unset)),
                Verdict::Skip("SKIPPED: GnuGo is missing (apt-get install -y gnugo)".into())
            );
        }
        let Verdict::Fail(message) = verdict(gone(), &vars(&[(REQUIRE, "1")])) else { panic!("required") };
        assert_eq!(
            message,
            "GnuGo is missing (apt-get install -y gnugo); GO_TRAIN_REQUIRE_DATA=1 makes that a failure"
        );
    }

    #[test]
    fn a_reference_at_hand_runs_and_a_misspelt_requirement_fails() {
        assert_eq!(verdict(Ok(7), &vars(&[(REQUIRE, "1")])), Verdict::Run(7));
        assert_eq!(verdict(Ok(7), &vars(&[])), Verdict::Run(7));
        for typo in ["yes", "true", " 1"] {
            let Verdict::Fail(message) = verdict(Ok(7), &vars(&[(REQUIRE, typo)])) else { panic!("{typo}") };
            assert!(message.starts_with("GO_TRAIN_REQUIRE_DATA is 1") && message.contains(typo), "{message}");
        }
    }

    #[test]
    #[should_panic(expected = "GnuGo is missing (apt-get install -y gnugo); GO_TRAIN_REQUIRE_DATA=1 makes that")]
    fn a_required_reference_fails_the_test() {
        decide_with(gone(), &vars(&[(REQUIRE, "1")]), &mut Vec::new());
    }

    #[test]
    fn a_skip_says_so_naming_the_test_and_gives_it_nothing() {
        let mut said = Vec::new();
        assert_eq!(decide_with(gone(), &vars(&[]), &mut said), None);
        let test = "test_references::tests::a_skip_says_so_naming_the_test_and_gives_it_nothing";
        let line = format!("SKIPPED: GnuGo is missing (apt-get install -y gnugo) [{test}]\n");
        assert_eq!(String::from_utf8(said).unwrap(), line);
        let mut said = Vec::new();
        assert_eq!(decide_with(Ok(3), &vars(&[(REQUIRE, "1")]), &mut said), Some(3));
        assert!(said.is_empty());
    }

    #[test]
    fn the_datasets_folder_and_each_collection_must_be_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("kgs-6d")).unwrap();
        let root = dir.path().to_str().unwrap();
        let set = [(DATASETS, root)];
        assert_eq!(find_collections(&vars(&set), &["kgs-6d"]), Ok(dir.path().to_path_buf()));
        let absent = find_collections(&vars(&set), &["kgs-6d", "tygem-9d-2010-2011"]).unwrap_err();
        assert_eq!(absent.what, format!("the collection tygem-9d-2010-2011 in {root}"));
        assert!(absent.how.contains("GO_TRAIN_DATASETS"), "{absent}");

        let nowhere = find_collections(&vars(&[(DATASETS, "/nonexistent")]), &["kgs-6d"]).unwrap_err();
        assert_eq!(nowhere.what, "the folder of game records /nonexistent (GO_TRAIN_DATASETS)");
        let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets");
        assert_eq!(datasets_dir(&vars(&[])), default);
        assert_eq!(datasets_dir(&vars(&[(DATASETS, "")])), default, "empty is unset");
    }

    #[test]
    fn gnugo_is_the_named_program_or_none() {
        let installed = |program: &str| program == "/usr/games/gnugo";
        assert_eq!(find_gnugo(&vars(&[]), &installed), Ok("/usr/games/gnugo".to_string()));
        let named = vars(&[(GNUGO, "/opt/gnugo")]);
        let wrong = find_gnugo(&named, &installed).unwrap_err();
        assert_eq!(wrong.what, "GnuGo at /opt/gnugo (GO_TRAIN_GNUGO)");
        assert_eq!(find_gnugo(&named, &|program| program == "/opt/gnugo"), Ok("/opt/gnugo".to_string()));
        let on_path = find_gnugo(&vars(&[]), &|program| program == "gnugo");
        assert_eq!(on_path, Ok("gnugo".to_string()));
        assert_eq!(find_gnugo(&vars(&[(GNUGO, "")]), &installed), Ok("/usr/games/gnugo".to_string()));
        let none = find_gnugo(&vars(&[]), &|_| false).unwrap_err();
        assert!(none.how.starts_with("apt-get install -y gnugo"), "{none}");
    }
}
