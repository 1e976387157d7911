//! The search's settings as command-line flags: `--preset`,
//! `--search-config FILE` and one flag per setting, each made from the
//! settings table (`go_train::search::config`) with its name, aliases,
//! values and help, and read through the same [`SettingsText`] as agent
//! specs and config files.

use std::path::PathBuf;
use std::str::FromStr;

use clap::{Arg, ArgMatches, Command};

use go_train::bounds::Domain;
use go_train::search::config::{setting, Preset, Setting, SettingsText, SETTINGS};
use go_train::search::MctsConfig;

const HEADING: &str = "Search settings";

/// The search settings given as flags, in the order they apply.
#[derive(Clone, Debug, Default)]
pub struct SearchFlags(pub SettingsText);

impl clap::FromArgMatches for SearchFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<SearchFlags, clap::Error> {
        let mut flags = SearchFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let given = &mut self.0;
        if let Some(preset) = matches.get_one::<Preset>("preset") {
            given.preset = Some(*preset);
        }
        if let Some(file) = matches.get_one::<PathBuf>("search-config") {
            given.file = Some(file.clone());
        }
        for setting in SETTINGS {
            if let Some(text) = matches.get_one::<String>(setting.key) {
                given.pairs.push((format!("--{} {text}", setting.key), setting.key.to_string(), text.clone()));
            }
        }
        Ok(())
    }
}

impl clap::Args for SearchFlags {
    fn augment_args(command: Command) -> Command {
        let presets = Preset::ALL.map(|p| p.name()).join("|");
        let command = command
            .arg(
                Arg::new("preset")
                    .long("preset")
                    .value_name(presets)
                    .value_parser(|text: &str| text.parse::<Preset>())
                    .help_heading(HEADING)
                    .help(
                        "The search settings to start from: tuned (PUCT, 800 iterations, value-net leaves mixed \
                         with random playouts, tactics on: the strongest measured) or seed (the seed design's \
                         UCB1, 200 iterations, 5-move rollouts) [default: tuned]",
                    ),
            )
            .arg(
                Arg::new("search-config")
                    .long("search-config")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help_heading(HEADING)
                    .help(
                        "A TOML file of search settings, `key = value` with the keys of the flags below (and \
                         preset): applied after the preset, before the flags",
                    ),
            );
        SETTINGS.iter().fold(command, |command, setting| command.arg(flag(setting)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

/// The flag of `setting`, checked by the setting itself.
fn flag(setting: &'static Setting) -> Arg {
    let preset_value = |preset| setting.value(&MctsConfig::preset(preset));
    let help = format!(
        "{} [{}; tuned: {}, seed: {}]",
        setting.help(),
        setting.domain,
        preset_value(Preset::Tuned),
        preset_value(Preset::Seed)
    );
    let mut arg = Arg::new(setting.key)
        .long(setting.key)
        .value_name(value_name(&setting.domain))
        .value_parser(move |text: &str| setting.check(text).map(|()| text.to_string()))
        .help_heading(HEADING)
        .help(help);
    for alias in setting.aliases {
        let mut letters = alias.chars();
        arg = match (letters.next(), letters.next()) {
            (Some(letter), None) => arg.short(letter),
            _ => arg.alias(*alias),
        };
    }
    arg
}

/// How a flag's value looks in help: `N`, `X`, `on|off`, `ucb|puct`.
fn value_name(domain: &Domain) -> String {
    match domain {
        Domain::Count { .. } => "N".into(),
        Domain::Real { .. } => "X".into(),
        Domain::Switch => "on|off".into(),
        Domain::Words(words) => words.join("|"),
        Domain::Or { word, domain } => format!("{word}|{}", value_name(domain)),
    }
}

/// A parser for a flag that takes a search setting's values outside a
/// search (`eval --mix`): checked as the setting `key` is, read as `T`.
pub fn setting_flag<T: FromStr>(key: &str) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    let setting = setting(key).unwrap_or_else(|| panic!("no search setting {key}"));
    move |text: &str| {
        setting.check(text)?;
        text.trim().parse().map_err(|_| setting.domain.refusal())
    }
}
