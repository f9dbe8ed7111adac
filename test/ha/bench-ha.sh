#!/usr/bin/env bash
# make bench-ha: print the failover figures of the last HA run
# (test/ha/last-run.txt, written by test/suites/50_ha.sh and by the sweep
# below) beside the Patroni timing settings each was measured with.
#
# PAIDB_HA_SWEEP=1 (as root) first runs the kill -9 scenario
# PAIDB_HA_REPEAT times (default 3) per timing set in PAIDB_HA_TIMINGS
# ("ttl/loop_wait/retry_timeout ...", default "10/2/5 20/5/10 30/10/10"),
# so the file shows how the times move with ttl and loop_wait; the medians
# of each set are printed after its runs.  PAIDB_PG_ROOT as for
# test/run-tests.sh.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LAST=$ROOT/test/ha/last-run.txt

if [ "${PAIDB_HA_SWEEP:-0}" = 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "the sweep runs as root (servers run as postgres)" >&2; exit 2; }
    . "$ROOT/test/lib/common.sh"
    paidb_install_packages >/dev/null && paidb_build_install "$ROOT" || exit 1
    command -v patroni >/dev/null && command -v etcd >/dev/null || \
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patroni etcd-server >/dev/null; } || exit 1
    WORK=$(mktemp -d /tmp/paidb-ha-bench.XXXXXX)
    chmod 755 "$WORK"
    tar -C "$ROOT" --exclude=.git --exclude='*.o' --exclude=tmp_check -cf - . | tar -C "$WORK" -xf -
    chown -R postgres "$WORK"
    mkdir -p "$PG_TEST_PORT_DIR" && chmod 1777 "$PG_TEST_PORT_DIR"
    echo "# $(date -u +%FT%TZ) make bench-ha PAIDB_HA_SWEEP=1" > "$WORK/sweep.txt"
    for t in ${PAIDB_HA_TIMINGS:-10/2/5 20/5/10 30/10/10}; do
      IFS=/ read -r ttl lw rt <<< "$t"
      for n in $(seq 1 "${PAIDB_HA_REPEAT:-3}"); do
        echo "== kill -9 with ttl=$ttl loop_wait=$lw retry_timeout=$rt"
        su postgres -c "cd '$WORK' && PATH=$PG_BIN:\$PATH PG_BIN=$PG_BIN PG_TEST_PORT_DIR=$PG_TEST_PORT_DIR \
            HA_TTL=$ttl HA_LOOP_WAIT=$lw HA_RETRY_TIMEOUT=$rt HA_SCENARIOS=kill-sync HA_RESULTS='$WORK/one.txt' \
            nice timeout 900 prove -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl -I test/t/lib test/ha/failover.pl" \
            > "$WORK/sweep-$ttl-$lw.log" 2>&1 || { echo "failed: see $WORK/sweep-$ttl-$lw.log"; tail -30 "$WORK/sweep-$ttl-$lw.log"; }
        cat "$WORK/one.txt" >> "$WORK/sweep.txt" 2>/dev/null
        rm -f "$WORK/one.txt"
      done
    done
    cp "$WORK/sweep.txt" "$LAST"
fi

[ -s "$LAST" ] || { echo "no HA run yet: PAIDB_SUITES=ha bash test/run-tests.sh, or make bench-ha PAIDB_HA_SWEEP=1"; exit 0; }
head -1 "$LAST"
printf '%-11s %4s %9s %13s | %16s %12s %14s | %6s %8s %5s %7s %8s\n' scenario ttl loop_wait retry_timeout first_request_s all_synced_s old_workers_s acked in_flight lost adopted held/409
# one row per run; after the runs of one scenario and timing set, their medians
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
row() { printf '%-11s %4s %9s %13s | %16s %12s %14s | %6s %8s %5s %7s %8s\n' "$@"; }
prev=""; firsts=""; synceds=""; runs=0
flush() {
    [ "$runs" -gt 1 ] || return 0
    IFS=' ' read -r sc tt lw rt <<< "$prev"
    row "  median" "$tt" "$lw" "$rt" "$(tr ' ' '\n' <<< "$firsts" | grep -v '^$' | median)" \
        "$(tr ' ' '\n' <<< "$synceds" | grep -v '^$' | median)" "" "" "$runs runs" "" "" ""
}
while read -r line; do
    declare -A f=()
    for kv in $line; do f[${kv%%=*}]=${kv#*=}; done
    key="${f[scenario]} ${f[ttl]} ${f[loop_wait]} ${f[retry_timeout]}"
    if [ "$key" != "$prev" ]; then flush; prev=$key; firsts=""; synceds=""; runs=0; fi
    firsts="$firsts ${f[first_request]}"; synceds="$synceds ${f[all_synced]}"; runs=$((runs + 1))
    held=${f[held]:+${f[held]}/${f[held_409]}}
    row "${f[scenario]}" "${f[ttl]}" "${f[loop_wait]}" "${f[retry_timeout]}" "${f[first_request]}" "${f[all_synced]}" \
        "${f[workers_gone]:--}" "${f[acked]}" "${f[acked_before]}" "${f[lost]}" "${f[adopted]:--}" \
        "${held:--}"
    unset f
done < <(grep -v '^#' "$LAST")
flush
echo "times in seconds from the fault; old_workers: until the old primary's paidb workers have exited"
echo "(a switchover's old_workers is measured once Patroni's REST call has returned: an upper bound)"
echo "held/409 (kill-sync): creates of the old primary the fake held across the kill and executed after it / those the new primary sent again and adopted on 409 (the others it learned from its watch)"
echo "targets (ttl 10, loop_wait 2): first request < 5 s, all synced < 10 s; 'lost' is only allowed in kill-async (the asynchronous window)"
