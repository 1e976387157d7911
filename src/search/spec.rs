//! Naming an agent on the command line and building it.
//!
//! A spec is a kind with optional settings: `random`, `policy`,
//! `policy:temperature=0.5`, `mcts:iterations=400,selection=puct,c=2`,
//! `mcts:policy=checkpoints/policy,value=checkpoints/value,leaf=value`,
//! `mcts:root-policy=nets/resnet-policy.safetensors`.
//! `go-train gtp` builds the same spec from its flags, so both spell every
//! setting the same way.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use super::mcts::{check_score, LeafEval, Mcts, MctsConfig, Selection};
use super::net_agent::NetAgent;
use super::nets::NetEval;
use super::ownership::Ownership;
use super::random::RandomAgent;
use super::Agent;
use crate::nn::Output;

/// Which agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    /// Uniform among acceptable moves.
    Random,
    /// The policy net's move.
    Policy,
    /// The fast playout net's move.
    Playout,
    /// Tree search.
    Mcts,
}

impl FromStr for AgentKind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<AgentKind> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "random" => AgentKind::Random,
            "policy" => AgentKind::Policy,
            "playout" => AgentKind::Playout,
            "mcts" => AgentKind::Mcts,
            _ => bail!("unknown agent {s:?}: use random, policy, playout or mcts"),
        })
    }
}

/// An agent and everything needed to build it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentSpec {
    pub kind: AgentKind,
    /// Policy net checkpoint (policy agent; MCTS priors).
    pub policy: Option<PathBuf>,
    /// MCTS: a policy net for the root's children alone (a stronger,
    /// slower one than `policy`).
    pub root_policy: Option<PathBuf>,
    /// Value net checkpoint (MCTS leaves).
    pub value: Option<PathBuf>,
    /// Playout net checkpoint (playout agent; MCTS rollouts).
    pub playout: Option<PathBuf>,
    /// Net agents: 0 plays the most likely move, above 0 samples.
    pub temperature: f32,
    /// MCTS iterations.
    pub iterations: u32,
    /// MCTS top-k expansion.
    pub expand: usize,
    /// MCTS top-k expansion where the opponent is to move, if different.
    pub expand_replies: Option<usize>,
    /// MCTS rollout moves.
    pub rollout_depth: usize,
    /// MCTS exploration constant; by default 1.4 for UCB1, 2.0 for PUCT.
    pub c: Option<f32>,
    /// MCTS (PUCT): first-play urgency reduction.
    pub fpu_reduction: f32,
    /// MCTS selection rule.
    pub selection: Selection,
    /// MCTS leaf evaluation; by default the value net when one is given,
    /// else the stone count.
    pub leaf: Option<LeafEval>,
    /// MCTS leaves per batch.
    pub batch: usize,
    /// MCTS: expand captures and escapes from atari beyond the top k.
    pub tactics: bool,
    /// MCTS: weight of random-playout outcomes in leaf values (0: none).
    pub mix: f32,
    /// MCTS: random playouts per leaf when `mix` is above 0.
    pub mix_playouts: usize,
    /// MCTS: those playouts answer ataris (`mix-tactics=on`).
    pub mix_tactics: bool,
    /// MCTS: weight of the predicted score in leaf values (0: none).
    pub score: f32,
    /// MCTS: each batch of leaves seen through a random symmetry.
    pub random_symmetry: bool,
    /// MCTS seconds per move at most.
    pub time: Option<f64>,
    /// Seeds every random choice.
    pub seed: u64,
}

impl AgentSpec {
    /// `kind` with the seed design's settings.
    pub fn new(kind: AgentKind) -> AgentSpec {
        let mcts = MctsConfig::default();
        AgentSpec {
            kind,
            policy: None,
            root_policy: None,
            value: None,
            playout: None,
            temperature: 0.0,
            iterations: mcts.iterations,
            expand: mcts.expand,
            expand_replies: mcts.expand_replies,
            rollout_depth: mcts.rollout_depth,
            c: None,
            fpu_reduction: mcts.fpu_reduction,
            selection: mcts.selection,
            leaf: None,
            batch: mcts.batch,
            tactics: mcts.tactics,
            mix: mcts.mix,
            mix_playouts: mcts.mix_playouts,
            mix_tactics: mcts.mix_tactics,
            score: mcts.score,
            random_symmetry: mcts.random_symmetry,
            time: None,
            seed: 0,
        }
    }

    /// The settings that differ from the kind's defaults, `name=value` in
    /// the order of the fields (values as JSON): what tells two agents of
    /// one kind apart, so that a match's record can name its players
    /// exactly. A setting added later with a default that plays as before
    /// leaves the text of older agents as it was.
    pub fn settings(&self) -> String {
        let as_map = |spec: &AgentSpec| match serde_json::to_value(spec) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("an AgentSpec serializes to a JSON object"),
        };
        let defaults = as_map(&AgentSpec::new(self.kind));
        as_map(self)
            .into_iter()
            .filter(|(name, value)| defaults.get(name) != Some(value))
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Sets one setting by its name in a spec string.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = || format!("agent setting {key}={value:?}");
        match key.trim() {
            "policy" => self.policy = Some(PathBuf::from(value)),
            "root-policy" => self.root_policy = Some(PathBuf::from(value)),
            "value" => self.value = Some(PathBuf::from(value)),
            "playout" => self.playout = Some(PathBuf::from(value)),
            "temperature" => self.temperature = value.parse().with_context(bad)?,
            "iterations" => self.iterations = value.parse().with_context(bad)?,
            "expand" | "k" => self.expand = value.parse().with_context(bad)?,
            "expand-replies" => self.expand_replies = Some(value.parse().with_context(bad)?),
            "rollout" | "rollout-depth" => self.rollout_depth = value.parse().with_context(bad)?,
            "c" => self.c = Some(value.parse().with_context(bad)?),
            "fpu" => self.fpu_reduction = parse_fpu_reduction(value).with_context(bad)?,
            "selection" => self.selection = value.parse().with_context(bad)?,
            "leaf" => self.leaf = Some(value.parse().with_context(bad)?),
            "batch" => self.batch = value.parse().with_context(bad)?,
            "tactics" => self.tactics = parse_switch(value).with_context(bad)?,
            "mix" => {
                self.mix = value.parse().with_context(bad)?;
                Ownership::check_mix(self.mix)?;
            }
            "mix-playouts" | "playouts" => {
                self.mix_playouts = value.parse().with_context(bad)?;
                if self.mix_playouts == 0 {
                    bail!("{}: a mixed leaf needs at least one playout (mix=0 turns the mix off)", bad());
                }
            }
            "mix-tactics" => self.mix_tactics = parse_switch(value).with_context(bad)?,
            "score" => {
                self.score = value.parse().with_context(bad)?;
                check_score(self.score).with_context(bad)?;
            }
            "symmetry" => self.random_symmetry = parse_random_symmetry(value).with_context(bad)?,
            "time" => self.time = Some(value.parse().with_context(bad)?),
            "seed" => self.seed = value.parse().with_context(bad)?,
            other => bail!(
                "unknown agent setting {other:?}: use policy, root-policy, value, playout, temperature, iterations, expand, \
                 expand-replies, rollout, c, fpu, selection, leaf, batch, tactics, mix, mix-playouts, mix-tactics, score, \
                 symmetry, time \
                 or seed"
            ),
        }
        Ok(())
    }

    /// The search that played strongest with the shipped nets (README,
    /// *Playing strength*): PUCT, leaves valued by the value net with no
    /// rollout and mixed with 8 random playouts as the board settles, 800
    /// iterations, tactics on. Settings already given on the command line
    /// are applied after it.
    pub fn tuned(self) -> AgentSpec {
        AgentSpec {
            selection: Selection::Puct,
            rollout_depth: 0,
            iterations: 800,
            tactics: true,
            mix: 1.0,
            mix_playouts: 8,
            ..self
        }
    }

    /// Fills the nets the spec does not name from defaults (the command
    /// line's `--policy`, `--value`, `--playout`).
    pub fn with_default_nets(
        mut self,
        policy: Option<&PathBuf>,
        value: Option<&PathBuf>,
        playout: Option<&PathBuf>,
    ) -> Self {
        self.policy = self.policy.or_else(|| policy.cloned());
        self.value = self.value.or_else(|| value.cloned());
        self.playout = self.playout.or_else(|| playout.cloned());
        self
    }

    /// The MCTS settings this spec gives.
    pub fn mcts_config(&self) -> MctsConfig {
        MctsConfig {
            iterations: self.iterations,
            expand: self.expand,
            expand_replies: self.expand_replies,
            rollout_depth: self.rollout_depth,
            c: self.c.unwrap_or(match self.selection {
                Selection::Ucb => 1.4,
                Selection::Puct => 2.0,
            }),
            fpu_reduction: self.fpu_reduction,
            selection: self.selection,
            leaf: self.leaf.unwrap_or(if self.value.is_some() { LeafEval::Value } else { LeafEval::Stones }),
            batch: self.batch,
            tactics: self.tactics,
            mix: self.mix,
            mix_playouts: self.mix_playouts,
            mix_tactics: self.mix_tactics,
            score: self.score,
            random_symmetry: self.random_symmetry,
            time: self.time.map(Duration::from_secs_f64),
            seed: self.seed,
        }
    }

    /// Loads the nets and builds the agent on `device`.
    pub fn build(&self, device: &Device) -> Result<Box<dyn Agent>> {
        if let Some(t) = self.time {
            if !(t.is_finite() && t > 0.0 && Duration::try_from_secs_f64(t).is_ok()) {
                bail!("agent time {t}: give a positive number of seconds per move");
            }
        }
        let kind = self.kind;
        let need = |path: Option<&PathBuf>, flag: &str| -> Result<PathBuf> {
            path.cloned().with_context(|| format!("the {kind:?} agent needs a net: give {flag}"))
        };
        Ok(match self.kind {
            AgentKind::Random => Box::new(RandomAgent::new(self.seed)),
            AgentKind::Policy => {
                let net = NetEval::load(
                    &need(self.policy.as_ref(), "--policy CKPT (or policy=CKPT)")?,
                    device,
                    Output::MoveLogProbs,
                )?;
                Box::new(NetAgent::new(net, "policy", self.temperature, self.seed))
            }
            AgentKind::Playout => {
                let net = NetEval::load(
                    &need(self.playout.as_ref(), "--playout CKPT (or playout=CKPT)")?,
                    device,
                    Output::MoveLogProbs,
                )?;
                Box::new(NetAgent::new(net, "playout", self.temperature, self.seed))
            }
            AgentKind::Mcts => Box::new(self.build_mcts(device)?),
        })
    }

    /// The tree search of these settings and nets, whatever the kind (GTP
    /// analysis runs one beside a policy-net agent).
    pub fn build_mcts(&self, device: &Device) -> Result<Mcts> {
        let load =
            |path: &Option<PathBuf>, output| path.as_deref().map(|p| NetEval::load(p, device, output)).transpose();
        let mcts = Mcts::new(
            self.mcts_config(),
            load(&self.policy, Output::MoveLogProbs)?,
            load(&self.value, Output::WinProb)?,
            load(&self.playout, Output::MoveLogProbs)?,
        )?;
        Ok(match load(&self.root_policy, Output::MoveLogProbs)? {
            Some(net) => mcts.with_root_policy(net),
            None => mcts,
        })
    }
}

/// `on`/`off` (also `1`/`0`, `true`/`false`, `yes`/`no`): agent settings
/// and the `gtp` flags that switch a setting read it alike.
pub fn parse_switch(value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => bail!("use on or off"),
    }
}

/// A first-play urgency reduction: a finite number from 0 to 1 (values are
/// win probabilities, so a larger one only ever forbids unvisited moves).
pub fn parse_fpu_reduction(value: &str) -> Result<f32> {
    let r: f32 = value.trim().parse().context("give a number from 0 to 1")?;
    if !(0.0..=1.0).contains(&r) {
        bail!("{r}: give a number from 0 to 1");
    }
    Ok(r)
}

/// `random` (true) or `identity` (false): how an MCTS shows boards to
/// its nets.
pub fn parse_random_symmetry(value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "random" => Ok(true),
        "identity" | "none" => Ok(false),
        _ => bail!("use random or identity"),
    }
}

impl FromStr for AgentSpec {
    type Err = anyhow::Error;

    /// `kind` or `kind:key=value,key=value`.
    fn from_str(s: &str) -> Result<AgentSpec> {
        let (kind, settings) = s.split_once(':').unwrap_or((s, ""));
        let mut spec = AgentSpec::new(kind.parse()?);
        for pair in settings.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                pair.split_once('=').with_context(|| format!("agent {s:?}: {pair:?} is not key=value"))?;
            spec.set(key, value).with_context(|| format!("agent {s:?}"))?;
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_settings_and_reject_unknown_ones() {
        let spec: AgentSpec = "mcts:iterations=50,selection=puct,k=3,leaf=stones".parse().unwrap();
        assert_eq!(spec.kind, AgentKind::Mcts);
        let config = spec.mcts_config();
        assert_eq!((config.iterations, config.expand, config.selection), (50, 3, Selection::Puct));
        assert_eq!(config.c, 2.0);
        assert_eq!(config.leaf, LeafEval::Stones);
        assert_eq!("random".parse::<AgentSpec>().unwrap().kind, AgentKind::Random);
        assert!("mcts:depth=3".parse::<AgentSpec>().is_err());
        assert!("mcts:iterations".parse::<AgentSpec>().is_err());
        assert!("gnugo --mode gtp".parse::<AgentSpec>().is_err());
        let mixed = "mcts:mix=0.5,mix-playouts=4".parse::<AgentSpec>().unwrap().mcts_config();
        assert_eq!((mixed.mix, mixed.mix_playouts), (0.5, 4));
        assert_eq!(AgentSpec::new(AgentKind::Mcts).mcts_config().mix, 0.0);
        assert!("mcts:mix=1,mix-tactics=on".parse::<AgentSpec>().unwrap().mcts_config().mix_tactics);
        assert!(!AgentSpec::new(AgentKind::Mcts).tuned().mcts_config().mix_tactics);
        assert!("mcts:mix-tactics=maybe".parse::<AgentSpec>().is_err());
        let err = "mcts:mix=1.5".parse::<AgentSpec>().unwrap_err();
        assert!(format!("{err:#}").contains("between 0 and 1"), "{err:#}");
        // No playouts cannot mix anything: refused, not quietly made one.
        let err = "mcts:mix=1,mix-playouts=0".parse::<AgentSpec>().unwrap_err();
        assert!(format!("{err:#}").contains("at least one playout"), "{err:#}");
        assert!("mcts:symmetry=random".parse::<AgentSpec>().unwrap().mcts_config().random_symmetry);
        assert!(!AgentSpec::new(AgentKind::Mcts).mcts_config().random_symmetry);
        assert!("mcts:symmetry=sideways".parse::<AgentSpec>().is_err());
        let wide = "mcts:expand=2,expand-replies=8,fpu=0.25".parse::<AgentSpec>().unwrap().mcts_config();
        assert_eq!((wide.expand, wide.expand_replies, wide.fpu_reduction), (2, Some(8), 0.25));
        assert_eq!(AgentSpec::new(AgentKind::Mcts).mcts_config().expand_replies, None);
        assert!("mcts:fpu=1.5".parse::<AgentSpec>().is_err());
        assert!("mcts:fpu=-0.1".parse::<AgentSpec>().is_err());
        // What tells agents of a kind apart: the settings away from its
        // defaults, whatever order they were given in.
        assert_eq!(AgentSpec::new(AgentKind::Mcts).settings(), "");
        let tuned = "mcts:selection=puct,iterations=800,root-policy=r.safetensors".parse::<AgentSpec>().unwrap();
        assert_eq!(tuned.settings(), r#"root_policy="r.safetensors",iterations=800,selection="puct""#);
    }

    #[test]
    fn a_root_policy_is_loaded_named_and_a_missing_one_named_in_the_error() {
        let net = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/resnet-policy.safetensors");
        let spec: AgentSpec = format!("mcts:leaf=stones,root-policy={net}").parse().unwrap();
        let name = spec.build(&Device::Cpu).unwrap().name();
        assert!(name.contains(&format!("the root's top-2 of {net}")), "{name}");
        let missing: AgentSpec = "mcts:leaf=stones,root-policy=no/such/net.safetensors".parse().unwrap();
        let err = missing.build(&Device::Cpu).err().expect("a missing net is refused");
        assert!(format!("{err:#}").contains("no/such/net.safetensors"), "{err:#}");
    }

    #[test]
    fn net_agents_without_their_net_are_refused_with_the_flag_to_give() {
        let err = AgentSpec::new(AgentKind::Policy).build(&Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("--policy"), "{err}");
        let err = "mcts:leaf=value".parse::<AgentSpec>().unwrap().build(&Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("value net"), "{err}");
    }
}
