//! The nets commands play and judge with: those named on the command line,
//! else the shipped ones. The shipped nets are built into the program, so
//! that an installed `go-train` (or one a GUI starts in any folder) plays
//! with them; `GO_TRAIN_NETS=DIR` takes them from DIR instead (empty: none).

use std::path::{Path, PathBuf};

use go_train::eval::arena::PlayerSpec;
use go_train::nn::BOARD;
use go_train::search::{AgentKind, DefaultNets, NetChoice, NetSource};

/// The shipped nets (`nets/`), built in: file name and bytes.
const BUILT_IN: [(&str, &[u8]); 5] = [
    ("policy.safetensors", include_bytes!("../../nets/policy.safetensors")),
    ("value.safetensors", include_bytes!("../../nets/value.safetensors")),
    ("playout.safetensors", include_bytes!("../../nets/playout.safetensors")),
    ("resnet-policy.safetensors", include_bytes!("../../nets/resnet-policy.safetensors")),
    ("rl-policy.safetensors", include_bytes!("../../nets/rl-policy.safetensors")),
];

/// The three nets' checkpoints, as commands take them: each a checkpoint
/// folder or a weights file in one, or `none`; a net not named is the
/// shipped one.
#[derive(clap::Args, Clone, Default)]
pub struct NetPaths {
    #[command(flatten)]
    pub judging: JudgingNets,
    /// Fast playout net (playout agent; MCTS rollouts) [default: the
    /// shipped nets/playout.safetensors].
    #[arg(long, value_name = "NET|none")]
    pub playout: Option<PathBuf>,
}

/// The policy and the value net: all that commands which only ask the nets
/// (`review`, `raw-nn`) take, and two of [`NetPaths`].
#[derive(clap::Args, Clone, Default)]
pub struct JudgingNets {
    /// Policy net [default: the shipped nets/policy.safetensors].
    #[arg(long, value_name = "NET|none")]
    pub policy: Option<PathBuf>,
    /// Value net (MCTS leaf evaluation, the win rates of review and
    /// raw-nn) [default: the shipped nets/value.safetensors].
    #[arg(long, value_name = "NET|none")]
    pub value: Option<PathBuf>,
}

impl JudgingNets {
    /// The policy and the value net named, else the shipped ones; at least
    /// one of them.
    pub fn defaults(&self) -> anyhow::Result<DefaultNets> {
        let none = Some(PathBuf::from("none"));
        let paths = NetPaths { judging: self.clone(), playout: none };
        let nets = paths.defaults(BOARD, None, true)?;
        if nets.policy.is_none() && nets.value.is_none() {
            let why = |flag: &str, named: &Option<PathBuf>| match named {
                Some(_) => format!("{flag} none"),
                None => format!("no shipped {} net in GO_TRAIN_NETS", &flag[2..]),
            };
            anyhow::bail!(
                "no nets to judge with ({}, {}): name a policy or a value net",
                why("--policy", &self.policy),
                why("--value", &self.value)
            );
        }
        Ok(nets)
    }
}

impl NetPaths {
    /// The nets for roles an agent does not name on a board of `size`: the
    /// ones named here, else (with `shipped`, on the board they play) the
    /// shipped ones. The root's net is `root_policy` when named, else the
    /// shipped residual policy where the policy is the shipped one: it won
    /// more games against GnuGo than the policy's own root
    /// (docs/results/strength.md, *Against GnuGo 3.8 level 10*).
    /// A `GO_TRAIN_NETS` folder that is not there is refused: a misspelt
    /// one would play without nets.
    pub fn defaults(&self, size: usize, root_policy: Option<&Path>, shipped: bool) -> anyhow::Result<DefaultNets> {
        if let Some(dir) = std::env::var_os("GO_TRAIN_NETS").filter(|d| !d.is_empty()) {
            if !Path::new(&dir).is_dir() {
                anyhow::bail!(
                    "GO_TRAIN_NETS={}: no such folder (it names the folder of the shipped nets; empty for none)",
                    Path::new(&dir).display()
                );
            }
        }
        let shipped = |file| if shipped && size == BOARD { shipped_net(file) } else { None };
        let pick = |named: &Option<PathBuf>, file| match named {
            Some(path) => NetChoice::named(path).source().cloned(),
            None => shipped(file),
        };
        Ok(DefaultNets {
            policy: pick(&self.judging.policy, "policy.safetensors"),
            value: pick(&self.judging.value, "value.safetensors"),
            playout: pick(&self.playout, "playout.safetensors"),
            root_policy: match (root_policy, &self.judging.policy) {
                (Some(path), _) => NetChoice::named(path).source().cloned(),
                (None, None) => shipped("resnet-policy.safetensors"),
                (None, Some(_)) => None,
            },
        })
    }
}

/// The shipped net `file`: in `GO_TRAIN_NETS` when it is set (none when
/// empty or the file is not there), else built in.
pub fn shipped_net(file: &str) -> Option<NetSource> {
    match std::env::var_os("GO_TRAIN_NETS") {
        Some(dir) if dir.is_empty() => None,
        Some(dir) => Some(PathBuf::from(dir).join(file)).filter(|p| p.is_file()).map(NetSource::File),
        None => {
            BUILT_IN.iter().find(|(name, _)| *name == file).map(|&(file, bytes)| NetSource::BuiltIn { file, bytes })
        }
    }
}

/// A player named on the command line (an agent spec or a GTP engine's
/// command line) for games on a board of `size`, its agent given the nets
/// its spec does not name from `nets`. An agent that is a net alone is
/// refused on another board than the nets': no net is shipped for it, so
/// the net it then lacked was named as what was wrong.
pub fn player_spec(text: &str, nets: &DefaultNets, size: usize) -> anyhow::Result<PlayerSpec> {
    Ok(match PlayerSpec::parse(text)? {
        PlayerSpec::Agent(agent) => {
            check_board_of_net_agent(agent.kind, size)?;
            PlayerSpec::Agent(Box::new(agent.with_default_nets(nets)))
        }
        gtp => gtp,
    })
}

/// Refuses an agent that is a net alone (policy, playout) on a board of
/// `size` other than the nets'.
pub fn check_board_of_net_agent(kind: AgentKind, size: usize) -> anyhow::Result<()> {
    if size != BOARD && matches!(kind, AgentKind::Policy | AgentKind::Playout) {
        anyhow::bail!(
            "cannot play on {size}x{size} (--size {size}): a {} agent plays a net, and the nets play {BOARD}x{BOARD} \
             only",
            kind.name()
        )
    }
    Ok(())
}
