//! GTP commands beyond GTP 2 that controllers and GUIs send:
//!
//! * KataGo's `kata-raw-nn` (the nets' raw output, to compare go-train's
//!   nets with another framework's) and `kata-set-rules`;
//! * KGS's `kgs-rules` and `kgs-game_over`;
//! * gomill's `gomill-describe_engine` and `gomill-cpu_time`;
//! * GoGui's `gogui-analyze_commands` and the three it lists: a policy
//!   heatmap, the value, and ownership.

use super::engine::Engine;
use crate::features::Symmetry;
use crate::go::{Color, Rules, Vertex};
use crate::search::nets::{raw_output, RawOutput};

/// What `gogui-analyze_commands` lists, where the engine offers the
/// command: `type/label/command`.
const GOGUI_ANALYZE: &[&str] =
    &["gfx/Policy heatmap/gogui-policy_heatmap", "string/Value/gogui-value", "gfx/Ownership/gogui-ownership"];

impl Engine {
    /// Answers the extension `name`, or `None` when it is none of them.
    pub(super) fn handle_extension(&mut self, name: &str, args: &[&str]) -> Option<Result<String, String>> {
        Some(match name {
            "kata-raw-nn" => self.raw_nn(args),
            "kata-set-rules" | "kgs-rules" => self.set_rules(args),
            // KGS tells the engine a game ended; nothing here outlives it.
            "kgs-game_over" => Ok(String::new()),
            "gomill-describe_engine" => {
                let description = self.description.clone().unwrap_or_else(|| self.agent.name());
                Ok(format!("go-train {}\n{description}", env!("GO_TRAIN_LONG_VERSION")))
            }
            "gomill-cpu_time" => Ok(format!("{:.3}", crate::cpu_time::process_cpu_seconds().unwrap_or(0.0))),
            "gogui-analyze_commands" => Ok(self.gogui_analyze_commands()),
            "gogui-policy_heatmap" => self.policy_heatmap(),
            "gogui-value" => self.value_text(),
            "gogui-ownership" => Ok(self.ownership_gfx()),
            _ => return None,
        })
    }

    fn gogui_analyze_commands(&mut self) -> String {
        let offered: Vec<&str> = GOGUI_ANALYZE
            .iter()
            .copied()
            .filter(|entry| entry.rsplit('/').next().is_some_and(|c| self.offers(c)))
            .collect();
        offered.join("\n")
    }

    /// `kata-raw-nn [COLOR] SYMMETRY|all`: KataGo's key-value format.
    fn raw_nn(&mut self, args: &[&str]) -> Result<String, String> {
        let (color, rest) = match args.first().and_then(|c| Color::parse(c)) {
            Some(c) => (c, &args[1..]),
            None => (self.game.to_move(), args),
        };
        let symmetries: Vec<Symmetry> = match rest.first().copied() {
            Some("all") => Symmetry::all().collect(),
            Some(n) => match n.parse::<u8>() {
                Ok(n) if n < 8 => vec![Symmetry::new(n)],
                _ => return Err("symmetry must be 0 to 7 or all".to_string()),
            },
            None => return Err("expected a symmetry (0 to 7, or all)".to_string()),
        };
        let mut position = self.game.clone();
        position.set_to_move(color);
        let (policy, value) = self.search_mut()?.nets();
        if policy.is_none() && value.is_none() {
            return Err("this engine has no nets".to_string());
        }
        let mut text = String::new();
        for symmetry in symmetries {
            let raw = raw_output(&position, policy, value, symmetry).map_err(|e| format!("{e:#}"))?;
            text.push_str(&raw_nn_text(&raw, color, position.size()));
        }
        Ok(text)
    }

    /// `kata-set-rules NAME` / `kgs-rules NAME`: the named rules from now
    /// on, in this game too (komi stays), unless the game has a move they
    /// forbid.
    fn set_rules(&mut self, args: &[&str]) -> Result<String, String> {
        let name = args.first().ok_or("expected rules")?;
        // KataGo's and KGS's variants of Chinese rules differ from each
        // other only in the ko rule, which go-train's Chinese rules settle.
        let base = name.trim_end_matches("-kgs").trim_end_matches("-ogs");
        let mut rules = Rules::by_name(base).ok_or_else(|| format!("unknown rules {name}"))?;
        rules.komi = self.rules.komi;
        self.game.set_rules(rules).map_err(|e| format!("the rules stay: {e} ({name})"))?;
        self.rules = rules;
        Ok(String::new())
    }

    /// The policy as GoGui colours: a shade per point, the likelihood
    /// written on the ten likeliest.
    fn policy_heatmap(&mut self) -> Result<String, String> {
        let game = self.game.clone();
        let size = game.size();
        let (policy, _) = self.search_mut()?.nets();
        let policy = policy.ok_or("this engine has no policy net")?;
        let raw = raw_output(&game, Some(policy), None, Symmetry::IDENTITY).map_err(|e| format!("{e:#}"))?;
        let probs = raw.policy.expect("a policy net gives a policy");
        let mut ranked: Vec<(usize, f32)> =
            probs.iter().enumerate().take(size * size).filter_map(|(i, p)| Some((i, (*p)?))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let top = ranked.first().map_or(1.0, |r| r.1).max(1e-6);
        let mut lines = Vec::new();
        for &(i, p) in ranked.iter().filter(|r| r.1 >= 0.001) {
            // Red for the likeliest, fading to yellow, by the square root of
            // the share of the top move (small shares stay visible).
            let heat = (p / top).sqrt();
            let green = (255.0 * (1.0 - heat)).round() as u8;
            lines.push(format!("COLOR #ff{green:02x}00 {}", Vertex::from_index(i, size).to_gtp(size)));
        }
        let labels: Vec<String> = ranked
            .iter()
            .take(10)
            .map(|&(i, p)| format!("{} {:.0}", Vertex::from_index(i, size).to_gtp(size), 100.0 * p))
            .collect();
        if !labels.is_empty() {
            lines.push(format!("LABEL {}", labels.join(" ")));
        }
        let pass = probs[size * size].unwrap_or(0.0);
        lines.push(format!("TEXT policy of {} to move; pass {:.1}%", game.to_move(), 100.0 * pass));
        Ok(lines.join("\n"))
    }

    /// The value net's win probability for the side to move.
    fn value_text(&mut self) -> Result<String, String> {
        let game = self.game.clone();
        let (_, value) = self.search_mut()?.nets();
        let value = value.ok_or("this engine has no value net")?;
        let raw = raw_output(&game, None, Some(value), Symmetry::IDENTITY).map_err(|e| format!("{e:#}"))?;
        let v = raw.value.expect("a value net gives a value");
        Ok(format!("{} to move wins with probability {v:.3} (value net)", game.to_move()))
    }

    /// Ownership as GoGui influence: positive for Black, negative for White.
    fn ownership_gfx(&self) -> String {
        let size = self.game.size();
        let owned = super::analyze::ownership_for(&self.game, Color::Black);
        let points: Vec<String> = owned
            .iter()
            .enumerate()
            .map(|(i, x)| format!("{} {x:.2}", Vertex::from_index(i, size).to_gtp(size)))
            .collect();
        format!("INFLUENCE {}", points.join(" "))
    }
}

/// KataGo's `kata-raw-nn` text for one symmetry: `symmetry N`, `whiteWin`
/// and `whiteLoss` (with a value net), `policy` as rows from the top with
/// `NAN` on illegal points and `policyPass` (with a policy net).
pub fn raw_nn_text(raw: &RawOutput, color: Color, size: usize) -> String {
    let mut text = format!("symmetry {}\n", raw.symmetry.number());
    if let Some(v) = raw.value {
        let white = if color == Color::White { v } else { 1.0 - v };
        text.push_str(&format!("whiteWin {white:.6}\nwhiteLoss {:.6}\nnoResult 0\n", 1.0 - white));
    }
    if let Some(policy) = &raw.policy {
        let number = |p: Option<f32>| p.map_or("NAN".to_string(), |p| format!("{p:.6}"));
        text.push_str("policy\n");
        for row in policy[..size * size].chunks(size) {
            text.push_str(&row.iter().map(|&p| number(p)).collect::<Vec<_>>().join(" "));
            text.push('\n');
        }
        text.push_str(&format!("policyPass {}\n", number(policy[size * size])));
    }
    text
}
