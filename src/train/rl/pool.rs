//! The opponent pool: the policy the run started from, and a snapshot of
//! the learner every N iterations. Each iteration's opponent is drawn
//! uniformly from it, which keeps the learner from overfitting to its
//! current self (AlphaGo's stage 2).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Result};
use candle_core::Device;

use crate::go::zobrist::mix;
use crate::nn::{weights, Model, Output};
use crate::search::NetEval;

/// Nets kept loaded at once, the last used (the start policy among them
/// while matches against it are played). A pool of hundreds of snapshots
/// once kept each one drawn in memory to the run's end.
const KEPT_LOADED: usize = 3;

/// The pool's members, as weights files.
pub struct Pool {
    /// The start policy, then the snapshots in order.
    members: Vec<(String, PathBuf)>,
    /// Where snapshots are written.
    dir: PathBuf,
    /// The nets last used, by member, the most recent last. One read
    /// again from its file is the same net, so what is kept changes no
    /// game.
    loaded: Vec<(usize, Arc<NetEval>)>,
}

impl Pool {
    /// The pool after `done` iterations of a run that adds a snapshot
    /// every `every` iterations into `dir`, starting from `start`; every
    /// snapshot it names must be there.
    pub fn open(start: &Path, dir: &Path, every: u64, done: u64) -> Result<Pool> {
        let mut members = vec![("the start policy".to_string(), start.to_path_buf())];
        for iteration in (1..=done).filter(|i| i % every.max(1) == 0) {
            let path = snapshot_path(dir, iteration);
            if !path.is_file() {
                bail!(
                    "{}: the pool's snapshot of iteration {iteration} is missing (the run takes one every {every} \
                     iterations), so the run cannot go on as it was (--force starts it again)",
                    path.display()
                );
            }
            members.push((format!("iteration {iteration}"), path));
        }
        Ok(Pool { members, dir: dir.to_path_buf(), loaded: Vec::new() })
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The opponent of iteration `iteration`: drawn uniformly, a function
    /// of the seed and the iteration (a resumed run draws the same).
    pub fn draw(&self, seed: u64, iteration: u64) -> usize {
        (mix(seed ^ mix(iteration ^ 0x504F_4F4C)) % self.members.len() as u64) as usize
    }

    /// The member's name, for metrics.
    pub fn name(&self, member: usize) -> &str {
        &self.members[member].0
    }

    /// The member's net: loaded from its file unless used lately.
    pub fn net(&mut self, member: usize, device: &Device) -> Result<Arc<NetEval>> {
        let net = match self.loaded.iter().position(|(m, _)| *m == member) {
            Some(i) => self.loaded.remove(i).1,
            None => Arc::new(NetEval::load(&self.members[member].1, device, Output::MoveLogProbs)?),
        };
        self.loaded.push((member, net.clone()));
        if self.loaded.len() > KEPT_LOADED {
            self.loaded.remove(0);
        }
        Ok(net)
    }

    /// Adds the learner after `iteration` iterations.
    pub fn add(&mut self, iteration: u64, model: &Model) -> Result<()> {
        let path = snapshot_path(&self.dir, iteration);
        weights::save(&path, model, None)?;
        self.members.push((format!("iteration {iteration}"), path));
        Ok(())
    }
}

/// The snapshot of the learner after `iteration` iterations.
fn snapshot_path(dir: &Path, iteration: u64) -> PathBuf {
    dir.join(format!("iteration-{iteration:06}.safetensors"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_grows_every_n_iterations_and_draws_every_member() {
        let dir = tempfile::tempdir().unwrap();
        let start = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/nets/policy.safetensors"));
        let err = Pool::open(start, dir.path(), 5, 7).err().expect("a snapshot is missing").to_string();
        assert!(err.contains("iteration-000005.safetensors"), "{err}");
        let mut pool = Pool::open(start, dir.path(), 5, 4).unwrap();
        assert_eq!(pool.len(), 1);
        let model = pool.net(0, &Device::Cpu).unwrap();
        pool.add(5, model.model()).unwrap();
        let reopened = Pool::open(start, dir.path(), 5, 9).unwrap();
        assert_eq!((reopened.len(), reopened.name(1)), (2, "iteration 5"));
        let drawn: std::collections::HashSet<usize> = (0..40).map(|i| reopened.draw(3, i)).collect();
        assert_eq!(drawn.len(), 2, "both members are drawn");
        assert_eq!(reopened.draw(3, 17), reopened.draw(3, 17));
    }

    /// A long run's pool holds hundreds of snapshots: they are not all
    /// kept in memory, and one loaded again plays as it did.
    #[test]
    fn only_a_few_opponents_stay_loaded_and_one_loaded_again_is_the_same_net() {
        use crate::features::FeatureSet;
        use crate::go::{Game, Rules};
        use crate::nn::Arch;
        let dir = tempfile::tempdir().unwrap();
        let start = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/nets/policy.safetensors"));
        let mut pool = Pool::open(start, dir.path(), 1, 0).unwrap();
        for i in 1..=KEPT_LOADED as u64 + 2 {
            pool.add(i, &Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, i).unwrap()).unwrap();
        }
        let game = Game::new(19, Rules::CHINESE);
        let probs = |net: &NetEval| net.move_probs(&[&game]).unwrap();
        let first: Vec<_> = (0..pool.len()).map(|m| probs(&pool.net(m, &Device::Cpu).unwrap())).collect();
        assert_ne!(first[1], first[2], "each member its own net");
        assert!(pool.loaded.len() <= KEPT_LOADED, "{} nets loaded", pool.loaded.len());
        for member in (0..pool.len()).rev() {
            assert_eq!(probs(&pool.net(member, &Device::Cpu).unwrap()), first[member], "member {member}");
            assert!(pool.loaded.len() <= KEPT_LOADED, "{} nets loaded", pool.loaded.len());
        }
        let (a, b) = (pool.net(2, &Device::Cpu).unwrap(), pool.net(2, &Device::Cpu).unwrap());
        assert!(Arc::ptr_eq(&a, &b), "a net drawn again soon is not read again");
    }
}
