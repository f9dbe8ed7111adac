# test/suites/50_ha.sh — paidb under Patroni + etcd: failover with kill -9
# and switchover, synchronous and asynchronous (test/ha/failover.pl), with
# Debian's patroni and etcd-server.  Sourced by test/run-tests.sh.
#
# The figures of the run (time from the fault to the new primary's first
# request and to every in-flight job synced, with the Patroni timings) go to
# test/ha/last-run.txt in the checkout; `make bench-ha` prints them.

ha_debs="patroni etcd-server"
ha_missing=()
for p in $ha_debs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || ha_missing+=("$p")
done
if [ ${#ha_missing[@]} -gt 0 ]; then
    echo "== installing Debian packages: ${ha_missing[*]}"
    # the packages' own services must not start (policy-rc.d or no systemd)
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${ha_missing[@]}" >/dev/null; } \
        || echo "could not install ${ha_missing[*]}; the HA suite will fail" >&2
fi
ha_results="$WORK/ha-results.txt"
su postgres -c "cd '$WORK' && PATH=$PG_BIN:\$PATH PG_BIN=$PG_BIN PG_TEST_PORT_DIR=$PG_TEST_PORT_DIR \
    HA_RESULTS='$ha_results' ${HA_SCENARIOS:+HA_SCENARIOS='$HA_SCENARIOS'} timeout 1200 \
    prove -v -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl -I test/t/lib test/ha/failover.pl" > "$WORK/ha.log" 2>&1
rc=$?
grep -E '^(not )?ok|^# (acked|----|kill-sync: (creates of|of those))|^Files=|^Result' "$WORK/ha.log"
[ $rc = 0 ] || tail -150 "$WORK/ha.log"
if [ -s "$ha_results" ]; then
    { echo "# $(date -u +%FT%TZ) test/suites/50_ha.sh"; cat "$ha_results"; } > "$ROOT/test/ha/last-run.txt"
fi
read -r p f < <(harness_counts "$WORK/ha.log" $rc)
add "$p" "$f" "HA (Patroni + etcd)"
[ "$f" = 0 ] || { grep -E '^not ok' "$WORK/ha.log" | head -20 | sed 's/^/    /' >> "$RECAP"; tap_failures "$WORK/ha.log"; }
