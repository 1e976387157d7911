//! `go-train gtp` as analysis GUIs drive it: streamed `lz-analyze` and
//! `kata-analyze` lines read by Leela Zero's and KataGo's grammar, cut off
//! by the next command, which must then be answered with no line lost or
//! garbled; `genmove_analyze`; the raw nets (`kata-raw-nn`); GoGui's,
//! gomill's and KGS's extensions.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use go_train::go::{Move, Vertex};

/// A live `go-train gtp` with its output read line by line on a thread.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        let mut child = common::piped(&["gtp"]).args(args).stderr(Stdio::null()).spawn().expect("start go-train gtp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                if send.send(line.expect("GTP output is UTF-8")).is_err() {
                    return;
                }
            }
        });
        Session { child, stdin, lines }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn line(&self) -> String {
        self.lines.recv_timeout(Duration::from_secs(120)).expect("an answer line within two minutes")
    }

    /// A whole ordinary answer, its lines joined by newlines.
    fn answer(&mut self, command: &str) -> String {
        self.send(command);
        let mut lines = vec![self.line()];
        loop {
            let line = self.line();
            if line.is_empty() {
                return lines.join("\n");
            }
            lines.push(line);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `info` block of an analysis line.
#[derive(Debug)]
struct Info {
    mv: String,
    visits: u64,
    winrate: f64,
    order: usize,
    pv: Vec<String>,
}

/// Reads an analysis line by the grammar of KataGo's GTP_Extensions.md:
/// `info` blocks of key-value pairs ending with `pv MOVES`, then
/// optionally `rootInfo` pairs and `ownership` with one number per point.
/// Panics on anything else. Win rates are scaled to 0..1.
fn parse_line(line: &str, leela: bool, size: usize) -> (Vec<Info>, Option<Vec<f64>>) {
    let words: Vec<&str> = line.split(' ').collect();
    assert!(words.iter().all(|w| !w.is_empty()), "no empty field: {line:?}");
    let is_move = |w: &str| w == "pass" || Vertex::parse_gtp(w, size).is_some();
    let number = |w: &str| -> f64 { w.parse().unwrap_or_else(|_| panic!("{w:?} is no number in {line:?}")) };
    let scale = if leela { 10000.0 } else { 1.0 };
    let (mut infos, mut ownership, mut i) = (Vec::new(), None, 0);
    while i < words.len() {
        match words[i] {
            "info" => {
                let mut info = Info { mv: String::new(), visits: 0, winrate: -1.0, order: usize::MAX, pv: vec![] };
                i += 1;
                while i < words.len() && words[i] != "pv" {
                    let (key, value) = (words[i], words[i + 1]);
                    match key {
                        "move" => info.mv = value.to_string(),
                        "visits" => info.visits = value.parse().expect("visits are an integer"),
                        "winrate" => info.winrate = number(value) / scale,
                        "order" => info.order = value.parse().expect("order is an integer"),
                        "prior" | "lcb" => {
                            let x = number(value) / scale;
                            assert!((0.0..=1.0).contains(&x), "{key} {value} in {line:?}");
                            if leela {
                                assert!(!value.contains('.'), "Leela Zero's numbers are integers: {line:?}");
                            }
                        }
                        _ => panic!("unexpected key {key:?} in {line:?}"),
                    }
                    i += 2;
                }
                assert_eq!(words.get(i), Some(&"pv"), "an info block ends with its pv: {line:?}");
                i += 1;
                while i < words.len() && is_move(words[i]) {
                    info.pv.push(words[i].to_string());
                    i += 1;
                }
                assert!(is_move(&info.mv) && (0.0..=1.0).contains(&info.winrate), "{info:?} in {line:?}");
                infos.push(info);
            }
            "rootInfo" => {
                assert!(!leela);
                assert_eq!((words[i + 1], words[i + 3]), ("visits", "winrate"), "{line:?}");
                assert!((0.0..=1.0).contains(&number(words[i + 4])));
                i += 5;
            }
            "ownership" => {
                assert!(!leela);
                let owned: Vec<f64> = words[i + 1..].iter().map(|w| number(w)).collect();
                assert!(owned.iter().all(|x| (-1.0..=1.0).contains(x)), "{line:?}");
                ownership = Some(owned);
                i = words.len();
            }
            other => panic!("unexpected {other:?} in {line:?}"),
        }
    }
    let orders: Vec<usize> = infos.iter().map(|info| info.order).collect();
    assert_eq!(orders, (0..infos.len()).collect::<Vec<_>>(), "orders count from 0: {line:?}");
    assert!(infos.windows(2).all(|w| w[0].visits >= w[1].visits), "most visited first: {line:?}");
    (infos, ownership)
}

/// Starts `command` (an analysis command with an interval), reads `lines`
/// analysis lines, interrupts it with `name`, and checks the answer ends
/// cleanly before `name` is answered. Returns the lines.
fn analyze_then_interrupt(s: &mut Session, command: &str, lines: usize, leela: bool, size: usize) -> Vec<String> {
    s.send(&format!("5 {command}"));
    assert_eq!(s.line(), "=5", "the answer begins at once");
    let mut got = Vec::new();
    for _ in 0..lines {
        let line = s.line();
        assert!(!line.is_empty(), "analysis runs until interrupted");
        parse_line(&line, leela, size);
        got.push(line);
    }
    s.send("6 name");
    // Lines already on their way may come before the end of the answer.
    loop {
        let line = s.line();
        if line.is_empty() {
            break;
        }
        parse_line(&line, leela, size);
    }
    assert_eq!(s.line(), "=6 go-train", "the interrupting command is answered");
    assert_eq!(s.line(), "");
    got
}

#[test]
fn analysis_streams_by_each_grammar_until_the_next_command() {
    // MCTS without nets on 9x9: every legal move is a child.
    let mut s = Session::start(&["--engine", "mcts", "--size", "9", "--leaf", "stones", "--seed", "2"]);
    assert_eq!(s.answer("play b e5"), "= ");
    assert_eq!(s.answer("play w c3"), "= ");

    let lines = analyze_then_interrupt(&mut s, "kata-analyze 5 ownership true rootInfo true minmoves 3", 3, false, 9);
    let (infos, ownership) = parse_line(lines.last().unwrap(), false, 9);
    assert!(infos.len() >= 3, "minmoves 3: {}", lines.last().unwrap());
    assert_eq!(ownership.expect("ownership asked for").len(), 81);
    // Visits grow from line to line: one search goes on.
    let total = |l: &String| parse_line(l, false, 9).0.iter().map(|i| i.visits).sum::<u64>();
    assert!(total(&lines[0]) < total(&lines[2]), "{lines:#?}");
    assert!(infos.iter().all(|i| i.mv != "E5" && i.mv != "C3"), "no move on a stone");
    assert!(infos.iter().all(|i| i.visits == 0 || i.pv.first() == Some(&i.mv)), "a pv starts with its move");

    let lines = analyze_then_interrupt(&mut s, "lz-analyze w 5", 2, true, 9);
    assert!(!lines[1].contains("ownership"));
    // `avoid` keeps the moves out of the search's root, `allow` keeps it to them.
    let avoided = ["D4", "D5", "D6", "E4", "E6", "F4", "F5", "F6"];
    let command = format!("lz-analyze w 5 avoid w {} 1", avoided.join(","));
    let lines = analyze_then_interrupt(&mut s, &command, 2, true, 9);
    let (infos, _) = parse_line(&lines[1], true, 9);
    assert!(!infos.is_empty() && infos.iter().all(|i| !avoided.contains(&i.mv.as_str())), "{}", lines[1]);
    let lines = analyze_then_interrupt(&mut s, "kata-analyze w 5 allow w G7,B2 1", 2, false, 9);
    let (infos, _) = parse_line(&lines[1], false, 9);
    assert!(!infos.is_empty() && infos.iter().all(|i| i.mv == "G7" || i.mv == "B2"), "{}", lines[1]);
    // Sabaki's dialect: KataGo's, every float with a decimal point.
    let lines = analyze_then_interrupt(&mut s, "analyze b interval 5 maxmoves 2", 2, false, 9);
    let (infos, _) = parse_line(&lines[1], false, 9);
    assert!(infos.len() <= 2 && lines[1].contains("winrate 0."), "{}", lines[1]);

    // An empty line stops an analysis too, and gets no answer of its own.
    s.send("7 kata-analyze 5");
    assert_eq!(s.line(), "=7");
    parse_line(&s.line(), false, 9);
    s.send("");
    while !s.line().is_empty() {}
    assert_eq!(s.answer("8 list_stones black"), "=8 E5");

    // genmove_analyze searches, plays and says what it played.
    s.send("9 lz-genmove_analyze b 1");
    assert_eq!(s.line(), "=9");
    let played = loop {
        let line = s.line();
        if let Some(mv) = line.strip_prefix("play ") {
            break mv.to_string();
        }
        parse_line(&line, true, 9);
    };
    assert_eq!(s.line(), "", "play ends the answer");
    assert!(Move::parse_gtp(&played, 9).is_some(), "{played}");
    let stones = s.answer("list_stones black");
    assert!(played == "pass" || stones.split(' ').any(|v| v == played), "{played} is on the board: {stones}");

    // Bad arguments are an ordinary error answer.
    assert_eq!(s.answer("lz-analyze b 10 ownership true"), "? unknown analysis option ownership");
    assert_eq!(s.answer("kata-analyze 10 minmoves"), "? minmoves: a key without a value");
    // Once "? -1: a key without a value".
    assert_eq!(s.answer("lz-analyze b -1"), "? interval -1: give a whole number of centiseconds");
    assert_eq!(s.answer("lz-analyze 1e3"), "? interval 1e3: give a whole number of centiseconds");
    assert_eq!(s.answer("10 name"), "=10 go-train");
}

/// Reads the rest of a streamed answer up to the empty line that ends it:
/// every line before that must be an analysis line (none empty), the last
/// one may be `play VERTEX`. Returns the lines.
fn rest_of_analysis(s: &Session, leela: bool, size: usize) -> Vec<String> {
    let mut got: Vec<String> = Vec::new();
    loop {
        let line = s.line();
        if line.is_empty() {
            return got;
        }
        assert!(!got.last().is_some_and(|l| l.starts_with("play ")), "play is the answer's last line: {got:?}");
        if !line.starts_with("play ") {
            parse_line(&line, leela, size);
        }
        got.push(line);
    }
}

#[test]
fn analysis_with_no_move_to_list_writes_no_empty_line_inside_its_answer() {
    let mut s = Session::start(&["--engine", "mcts", "--size", "9", "--leaf", "stones", "--iterations", "50"]);
    assert_eq!(s.answer("play b pass"), "= ");
    assert_eq!(s.answer("play w pass"), "= ");
    // Two passes ended the game; its position is read as if play went on
    // (as KataGo's is, for a GUI's analysis of a finished game).
    s.send("1 kata-analyze 10");
    assert_eq!(s.line(), "=1");
    s.send("2 name");
    rest_of_analysis(&s, false, 9);
    assert_eq!(s.line(), "=2 go-train", "the analysis answer ended with one empty line");
    assert_eq!(s.line(), "");
    s.send("3 lz-genmove_analyze b 10");
    assert_eq!(s.line(), "=3");
    let lines = rest_of_analysis(&s, true, 9);
    let last = lines.last().map(String::as_str).unwrap_or_default();
    assert!(last.starts_with("play ") && lines.len() > 1, "moves, then play before the empty line: {lines:?}");
    assert_eq!(s.answer("4 name"), "=4 go-train");

    // Listing no move at all: the lines it would stream every interval
    // are left out (given time for a few intervals to pass).
    assert_eq!(s.answer("clear_board"), "= ");
    s.send("5 kata-analyze 1 maxmoves 0");
    assert_eq!(s.line(), "=5");
    std::thread::sleep(Duration::from_millis(300));
    s.send("6 name");
    assert_eq!(rest_of_analysis(&s, false, 9), Vec::<String>::new());
    assert_eq!(s.line(), "=6 go-train");
    assert_eq!(s.line(), "");
}

#[test]
fn raw_net_output_and_gui_extensions_answer_on_the_shipped_nets() {
    let mut s = Session::start(&[]);
    assert_eq!(s.answer("play b q16"), "= ");
    assert_eq!(s.answer("play w d4"), "= ");
    let raw = s.answer("kata-raw-nn all");
    let blocks: Vec<&str> = raw.trim_start_matches("= ").split("symmetry ").filter(|b| !b.is_empty()).collect();
    assert_eq!(blocks.len(), 8, "{raw}");
    for (n, block) in blocks.iter().enumerate() {
        let words: Vec<&str> = block.split_whitespace().collect();
        assert_eq!(words[0], n.to_string());
        let after = |key: &str| words.iter().position(|w| *w == key).unwrap_or_else(|| panic!("{key} in {block}")) + 1;
        let win: f64 = words[after("whiteWin")].parse().unwrap();
        let loss: f64 = words[after("whiteLoss")].parse().unwrap();
        assert!((win + loss - 1.0).abs() < 1e-5 && (0.0..=1.0).contains(&win));
        let policy = &words[after("policy")..after("policy") + 361];
        // Illegal points (the two stones) are NAN, in board order from A19.
        let nan: Vec<usize> = (0..361).filter(|&i| policy[i] == "NAN").collect();
        assert_eq!(nan, vec![3 * 19 + 15, 15 * 19 + 3], "{block}");
        let pass: f64 = words[after("policyPass")].parse().unwrap();
        let sum: f64 = policy.iter().filter(|w| **w != "NAN").map(|w| w.parse::<f64>().unwrap()).sum::<f64>() + pass;
        assert!((sum - 1.0).abs() < 0.01, "probabilities sum to 1: {sum}");
    }
    assert!(s.answer("kata-raw-nn 8").starts_with("? symmetry"));

    let commands = s.answer("gogui-analyze_commands");
    for entry in commands.trim_start_matches("= ").lines() {
        let [kind, label, command] = entry.split('/').collect::<Vec<_>>()[..] else { panic!("{entry}") };
        assert!(["gfx", "string"].contains(&kind) && !label.is_empty(), "{entry}");
        let answer = s.answer(command);
        assert!(answer.starts_with("= ") && answer.len() > 10, "{command}: {answer}");
    }
    let heat = s.answer("gogui-policy_heatmap");
    assert!(heat.trim_start_matches("= ").starts_with("COLOR #ff0000 "), "the likeliest move first, red: {heat}");

    let cpu: f64 = s.answer("gomill-cpu_time").trim_start_matches("= ").parse().unwrap();
    assert!(cpu > 0.0);
    assert!(s.answer("gomill-describe_engine").contains("mcts"));
    assert_eq!(s.answer("kgs-rules japanese"), "= ");
    assert_eq!(s.answer("kata-set-rules chinese-kgs"), "= ");
    assert_eq!(s.answer("kgs-rules ing"), "? unknown rules ing");
    assert_eq!(s.answer("kgs-game_over"), "= ");
    assert_eq!(s.answer("list_stones white"), "= D4", "rules changed, the game stayed");
}

#[test]
fn gtp_flags_reach_the_search_it_plays() {
    let mut tuned = Session::start(&[]);
    let shipped = tuned.answer("gomill-describe_engine");
    assert!(shipped.contains("preset tuned:") && shipped.contains(" mix=1 mix-playouts=8 "), "{shipped}");
    assert!(shipped.contains("root-policy=built-in resnet-policy.safetensors"), "{shipped}");
    let mut own_root = Session::start(&["--root-policy", "none"]);
    let described = own_root.answer("gomill-describe_engine");
    assert!(described.contains(" mix=1 mix-playouts=8 ") && described.contains("root-policy=none"), "{described}");
    // The raw policy GUIs show is the one that chose the root's children.
    let policy = |s: &mut Session| {
        let raw = s.answer("kata-raw-nn 0");
        raw.split_whitespace().skip_while(|w| *w != "policy").skip(1).take(361).collect::<Vec<_>>().join(" ")
    };
    assert_ne!(policy(&mut tuned), policy(&mut own_root));
    let mut tactical = Session::start(&["--mix-tactics", "on", "--mix-playouts", "4"]);
    let described = tactical.answer("gomill-describe_engine");
    assert!(described.contains(" mix-playouts=4 mix-tactics=on "), "{described}");
}

/// The move a `genmove_analyze` form plays is the one `genmove` would:
/// under an engine without a tree search of its own the agent chooses it,
/// and the analysis search (if any) only streams lines.
#[test]
fn genmove_analyze_plays_the_agents_own_move() {
    fn played(s: &Session) -> String {
        loop {
            let line = s.line();
            if let Some(mv) = line.strip_prefix("play ") {
                assert_eq!(s.line(), "", "play ends the answer");
                return mv.to_string();
            }
            parse_line(&line, true, 19);
        }
    }
    // The policy net alone: its choice here (C3) is not what a 30-iteration
    // search on the same nets plays (F17).
    let mut s = Session::start(&["--engine", "policy", "--iterations", "30"]);
    for mv in ["b q16", "w d4", "b q3", "w d16", "b f3", "w c10"] {
        assert_eq!(s.answer(&format!("play {mv}")), "= ");
    }
    let policy_choice = s.answer("reg_genmove b");
    s.send("1 lz-genmove_analyze b 0");
    assert_eq!(s.line(), "=1");
    assert_eq!(format!("= {}", played(&s)), policy_choice);

    // Random play has no search to analyze with: it still plays.
    let mut s = Session::start(&["--engine", "random", "--size", "9"]);
    s.send("2 kata-genmove_analyze b 10");
    assert_eq!(s.line(), "=2");
    let mv = played(&s);
    let stones = s.answer("list_stones black");
    assert_eq!(stones, format!("= {mv}"), "the move is on the board");
    assert_eq!(s.answer("3 lz-analyze b 10"), "?3 this engine has no search to analyze with");
}
