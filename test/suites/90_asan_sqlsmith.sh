# test/suites/90_asan_sqlsmith.sh — sqlsmith (test/lib/sqlsmith.sh) for
# $PAIDB_SQLSMITH_ASAN_SECONDS (default 60) against paidb built with
# AddressSanitizer + UBSan (test/asan/asan-build.sh: the build 90_asan.sh
# made in this run, else made here), preloaded.  Fails on any sanitizer
# report, a crash, a server that no longer answers, or no query executed.
# Runs after 90_asan.sh (the same build), before 90_deb.sh.
. "$ROOT/test/lib/sqlsmith.sh"
if [ "${ASAN_BUILT:-}" != 1 ]; then
    . "$ROOT/test/asan/asan-build.sh"
    asan_setup_pg && asan_build || { add 0 1 "ASan+UBSan build (for sqlsmith)"; ASAN_BUILT=0; }
else
    rm -rf "$ASAN_LOGS" && mkdir -p "$ASAN_LOGS" && chown postgres "$ASAN_LOGS"
fi
if [ "${ASAN_BUILT:-}" = 1 ]; then
    if ! paidb_sqlsmith "$asan_bin" "$WORK/sqlsmith-asan/data" "${PAIDB_SQLSMITH_ASAN_SECONDS:-60}" asan; then
        add 0 1 "sqlsmith under ASan (server set-up)"
    else
        [ "$SMITH_QUERIES" -gt 0 ] && add 1 0 "sqlsmith under ASan executed $SMITH_QUERIES queries" || add 0 1 "sqlsmith under ASan executed no query"
        [ "$SMITH_CRASHES" = 0 ] && add 1 0 "sqlsmith under ASan: no crash" || add 0 1 "sqlsmith under ASan: crash lines in the server log"
        [ "$SMITH_UP" = 1 ] && add 1 0 "sqlsmith under ASan: server up afterwards" || add 0 1 "sqlsmith under ASan: server down afterwards"
        smith_reports=0
        for f in "$ASAN_LOGS"/*; do
            [ -s "$f" ] || continue
            smith_reports=$((smith_reports + 1))
            echo "--- sanitizer report $f"; head -80 "$f"
        done
        if grep -qE 'runtime error:|AddressSanitizer|UndefinedBehaviorSanitizer' "$SMITH_LOG"; then
            smith_reports=$((smith_reports + 1))
            grep -E -A30 'runtime error:|AddressSanitizer|UndefinedBehaviorSanitizer' "$SMITH_LOG" | head -80
        fi
        if [ $smith_reports = 0 ]; then add 1 0 "sqlsmith under ASan: no sanitizer report"
        else add 0 "$smith_reports" "sqlsmith under ASan: sanitizer reports"; fi
    fi
fi
