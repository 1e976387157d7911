//! Reading a whole file into memory, refused past a size: what every file
//! go-train reads whole goes through (game records, lists, settings, run
//! state, weights), so that a device (`/dev/zero`), an endless pipe or a
//! file far larger than its kind ever is ends in an error naming it rather
//! than in the machine running out of memory.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most a settings, manifest or run-state file may hold: a thousand
/// times what any go-train writes.
pub const TEXT_BYTES: u64 = 64 << 20;
/// The most a game list or a file of game records may hold.
pub const LIST_BYTES: u64 = 1 << 30;
/// The most a weights file may hold: the 10×128 residual net's is 12 MB.
pub const WEIGHTS_BYTES: u64 = 4 << 30;

/// The bytes of `path`, refused past `limit`; `what` names its kind in
/// errors ("an SGF file"). A device or a folder is refused before reading
/// (a device reports no size and may never end); a pipe is read up to the
/// limit.
pub fn read_at_most(path: &Path, limit: u64, what: &str) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    let too_big = || io::Error::other(format!("larger than {limit} bytes, the most {what} may hold"));
    let file = open_without_waiting(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_char_device() || kind.is_block_device() || kind.is_dir() {
        return Err(io::Error::other(format!("not {what} (a device or a folder)")));
    }
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// Opens `path` for reading without waiting for a writer: `open` of a
/// FIFO that no process writes to blocks until one does, which once hung
/// `prepare` on a list naming one. Opened so, a FIFO without a writer
/// reads as empty, and one with a writer (`<(cat game.sgf)`) reads as it
/// is written: the file is switched back to blocking reads once open.
pub fn open_without_waiting(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns, with flags it read
    // from that descriptor.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) >= 0
    };
    if !cleared {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

/// [`read_at_most`] of a UTF-8 text.
pub fn read_text_at_most(path: &Path, limit: u64, what: &str) -> io::Result<String> {
    let bytes = read_at_most(path, limit, what)?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--set init=/dev/zero` once grew until the kernel killed the process.
    #[test]
    fn devices_folders_and_files_past_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "net = 1\n").unwrap();
        assert_eq!(read_text_at_most(&path, 8, "a config").unwrap(), "net = 1\n");
        let err = read_at_most(&path, 7, "a config").unwrap_err().to_string();
        assert_eq!(err, "larger than 7 bytes, the most a config may hold");
        let err = read_at_most(dir.path(), TEXT_BYTES, "a config").unwrap_err().to_string();
        assert_eq!(err, "not a config (a device or a folder)");
        if Path::new("/dev/zero").exists() {
            let err = read_at_most(Path::new("/dev/zero"), WEIGHTS_BYTES, "a weights file").unwrap_err();
            assert_eq!(err.to_string(), "not a weights file (a device or a folder)");
        }
        std::fs::write(&path, [b'a', 0xff]).unwrap();
        let err = read_text_at_most(&path, 8, "a config").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    /// A FIFO no process writes to once hung `prepare` and `show` in `open`.
    #[test]
    fn a_fifo_without_a_writer_reads_as_empty_and_one_with_a_writer_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("game.sgf");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        assert_eq!(read_at_most(&fifo, LIST_BYTES, "a file of game records").unwrap(), b"");
        let writer = {
            let fifo = fifo.clone();
            // A reader that closed before the write makes it fail (EPIPE):
            // write again for the next.
            std::thread::spawn(move || (0..500).any(|_| std::fs::write(&fifo, "(;SZ[9])").is_ok()))
        };
        // The writer's open waits for a reader: read until it has written.
        let mut read = Vec::new();
        for _ in 0..500 {
            read = read_at_most(&fifo, LIST_BYTES, "a file of game records").unwrap();
            if !read.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(writer.join().unwrap());
        assert_eq!(read, b"(;SZ[9])");
    }
}
