//! How the ranks of a data-parallel run agree on one secret before they
//! can talk: NCCL's unique id, made by rank 0 and needed by every rank to
//! join its communicator. Two ways, as launchers offer them:
//!
//! - **a file on the shared filesystem** (Slurm: every node sees the
//!   checkpoint folder): rank 0 writes it atomically under a name of the
//!   job step, the others wait for it;
//! - **a TCP address** (torchrun's `MASTER_ADDR`, on the port after
//!   `MASTER_PORT`, which torchrun's own store holds): rank 0 listens and
//!   sends the id to each rank that connects.
//!
//! Written by hand because it is a dozen lines of std: no crate does this
//! one exchange without bringing a whole RPC system.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

/// Where the ranks meet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// A file every rank can read.
    File(PathBuf),
    /// `host:port` that rank 0 listens on.
    Tcp(String),
}

/// How long a rank waits for rank 0 before giving up with an error (a
/// rank that never starts must not leave the others hanging for ever).
pub const WAIT: Duration = Duration::from_secs(600);

impl Rendezvous {
    /// `GO_TRAIN_RENDEZVOUS` (`host:port`, or a file path) when set; else
    /// torchrun's `MASTER_ADDR` on `MASTER_PORT + 1`; else a file in
    /// `dir` named after the Slurm job, step and restart (a requeued job
    /// keeps its id and starts again at step 0: without the restart count
    /// its ranks could read the id of the run before, whose rank 0 is gone).
    pub fn from_env(env: impl Fn(&str) -> Option<String>, dir: &Path) -> Result<Rendezvous> {
        if let Some(given) = env("GO_TRAIN_RENDEZVOUS") {
            let tcp =
                given.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()) && !given.contains('/');
            return Ok(if tcp { Rendezvous::Tcp(given) } else { Rendezvous::File(given.into()) });
        }
        if let (Some(addr), Some(port)) = (env("MASTER_ADDR"), env("MASTER_PORT")) {
            let next = port.trim().parse::<u16>().ok().and_then(|p| p.checked_add(1));
            let Some(next) = next else {
                bail!("MASTER_PORT={port}: not a port below 65535 (the rendezvous listens on the port after it)")
            };
            return Ok(Rendezvous::Tcp(format!("{addr}:{next}")));
        }
        let Some(job) = env("SLURM_JOB_ID") else {
            bail!("several ranks but no way to meet: set GO_TRAIN_RENDEZVOUS (host:port or a shared file), or launch with srun or torchrun")
        };
        let step = env("SLURM_STEP_ID").unwrap_or_else(|| "0".into());
        let restart = env("SLURM_RESTART_COUNT").unwrap_or_else(|| "0".into());
        Ok(Rendezvous::File(dir.join(format!(".rendezvous-{job}.{step}.{restart}"))))
    }

    /// Called by every rank once all have joined: rank 0 removes the file,
    /// which no one needs any more and which a later run given the same
    /// path must not read.
    pub fn finish(&self, rank: usize) -> Result<()> {
        match self {
            Rendezvous::File(path) if rank == 0 => crate::atomic::remove_if_present(path),
            _ => Ok(()),
        }
    }

    /// Rank 0 gives `secret`; the others receive it. Every rank returns
    /// the secret.
    pub fn exchange(&self, rank: usize, ranks: usize, secret: Option<&[u8]>, len: usize) -> Result<Vec<u8>> {
        match (self, secret) {
            (Rendezvous::File(path), Some(secret)) => {
                crate::atomic::write_atomic(path, secret)?;
                Ok(secret.to_vec())
            }
            (Rendezvous::File(path), None) => wait_for_file(path, len, SystemTime::now() - STALE),
            (Rendezvous::Tcp(addr), Some(secret)) => serve(addr, ranks - 1, secret),
            (Rendezvous::Tcp(addr), None) => fetch(addr, rank, len),
        }
    }
}

/// How much older than a rank's wait a rendezvous file may be and still be
/// rank 0's of this run: ranks start at about the same time, but rank 0
/// may write before a slow rank begins to wait, and the clocks of nodes
/// and file server differ a little. A file older than that is a run's
/// that died before removing it ([`Rendezvous::finish`]).
const STALE: Duration = Duration::from_secs(120);

/// Waits for rank 0's file, written at `not_before` or later.
fn wait_for_file(path: &Path, len: usize, not_before: SystemTime) -> Result<Vec<u8>> {
    let started = Instant::now();
    let mut stale = None;
    loop {
        let modified = std::fs::metadata(path).and_then(|m| m.modified());
        let fresh = match modified {
            Ok(at) if at < not_before => {
                stale = Some(at);
                false
            }
            Ok(_) => true,
            Err(_) => false,
        };
        let read = if fresh { std::fs::read(path).ok() } else { None };
        match read {
            Some(bytes) if bytes.len() == len => return Ok(bytes),
            Some(bytes) => bail!("{}: {} bytes, not the {len} of a rendezvous", path.display(), bytes.len()),
            None if started.elapsed() < WAIT => std::thread::sleep(Duration::from_millis(100)),
            None => {
                let why = match stale {
                    Some(at) => format!(
                        "the file there is {} s older than this run's start, another run's: remove it",
                        not_before.duration_since(at).unwrap_or_default().as_secs() + STALE.as_secs()
                    ),
                    None => "no file".into(),
                };
                bail!("{}: rank 0 did not write it within {} s ({why})", path.display(), WAIT.as_secs())
            }
        }
    }
}

/// Rank 0: sends `secret` to each of `peers` connections.
fn serve(addr: &str, peers: usize, secret: &[u8]) -> Result<Vec<u8>> {
    let port = addr.rsplit_once(':').map_or(addr, |(_, p)| p);
    let listener = TcpListener::bind(("0.0.0.0", port.parse::<u16>()?))
        .with_context(|| format!("rendezvous: listening on {addr}"))?;
    listener.set_nonblocking(true)?;
    let started = Instant::now();
    let mut served = 0;
    while served < peers {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                stream.write_all(secret).context("rendezvous: sending to a rank")?;
                served += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && started.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => bail!("rendezvous on {addr}: {served} of {peers} ranks came within {} s ({e})", WAIT.as_secs()),
        }
    }
    Ok(secret.to_vec())
}

/// Another rank: connects (retrying while rank 0 starts) and reads.
fn fetch(addr: &str, rank: usize, len: usize) -> Result<Vec<u8>> {
    let started = Instant::now();
    loop {
        let target = addr.to_socket_addrs().ok().and_then(|mut a| a.next());
        let connected = target.map(|t| TcpStream::connect_timeout(&t, Duration::from_secs(5)));
        match connected {
            Some(Ok(mut stream)) => {
                stream.set_read_timeout(Some(WAIT))?;
                let mut secret = vec![0u8; len];
                stream.read_exact(&mut secret).with_context(|| format!("rank {rank}: reading from {addr}"))?;
                return Ok(secret);
            }
            _ if started.elapsed() < WAIT => std::thread::sleep(Duration::from_millis(200)),
            Some(Err(e)) => bail!("rank {rank}: no rank 0 at {addr} within {} s ({e})", WAIT.as_secs()),
            None => bail!("rank {rank}: {addr} is not an address"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn everyone_gets_the_secret(meet: Rendezvous) {
        let secret: Vec<u8> = (0..128).map(|i| (i * 7) as u8).collect();
        let got: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..3)
                .rev()
                .map(|rank| {
                    let (meet, secret) = (&meet, &secret);
                    scope.spawn(move || {
                        let mine = (rank == 0).then_some(secret.as_slice());
                        meet.exchange(rank, 3, mine, 128).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|g| *g == secret));
    }

    #[test]
    fn ranks_meet_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        everyone_gets_the_secret(Rendezvous::File(dir.path().join(".rendezvous-7.0")));
    }

    /// A file a dead run left (rank 0 removes it once all have joined) is
    /// not taken for this run's: it once was, and its ranks waited for a
    /// rank 0 that was gone.
    #[test]
    fn a_rendezvous_file_of_a_run_before_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".rendezvous-7.0.0");
        let meet = Rendezvous::File(path.clone());
        let (old, new) = (vec![1u8; 16], vec![2u8; 16]);
        std::fs::write(&path, &old).unwrap();
        let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(an_hour_ago).unwrap();
        let got = std::thread::scope(|scope| {
            let waiting = {
                let path = &path;
                scope.spawn(move || wait_for_file(path, 16, SystemTime::now() - STALE))
            };
            std::thread::sleep(Duration::from_millis(300));
            meet.exchange(0, 2, Some(&new), 16).unwrap();
            waiting.join().unwrap().unwrap()
        });
        assert_eq!(got, new);
        meet.finish(1).unwrap();
        assert!(path.exists(), "only rank 0 removes it");
        meet.finish(0).unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn ranks_meet_over_tcp() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        everyone_gets_the_secret(Rendezvous::Tcp(format!("127.0.0.1:{port}")));
    }

    #[test]
    fn the_meeting_place_comes_from_the_launcher() {
        let dir = Path::new("/ckpt");
        let env = |vars: &'static [(&'static str, &'static str)]| {
            Rendezvous::from_env(|n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string()), dir)
        };
        assert_eq!(
            env(&[("MASTER_ADDR", "node1"), ("MASTER_PORT", "29500")]).unwrap(),
            Rendezvous::Tcp("node1:29501".into())
        );
        assert_eq!(
            env(&[("SLURM_JOB_ID", "42"), ("SLURM_STEP_ID", "3")]).unwrap(),
            Rendezvous::File("/ckpt/.rendezvous-42.3.0".into())
        );
        // A requeued job has the same id and steps: its restart count
        // names another file.
        assert_eq!(
            env(&[("SLURM_JOB_ID", "42"), ("SLURM_STEP_ID", "0"), ("SLURM_RESTART_COUNT", "1")]).unwrap(),
            Rendezvous::File("/ckpt/.rendezvous-42.0.1".into())
        );
        // The port after 65535 once wrapped to 0, and every rank waited.
        let e = env(&[("MASTER_ADDR", "node1"), ("MASTER_PORT", "65535")]).unwrap_err().to_string();
        assert!(e.contains("MASTER_PORT=65535"), "{e}");
        assert_eq!(env(&[("GO_TRAIN_RENDEZVOUS", "10.0.0.1:7000")]).unwrap(), Rendezvous::Tcp("10.0.0.1:7000".into()));
        assert!(env(&[]).is_err());
    }
}
