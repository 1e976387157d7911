#!/usr/bin/env python3
"""Drive `go-train analysis` with KaTrain's own engine client, headless.

KaTrain (pip package `katrain`) talks to KataGo's JSON analysis engine
through `katrain.core.engine.KataGoEngine`. This script starts that class
with a stand-in for the KaTrain app (no window, no GUI), pointed at a small
wrapper named `katago` that ignores KataGo's arguments (`analysis -model M
-config C -override-config ...`) and execs `go-train analysis` instead, teeing
every query KaTrain writes and every line go-train answers to files. It then
asks for analyses the way the GUI does (GameNode.analyze, request_analysis
with ownership/policy, find-alternatives, pondering + terminate, an
unsupported board size) on a real SGF, and prints what KaTrain parsed.

Exit 0 when KaTrain's client received and parsed analyses, everything the
GUI reads from an analysed node works, find-alternatives avoided the moves
it named, and pondering streamed partial results before its terminate.

Setup (once):
    python3 -m venv /tmp/katrain-venv
    /tmp/katrain-venv/bin/pip install katrain
Run (from the repository root):
    KATRAIN_VENV=/tmp/katrain-venv python3 scripts/katrain-check.py target/release/go-train
    # or: /tmp/katrain-venv/bin/python scripts/katrain-check.py target/release/go-train --sgf GAME.sgf
"""

import argparse
import glob
import json
import os
import shlex
import sys
import tempfile
import threading
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Fields go-train's analysis engine reads (src/gtp/analysis_engine.rs);
# everything else in a query is ignored without a warning.
GO_TRAIN_FIELDS = {
    "id", "moves", "initialStones", "initialPlayer", "rules", "komi", "boardXSize", "boardYSize",
    "analyzeTurns", "maxVisits", "includeOwnership", "includeMovesOwnership", "includePolicy", "avoidMoves",
    "allowMoves", "reportDuringSearchEvery", "priority", "overrideSettings", "action", "terminateId",
}
GO_TRAIN_OVERRIDES = {"reportAnalysisWinratesAs", "maxTime"}


def reexec_in_venv():
    venv = os.environ.get("KATRAIN_VENV")
    if not venv:
        return
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv) and os.path.exists(python):
        os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])


def parse_args():
    default_sgf = sorted(glob.glob(os.path.join(REPO, "..", "shared", "datasets", "kgs-6d", "*", "*.sgf")))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("go_train", help="the go-train binary")
    p.add_argument("--sgf", default=default_sgf[0] if default_sgf else None, help="game to analyse (default: first kgs-6d game)")
    p.add_argument("--move", type=int, default=30, help="main-line move to analyse (default 30)")
    p.add_argument("--visits", type=int, default=16, help="KaTrain's max_visits (default 16)")
    p.add_argument("--nets", default=os.path.join(REPO, "nets"), help="folder with policy/value/playout.safetensors")
    p.add_argument("--threads", type=int, default=1, help="go-train --threads (default 1)")
    p.add_argument("--workdir", default=None, help="where the wrapper and the query/response logs go (default: a new /tmp dir)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each answer")
    p.add_argument("--no-ponder", action="store_true", help="skip the pondering + terminate probe")
    return p.parse_args()


def write_wrapper(workdir, args):
    """A `katago` that ignores its arguments and execs go-train analysis."""
    binary = os.path.abspath(args.go_train)
    nets = os.path.abspath(args.nets)
    cmd = [binary, "analysis", "--threads", str(args.threads),
           "--policy", os.path.join(nets, "policy.safetensors"),
           "--value", os.path.join(nets, "value.safetensors"),
           "--playout", os.path.join(nets, "playout.safetensors")]
    q, r, e, a = (os.path.join(workdir, n) for n in ("queries.jsonl", "responses.jsonl", "stderr.log", "argv.txt"))
    path = os.path.join(workdir, "katago")
    with open(path, "w") as f:
        f.write("#!/bin/bash\n"
                "# Stand-in for katago: KaTrain's arguments are logged and ignored.\n"
                f'printf "%s\\n" "$0" "$@" > {shlex.quote(a)}\n'
                f"exec {shlex.join(cmd)} < <(tee -a {shlex.quote(q)}) > >(tee -a {shlex.quote(r)}) 2> >(tee -a {shlex.quote(e)} >&2)\n")
    os.chmod(path, 0o755)
    return path, q, r


def read_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        out.append({"_unparsed": line})
    return out


def trimmed(obj, n=4):
    """A query or response with long lists cut, for printing."""
    if isinstance(obj, dict):
        return {k: trimmed(v, n) for k, v in obj.items()}
    if isinstance(obj, list):
        return [trimmed(v, n) for v in obj[:n]] + ([f"...{len(obj) - n} more"] if len(obj) > n else [])
    return obj


def main():
    reexec_in_venv()
    args = parse_args()
    if not (os.path.isfile(args.go_train) and os.access(args.go_train, os.X_OK)):
        sys.exit(f"FAIL: {args.go_train}: no go-train binary there (cargo build --release; then target/release/go-train)")
    if not args.sgf or not os.path.exists(args.sgf):
        sys.exit(f"no SGF: give --sgf (looked for {REPO}/../shared/datasets/kgs-6d/*/*.sgf)")
    workdir = args.workdir or tempfile.mkdtemp(prefix="katrain-check-")
    os.makedirs(workdir, exist_ok=True)
    # Headless: no window, no kivy argv parsing, kivy/katrain homes in the scratch dir.
    os.environ.update(KIVY_NO_WINDOW="1", KIVY_NO_ARGS="1", KIVY_NO_CONSOLELOG="1", KIVY_NO_FILELOG="1",
                      KIVY_HOME=os.path.join(workdir, "kivy-home"))
    sys.argv = sys.argv[:1]  # KaTrainBase reads sys.argv[1] as a config file name

    try:
        from katrain.core.base_katrain import KaTrainBase
        from katrain.core.constants import OUTPUT_ERROR, OUTPUT_DEBUG, VERSION
        from katrain.core.engine import KataGoEngine
        from katrain.core.game import BaseGame, KaTrainSGF
    except ImportError as e:
        sys.exit(f"FAIL: could not import KaTrain ({e}; pip install katrain in a venv and set KATRAIN_VENV to it)")
    except Exception:
        traceback.print_exc()
        sys.exit("FAIL: could not import KaTrain (pip install katrain in the venv; set KATRAIN_VENV)")

    class HeadlessKaTrain(KaTrainBase):
        """What KataGoEngine and BaseGame need from the app: config, log, popups."""

        def __init__(self):
            self.messages = []
            self.popups = []
            super().__init__(force_package_config=True, debug_level=OUTPUT_DEBUG)

        def log(self, message, level=0):
            self.messages.append((level, str(message)))
            if level == OUTPUT_ERROR:
                print(f"  [katrain ERROR] {message}")

        def __call__(self, message, *args):  # the app's message dispatch, e.g. engine_recovery_popup
            self.popups.append((message, args))
            print(f"  [katrain popup] {message} {args}")

        def update_state(self, *args, **kwargs):
            pass

    wrapper, queries_log, responses_log = write_wrapper(workdir, args)
    print(f"KaTrain {VERSION}; go-train {os.path.abspath(args.go_train)}; work dir {workdir}")
    katrain = HeadlessKaTrain()
    config = dict(katrain.config("engine"))
    config.update(katago=wrapper, backend="local", max_visits=args.visits, fast_visits=max(1, args.visits // 2))
    engine = KataGoEngine(katrain, config)
    if getattr(engine, "katago_process", None) is None:
        sys.exit(f"FAIL: KaTrain did not start the engine: {katrain.messages[-3:]}")
    print(f"KaTrain started: {engine.command}")

    root = KaTrainSGF.parse_file(args.sgf)
    game = BaseGame(katrain, move_tree=root)
    nodes = [root]
    while nodes[-1].children and len(nodes) <= args.move + 1:
        nodes.append(nodes[-1].children[0])
    node = nodes[min(args.move, len(nodes) - 1)]
    child = nodes[min(args.move + 1, len(nodes) - 1)]
    print(f"SGF {args.sgf}: RU={root.ruleset} KM={root.komi} SZ={root.board_size}; analysing move {node.depth}")

    problems = []
    results = {}

    def wait(cond, what):
        end = time.time() + args.timeout
        while time.time() < end:
            if cond():
                return True
            if engine.katago_process is None or engine.katago_process.poll() is not None:
                problems.append(f"{what}: engine process died")
                return False
            time.sleep(0.05)
        problems.append(f"{what}: no answer in {args.timeout}s")
        return False

    # 1. The GUI path: GameNode.analyze -> request_analysis -> set_analysis.
    node.analyze(engine, visits=args.visits)
    child.analyze(engine, visits=args.visits)
    wait(lambda: node.analysis_complete and child.analysis_complete, "GameNode.analyze")

    # 2. request_analysis directly, ownership and policy asked for.
    def keep(name):
        def callback(result, partial):
            results.setdefault(name, []).append((partial, result))
        return callback

    def error_cb(name):
        def callback(result):
            results.setdefault(name + ":error", []).append(result)
        return callback

    engine.request_analysis(node, keep("direct"), error_cb("direct"), visits=args.visits, ownership=True,
                            include_policy=True)
    wait(lambda: "direct" in results or "direct:error" in results, "request_analysis")

    # 3. Find alternatives (avoidMoves with the moves already analysed).
    before = set(node.analysis["moves"])
    engine.request_analysis(node, keep("alternatives"), error_cb("alternatives"), visits=args.visits,
                            find_alternatives=True)
    wait(lambda: "alternatives" in results or "alternatives:error" in results, "find_alternatives")

    # 4. Pondering (maxVisits 10M, reportDuringSearchEvery) stopped by a terminate.
    if not args.no_ponder:
        engine.request_analysis(node, keep("ponder"), error_cb("ponder"), ponder=True)
        time.sleep(2.0)
        engine.stop_pondering()
        wait(lambda: "ponder" in results or "ponder:error" in results, "ponder + terminate")

    # 5. A position go-train cannot analyse (9x9): does KaTrain's error path cope?
    small = BaseGame(katrain, move_tree=KaTrainSGF.parse_sgf("(;GM[1]FF[4]SZ[9]KM[7]RU[chinese];B[ee])"))
    engine.request_analysis(small.root.children[0], keep("9x9"), error_cb("9x9"), visits=args.visits)
    wait(lambda: "9x9" in results or "9x9:error" in results, "9x9 query")

    engine_alive = engine.katago_process is not None and engine.katago_process.poll() is None
    # What KaTrain's GUI reads from an analysed node.
    views = {}
    for label, fn in [
        ("node.winrate", lambda: node.winrate),
        ("node.format_winrate()", lambda: node.format_winrate()),
        ("node.score (scoreLead)", lambda: node.score),
        ("node.root_visits", lambda: node.root_visits),
        ("len(node.ownership)", lambda: len(node.ownership or [])),
        ("node.policy_ranking[:3]", lambda: [(round(p, 3), m.gtp()) for p, m in (node.policy_ranking or [])[:3]]),
        ("node.candidate_moves", lambda: [(d["move"], d["visits"], round(d["winrate"], 3)) for d in node.candidate_moves]),
        ("child.points_lost", lambda: child.points_lost),
        ("child.comment(details=True)", lambda: child.comment(details=True, interactive=False).strip().replace("\n", " | ")),
    ]:
        try:
            views[label] = ("ok", fn())
        except Exception as e:
            views[label] = ("EXCEPTION", f"{type(e).__name__}: {e}")

    def shutdown():
        try:
            engine.shutdown(finish=False)
        except Exception:
            traceback.print_exc()
    t = threading.Thread(target=shutdown, daemon=True)
    t.start()
    t.join(15)

    # ---- summary ----
    queries = read_jsonl(queries_log)
    responses = read_jsonl(responses_log)
    print(f"\nKaTrain sent {len(queries)} lines, go-train answered {len(responses)} (logs: {queries_log}, {responses_log})")
    sent = set().union(*(q.keys() for q in queries)) if queries else set()
    overrides = set().union(*(q.get("overrideSettings", {}).keys() for q in queries)) if queries else set()
    print("query fields KaTrain used:", ", ".join(sorted(sent)))
    print("overrideSettings KaTrain used:", ", ".join(sorted(overrides)))
    print("fields go-train ignores silently:", ", ".join(sorted(sent - GO_TRAIN_FIELDS)) or "none")
    print("overrideSettings go-train ignores:", ", ".join(sorted(overrides - GO_TRAIN_OVERRIDES)) or "none")
    for q in queries[:2]:
        print("  query:", json.dumps(trimmed(q)))
    errors = [r for r in responses if "error" in r]
    for r in errors:
        print("  go-train error:", json.dumps(r))
    warnings = [r for r in responses if "warning" in r]
    for r in warnings:
        print("  go-train warning:", json.dumps(r))

    if node.analysis_exists:
        print(f"\nKaTrain's node (move {node.depth}, {node.next_player} to play): root {json.dumps(node.analysis['root'])}")
    for name in ("direct", "alternatives", "ponder", "9x9"):
        for partial, r in results.get(name, []):
            moves = [(m["move"], m["visits"], round(m["winrate"], 3)) for m in r.get("moveInfos", [])]
            print(f"  {name}: partial={partial} visits={r['rootInfo']['visits']} winrate={r['rootInfo']['winrate']:.3f} "
                  f"moves={moves} ownership={len(r.get('ownership') or [])} policy={len(r.get('policy') or [])}")
        for r in results.get(name + ":error", []):
            print(f"  {name}: error callback got {json.dumps(r)}")
    alt = set()
    if "alternatives" in results:
        alt = {m["move"] for _, r in results["alternatives"] for m in r.get("moveInfos", [])}
        if alt & before:
            print(f"  avoidMoves ignored: alternatives repeat avoided moves {sorted(alt & before)}")
    print("\nwhat KaTrain's GUI reads from the analysed node:")
    for label, (status, value) in views.items():
        print(f"  {label}: {status} {value}")
    engine_errors = [m for lvl, m in katrain.messages if lvl == OUTPUT_ERROR]
    print(f"\nengine alive at the end: {engine_alive}; KaTrain error log lines: {len(engine_errors)}; popups: {len(katrain.popups)}")
    for p in problems:
        print("  problem:", p)

    failures = []
    if not (node.analysis_exists and node.analysis["moves"] and "direct" in results):
        failures.append("KaTrain's client parsed no analysis")
    failures += [f"{label} raised {value}" for label, (status, value) in views.items() if status != "ok"]
    if "alternatives" in results and alt & before:
        failures.append("find-alternatives repeated avoided moves")
    if not args.no_ponder and not any(partial for partial, _ in results.get("ponder", [])):
        failures.append("pondering streamed no partial result")
    failures += problems
    for f in failures:
        print("FAIL:", f)
    print("\nPASS: KaTrain's client drove go-train's analysis engine" if not failures else "")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
