# hostile-api's own tests (test/hostile-api/test_hostile_api.py): the proxy
# that test/t/050_hostile_watch.pl and 051_hostile_answers.pl drive paidb
# through passes sane requests on, never forwards a request with an
# empty/./.. segment or an unnamed delete, records what reaches its trap
# port, and misbehaves as its modes say.  Python 3 standard library; ~3 s.
# Sourced by test/run-tests.sh (see README.md here).
(cd "$WORK" && timeout 300 /usr/bin/python3 -m unittest discover -s test/hostile-api -p 'test_*.py') \
    > "$WORK/hostile-api.log" 2>&1
_ha_rc=$?
tail -5 "$WORK/hostile-api.log"
_ha_total=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$WORK/hostile-api.log" | tail -1)
_ha_failed=$(sed -n 's/^FAILED (\(.*\))/\1/p' "$WORK/hostile-api.log" | grep -oE '(failures|errors)=[0-9]+' | awk -F= '{s+=$2} END {print s+0}')
_ha_total=${_ha_total:-0}
[ $_ha_rc != 0 ] && [ "${_ha_failed:-0}" = 0 ] && _ha_failed=1
add $((_ha_total - ${_ha_failed:-0})) "${_ha_failed:-0}" "hostile-api"
[ "${_ha_failed:-0}" = 0 ] || grep -E '^(FAIL|ERROR):' "$WORK/hostile-api.log" | head -20 | sed 's/^/    /' >> "$RECAP"
