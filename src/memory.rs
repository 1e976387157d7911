//! How much memory a run can still get, so that a setting too large for
//! the machine is refused at the start, naming it: a training batch too
//! large once ended in an allocation failure's abort and backtrace (or,
//! with overcommit, in the kernel's OOM killer some steps in).

use std::path::Path;

use anyhow::{bail, Result};

/// Bytes a process can still allocate: the kernel's estimate of memory
/// available without swapping (`MemAvailable`) plus free swap, or less
/// where its cgroup (a Slurm job, a container) has a lower limit. `None`
/// where none of these can be read (not Linux).
pub fn available_bytes() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| Some(meminfo_bytes(&text, "MemAvailable")? + meminfo_bytes(&text, "SwapFree").unwrap_or(0)));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| cgroup_room(&text, Path::new("/sys/fs/cgroup")));
    match (machine, cgroup) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Refuses, in `what`'s words ("--batch 1048576"), a setting that needs at
/// least `needed` bytes where fewer are available.
pub fn check_fits(needed: u64, what: impl FnOnce() -> String) -> Result<()> {
    match available_bytes() {
        Some(available) if needed > available => bail!(
            "{} needs at least {} of memory, and {} is available (free memory and swap, within this process's \
             cgroup limit): lower it",
            what(),
            human_bytes(needed),
            human_bytes(available)
        ),
        _ => Ok(()),
    }
}

/// `n` bytes in B, KiB, MiB, GiB or TiB.
pub fn human_bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// The value of `key` in `/proc/meminfo`'s text, in bytes.
fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let mut words = line.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// What the cgroups of `/proc/self/cgroup`'s text (mounted under `root`)
/// still allow: the least room (limit less usage) of the process's cgroup
/// and of each above it, as each limit holds for all below it. cgroup v2
/// (`0::/path`) and v1's memory controller (`N:memory:/path`); `None`
/// where no limit is set or none can be read.
fn cgroup_room(text: &str, root: &Path) -> Option<u64> {
    let mut rooms = Vec::new();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let (base, limit_file, usage_file) = if controllers.is_empty() {
            (root.to_path_buf(), "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (root.join("memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")
        } else {
            continue;
        };
        let mut dir = Some(Path::new(path));
        while let Some(here) = dir {
            let folder = base.join(here.strip_prefix("/").unwrap_or(here));
            let read = |name: &str| std::fs::read_to_string(folder.join(name)).ok()?.trim().parse::<u64>().ok();
            // "max" (v2) does not parse: no limit there.
            if let (Some(limit), Some(usage)) = (read(limit_file), read(usage_file)) {
                rooms.push(limit.saturating_sub(usage));
            }
            dir = here.parent();
        }
    }
    rooms.into_iter().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_read_in_bytes() {
        let text = "MemTotal:       24576000 kB\nMemAvailable:   20000000 kB\nSwapFree:              0 kB\n";
        assert_eq!(meminfo_bytes(text, "MemAvailable"), Some(20_000_000 * 1024));
        assert_eq!(meminfo_bytes(text, "SwapFree"), Some(0));
        assert_eq!(meminfo_bytes(text, "Mem"), None, "a key is a whole name");
        assert_eq!(meminfo_bytes(text, "Cached"), None);
    }

    #[test]
    fn the_least_room_of_the_cgroups_above_counts() {
        let root = tempfile::tempdir().unwrap();
        let write = |dir: &str, files: &[(&str, &str)]| {
            let dir = root.path().join(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, text) in files {
                std::fs::write(dir.join(name), text).unwrap();
            }
        };
        // A Slurm job's limit on the job, none on its step: the job's counts.
        write("job_7", &[("memory.max", "8000000000\n"), ("memory.current", "1000000000\n")]);
        write("job_7/step_0", &[("memory.max", "max\n"), ("memory.current", "900000000\n")]);
        assert_eq!(cgroup_room("0::/job_7/step_0\n", root.path()), Some(7_000_000_000));
        write("memory/docker/abc", &[("memory.limit_in_bytes", "4096\n"), ("memory.usage_in_bytes", "5000\n")]);
        assert_eq!(cgroup_room("12:cpu,cpuacct:/x\n4:memory:/docker/abc\n", root.path()), Some(0), "v1, over");
        assert_eq!(cgroup_room("0::/elsewhere\n", root.path()), None, "no limit found");
        assert_eq!(cgroup_room("garbage\n", root.path()), None);
    }

    #[test]
    fn a_need_past_what_there_is_is_refused_in_its_words() {
        let Some(available) = available_bytes() else {
            eprintln!("skipped: this system says nothing of its free memory");
            return;
        };
        let err = check_fits(available + (1 << 30), || "--batch 9".into()).unwrap_err().to_string();
        assert!(err.starts_with("--batch 9 needs at least ") && err.ends_with("lower it"), "{err}");
        check_fits(1, || unreachable!()).unwrap();
    }

    #[test]
    fn bytes_read_in_the_unit_that_fits() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
        assert_eq!(human_bytes(u64::MAX), "16777216.0 TiB");
    }
}
