//! Advisory locks that keep two go-train processes from writing one folder
//! at once: a training run's checkpoint folder, a dataset being prepared,
//! one part of a dataset prepared in parts. The kernel releases a lock when
//! its process ends, however it ends, so a killed run never leaves its
//! folder stuck.
//!
//! A lock is `flock(2)` (std's [`File::try_lock`]) on a file in the folder,
//! [`FOLDER_LOCK`] or one of its own (a part's), which stays there once
//! made: removing a lock file while it is held would let another process
//! lock a new file of the same name. An exclusive holder writes who it is
//! (pid, host, command line) into its file, for the error that refuses the
//! next one, and empties it when it lets go; shared holders write nothing,
//! and are named by the exclusive lock files of their own that they also
//! hold.
//!
//! Limits: the lock is advisory (other programs ignore it). On NFS, Linux
//! turns it into a whole-file POSIX lock that holds across machines when
//! the server supports locking (NFSv4, or v3 with lockd); a `nolock` or
//! `local_lock` mount keeps it within one machine. Where the filesystem
//! cannot lock at all (Lustre mounted without `flock`), go-train says so
//! and goes on unlocked.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The lock file of a folder.
pub const FOLDER_LOCK: &str = ".go-train.lock";

/// The first entry of `dir` (by name) other than its lock and the
/// temporary files a kill while writing leaves (`*.tmp`): what makes a
/// folder someone's. `None` for an empty folder, or one that cannot be read.
pub fn first_entry_of_another(dir: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?.flatten();
    entries
        .map(|e| e.file_name())
        .filter(|name| name != FOLDER_LOCK && !name.to_string_lossy().ends_with(".tmp"))
        .min()
        .map(|name| dir.join(name))
}

/// A lock held until dropped (or the process ends).
#[must_use = "the lock is released when dropped"]
#[derive(Debug)]
pub struct Lock {
    /// The open lock file; `None` where the filesystem cannot lock.
    file: Option<File>,
    /// Whether it is held alone (and names its holder).
    exclusive: bool,
    /// The folder, where this process made it ([`Lock::create_folder`]).
    made: Option<PathBuf>,
}

impl Drop for Lock {
    /// Empties the file before the lock goes, so that a folder its holder
    /// left holds the same bytes whichever process wrote it.
    fn drop(&mut self) {
        if let Some(dir) = &self.made {
            remove_if_only_locked(dir);
        }
        if let (Some(file), true) = (&self.file, self.exclusive) {
            let _ = file.set_len(0);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Exclusive,
    Shared,
}

impl Lock {
    /// Takes `dir`'s lock for this process alone, or refuses, naming the
    /// process that holds it.
    pub fn folder(dir: &Path) -> Result<Lock> {
        take(&dir.join(FOLDER_LOCK), dir, Mode::Exclusive)
    }

    /// Makes `dir` where it is missing, then takes its lock as
    /// [`Lock::folder`] does. A folder made here that holds nothing but its
    /// lock when the lock goes is removed: a run refused or failed before
    /// it wrote anything once left an empty folder in the way of the next.
    pub fn create_folder(dir: &Path, what: &str) -> Result<Lock> {
        let made = !dir.exists() && dir.symlink_metadata().is_err();
        crate::atomic::create_folder(dir, what)?;
        let mut lock = Lock::folder(dir)?;
        if made && lock.file.is_some() {
            lock.made = Some(dir.to_path_buf());
        }
        Ok(lock)
    }

    /// Takes `dir`'s lock together with other sharers (each holding a lock
    /// of its own for what it alone writes), refusing while one process
    /// holds it alone.
    pub fn folder_shared(dir: &Path) -> Result<Lock> {
        take(&dir.join(FOLDER_LOCK), dir, Mode::Shared)
    }

    /// Takes the lock file `name` in `dir` for this process alone: what
    /// one of the folder's sharers alone writes (a part of a dataset).
    pub fn own(dir: &Path, name: &str) -> Result<Lock> {
        take(&dir.join(name), dir, Mode::Exclusive)
    }
}

fn take(path: &Path, dir: &Path, mode: Mode) -> Result<Lock> {
    if dir.exists() && !dir.is_dir() {
        bail!("{}: a file, not a folder", dir.display());
    }
    if !dir.is_dir() {
        bail!("{}: no such folder", dir.display());
    }
    let mut file = open(path)?;
    let taken = match mode {
        Mode::Exclusive => file.try_lock(),
        Mode::Shared => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => {
            if mode == Mode::Exclusive {
                file.set_len(0)
                    .and_then(|()| file.write_all(holder().as_bytes()))
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(Lock { file: Some(file), exclusive: mode == Mode::Exclusive, made: None })
        }
        Err(TryLockError::WouldBlock) => bail!(
            "{} is in use by {}: two processes writing one folder would mix their files; wait for it to end, or \
             stop it (its lock, {}, goes when it ends)",
            dir.display(),
            holders(path, dir),
            path.display()
        ),
        Err(TryLockError::Error(e)) if cannot_lock(&e) => {
            crate::say!(
                "warning: {}: this filesystem cannot lock files ({e}): nothing keeps another go-train from writing \
                 here at the same time",
                dir.display()
            );
            Ok(Lock { file: None, exclusive: false, made: None })
        }
        Err(TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

fn open(path: &Path) -> Result<File> {
    // Read and write: NFS grants a whole-file write lock only to a file
    // open for writing.
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))
}

/// Whether a lock failed because the filesystem has no locks, rather than
/// because another process holds it.
fn cannot_lock(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || matches!(e.raw_os_error(), Some(libc::ENOLCK | libc::ENOSYS | libc::EOPNOTSUPP))
}

/// Removes `dir` if it holds only its lock file. Called while the lock is
/// still held, so no other go-train is writing there.
fn remove_if_only_locked(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let names: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    if names.iter().all(|n| n == FOLDER_LOCK) && std::fs::remove_file(dir.join(FOLDER_LOCK)).is_ok() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Who this process is, as its lock file keeps it.
fn holder() -> String {
    let command: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    format!("pid {} on {}: {}", std::process::id(), host_name(), command.join(" "))
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok && len > 0 {
        String::from_utf8_lossy(&buf[..len]).into_owned()
    } else {
        "an unknown host".into()
    }
}

/// Who holds the lock `path` of `dir`: the one process that holds it
/// alone, named in the file, or the sharers, named in the exclusive lock
/// files of their own in `dir`.
fn holders(path: &Path, dir: &Path) -> String {
    if let Some(alone) = exclusive_holder(path) {
        return alone;
    }
    let mut sharers: Vec<String> = lock_files(dir)
        .into_iter()
        .filter(|other| other != path)
        .filter_map(|other| exclusive_holder(&other))
        .collect();
    sharers.sort();
    match sharers.is_empty() {
        true => "other go-train processes that share it".into(),
        false => sharers.join("; "),
    }
}

/// What an exclusively held lock file says of its holder; `None` when
/// no process holds it alone.
fn exclusive_holder(path: &Path) -> Option<String> {
    let mut file = File::open(path).ok()?;
    match file.try_lock_shared() {
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let text = text.trim();
            Some(if text.is_empty() { "a process that is starting".into() } else { text.to_string() })
        }
        _ => None,
    }
}

/// The hidden lock files of `dir` (`.NAME.lock`).
fn lock_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.') && n.ends_with(".lock")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second holder is refused, naming this process; shared holders
    /// keep out an exclusive one (named by their own locks) but not each
    /// other; a dropped lock can be taken again.
    #[test]
    fn a_held_lock_refuses_others_naming_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let me = format!("pid {} on {}", std::process::id(), host_name());
        let first = Lock::folder(dir.path()).unwrap();
        for second in [Lock::folder(dir.path()), Lock::folder_shared(dir.path())] {
            let err = second.unwrap_err().to_string();
            assert!(err.contains(&dir.path().display().to_string()) && err.contains(&me), "{err}");
        }
        drop(first);

        let sharers = [Lock::folder_shared(dir.path()).unwrap(), Lock::folder_shared(dir.path()).unwrap()];
        let part = Lock::own(dir.path(), ".p0002of0004.lock").unwrap();
        let err = Lock::folder(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&me), "the sharer is named by its own lock: {err}");
        let err = Lock::own(dir.path(), ".p0002of0004.lock").unwrap_err().to_string();
        assert!(err.contains(&me), "{err}");
        drop((sharers, part));
        let _again = Lock::folder(dir.path()).unwrap();
    }

    /// A folder made for a run that wrote nothing into it goes with the
    /// run's lock; one that was there before, or that holds anything, stays.
    #[test]
    fn a_folder_made_for_nothing_goes_with_its_lock() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("run");
        drop(Lock::create_folder(&made, "a run is a folder").unwrap());
        assert!(!made.exists(), "an empty folder was left behind");

        let lock = Lock::create_folder(&made, "a run is a folder").unwrap();
        std::fs::write(made.join("config.json"), "{}").unwrap();
        drop(lock);
        assert!(made.join("config.json").is_file() && made.join(FOLDER_LOCK).is_file());

        let there = dir.path().join("there");
        std::fs::create_dir(&there).unwrap();
        drop(Lock::create_folder(&there, "a run is a folder").unwrap());
        assert!(there.is_dir(), "a folder this process did not make was removed");
    }

    /// A file where a folder should be was once "no such folder".
    #[test]
    fn a_file_is_named_as_a_file_and_a_missing_folder_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("afile");
        std::fs::write(&file, "").unwrap();
        assert!(Lock::folder(&file).unwrap_err().to_string().ends_with("afile: a file, not a folder"));
        let none = Lock::folder(&dir.path().join("none")).unwrap_err().to_string();
        assert!(none.ends_with("none: no such folder"), "{none}");
    }
}
