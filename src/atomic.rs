//! The one way go-train writes a file that must never be seen half
//! written: game lists, reports, manifests, metrics, game records, weights;
//! and reads such a file back when a run resumes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};

/// The temporary name of a file being written: `<name>.tmp` beside it.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `bytes` to `path` through a temporary file that is synced and
/// then renamed over `path`, then syncs the folder so that the rename
/// survives a power cut. Creates the folder if needed. A process killed at
/// any point leaves the old file or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_through(path, &tmp_path(path), bytes)
}

/// [`write_atomic`] for a file that several processes may write at once,
/// with the same bytes (the manifest of a dataset whose last parts finish
/// together): each writes its own temporary file, `<name>.<random>.tmp`,
/// created exclusively so that one's rename cannot take another's file
/// away. (A pid in the name was not enough: nodes of a cluster writing to
/// a shared file system can have the same pids.)
pub fn write_atomic_shared(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().ok_or_else(|| anyhow!("{}: not a file name", path.display()))?;
    refuse_special_file(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut prefix = name.to_os_string();
    prefix.push(".");
    // As `File::create` makes a file (the umask applies), not tempfile's 0600.
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o666);
    let mut tmp = tempfile::Builder::new()
        .permissions(mode)
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .with_context(|| format!("cannot write a temporary file for {} in {}", path.display(), dir.display()))?;
    let tmp_path = tmp.path().to_path_buf();
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp_path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot rename {} to {}", tmp_path.display(), path.display()))?;
    sync_dir(dir)
}

fn write_through(path: &Path, tmp: &Path, bytes: &[u8]) -> Result<()> {
    path.file_name().ok_or_else(|| anyhow!("{}: not a file name", path.display()))?;
    refuse_special_file(path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| match file_in_the_way(path) {
        Some(file) => format!("cannot write {}: {} is not a folder", path.display(), file.display()),
        None => format!("creating {}", dir.display()),
    })?;
    let write = || -> std::io::Result<()> {
        let mut f = File::create(tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    // A failed write or rename takes its temporary file with it (a full
    // disk's would stay full); a folder in its place is not its own.
    let written = write().with_context(|| format!("cannot write {}", tmp.display())).and_then(|()| {
        std::fs::rename(tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
    });
    if written.is_err() && tmp.is_file() {
        let _ = std::fs::remove_file(tmp);
    }
    written?;
    sync_dir(dir)
}

/// Refuses to write at `path` when a device, a named pipe or a socket is
/// there (or a link to one): the rename that ends every write would put a
/// file in its place, and `--out /dev/null --force`, run as root, would
/// replace `/dev/null` for the whole machine.
pub fn refuse_special_file(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => anyhow::bail!(
            "{}: a device, pipe or socket, not a file: go-train writes a file whole under a temporary name and \
             renames it into place, which would replace it; name a file",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// What stands where a folder of `path` would have to be made (`a.sgf` of
/// `a.sgf/x.list`, a link to nothing, a pipe), if anything: what a write
/// there fails on.
pub fn file_in_the_way(path: &Path) -> Option<&Path> {
    path.parent()?.ancestors().find(|a| !a.as_os_str().is_empty() && a.symlink_metadata().is_ok() && !a.is_dir())
}

/// The text of a file a run keeps (its log, settings, metrics), `None`
/// when there is none. Any other failure (no permission, not UTF-8, a
/// folder) is an error naming the file and `what` it is: taken for a
/// missing file, it would let a resume write over what the file held.
pub fn read_if_present(path: &Path, what: &str) -> Result<Option<String>> {
    match crate::bounded_read::read_text_at_most(path, crate::bounded_read::LIST_BYTES, what) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}, {what}", path.display())),
    }
}

/// Removes the file or folder (with all it holds) at `path`, if there is
/// one: what a run replacing an older one's outputs does.
pub fn remove_if_present(path: &Path) -> Result<()> {
    let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Creates the output folder `path` of a run, which `what` says holds:
/// a file there is named as such, not as "File exists".
pub fn create_folder(path: &Path, what: &str) -> Result<()> {
    if path.is_file() {
        anyhow::bail!("{}: a file, not a folder: {what}", path.display());
    }
    // A pipe or a device there once said only "File exists".
    if path.exists() && !path.is_dir() {
        anyhow::bail!("{}: a device, pipe or socket, not a folder: {what}", path.display());
    }
    std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))
}

/// Syncs a folder, so that renames and new files in it last.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync folder {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("list.txt");
        write_atomic(&path, b"first version, longer").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert!(!tmp_path(&path).exists());
        assert!(write_atomic(Path::new("/"), b"x").is_err(), "a folder is no file name");
    }

    /// Writers of a shared file each use a temporary file of their own,
    /// not named by the pid (which two nodes may share), and the file gets
    /// the usual permissions, not a temporary file's 0600.
    #[test]
    fn a_shared_write_uses_its_own_temporary_and_the_usual_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        // Where a pid-named temporary of another node's writer would lie.
        let other = dir.path().join(format!("manifest.json.{}.tmp", std::process::id()));
        std::fs::write(&other, b"another writer's half").unwrap();
        write_atomic_shared(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert_eq!(std::fs::read(&other).unwrap(), b"another writer's half");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        let created = dir.path().join("created");
        std::fs::File::create(&created).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), mode(&created));
    }

    /// A rename that fails (here onto a folder) leaves no temporary file
    /// behind; a folder standing at the temporary name is left alone.
    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::create_dir_all(target.join("inside")).unwrap();
        assert!(write_atomic(&target, b"x").is_err());
        assert!(!tmp_path(&target).exists(), "the temporary file stayed");
        let blocked = dir.path().join("blocked");
        std::fs::create_dir_all(tmp_path(&blocked)).unwrap();
        assert!(write_atomic(&blocked, b"x").is_err());
        assert!(tmp_path(&blocked).is_dir());
    }

    /// `train-rl --out FILE` and the other runs said only "File exists".
    #[test]
    fn an_output_folder_that_is_a_file_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let (file, folder) = (dir.path().join("f"), dir.path().join("a/b"));
        write_atomic(&file, b"x").unwrap();
        let err = format!("{:#}", create_folder(&file, "a run is a folder").unwrap_err());
        assert_eq!(err, format!("{}: a file, not a folder: a run is a folder", file.display()));
        create_folder(&folder, "a run is a folder").unwrap();
        create_folder(&folder, "a run is a folder").unwrap();
        assert!(folder.is_dir());
        // A file where a written file's folder would be is named.
        let inside = file.join("deeper/list.txt");
        assert_eq!(file_in_the_way(&inside), Some(file.as_path()));
        let err = format!("{:#}", write_atomic(&inside, b"y").unwrap_err());
        assert!(
            err.starts_with(&format!("cannot write {}: {} is not a folder", inside.display(), file.display())),
            "{err}"
        );
        assert_eq!(file_in_the_way(&folder.join("x")), None);
        let err = format!("{:#}", create_folder(Path::new("/dev/null"), "a run is a folder").unwrap_err());
        assert_eq!(err, "/dev/null: a device, pipe or socket, not a folder: a run is a folder");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nothing"), &dangling).unwrap();
        assert_eq!(file_in_the_way(&dangling.join("x.list")), Some(dangling.as_path()));
    }

    /// `review --out dev --force` once renamed a file over a character
    /// device, and `filter --out fifo --force` over a named pipe.
    #[test]
    fn a_device_or_a_pipe_is_never_replaced_by_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
        let link = dir.path().join("null-link");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        for path in [fifo.as_path(), Path::new("/dev/null"), link.as_path()] {
            for write in [write_atomic, write_atomic_shared] {
                let err = format!("{:#}", write(path, b"x").unwrap_err());
                assert!(err.contains("a device, pipe or socket, not a file"), "{}: {err}", path.display());
            }
        }
        use std::os::unix::fs::FileTypeExt;
        assert!(fifo.metadata().unwrap().file_type().is_fifo());
        assert!(Path::new("/dev/null").metadata().unwrap().file_type().is_char_device());
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
    }

    #[test]
    fn removes_a_file_or_a_whole_folder_and_nothing_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let (file, folder) = (dir.path().join("f"), dir.path().join("d"));
        write_atomic(&file, b"x").unwrap();
        write_atomic(&folder.join("inner").join("g"), b"y").unwrap();
        for path in [&file, &folder, &file] {
            remove_if_present(path).unwrap();
            assert!(!path.exists());
        }
    }
}
