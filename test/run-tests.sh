#!/usr/bin/env bash
# Run every paidb test suite: pg_regress, pgTAP, the fake API server's own
# tests (with kubectl), and the TAP integration tests.  Run as root on
# Debian 12; installs what it needs; ends with "N passed, N failed".
#
# While developing: PAIDB_SUITES="regress pgtap kubefake tap ..." picks
# suites (default all: these four and every test/suites/NN_NAME.sh), PAIDB_TAP_TESTS="test/t/034_*.pl" picks TAP files, and
# PAIDB_PG_ROOT=/some/dir installs into a private PostgreSQL (test/lib/common.sh).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/test/lib/common.sh"

[ "$(id -u)" = 0 ] || { echo "run as root (servers run as the postgres user)" >&2; exit 2; }
paidb_install_packages || exit 1
paidb_build_install "$ROOT" || { echo "0 passed, 1 failed"; exit 1; }

# A copy owned by postgres: pg_regress and prove write results next to the tests.
WORK=$(mktemp -d /tmp/paidb-tests.XXXXXX)
chmod 755 "$WORK"
tar -C "$ROOT" --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude=results \
    --exclude=tmp_check -cf - . | tar -C "$WORK" -xf -
mkdir -p "$WORK/src"
chown -R postgres "$WORK"
PORT=$(paidb_free_port)
PGDATA_DIR="$WORK/pg/data"
trap 'paidb_stop_pg "$PGDATA_DIR"' EXIT
paidb_start_pg "$PGDATA_DIR" "$PORT" || { echo "0 passed, 1 failed"; exit 1; }
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres

PASSED=0
FAILED=0
SUITES=" ${PAIDB_SUITES:-all} "
TAP_TESTS=${PAIDB_TAP_TESTS:-test/t/*.pl}
want() { [[ "$SUITES" == *" all "* || "$SUITES" == *" $1 "* ]]; }
mkdir -p "$PG_TEST_PORT_DIR" && chmod 1777 "$PG_TEST_PORT_DIR"
RECAP=$WORK/failures.txt
: > "$RECAP"
add() {
    PASSED=$((PASSED + $1)); FAILED=$((FAILED + $2)); echo "-- $3: $1 passed, $2 failed"
    [ "$2" = 0 ] || echo "$3: $2 failed" >> "$RECAP"
}

# What failed in a prove log, for the recap: each failed check with the line
# that names it, and the harness's summary.
tap_failures() {
    local log=$1
    grep -E -A1 '^#   Failed test' "$log" | grep -vE '^--$' | head -40 | sed 's/^/    /' >> "$RECAP"
    sed -n '/^Test Summary Report/,/^Files=/p' "$log" | grep -vE '^(Test Summary Report|-+|Files=.*)$' \
        | head -20 | sed 's/^/    /' >> "$RECAP"
}

# The server-side log tails of the TAP files that failed (not of all of them).
tap_failed_logs() {
    local log=$1 tree=$2 t f
    for t in $(sed -n 's/^\(test\/[^ ]*\.pl\) (Wstat.*/\1/p' "$log"); do
        f=$tree/tmp_check/log/regress_log_$(basename "$t" .pl)
        [ -f "$f" ] && { echo "--- $f"; tail -80 "$f"; }
    done
}

# Sum a TAP::Harness summary (prove, pg_prove): tests run and failures.
harness_counts() {
    local log=$1 rc=$2 total failed
    total=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\),.*/\1/p' "$log" | tail -1)
    failed=$(grep -oE 'Failed: [0-9]+' "$log" | awk '{s+=$2} END {print s+0}')
    local bad_files
    bad_files=$(grep -cE 'Parse errors|Wstat: [1-9]' "$log" || true)
    total=${total:-0}
    if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then failed=$(( bad_files > 0 ? bad_files : 1 )); fi
    echo "$((total - failed > 0 ? total - failed : 0)) $failed"
}

if want regress; then
echo "== pg_regress (make installcheck)"
su postgres -c "cd '$WORK' && PGHOST=$PGHOST PGPORT=$PGPORT make -s installcheck" > "$WORK/regress.log" 2>&1
rc=$?
cat "$WORK/regress.log"
[ $rc = 0 ] || { [ -f "$WORK/regression.diffs" ] && head -200 "$WORK/regression.diffs"; }
total=$(grep -cE '^(not )?ok [0-9]+|^test [a-z_]+ +\.\.\.|^ *(test )?[a-z_]+ +\.\.\. ' "$WORK/regress.log")
failed=$(grep -cE '^not ok|\.\.\. FAILED|FAILED \(' "$WORK/regress.log")
[ $rc != 0 ] && [ "$failed" = 0 ] && failed=1
add $((total - failed)) "$failed" "pg_regress"
[ "$failed" = 0 ] || grep -E 'FAILED' "$WORK/regress.log" | head -20 | sed 's/^/    /' >> "$RECAP"
fi

if want pgtap; then
echo "== pgTAP (pg_prove)"
su postgres -c "createdb -h $PGHOST -p $PGPORT paidb_tap" >/dev/null 2>&1
su postgres -c "cd '$WORK' && pg_prove -h $PGHOST -p $PGPORT -U postgres -d paidb_tap test/pgtap/*.sql" > "$WORK/pgtap.log" 2>&1
rc=$?
cat "$WORK/pgtap.log"
read -r p f < <(harness_counts "$WORK/pgtap.log" $rc)
add "$p" "$f" "pgTAP"
[ "$f" = 0 ] || tap_failures "$WORK/pgtap.log"
fi

want kubefake && echo "== kube-fake (its own tests, with kubectl)"
if want kubefake && [ -d "$WORK/test/kube-fake" ]; then
    (cd "$WORK" && /usr/bin/python3 -m unittest discover -s test/kube-fake -p 'test_*.py') > "$WORK/kubefake.log" 2>&1
    rc=$?
    tail -30 "$WORK/kubefake.log"
    total=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$WORK/kubefake.log" | tail -1)
    total=${total:-0}
    failed=$(sed -n 's/^FAILED (\(.*\))/\1/p' "$WORK/kubefake.log" | grep -oE '(failures|errors)=[0-9]+' | awk -F= '{s+=$2} END {print s+0}')
    [ $rc != 0 ] && [ "$failed" = 0 ] && failed=1
    add $((total - failed)) "$failed" "kube-fake"
    [ "$failed" = 0 ] || grep -E '^(FAIL|ERROR):' "$WORK/kubefake.log" | head -20 | sed 's/^/    /' >> "$RECAP"
fi

want tap && echo "== TAP integration tests (prove)"
if want tap && ls "$WORK"/$TAP_TESTS >/dev/null 2>&1; then
    su postgres -c "cd '$WORK' && PATH=$PG_BIN:\$PATH PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
        PG_TEST_PORT_DIR=$PG_TEST_PORT_DIR prove -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl -I test/t/lib $TAP_TESTS" > "$WORK/tap.log" 2>&1
    rc=$?
    cat "$WORK/tap.log"
    [ $rc = 0 ] || tap_failed_logs "$WORK/tap.log" "$WORK"
    read -r p f < <(harness_counts "$WORK/tap.log" $rc)
    add "$p" "$f" "TAP"
    [ "$f" = 0 ] || tap_failures "$WORK/tap.log"
fi

# More suites, one file each: test/suites/NN_NAME.sh runs suite NAME with
# $WORK (a postgres-owned copy of the tree), the server above at
# $PGHOST:$PGPORT, and add PASSED FAILED LABEL to count.
for suite in "$ROOT"/test/suites/[0-9][0-9]_*.sh; do
    [ -f "$suite" ] || continue
    name=$(basename "$suite" .sh); name=${name#[0-9][0-9]_}
    want "$name" || continue
    echo "== $name"
    . "$suite"
done

echo
if [ -s "$RECAP" ]; then echo "== what failed"; cat "$RECAP"; echo; fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
