# OpenPAI compatibility through node (test/openpai/): the rest-server's
# query shapes through Sequelize 5.21.3 and 6 against paidb_openpai's views,
# compared with the same jobs in OpenPAI's own schema, and the write
# merger module of contrib/openpai/.  Sourced by test/run-tests.sh (see
# README.md here).  node and the npm packages are test dependencies only.
openpai_suite() {
    local dir=$WORK/test/openpai log=$WORK/openpai.log rc pass fail cancelled
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "== installing Debian's nodejs and npm"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; } \
            || { echo "could not install nodejs/npm" >&2; return 1; }
    fi
    echo "node $(node --version), npm $(npm --version)"
    # The exact packages of package-lock.json, fetched as postgres into the copy.
    su postgres -c "cd '$dir' && rm -rf node_modules && npm ci --no-audit --no-fund --loglevel=error --cache '$WORK/.npm-cache'" \
        > "$WORK/openpai-npm.log" 2>&1 || { cat "$WORK/openpai-npm.log"; return 1; }
    # One file at a time: the files share cluster-wide roles, and the
    # machine is small.
    su postgres -c "cd '$dir' && PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres PGDATABASE=postgres \
        OPENPAI_JOBS=${PAIDB_OPENPAI_JOBS:-300} timeout 900 node --test --test-concurrency=1 --test-reporter=tap test/" > "$log" 2>&1
    rc=$?
    grep -E '^not ok|^ +not ok|^# (tests|pass|fail|cancelled)' "$log" | tail -40
    [ $rc = 0 ] || grep -nE -A12 '^ +not ok' "$log" | head -150
    pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$log" | tail -1)
    fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$log" | tail -1)
    cancelled=$(sed -n 's/^# cancelled \([0-9]*\)$/\1/p' "$log" | tail -1)
    pass=${pass:-0}; fail=$(( ${fail:-0} + ${cancelled:-0} ))
    [ $rc != 0 ] && [ "$fail" = 0 ] && fail=1
    OPENPAI_COUNTS="$pass $fail"
}
OPENPAI_COUNTS="0 1"
openpai_suite || OPENPAI_COUNTS="0 1"
read -r _op_pass _op_fail <<< "$OPENPAI_COUNTS"
add "$_op_pass" "$_op_fail" "OpenPAI (node)"
[ "$_op_fail" = 0 ] || grep -hE '^ *not ok' "$WORK/openpai.log" 2>/dev/null | head -20 | sed 's/^/    /' >> "$RECAP"
