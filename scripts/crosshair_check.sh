#!/usr/bin/env bash
# CrossHair checks of the contracts, as CI runs them (tests/contracts/test_crosshair.py),
# plus the Hypothesis properties under the CrossHair backend (the separate `crosshair` job).
#
#   scripts/crosshair_check.sh            # contract checks + diffbehavior (bounded, ~1-2 min)
#   scripts/crosshair_check.sh --backend  # also the hypothesis-crosshair job
#   BOUND=20 scripts/crosshair_check.sh   # a deeper search of the arithmetic modules
#
# Exit status: 0 if every check passed and every planted bug was found, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BOUND=${BOUND:-3}
SEQ_BOUND=${SEQ_BOUND:-20}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
status=0

run() {  # run <expected exit code> <description> crosshair-args...
    local want=$1 what=$2
    shift 2
    local out code
    out=$(timeout 300 "$PY" -m crosshair "$@" 2>&1)
    code=$?
    if [[ $code -eq $want ]]; then
        echo "ok    $what"
    else
        echo "FAIL  $what (exit $code, expected $want)"
        echo "$out" | sed 's/^/      /'
        status=1
    fi
}

check=(check --analysis_kind=PEP316)
run 0 "contracts: spec arithmetic + optimized wheel helpers" \
    "${check[@]}" --max_uninteresting_iterations="$BOUND" \
    kpurgatory.spec.arithmetic kpurgatory.optimized.wheel
run 0 "contracts: bucket/wheel invariants and sequences" \
    "${check[@]}" --max_uninteresting_iterations="$SEQ_BOUND" tests.contracts.sequences
for wrong in round_down_strictly_below deadline_never_above_level_one; do
    run 1 "planted wrong contract found: $wrong" \
        "${check[@]}" --max_uninteresting_iterations="$BOUND" "tests.contracts.wrong_post.$wrong"
done
run 1 "planted wrong contract found: leaky_bucket_sequence" \
    "${check[@]}" --max_uninteresting_iterations="$SEQ_BOUND" \
    tests.contracts.wrong_post.leaky_bucket_sequence

pairs=$("$PY" -c 'from tests.contracts.diff_pairs import PAIRS; print(" ".join(a + ":" + b for a, b in PAIRS))')
for pair in $pairs; do
    spec=${pair%%:*} opt=${pair##*:}
    iterations=5
    [[ $spec == spec_placement ]] && iterations=3
    run 0 "diffbehavior: $spec vs $opt" diffbehavior --max_uninteresting_iterations=$iterations \
        "tests.contracts.diff_pairs.$spec" "tests.contracts.diff_pairs.$opt"
done
run 1 "diffbehavior finds the planted difference (buggy_placement)" \
    diffbehavior --max_uninteresting_iterations=3 \
    tests.contracts.diff_pairs.spec_placement tests.contracts.diff_pairs.buggy_placement

if [[ ${1:-} == --backend ]]; then
    if "$PY" -m pytest -q -m crosshair tests/contracts; then
        echo "ok    hypothesis-crosshair backend job"
    else
        echo "FAIL  hypothesis-crosshair backend job"
        status=1
    fi
fi
exit $status
