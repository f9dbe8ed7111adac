# test/lib/sqlsmith.sh — Debian's sqlsmith against a throwaway server with
# paidb preloaded (its hooks active) and paidb_openpai, as a role that is
# no superuser (sqlsmith calls arbitrary functions: a superuser could kill
# backends or read files) but a member of paidb_reader and paidb_writer.
# Used by test/suites/66_sqlsmith.sh and test/suites/90_asan_sqlsmith.sh;
# needs test/lib/common.sh.  The data is test/differential/setup.sql's.

# paidb_sqlsmith BIN_DIR DATA_DIR SECONDS LABEL: sets SMITH_QUERIES (what
# sqlsmith executed), SMITH_CRASHES (crash lines in the server log),
# SMITH_UP (1 if the server still accepts connections), SMITH_LOG (the
# server log); the server is stopped again.
paidb_sqlsmith() {
    local bin=$1 data=$2 secs=$3 label=$4 port closed seed out
    port=$(paidb_free_port)
    closed=$(paidb_free_port)   # nothing listens there: the workers' API calls fail fast
    seed=${PAIDB_SQLSMITH_SEED:-$(( (RANDOM << 15 | RANDOM) % 2000000000 + 1 ))}
    SMITH_QUERIES=0 SMITH_CRASHES=0 SMITH_UP=0 SMITH_LOG=$data.log
    PG_BIN=$bin paidb_start_pg "$data" "$port" "shared_preload_libraries = 'paidb'" \
        "paidb.k8s_api_server = 'http://127.0.0.1:$closed'" "paidb.database = 'paidb_smith'" "max_connections = 20" || return 1
    local psql="psql -X -q -h 127.0.0.1 -p $port -U postgres"
    su postgres -c "$psql -d postgres -c 'CREATE DATABASE paidb_smith'" &&
        su postgres -c "$psql -d paidb_smith -v ON_ERROR_STOP=1 -f '$ROOT/test/differential/setup.sql'" >/dev/null &&
        su postgres -c "$psql -d postgres -v ON_ERROR_STOP=1" <<'SQL' || { PG_BIN=$bin paidb_stop_pg "$data"; return 1; }
CREATE ROLE paidb_smith LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB IN ROLE paidb_reader, paidb_writer;
ALTER ROLE paidb_smith SET statement_timeout = '5s';
ALTER ROLE paidb_smith SET lock_timeout = '2s';
SQL
    out=$WORK/sqlsmith-$label.out
    echo "-- sqlsmith ($label): seed $seed, ${secs} s, as paidb_smith (replay: PAIDB_SQLSMITH_SEED=$seed)"
    # SIGINT: sqlsmith prints its report (queries: N, the errors) and exits
    su postgres -c "cd /tmp && timeout -s INT -k 30 $secs sqlsmith --seed=$seed --exclude-catalog --verbose \
        --target='host=127.0.0.1 port=$port user=paidb_smith dbname=paidb_smith'" > "$out" 2>&1
    SMITH_QUERIES=$(sed -n 's/^queries: \([0-9]*\).*/\1/p' "$out" | tail -1)
    SMITH_QUERIES=${SMITH_QUERIES:-0}
    grep -E "^[0-9]+\s+ERROR" "$out" | head -8 | sed "s/^/   /"
    grep -E "^error rate" "$out" | tail -1 | sed "s/^/   /"
    sleep 1
    su postgres -c "$psql -d paidb_smith -tAc 'SELECT 1'" 2>/dev/null | grep -qx 1 && SMITH_UP=1
    SMITH_CRASHES=$(grep -cE 'terminated by signal|server process .* was terminated|TRAP: |terminating any other active server processes| PANIC: ' "$SMITH_LOG")
    if [ "$SMITH_CRASHES" != 0 ]; then
        echo "   crash lines in $SMITH_LOG:"
        grep -E -B2 -A3 'terminated by signal|server process .* was terminated|TRAP: | PANIC: ' "$SMITH_LOG" | head -40
        # the query that crashed it, as the server logged it
        grep -E -A2 'was terminated by signal' "$SMITH_LOG" | grep -E 'Failed process was running' | head -3
    fi
    echo "-- sqlsmith ($label): $SMITH_QUERIES queries executed; crash lines: $SMITH_CRASHES; server up afterwards: $SMITH_UP"
    PG_BIN=$bin paidb_stop_pg "$data"
    return 0
}
