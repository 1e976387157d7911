#!/usr/bin/env bash
# End-to-end test of `go-train prepare` as a Slurm array job: the parts that N
# array tasks write into one folder, merged, must hold the very records of a
# one-process run.
#
#   scripts/slurm-array-prepare.sh [--no-slurm] [--games N] [--parts N]
#                                  [--list FILE] [--work DIR] [ROOT...]
#
#  1. a small game list: `go-train filter ROOT...` (default
#     ../shared/datasets/kgs-6d), or --list FILE, cut to its first N games
#     (--games, default 600: seconds of work);
#  2. `go-train prepare LIST --out WORK/one --value per-game:8`, one process;
#  3. `sbatch --array=1-N --wait` (--parts, default 4) of a batch script whose
#     tasks run `go-train prepare LIST --out WORK/parts --value per-game:8`
#     with no --part: go-train reads SLURM_ARRAY_TASK_ID/_COUNT/_MIN itself;
#  4. `go-train dataset merge` (twice: merging again must be harmless),
#     `go-train dataset verify`, and per split the records_crc32, games,
#     positions and value positions of `go-train dataset info --json` of
#     WORK/one and WORK/parts compared;
#  5. kill tests, twice: part 2 killed before the merge (its manifest
#     part-0002-of-0004.json and the dataset's manifest gone, a shard of it
#     truncated), then part 2's manifest lost after the merge; each time
#     merge must refuse, the whole array submitted again must redo part 2
#     only (the others' files untouched), then merge, verify, compare again.
#
# Slurm must be up (scripts/slurm-local.sh start gives a one-node cluster
# here; its config is found through SLURM_CONF, or under
# ${SLURM_LOCAL_DIR:-/tmp/go-train-slurm}). --no-slurm runs the N parts as
# background processes instead, with the SLURM_ARRAY_* variables set by hand.
# On a real cluster, put --work on a filesystem the compute nodes share.
#
# Prints a PASS or FAIL line per check. Exits 0 when all pass, 1 when any
# fails, 2 when it cannot run (no Slurm, a go-train without --part, bad use).
# Environment: GO_TRAIN (default target/release/go-train).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
go_train=${GO_TRAIN:-$repo/target/release/go-train}
use_slurm=1
games=600
parts=4
list_in=""
work=""
roots=()

usage() {
    sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

while (($#)); do
    case $1 in
        --no-slurm) use_slurm=0 ;;
        --games) games=${2:?--games needs a number}; shift ;;
        --parts) parts=${2:?--parts needs a number}; shift ;;
        --list) list_in=${2:?--list needs a file}; shift ;;
        --work) work=${2:?--work needs a folder}; shift ;;
        -h | --help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "unknown option $1" >&2; usage ;;
        *) roots+=("$1") ;;
    esac
    shift
done
[[ $games =~ ^[1-9][0-9]*$ && $parts =~ ^[1-9][0-9]*$ ]] || { echo "--games and --parts take positive numbers" >&2; exit 2; }
((parts >= 2)) || { echo "--parts must be at least 2 (the kill test redoes part 2)" >&2; exit 2; }

failures=0
checks=0
pass() { checks=$((checks + 1)); echo "PASS $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; }
info() { echo "     $*"; }
die2() { echo "slurm-array-prepare: $*" >&2; exit 2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# --- what it needs ------------------------------------------------------------
if [[ $go_train != */* ]]; then
    go_train=$(command -v "$go_train") || die2 "GO_TRAIN=$GO_TRAIN is not on PATH"
fi
[[ -x $go_train ]] || die2 "no go-train at $go_train (cargo build --release, or set GO_TRAIN)"
go_train=$(realpath "$go_train")
"$go_train" prepare --help | grep -q -- --part ||
    die2 "$go_train has no 'prepare --part': build a go-train with parts"
"$go_train" dataset --help | grep -qw merge ||
    die2 "$go_train has no 'dataset merge': build a go-train with parts"
command -v jq >/dev/null || die2 "needs jq (apt-get install -y jq)"

if ((use_slurm)); then
    if [[ -z ${SLURM_CONF:-} && -e ${SLURM_LOCAL_DIR:-/tmp/go-train-slurm}/slurm.conf ]]; then
        export SLURM_CONF=${SLURM_LOCAL_DIR:-/tmp/go-train-slurm}/slurm.conf
    fi
    command -v sbatch >/dev/null ||
        die2 "Slurm is not installed (no sbatch); install it (apt-get install -y slurm-wlm munge) and run scripts/slurm-local.sh start, or pass --no-slurm"
    states=$(sinfo --noheader --format=%t 2>&1 | head -n 3 | tr '\n' ' ') || true
    grep -qE '(^| )(idle|mix|alloc|comp) ' <<<"$states" ||
        die2 "Slurm is not running or has no usable node (SLURM_CONF=${SLURM_CONF:-unset}; sinfo: ${states:-no answer}); start it with scripts/slurm-local.sh start, or pass --no-slurm"
fi

# --- the work folder ------------------------------------------------------------
marker=.slurm-array-prepare
if [[ -z $work ]]; then
    work=$(mktemp -d /tmp/go-train-array.XXXXXX)
elif [[ -e $work ]]; then
    [[ -d $work ]] || die2 "--work $work is not a folder"
    if [[ -n $(ls -A "$work") && ! -e $work/$marker ]]; then
        die2 "--work $work is not empty and was not made by this script; give a new or empty folder"
    fi
    rm -rf "${work:?}/one" "${work:?}/parts" "${work:?}/logs"
fi
mkdir -p "$work/logs"
work=$(realpath "$work")
touch "$work/$marker"
echo "work folder: $work"
echo "go-train: $go_train"

# --- 1. the small list ------------------------------------------------------------
list=$work/small.list
if [[ -z $list_in ]]; then
    ((${#roots[@]})) || roots=("$repo/../shared/datasets/kgs-6d")
    for i in "${!roots[@]}"; do
        [[ -e ${roots[$i]} ]] || die2 "no such game folder: ${roots[$i]}"
        roots[i]=$(realpath "${roots[$i]}")
    done
    list_in=$work/full.list
    t=$(now)
    "$go_train" filter "${roots[@]}" --out "$list_in" >"$work/logs/filter.log" 2>&1 ||
        { tail -n 20 "$work/logs/filter.log" >&2; die2 "go-train filter failed (log: $work/logs/filter.log)"; }
    info "filter ${roots[*]}: $(since "$t") s"
fi
[[ -r $list_in ]] || die2 "cannot read the list $list_in"
# A list is a '#' header line, then `file<TAB>game index` per game: keep the
# comment lines and the first N games. Names relative to the list's folder
# (under the header that says so) are given that folder, for the copy lies
# in another.
# The folder goes through the environment (awk -v reads escapes in it) and
# is escaped as the list's names are: \\ \t \n \r.
LIST_FROM=$(dirname "$(realpath "$list_in")") awk -v n="$games" '
    BEGIN {
        for (i = 1; i <= length(ENVIRON["LIST_FROM"]); i++) {
            c = substr(ENVIRON["LIST_FROM"], i, 1)
            from = from (c == "\\" ? "\\\\" : c == "\t" ? "\\t" : c == "\n" ? "\\n" : c == "\r" ? "\\r" : c)
        }
    }
    { sub(/\r$/, "") }
    NR == 1 && /^#/ { if (index($0, "relative to this list'"'"'s folder")) rel = 1 }
    /^#/ { print; next }
    NF && k < n { if (rel && substr($0, 1, 1) != "/") $0 = from "/" $0; print; k++ }' "$list_in" >"$list"
listed=$(grep -cv '^#' "$list" || true)
((listed > 0)) || die2 "no games in $list_in"
info "list: $list ($listed games)"

# --- 2. one process ------------------------------------------------------------
t=$(now)
(cd "$repo" && "$go_train" prepare "$list" --out "$work/one" --value per-game:8) >"$work/logs/one.log" 2>&1 ||
    { tail -n 20 "$work/logs/one.log" >&2; die2 "the one-process prepare failed (log: $work/logs/one.log)"; }
one_s=$(since "$t")
info "one-process prepare: $one_s s"

# --- 3. the parts ------------------------------------------------------------
# The task: go-train picks its part from the SLURM_ARRAY_* variables.
job=$work/prepare-part.sbatch
cat >"$job" <<EOF
#!/bin/bash
#SBATCH --job-name=go-train-prepare
#SBATCH --cpus-per-task=1
#SBATCH --time=15
set -euo pipefail
echo "task \$SLURM_ARRAY_TASK_ID of \$SLURM_ARRAY_TASK_COUNT (min \$SLURM_ARRAY_TASK_MIN) on \$(hostname -s) start \$(date +%s.%N)"
$(printf %q "$go_train") prepare $(printf %q "$list") --out $(printf %q "$work/parts") --value per-game:8 --threads "\${SLURM_CPUS_PER_TASK:-1}"
echo "task \$SLURM_ARRAY_TASK_ID end \$(date +%s.%N)"
EOF
chmod +x "$job"

# Runs all the parts; $1 names the round (its logs: logs/ROUND-part-I.log).
run_parts() {
    local round=$1 rc=0 i
    rm -f "$work/logs/$round"-part-*.log
    if ((use_slurm)); then
        local out
        out=$(sbatch --array="1-$parts" --wait --parsable --chdir="$repo" \
            --output="$work/logs/$round-part-%a.log" "$job" 2>&1) || rc=$?
        info "sbatch --array=1-$parts --wait: job ${out%%;*} (exit $rc)"
    else
        local pids=()
        for ((i = 1; i <= parts; i++)); do
            (cd "$repo" && SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=$parts SLURM_ARRAY_TASK_MIN=1 \
                SLURM_ARRAY_TASK_MAX=$parts SLURM_ARRAY_JOB_ID=local SLURM_CPUS_PER_TASK=1 \
                exec bash "$job") >"$work/logs/$round-part-$i.log" 2>&1 &
            pids+=($!)
        done
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}" || { rc=$?; info "part $((i + 1)) exited $rc"; }
        done
        info "$parts local processes (SLURM_ARRAY_* set by hand), exit $rc"
    fi
    return "$rc"
}

# Seconds from the first task's start to the last task's end, from the logs.
task_span() {
    cat "$work/logs/$1"-part-*.log 2>/dev/null |
        awk '/^task .* start /{ s = $NF; if (!a || s < a) a = s } /^task .* end /{ e = $NF; if (e > b) b = e }
             END { if (a && b) printf "%.2f", b - a; else printf "?" }'
}

show_logs() {
    for f in "$work/logs/$1"-part-*.log; do
        echo "--- $f"
        tail -n 8 "$f"
    done
}

compare() {
    local what=$1 a b
    a=$("$go_train" dataset info --json "$work/one" | jq -r '.splits | to_entries[] |
        [.key, (.value.records_crc32 // "missing"), .value.games, .value.positions, .value.value_positions] | @tsv') ||
        { fail "$what: dataset info --json $work/one"; return; }
    b=$("$go_train" dataset info --json "$work/parts" | jq -r '.splits | to_entries[] |
        [.key, (.value.records_crc32 // "missing"), .value.games, .value.positions, .value.value_positions] | @tsv') ||
        { fail "$what: dataset info --json $work/parts"; return; }
    local split crc g p v crc2 g2 p2 v2
    while IFS=$'\t' read -r split crc g p v; do
        read -r _ crc2 g2 p2 v2 < <(awk -F'\t' -v s="$split" '$1 == s' <<<"$b") || true
        if [[ $crc == missing || ${crc2:-missing} == missing ]]; then
            fail "$what: $split has no records_crc32 (one: $crc, parts: ${crc2:-missing})"
        elif [[ $crc == "$crc2" && $g == "$g2" && $p == "$p2" && $v == "$v2" ]]; then
            pass "$what: $split records_crc32 $crc, $g games, $p positions, $v with value in both"
        else
            fail "$what: $split one: crc $crc $g games $p positions $v value; parts: crc ${crc2:-none} ${g2:-?} games ${p2:-?} positions ${v2:-?} value"
        fi
    done <<<"$a"
    local only
    only=$(comm -13 <(cut -f1 <<<"$a" | sort) <(cut -f1 <<<"$b" | sort))
    [[ -z $only ]] || fail "$what: splits only in parts: $only"
}

# expect_ok LABEL go-train-args...: PASS with the last line of its output,
# or FAIL with the last lines.
expect_ok() {
    local label=$1 out
    shift
    if out=$("$go_train" "$@" 2>&1); then
        pass "$label: ${out##*$'\n'}"
    else
        fail "$label: $(tail -n 5 <<<"$out")"
    fi
}

merge_verify() {
    local what=$1
    expect_ok "$what: dataset merge" dataset merge "$work/parts"
    expect_ok "$what: dataset merge again (harmless)" dataset merge "$work/parts"
    expect_ok "$what: dataset verify" dataset verify "$work/parts"
    compare "$what"
}

mode=$( ((use_slurm)) && echo "Slurm array" || echo "local processes")
t=$(now)
if run_parts array; then
    array_s=$(since "$t")
    pass "array prepare: $parts parts ($mode) in $array_s s wall, tasks $(task_span array) s first start to last end (one process: $one_s s)"
else
    fail "array prepare: a part failed"
    show_logs array
fi
for f in "$work/logs"/array-part-*.log; do
    info "$(basename "$f"): $(grep -m1 '^task ' "$f" | sed 's/ start [0-9.]*$//'); $(grep -E '^part [0-9]+/' "$f" | tail -n 1)"
done
merge_verify "array"

# --- 5. kill tests: part 2 redone alone -----------------------------------------
# killed: part 2 died mid-run, so no merge happened: no part-0002 manifest,
#   no dataset manifest, and a truncated part-2 shard left behind;
# lost:   part 2's manifest deleted after the merge (dataset manifest kept).
# Either way, submitting the whole array again must redo part 2 and only it.
snapshot() {
    find "$work/parts" -maxdepth 1 -type f \( -name 'part-*.json' -o -name '*.shard' \) -printf '%f %T@ %s\n' | sort
}

kill_test() {
    local name=$1 what="kill test ($1)" manifests lost tag before after out t changed others redone shard
    mapfile -t manifests < <(find "$work/parts" -maxdepth 1 -name 'part-*-of-*.json' -printf '%f\n' | sort)
    if ((${#manifests[@]} != parts)); then
        fail "$what: expected $parts part manifests part-*-of-*.json in $work/parts, found ${#manifests[@]}: ${manifests[*]:-none}"
        return
    fi
    lost=${manifests[1]}
    # part-0002-of-0004.json owns the shards *-p0002of0004-*.shard.
    tag=$(sed -E 's/^part-([0-9]+)-of-([0-9]+)\.json$/p\1of\2/' <<<"$lost")
    before=$(snapshot)
    rm -f "$work/parts/$lost"
    if [[ $name == killed ]]; then
        rm -f "$work/parts/manifest.json"
        shard=$(find "$work/parts" -maxdepth 1 -name "*-$tag-*.shard" -printf '%f\n' | sort | head -n 1)
        [[ -z $shard ]] || truncate -s "$(($(stat -c %s "$work/parts/$shard") / 2))" "$work/parts/$shard"
        info "$what: deleted $lost and manifest.json, truncated ${shard:-no shard} to half"
    else
        info "$what: deleted $lost (manifest.json kept)"
    fi
    if out=$("$go_train" dataset merge "$work/parts" 2>&1); then
        fail "$what: dataset merge succeeded with $lost missing: ${out##*$'\n'}"
    else
        pass "$what: dataset merge refuses with $lost missing: ${out##*$'\n'}"
    fi
    t=$(now)
    if run_parts "rerun-$name"; then
        pass "$what: array submitted again in $(since "$t") s wall, tasks $(task_span "rerun-$name") s"
    else
        fail "$what: a part failed on the rerun"
        show_logs "rerun-$name"
    fi
    for f in "$work/logs/rerun-$name"-part-*.log; do
        info "$(basename "$f"): $(grep -E '^part [0-9]+/' "$f" | head -n 1)"
    done
    after=$(snapshot)
    if [[ -e $work/parts/$lost ]]; then
        pass "$what: $lost written again"
    else
        fail "$what: $lost not written again"
    fi
    others=$(grep -v -e "^$lost " -e "$tag" <<<"$after" || true)
    changed=$(comm -3 <(grep -v -e "^$lost " -e "$tag" <<<"$before" || true) <(cat <<<"$others") |
        awk '{ print $1 }' | sort -u | tr '\n' ' ')
    if [[ -z $changed ]]; then
        pass "$what: the other parts' manifests and shards untouched ($(grep -c . <<<"$others") files)"
    else
        fail "$what: other parts' files changed: $changed"
    fi
    redone=$(comm -13 <(grep "$tag" <<<"$before" || true) <(grep "$tag" <<<"$after" || true) | grep -c . || true)
    info "$what: $redone of $(grep -c "$tag" <<<"$after" || true) $tag shards rewritten"
    merge_verify "$what"
}

kill_test killed
kill_test lost

echo
if ((failures)); then
    echo "FAIL: $failures of $checks checks failed (work folder: $work)"
    exit 1
fi
echo "PASS: all $checks checks (work folder: $work)"
