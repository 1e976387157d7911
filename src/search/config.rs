//! The tree search's settings, each declared once below: its name (the
//! agent spec's key, the TOML key and the flag `--NAME`), its type, its
//! values (range), its value in each preset and its help text. The spec
//! parser ([`MctsConfig::set`]), the config file reader
//! ([`SettingsText::resolve`]), the command-line flags (`cmd/search_flags.rs`)
//! and the settings line `go-train gtp` prints ([`MctsConfig::describe`])
//! are all derived from that one table, so a setting cannot be spelled,
//! ranged or defaulted differently in two places.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::bounds::Domain;

/// How a child is chosen during selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Selection {
    /// UCB1: mean value plus `c·sqrt(ln N / n)`; unvisited children first.
    Ucb,
    /// PUCT: mean value plus `c·P·sqrt(N) / (1 + n)`, P the policy prior.
    Puct,
}

impl std::str::FromStr for Selection {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Selection> {
        match s.to_ascii_lowercase().as_str() {
            "ucb" | "ucb1" => Ok(Selection::Ucb),
            "puct" => Ok(Selection::Puct),
            _ => bail!("unknown selection {s:?}: use ucb or puct"),
        }
    }
}

/// How a simulated position is valued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeafEval {
    /// The value net's win probability.
    Value,
    /// The stone-count fallback: `0.5 + 0.5·tanh(gain / 5)`, the gain being
    /// how much the area count (stones and surrounded points) moved in the
    /// player's favour since the root. Measured from the root, one captured
    /// stone (2 points of area) is worth about 0.2 whatever the score, where
    /// an absolute count with komi would squash every value towards one end.
    Stones,
}

impl std::str::FromStr for LeafEval {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<LeafEval> {
        match s.to_ascii_lowercase().as_str() {
            "value" => Ok(LeafEval::Value),
            "stones" | "stone-count" => Ok(LeafEval::Stones),
            _ => bail!("unknown leaf evaluation {s:?}: use value or stones"),
        }
    }
}

/// A named set of search settings to start from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Preset {
    /// The search that measured strongest with the shipped nets
    /// (docs/results/strength.md): PUCT, 800 iterations, value-net leaves with no
    /// rollout mixed with random playouts as the board settles, tactics on.
    #[default]
    Tuned,
    /// The seed design's search: UCB1, 200 iterations, top-2 expansion,
    /// 5-move rollouts, value-net leaves, no mixing.
    Seed,
}

impl Preset {
    pub const ALL: [Preset; 2] = [Preset::Tuned, Preset::Seed];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Tuned => "tuned",
            Preset::Seed => "seed",
        }
    }
}

impl FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Preset, String> {
        let word = s.trim().to_ascii_lowercase();
        Preset::ALL.into_iter().find(|p| p.name() == word).ok_or_else(|| "give tuned or seed".to_string())
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One search setting, as the table declares it.
pub struct Setting {
    /// Its name: the spec's and the TOML file's key, and the flag `--key`.
    pub key: &'static str,
    /// Other names it answers to (a one-letter one is also a short flag).
    pub aliases: &'static [&'static str],
    /// Its help text, one doc line each.
    pub doc: &'static [&'static str],
    /// The values it takes.
    pub domain: Domain,
    read: fn(&mut MctsConfig, &str, &Domain) -> Result<(), String>,
    write: fn(&MctsConfig, &Domain) -> String,
}

impl Setting {
    /// Whether `name` (`-` and `_` alike, any case) names it.
    pub fn is_named(&self, name: &str) -> bool {
        let name = name.trim().to_ascii_lowercase().replace('_', "-");
        self.key == name || self.aliases.contains(&name.as_str())
    }

    /// The help text as one paragraph.
    pub fn help(&self) -> String {
        self.doc.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
    }

    /// Checks `text` as a value of this setting without keeping it.
    pub fn check(&self, text: &str) -> Result<(), String> {
        (self.read)(&mut MctsConfig::preset(Preset::Tuned), text, &self.domain)
    }

    /// Its value in `config`, as a spec would give it.
    pub fn value(&self, config: &MctsConfig) -> String {
        (self.write)(config, &self.domain)
    }
}

/// The setting `name` names, if any.
pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.is_named(name))
}

/// A setting's type: read from text within its domain, and written back.
trait SettingValue: Sized {
    fn read(text: &str, domain: &Domain) -> Result<Self, String>;
    fn write(&self, domain: &Domain) -> String;
}

macro_rules! whole_numbers {
    ($($t:ty),*) => {$(
        impl SettingValue for $t {
            fn read(text: &str, domain: &Domain) -> Result<$t, String> {
                <$t>::try_from(domain.count(text)?).map_err(|_| domain.refusal())
            }
            fn write(&self, _: &Domain) -> String {
                self.to_string()
            }
        }
    )*};
}
whole_numbers!(u32, u64, usize);

impl SettingValue for f32 {
    fn read(text: &str, domain: &Domain) -> Result<f32, String> {
        domain.real_f32(text)
    }
    fn write(&self, _: &Domain) -> String {
        self.to_string()
    }
}

impl SettingValue for f64 {
    fn read(text: &str, domain: &Domain) -> Result<f64, String> {
        domain.real(text)
    }
    fn write(&self, _: &Domain) -> String {
        self.to_string()
    }
}

impl SettingValue for bool {
    fn read(text: &str, domain: &Domain) -> Result<bool, String> {
        domain.switch(text)
    }
    fn write(&self, domain: &Domain) -> String {
        match domain {
            Domain::Words([off, on]) => if *self { on } else { off }.to_string(),
            _ => if *self { "on" } else { "off" }.to_string(),
        }
    }
}

macro_rules! word_values {
    ($($t:ty),*) => {$(
        impl SettingValue for $t {
            fn read(text: &str, domain: &Domain) -> Result<$t, String> {
                domain.word(text)?.parse().map_err(|e: anyhow::Error| e.to_string())
            }
            fn write(&self, _: &Domain) -> String {
                format!("{self:?}").to_ascii_lowercase()
            }
        }
    )*};
}
word_values!(Selection, LeafEval);

impl<T: SettingValue> SettingValue for Option<T> {
    fn read(text: &str, domain: &Domain) -> Result<Option<T>, String> {
        match domain {
            Domain::Or { word, .. } if text.trim().eq_ignore_ascii_case(word) => Ok(None),
            Domain::Or { domain: inner, .. } => T::read(text, inner).map(Some).map_err(|_| domain.refusal()),
            _ => Err(format!("{domain} has no word for none")),
        }
    }
    fn write(&self, domain: &Domain) -> String {
        match (self, domain) {
            (Some(value), Domain::Or { domain: inner, .. }) => value.write(inner),
            (Some(value), _) => value.write(domain),
            (None, Domain::Or { word, .. }) => word.to_string(),
            (None, _) => "none".to_string(),
        }
    }
}

/// Declares the settings: the struct, its presets and [`SETTINGS`].
macro_rules! search_settings {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident: $ty:ty = $key:literal $(| $alias:literal)*, $domain:expr, seed $seed:expr, tuned $tuned:expr;
    )*) => {
        /// The settings of a tree search. Serialized with the field names
        /// and values match records have saved since they began
        /// ([`super::AgentSpec::settings`]).
        #[derive(Clone, Debug, PartialEq, serde::Serialize)]
        pub struct MctsConfig {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl MctsConfig {
            /// The settings of `preset`.
            pub fn preset(preset: Preset) -> MctsConfig {
                match preset {
                    Preset::Seed => MctsConfig { $( $field: $seed, )* },
                    Preset::Tuned => MctsConfig { $( $field: $tuned, )* },
                }
            }
        }

        /// Every setting, in the order of [`MctsConfig`]'s fields.
        pub const SETTINGS: &[Setting] = &[$(
            Setting {
                key: $key,
                aliases: &[$($alias),*],
                doc: &[$($doc),*],
                domain: $domain,
                read: |config, text, domain| {
                    config.$field = SettingValue::read(text, domain)?;
                    Ok(())
                },
                write: |config, domain| SettingValue::write(&config.$field, domain),
            },
        )*];
    };
}

const EXPANSION: Domain = Domain::Count { min: 1, max: 362 };
const WEIGHT: Domain = Domain::Real { min: 0.0, max: 1.0, open: false };

search_settings! {
    /// Iterations (simulations) per move.
    iterations: u32 = "iterations" | "visits", Domain::Count { min: 1, max: u32::MAX as u64 }, seed 200, tuned 800;
    /// Children per expanded node: the policy's top k (every acceptable move
    /// without a policy net).
    expand: usize = "expand" | "k", EXPANSION, seed 2, tuned 2;
    /// Children per expanded node where the opponent is to move; auto: as
    /// expand. Experimental: lost its matches (docs/results/strength.md).
    expand_replies: Option<usize> = "expand-replies", Domain::Or { word: "auto", domain: &EXPANSION },
        seed None, tuned None;
    /// Children of the root: the top k of the root policy where there is
    /// one, else of the policy; auto: as expand. More candidates for
    /// analysis; in play the search rarely picks past the second
    /// (docs/results/strength.md).
    root_expand: Option<usize> = "root-expand", Domain::Or { word: "auto", domain: &EXPANSION },
        seed None, tuned None;
    /// Moves simulated from a leaf before it is valued (by the playout net,
    /// else at random).
    rollout_depth: usize = "rollout-depth" | "rollout", Domain::Count { min: 0, max: 1000 }, seed 5, tuned 0;
    /// Exploration constant; auto: 1.4 for ucb, 2 for puct.
    c: Option<f32> = "c", Domain::Or { word: "auto", domain: &Domain::Real { min: 0.0, max: 100.0, open: false } },
        seed None, tuned None;
    /// PUCT's first-play urgency reduction: an unvisited move is valued as
    /// its parent less this times the square root of the prior already
    /// visited. Experimental: lost its matches (docs/results/strength.md).
    fpu_reduction: f32 = "fpu", WEIGHT, seed 0.0, tuned 0.0;
    /// Selection rule: ucb (UCB1) or puct (policy priors).
    selection: Selection = "selection", Domain::Words(&["ucb", "puct"]), seed Selection::Ucb, tuned Selection::Puct;
    /// Leaf evaluation: the value net or the stone count; auto: value when
    /// there is a value net, else stones.
    leaf: Option<LeafEval> = "leaf", Domain::Or { word: "auto", domain: &Domain::Words(&["value", "stones"]) },
        seed None, tuned None;
    /// Leaves selected and evaluated together.
    batch: usize = "batch", Domain::Count { min: 1, max: 4096 }, seed 8, tuned 8;
    /// Also expand every move that captures or saves a string in atari,
    /// beyond the policy's top k.
    tactics: bool = "tactics", Domain::Switch, seed false, tuned true;
    /// Weight of random playouts in leaf values, scaled by how settled the
    /// board is (AlphaGo's λ); 0: the leaf value alone.
    mix: f32 = "mix", WEIGHT, seed 0.0, tuned 1.0;
    /// Random playouts per leaf when mix is above 0.
    mix_playouts: usize = "mix-playouts" | "playouts", Domain::Count { min: 1, max: 1000 }, seed 8, tuned 8;
    /// The mixed playouts capture a string the last move left in atari, or
    /// save their own, first. Experimental: lost its match
    /// (docs/results/strength.md).
    mix_tactics: bool = "mix-tactics", Domain::Switch, seed false, tuned false;
    /// Weight of the score the value net's ownership head predicts in leaf
    /// values, beside the win probability. Experimental: lost its match
    /// (docs/results/strength.md).
    score: f32 = "score", WEIGHT, seed 0.0, tuned 0.0;
    /// Show the nets each batch of leaves through a random one of the
    /// board's 8 symmetries, or as it is. Experimental: lost its match
    /// (docs/results/strength.md).
    random_symmetry: bool = "symmetry", Domain::Words(&["identity", "random"]), seed false, tuned false;
    /// The root policy's priors (the root's children) averaged over the
    /// board's 8 symmetries: 8 passes of that net a move; needs a root
    /// policy. Experimental: lost its match (docs/results/strength.md).
    root_symmetries: bool = "root-symmetries", Domain::Switch, seed false, tuned false;
    /// Levels of the tree whose nodes the root policy expands: 1, the root
    /// alone; 2, the opponent's replies below it too; needs a root policy.
    /// Experimental: lost its match (docs/results/strength.md).
    root_policy_depth: u32 = "root-policy-depth", Domain::Count { min: 1, max: 8 }, seed 1, tuned 1;
    /// The move played: the root child whose win rate has the highest
    /// lower confidence bound (the analyses' `lcb`) among those with at
    /// least a tenth of the most visited's visits, as Leela Zero and KataGo
    /// choose, rather than the most visited child. Experimental: lost its
    /// match (docs/results/strength.md).
    lcb: bool = "lcb", Domain::Switch, seed false, tuned false;
    /// Seconds per move at most, on top of the iterations (a GTP clock may
    /// shorten it; live analysis runs until the next command); none: no
    /// limit.
    time: Option<f64> = "time", Domain::Or { word: "none", domain: &crate::bounds::SECONDS }, seed None, tuned None;
    /// Seeds every random choice.
    seed: u64 = "seed", crate::bounds::SEED, seed 0, tuned 0;
}

/// Why a setting was not taken.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// No setting has this name.
    Unknown,
    /// The value is not one the setting takes: what to give instead.
    Value(String),
}

impl MctsConfig {
    /// Sets the setting `name` (a key or an alias) from `text`, checked.
    pub fn set(&mut self, name: &str, text: &str) -> Result<(), Refused> {
        let setting = setting(name).ok_or(Refused::Unknown)?;
        (setting.read)(self, text, &setting.domain).map_err(Refused::Value)
    }

    /// Checks every setting against its domain (settings made in code
    /// rather than read from text), naming the first one out of it.
    pub fn check(&self) -> Result<()> {
        for setting in SETTINGS {
            let value = setting.value(self);
            if let Err(reason) = setting.check(&value) {
                bail!("search setting {}={value}: {reason}", setting.key);
            }
        }
        Ok(())
    }

    /// Every setting as `key=value`, in the table's order.
    pub fn describe(&self) -> String {
        SETTINGS.iter().map(|s| format!("{}={}", s.key, s.value(self))).collect::<Vec<_>>().join(" ")
    }

    /// The exploration constant the search uses: `c`, else 1.4 for UCB1
    /// and 2 for PUCT.
    pub fn exploration(&self) -> f32 {
        self.c.unwrap_or(match self.selection {
            Selection::Ucb => 1.4,
            Selection::Puct => 2.0,
        })
    }

    /// How leaves are valued given whether there is a value net: `leaf`,
    /// else by the value net when there is one.
    pub fn leaf_eval(&self, has_value_net: bool) -> LeafEval {
        self.leaf.unwrap_or(if has_value_net { LeafEval::Value } else { LeafEval::Stones })
    }

    /// The wall-clock limit per move, if any.
    pub fn time_limit(&self) -> Option<Duration> {
        self.time.and_then(|t| Duration::try_from_secs_f64(t).ok())
    }

    /// These settings with every automatic one made explicit, as a search
    /// with a value net or not (`has_value_net`) runs them.
    pub fn effective(&self, has_value_net: bool) -> MctsConfig {
        MctsConfig {
            c: Some(self.exploration()),
            leaf: Some(self.leaf_eval(has_value_net)),
            expand_replies: Some(self.expand_replies.unwrap_or(self.expand)),
            root_expand: Some(self.root_expand.unwrap_or(self.expand)),
            ..self.clone()
        }
    }
}

/// Search settings as given, in the order they apply: a preset, then a
/// TOML file (which may name a preset itself), then single settings.
#[derive(Clone, Debug, Default)]
pub struct SettingsText {
    /// The preset named (else the file's, else tuned).
    pub preset: Option<Preset>,
    /// A TOML file of settings: `key = value` lines, keys as the spec's.
    pub file: Option<PathBuf>,
    /// Single settings: (spelling for messages, key, value).
    pub pairs: Vec<(String, String, String)>,
}

impl SettingsText {
    /// The preset and settings these give; a setting refused names how it
    /// was given and what to give instead.
    pub fn resolve(&self) -> Result<(Preset, MctsConfig)> {
        let file = self.file.as_deref().map(read_settings_file).transpose()?;
        let preset = self.preset.or(file.as_ref().and_then(|f| f.preset)).unwrap_or_default();
        let mut config = MctsConfig::preset(preset);
        if let (Some(path), Some(file)) = (&self.file, &file) {
            for (key, text) in &file.pairs {
                config.set(key, text).map_err(|e| refusal(e, &format!("{}: {key} = {text}", path.display())))?;
            }
        }
        for (spelled, key, text) in &self.pairs {
            config.set(key, text).map_err(|e| refusal(e, spelled))?;
        }
        Ok((preset, config))
    }
}

/// The error for a refused setting, given as `spelled`.
pub fn refusal(refused: Refused, spelled: &str) -> anyhow::Error {
    match refused {
        Refused::Unknown => {
            let keys: Vec<&str> = SETTINGS.iter().map(|s| s.key).collect();
            anyhow::anyhow!("{spelled}: no such search setting (the settings: preset, {})", keys.join(", "))
        }
        Refused::Value(reason) => anyhow::anyhow!("{spelled}: {reason}"),
    }
}

/// A settings file's content: its preset, and its other settings as text.
struct SettingsFile {
    preset: Option<Preset>,
    pairs: Vec<(String, String)>,
}

/// Reads a TOML settings file: flat `key = value` lines, the keys those of
/// agent specs and the values numbers, booleans or words.
fn read_settings_file(path: &Path) -> Result<SettingsFile> {
    let text = crate::bounded_read::read_text_at_most(path, crate::bounded_read::TEXT_BYTES, "a settings file")
        .with_context(|| format!("cannot read {}", path.display()))?;
    let table: toml::Table = text.parse().with_context(|| format!("{}: not a TOML file", path.display()))?;
    let mut file = SettingsFile { preset: None, pairs: Vec::new() };
    for (key, value) in table {
        let text = match &value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => bail!("{}: {key} = {other}: give a number, true or false, or a word", path.display()),
        };
        if key.trim().eq_ignore_ascii_case("preset") {
            file.preset = Some(text.parse().map_err(|e| anyhow::anyhow!("{}: preset = {text}: {e}", path.display()))?);
        } else {
            file.pairs.push((key, text));
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_value_is_in_its_settings_domain_and_reads_back_as_written() {
        for preset in Preset::ALL {
            let config = MctsConfig::preset(preset);
            config.check().unwrap();
            for setting in SETTINGS {
                let mut copy = MctsConfig::preset(if preset == Preset::Seed { Preset::Tuned } else { Preset::Seed });
                copy.set(setting.key, &setting.value(&config)).unwrap();
                assert_eq!(setting.value(&copy), setting.value(&config), "{}", setting.key);
            }
        }
        let keys: Vec<&str> = SETTINGS.iter().flat_map(|s| std::iter::once(&s.key).chain(s.aliases)).copied().collect();
        let unique: std::collections::HashSet<&str> = keys.iter().copied().collect();
        assert_eq!(unique.len(), keys.len(), "a name names one setting: {keys:?}");
    }

    #[test]
    fn the_presets_are_the_seed_design_and_the_tuned_search() {
        let seed = MctsConfig::preset(Preset::Seed);
        assert_eq!((seed.iterations, seed.expand, seed.rollout_depth, seed.selection), (200, 2, 5, Selection::Ucb));
        assert_eq!((seed.exploration(), seed.mix, seed.tactics), (1.4, 0.0, false));
        let tuned = MctsConfig::preset(Preset::Tuned);
        assert_eq!((tuned.iterations, tuned.rollout_depth, tuned.selection), (800, 0, Selection::Puct));
        assert_eq!((tuned.exploration(), tuned.mix, tuned.tactics), (2.0, 1.0, true));
        assert_eq!(tuned.leaf_eval(true), LeafEval::Value);
        assert_eq!(tuned.leaf_eval(false), LeafEval::Stones);
        assert!(tuned
            .describe()
            .starts_with("iterations=800 expand=2 expand-replies=auto root-expand=auto rollout-depth=0 c=auto"));
    }

    /// Every numeric setting refuses values outside its range, NaN and
    /// infinities by name, from a spec's pairs and from a TOML file alike.
    #[test]
    fn bad_values_are_refused_with_the_settings_name_and_range_from_pairs_and_files() {
        let bad: &[(&str, &str, &str)] = &[
            ("iterations", "0", "give a whole number from 1 to 4294967295"),
            ("iterations", "-5", "give a whole number from 1 to 4294967295"),
            ("expand", "363", "give a whole number from 1 to 362"),
            ("expand-replies", "0", "give auto or a whole number from 1 to 362"),
            ("root-expand", "363", "give auto or a whole number from 1 to 362"),
            ("rollout-depth", "1001", "give a whole number from 0 to 1000"),
            ("c", "-1", "give auto or a number from 0 to 100"),
            ("c", "nan", "give auto or a number from 0 to 100"),
            ("fpu", "1.5", "give a number from 0 to 1"),
            ("batch", "0", "give a whole number from 1 to 4096"),
            ("mix", "inf", "give a number from 0 to 1"),
            ("mix", "NaN", "give a number from 0 to 1"),
            ("mix-playouts", "0", "give a whole number from 1 to 1000"),
            ("score", "-0.1", "give a number from 0 to 1"),
            ("time", "0", "give none or a number above 0, up to 1000000"),
            ("time", "1e300", "give none or a number above 0, up to 1000000"),
            ("seed", "-1", "give a whole number from 0"),
            ("selection", "best", "give ucb or puct"),
            ("leaf", "net", "give auto, value or stones"),
            ("tactics", "maybe", "give on or off"),
            ("symmetry", "sideways", "give identity or random"),
        ];
        let dir = tempfile::tempdir().unwrap();
        for (key, value, reason) in bad {
            let pairs = SettingsText {
                pairs: vec![(format!("{key}={value}"), key.to_string(), value.to_string())],
                ..SettingsText::default()
            };
            let err = format!("{:#}", pairs.resolve().unwrap_err());
            assert_eq!(err, format!("{key}={value}: {reason}"));
            let path = dir.path().join("search.toml");
            let quoted =
                if value.parse::<f64>().is_ok_and(f64::is_finite) { value.to_string() } else { format!("{value:?}") };
            std::fs::write(&path, format!("{key} = {quoted}\n")).unwrap();
            let file = SettingsText { file: Some(path.clone()), ..SettingsText::default() };
            let err = format!("{:#}", file.resolve().unwrap_err());
            assert!(err.starts_with(&path.display().to_string()) && err.ends_with(reason), "{key}: {err}");
            assert!(err.contains(&format!("{key} = ")), "{err}");
        }
        // TOML's own NaN and infinity are numbers too, and refused as such.
        let path = dir.path().join("nan.toml");
        std::fs::write(&path, "mix = nan\nc = inf\n").unwrap();
        let err = format!("{:#}", SettingsText { file: Some(path), ..SettingsText::default() }.resolve().unwrap_err());
        assert!(
            err.ends_with("give a number from 0 to 1") || err.ends_with("give auto or a number from 0 to 100"),
            "{err}"
        );
    }

    #[test]
    fn a_file_names_a_preset_and_settings_and_single_settings_override_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("search.toml");
        std::fs::write(&path, "preset = \"seed\"\niterations = 400\nmix_playouts = 4\ntactics = true\nc = 1.1\n")
            .unwrap();
        let given = SettingsText {
            file: Some(path.clone()),
            pairs: vec![("--iterations 50".into(), "iterations".into(), "50".into())],
            ..SettingsText::default()
        };
        let (preset, config) = given.resolve().unwrap();
        assert_eq!(preset, Preset::Seed);
        assert_eq!((config.iterations, config.mix_playouts, config.tactics), (50, 4, true));
        assert_eq!((config.c, config.rollout_depth), (Some(1.1), 5));
        // A preset named outside the file wins over the file's.
        let (preset, config) = SettingsText { preset: Some(Preset::Tuned), ..given }.resolve().unwrap();
        assert_eq!((preset, config.rollout_depth, config.iterations), (Preset::Tuned, 0, 50));
        // Unknown keys, other types and unreadable files name the file.
        for (text, expected) in [
            ("depth = 3\n", "depth = 3: no such search setting"),
            ("iterations = [1, 2]\n", "give a number, true or false, or a word"),
            ("preset = \"best\"\n", "preset = best: give tuned or seed"),
            ("iterations = \n", "not a TOML file"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = SettingsText { file: Some(path.clone()), ..SettingsText::default() }.resolve().unwrap_err();
            let err = format!("{err:#}");
            assert!(err.contains(&path.display().to_string()) && err.contains(expected), "{text}: {err}");
        }
        let missing = SettingsText { file: Some(dir.path().join("none.toml")), ..SettingsText::default() };
        assert!(format!("{:#}", missing.resolve().unwrap_err()).contains("none.toml"));
    }
}
