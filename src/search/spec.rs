//! Naming an agent on the command line and building it.
//!
//! A spec is a kind with optional settings: `random`, `policy`,
//! `policy:temperature=0.5`, `mcts:iterations=400,selection=ucb,c=2`,
//! `mcts:preset=seed,iterations=400`, `mcts:config=search.toml`,
//! `mcts:policy=checkpoints/policy,value=checkpoints/value,leaf=value`,
//! `mcts:root-policy=nets/resnet-policy.safetensors`. The search settings
//! are those of [`super::config`], read through [`SettingsText`] as
//! `go-train gtp`'s flags and config file are, so every setting is spelled,
//! ranged and defaulted alike wherever it is given.

use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use super::config::{self, MctsConfig, Preset, SettingsText};
use super::mcts::Mcts;
use super::net_agent::NetAgent;
use super::nets::{DefaultNets, NetChoice, NetEval, NetSource};
use super::random::RandomAgent;
use super::Agent;
use crate::bounds;
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

impl AgentKind {
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Random => "random",
            AgentKind::Policy => "policy",
            AgentKind::Playout => "playout",
            AgentKind::Mcts => "mcts",
        }
    }
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

/// The settings of an agent that are not the search's: its nets and its
/// temperature.
const AGENT_KEYS: [&str; 5] = ["policy", "root-policy", "value", "playout", "temperature"];

/// An agent and everything needed to build it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AgentSpec {
    pub kind: AgentKind,
    /// The preset its search settings started from.
    #[serde(skip)]
    pub preset: Preset,
    /// Policy net (policy agent; MCTS priors).
    pub policy: NetChoice,
    /// MCTS: a policy net for the root's children alone (a stronger,
    /// slower one than `policy`).
    pub root_policy: NetChoice,
    /// Value net (MCTS leaves).
    pub value: NetChoice,
    /// Playout net (playout agent; MCTS rollouts).
    pub playout: NetChoice,
    /// Net agents: 0 plays the most likely move, above 0 samples.
    pub temperature: f32,
    /// The search's settings (MCTS, and the analysis search of an engine
    /// playing a net alone); its seed seeds every agent's random choices.
    #[serde(flatten)]
    pub search: MctsConfig,
}

impl AgentSpec {
    /// `kind` with the default (tuned) search settings and no net named.
    pub fn new(kind: AgentKind) -> AgentSpec {
        AgentSpec::with_preset(kind, Preset::default())
    }

    /// `kind` with the search settings of `preset` and no net named.
    pub fn with_preset(kind: AgentKind, preset: Preset) -> AgentSpec {
        AgentSpec {
            kind,
            preset,
            policy: NetChoice::Default,
            root_policy: NetChoice::Default,
            value: NetChoice::Default,
            playout: NetChoice::Default,
            temperature: 0.0,
            search: MctsConfig::preset(preset),
        }
    }

    /// The settings that differ from the seed design's, `name=value` in the
    /// order of the fields (values as JSON): what tells two agents of one
    /// kind apart, so that a match's record can name its players exactly.
    /// Measured from the seed design, the defaults when records began,
    /// however the settings were reached (a preset, a file, single keys), so
    /// older records name the same agents as they did. An agent without a
    /// search is told by its nets, temperature and seed alone.
    pub fn settings(&self) -> String {
        let as_map = |spec: &AgentSpec| match serde_json::to_value(spec) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("an AgentSpec serializes to a JSON object"),
        };
        let mut baseline = AgentSpec::with_preset(self.kind, Preset::Seed);
        if self.kind != AgentKind::Mcts {
            baseline.search = MctsConfig { seed: baseline.search.seed, ..self.search.clone() };
            baseline.root_policy = self.root_policy.clone();
        }
        let defaults = as_map(&baseline);
        as_map(self)
            .into_iter()
            .filter(|(name, value)| defaults.get(name) != Some(value))
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// [`AgentSpec::settings`] but the nets: with
    /// [`AgentSpec::net_fingerprints`], what a resumed run must find
    /// again. The fingerprints tell the nets by their files, however their
    /// paths are spelt, and leave out those the kind never plays with.
    pub fn settings_but_nets(&self) -> String {
        let default = NetChoice::Default;
        AgentSpec {
            policy: default.clone(),
            root_policy: default.clone(),
            value: default.clone(),
            playout: default,
            ..self.clone()
        }
        .settings()
    }

    /// Sets one of the agent's own settings (a net or the temperature) by
    /// its name in a spec; `false` when `key` names none of them.
    fn set_agent(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "policy" => self.policy = NetChoice::named(std::path::Path::new(value)),
            "root-policy" => self.root_policy = NetChoice::named(std::path::Path::new(value)),
            "value" => self.value = NetChoice::named(std::path::Path::new(value)),
            "playout" => self.playout = NetChoice::named(std::path::Path::new(value)),
            "temperature" => {
                self.temperature =
                    bounds::TEMPERATURE.real_f32(value).map_err(|e| anyhow::anyhow!("{key}={value}: {e}"))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Fills the nets the spec does not name from `defaults`: naming one
    /// net keeps the defaults of the others, and a policy of the agent's
    /// own keeps it at the root.
    pub fn with_default_nets(self, defaults: &DefaultNets) -> AgentSpec {
        let root = if self.policy == NetChoice::Default { defaults.root_policy.as_ref() } else { None };
        AgentSpec {
            root_policy: self.root_policy.or(root),
            policy: self.policy.or(defaults.policy.as_ref()),
            value: self.value.or(defaults.value.as_ref()),
            playout: self.playout.or(defaults.playout.as_ref()),
            ..self
        }
    }

    /// Whether it names any net.
    pub fn has_nets(&self) -> bool {
        [&self.policy, &self.root_policy, &self.value, &self.playout].iter().any(|n| n.source().is_some())
    }

    /// One line for logs and `gomill-describe_engine`: the kind, the
    /// preset, every search setting as the search runs it, the temperature
    /// and each net with its path (or `built-in FILE`).
    pub fn describe(&self) -> String {
        let net = |choice: &NetChoice| choice.source().map_or("none".to_string(), NetSource::to_string);
        format!(
            "{}, preset {}: {} temperature={}; nets: policy={} root-policy={} value={} playout={}",
            self.kind.name(),
            self.preset,
            self.search.effective(self.value.source().is_some()).describe(),
            self.temperature,
            net(&self.policy),
            net(&self.root_policy),
            net(&self.value),
            net(&self.playout)
        )
    }

    /// The [`NetSource::fingerprint`] of each net its kind plays with, by
    /// role: what a resumed match or self-play run must find again.
    pub fn net_fingerprints(&self) -> Result<Vec<String>> {
        let roles: &[(&str, &NetChoice)] = match self.kind {
            AgentKind::Random => &[],
            AgentKind::Policy => &[("policy", &self.policy)],
            AgentKind::Playout => &[("playout", &self.playout)],
            AgentKind::Mcts => &[
                ("policy", &self.policy),
                ("root-policy", &self.root_policy),
                ("value", &self.value),
                ("playout", &self.playout),
            ],
        };
        roles
            .iter()
            .filter_map(|(role, choice)| Some((role, choice.source()?)))
            .map(|(role, source)| Ok(format!("{role}: {}", source.fingerprint()?)))
            .collect()
    }

    /// Loads the nets and builds the agent on `device`.
    pub fn build(&self, device: &Device) -> Result<Box<dyn Agent>> {
        let kind = self.kind;
        let need = |choice: &NetChoice, flag: &str| -> Result<NetEval> {
            let source =
                choice.source().with_context(|| format!("the {} agent needs a net: give {flag}", kind.name()))?;
            NetEval::load_source(source, device, Output::MoveLogProbs)
        };
        let seed = self.search.seed;
        Ok(match self.kind {
            AgentKind::Random => Box::new(RandomAgent::new(seed)),
            AgentKind::Policy => {
                let net = need(&self.policy, "--policy CKPT (or policy=CKPT)")?;
                Box::new(NetAgent::new(net, "policy", self.temperature, seed))
            }
            AgentKind::Playout => {
                let net = need(&self.playout, "--playout CKPT (or playout=CKPT)")?;
                Box::new(NetAgent::new(net, "playout", self.temperature, seed))
            }
            AgentKind::Mcts => Box::new(self.build_mcts(device)?),
        })
    }

    /// The tree search of these settings and nets, whatever the kind (GTP
    /// analysis runs one beside a policy-net agent).
    pub fn build_mcts(&self, device: &Device) -> Result<Mcts> {
        let load = |choice: &NetChoice, output| {
            choice.source().map(|source| NetEval::load_source(source, device, output)).transpose()
        };
        let mcts = Mcts::new(
            self.search.clone(),
            load(&self.policy, Output::MoveLogProbs)?,
            load(&self.value, Output::WinProb)?,
            load(&self.playout, Output::MoveLogProbs)?,
        )?;
        Ok(match load(&self.root_policy, Output::MoveLogProbs)? {
            Some(net) => mcts.with_root_policy(net),
            None => {
                // As `mix-tactics` without `mix`: settings that would do nothing.
                let root_only = [
                    ("root-policy-depth", self.search.root_policy_depth.to_string(), self.search.root_policy_depth > 1),
                    ("root-symmetries", "on".to_string(), self.search.root_symmetries),
                ];
                if let Some((key, value, _)) = root_only.iter().find(|(_, _, set)| *set) {
                    bail!("MCTS {key}={value}: a setting of the root policy, and this search has none (give root-policy=NET)");
                }
                mcts
            }
        })
    }
}

impl FromStr for AgentSpec {
    type Err = anyhow::Error;

    /// `kind` or `kind:key=value,key=value`. `preset=` applies first, then
    /// a TOML file `config=FILE`, then the other settings, in any order.
    fn from_str(s: &str) -> Result<AgentSpec> {
        let (kind, settings) = s.split_once(':').unwrap_or((s, ""));
        let mut spec = AgentSpec::new(kind.parse()?);
        let mut search = SettingsText::default();
        let mut given = std::collections::HashSet::new();
        for pair in settings.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) =
                pair.split_once('=').with_context(|| format!("agent {s:?}: {pair:?} is not key=value"))?;
            let (key, value) = (key.trim().to_ascii_lowercase(), value.trim());
            // `iterations=1,iterations=2` once played the last without a
            // word; which one was meant is the user's to say. An alias
            // names its setting.
            let named = config::setting(&key).map_or(key.as_str(), |setting| setting.key);
            if !given.insert(named.to_string()) {
                bail!("agent {s:?}: {named} is given twice");
            }
            match key.as_str() {
                "preset" => {
                    let preset = value.parse().map_err(|e| anyhow::anyhow!("agent {s:?}: preset={value}: {e}"))?;
                    search.preset = Some(preset);
                }
                "config" => search.file = Some(PathBuf::from(value)),
                key if spec.set_agent(key, value).with_context(|| format!("agent {s:?}"))? => {}
                key if config::setting(key).is_some() => {
                    search.pairs.push((format!("{key}={value}"), key.to_string(), value.to_string()))
                }
                other => {
                    let keys: Vec<&str> = AGENT_KEYS
                        .into_iter()
                        .chain(["preset", "config"])
                        .chain(config::SETTINGS.iter().map(|s| s.key))
                        .collect();
                    bail!("agent {s:?}: unknown agent setting {other:?}: use {}", keys.join(", "))
                }
            }
        }
        // The other agents draw from the seed alone: a search setting given
        // to one would be dropped without a word, yet tell matches apart.
        if spec.kind != AgentKind::Mcts {
            let search_only = (search.pairs.iter().map(|(_, key, _)| key.as_str()).filter(|&key| key != "seed"))
                .chain(search.preset.as_ref().map(|_| "preset"))
                .chain(search.file.as_ref().map(|_| "config"))
                .next();
            if let Some(key) = search_only {
                bail!("agent {s:?}: {key} is a setting of the tree search (mcts); a {} agent has none", kind.trim());
            }
        }
        (spec.preset, spec.search) = search.resolve().with_context(|| format!("agent {s:?}"))?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{LeafEval, Selection};

    #[test]
    fn specs_parse_with_settings_and_reject_unknown_ones() {
        let spec: AgentSpec = "mcts:iterations=50,selection=ucb,k=3,leaf=stones".parse().unwrap();
        assert_eq!(spec.kind, AgentKind::Mcts);
        let search = &spec.search;
        assert_eq!((search.iterations, search.expand, search.selection), (50, 3, Selection::Ucb));
        assert_eq!(search.exploration(), 1.4);
        assert_eq!(search.leaf, Some(LeafEval::Stones));
        assert_eq!("random".parse::<AgentSpec>().unwrap().kind, AgentKind::Random);
        let err = format!("{:#}", "mcts:depth=3".parse::<AgentSpec>().unwrap_err());
        assert!(err.contains("unknown agent setting \"depth\"") && err.contains("iterations"), "{err}");
        assert!("mcts:iterations".parse::<AgentSpec>().is_err());
        let err = format!("{:#}", "mcts:iterations=1,ITERATIONS=2".parse::<AgentSpec>().unwrap_err());
        assert!(err.ends_with("iterations is given twice"), "{err}");
        let err = format!("{:#}", "mcts:playouts=2,mix-playouts=4".parse::<AgentSpec>().unwrap_err());
        assert!(err.ends_with("mix-playouts is given twice"), "{err}");
        assert!("gnugo --mode gtp".parse::<AgentSpec>().is_err());
        let mixed = "mcts:mix=0.5,mix-playouts=4".parse::<AgentSpec>().unwrap().search;
        assert_eq!((mixed.mix, mixed.mix_playouts), (0.5, 4));
        assert!("mcts:mix-tactics=on".parse::<AgentSpec>().unwrap().search.mix_tactics);
        assert!("mcts:symmetry=random".parse::<AgentSpec>().unwrap().search.random_symmetry);
        let wide = "mcts:expand=2,expand-replies=8,fpu=0.25".parse::<AgentSpec>().unwrap().search;
        assert_eq!((wide.expand, wide.expand_replies, wide.fpu_reduction), (2, Some(8), 0.25));
        let err = format!("{:#}", "mcts:mix=1.5".parse::<AgentSpec>().unwrap_err());
        assert!(err.contains("mix=1.5: give a number from 0 to 1"), "{err}");
        // No playouts cannot mix anything: refused, not quietly made one.
        let err = format!("{:#}", "mcts:mix=1,mix-playouts=0".parse::<AgentSpec>().unwrap_err());
        assert!(err.contains("mix-playouts=0: give a whole number from 1"), "{err}");
        for (spec, key) in [("random:iterations=5,c=3", "iterations"), ("policy:preset=seed", "preset")] {
            let err = format!("{:#}", spec.parse::<AgentSpec>().unwrap_err());
            assert!(err.contains(&format!("{key} is a setting of the tree search (mcts)")), "{spec}: {err}");
        }
        assert_eq!("random:seed=7".parse::<AgentSpec>().unwrap().search.seed, 7);
        let err = format!("{:#}", "policy:temperature=-1".parse::<AgentSpec>().unwrap_err());
        assert!(err.contains("temperature=-1: give a number from 0 to 100"), "{err}");
    }

    /// An agent's search is the tuned one unless it names the seed's; the
    /// preset applies first wherever it is written, the settings after it.
    #[test]
    fn a_spec_starts_from_the_tuned_preset_or_the_one_it_names() {
        let plain: AgentSpec = "mcts".parse().unwrap();
        assert_eq!((plain.preset, &plain.search), (Preset::Tuned, &MctsConfig::preset(Preset::Tuned)));
        for text in ["mcts:preset=seed,iterations=400", "mcts:iterations=400,preset=seed"] {
            let spec: AgentSpec = text.parse().unwrap();
            assert_eq!(spec.preset, Preset::Seed, "{text}");
            assert_eq!(spec.search, MctsConfig { iterations: 400, ..MctsConfig::preset(Preset::Seed) }, "{text}");
        }
        let err = format!("{:#}", "mcts:preset=best".parse::<AgentSpec>().unwrap_err());
        assert!(err.contains("preset=best: give tuned or seed"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("search.toml");
        std::fs::write(&file, "preset = \"seed\"\nselection = \"puct\"\niterations = 300\n").unwrap();
        let spec: AgentSpec = format!("mcts:iterations=100,config={}", file.display()).parse().unwrap();
        assert_eq!((spec.preset, spec.search.selection, spec.search.iterations), (Preset::Seed, Selection::Puct, 100));
    }

    /// What tells agents of a kind apart in match records: the settings away
    /// from the seed design's, however they were given; the tuned search
    /// with the shipped nets built in names itself as the match records in
    /// docs/matches named it when its nets were files in `nets/`.
    #[test]
    fn settings_are_measured_from_the_seed_design_as_match_records_saved_them() {
        assert_eq!("mcts:preset=seed".parse::<AgentSpec>().unwrap().settings(), "");
        let spelled = "mcts:selection=puct,iterations=800,root-policy=r.safetensors,preset=seed";
        assert_eq!(
            spelled.parse::<AgentSpec>().unwrap().settings(),
            r#"root_policy="r.safetensors",iterations=800,selection="puct""#
        );
        let built_in = |file| Some(NetSource::BuiltIn { file, bytes: &[] });
        let shipped = DefaultNets {
            policy: built_in("policy.safetensors"),
            value: built_in("value.safetensors"),
            playout: built_in("playout.safetensors"),
            root_policy: built_in("resnet-policy.safetensors"),
        };
        let record = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/matches/rootresnet-vs-gnugo10-s32/match.json"
        ))
        .unwrap();
        let record: serde_json::Value = serde_json::from_str(&record).unwrap();
        let long = "mcts:selection=puct,rollout=0,iterations=800,tactics=on,mix=1,\
                    root-policy=nets/resnet-policy.safetensors,preset=seed";
        for spec in ["mcts", long] {
            let settings = spec.parse::<AgentSpec>().unwrap().with_default_nets(&shipped).settings();
            assert_eq!(settings, record["a_settings"].as_str().unwrap(), "{spec}");
        }
        // A net agent is told by its nets and seed, not by search settings
        // it does not use.
        let policy = "policy:seed=3".parse::<AgentSpec>().unwrap().with_default_nets(&shipped);
        assert_eq!(
            policy.settings(),
            r#"policy="nets/policy.safetensors",value="nets/value.safetensors",playout="nets/playout.safetensors",seed=3"#
        );
    }

    #[test]
    fn default_nets_fill_the_unnamed_roles_and_the_root_goes_with_the_default_policy() {
        let file = |name: &str| Some(NetSource::File(PathBuf::from(name)));
        let defaults = DefaultNets { policy: file("p"), value: file("v"), playout: file("o"), root_policy: file("r") };
        let plain = "mcts".parse::<AgentSpec>().unwrap().with_default_nets(&defaults);
        assert_eq!(
            [&plain.policy, &plain.root_policy, &plain.value, &plain.playout].map(|n| n.source().cloned()),
            [file("p"), file("r"), file("v"), file("o")]
        );
        let own = "mcts:policy=mine,value=none".parse::<AgentSpec>().unwrap().with_default_nets(&defaults);
        assert_eq!((own.policy.source().cloned(), own.root_policy.source()), (file("mine"), None));
        assert_eq!((own.value.clone(), own.playout.source().cloned()), (NetChoice::Off, file("o")));
        let described = own.describe();
        assert!(described.starts_with("mcts, preset tuned: iterations=800"), "{described}");
        assert!(
            described.contains("leaf=stones")
                && described.ends_with("policy=mine root-policy=none value=none playout=o")
        );
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
    fn settings_of_the_root_policy_are_refused_without_one() {
        for (spelled, named) in [
            ("mcts:leaf=stones,root-policy=none,root-policy-depth=2", "root-policy-depth=2:"),
            ("mcts:leaf=stones,root-policy=none,root-symmetries=on", "root-symmetries=on:"),
        ] {
            let spec: AgentSpec = spelled.parse().unwrap();
            let err = spec.build(&Device::Cpu).err().expect("refused").to_string();
            assert!(err.contains(named) && err.contains("give root-policy=NET"), "{spelled}: {err}");
        }
        let net = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/resnet-policy.safetensors");
        let spec: AgentSpec = format!("mcts:leaf=stones,root-policy={net},root-policy-depth=2").parse().unwrap();
        let name = spec.build(&Device::Cpu).unwrap().name();
        assert!(name.contains(&format!("the top-2 of {net} in the first 2 levels")), "{name}");
    }

    #[test]
    fn net_agents_without_their_net_are_refused_with_the_flag_to_give() {
        let err = AgentSpec::new(AgentKind::Policy).build(&Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("--policy"), "{err}");
        let err = "mcts:leaf=value".parse::<AgentSpec>().unwrap().build(&Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("value net"), "{err}");
    }
}
