# test/suites/90_asan.sh — the whole TAP suite (test/t/*.pl, or
# $PAIDB_TAP_TESTS) against paidb built with AddressSanitizer + UBSan
# (`make asan`), sourced by test/run-tests.sh.
#
# The postgres binary is not instrumented, so the ASan runtime is preloaded
# into the server: the build goes into its own private copy of PostgreSQL
# ($PAIDB_ASAN_PG_ROOT, default under $WORK) whose bin/postgres is a wrapper
# that sets LD_PRELOAD=libasan and the sanitizer options, then execs the real
# binary; the normal build and its tests are unaffected.  Leak detection is
# off (PostgreSQL frees by memory context and at exit, by design).  Reports
# go to files under $ASAN_LOGS; the suite fails on any of them, and on any
# sanitizer line in a server log.
#
# What ASan sees: paidb's own code fully (stack, globals, malloc'd memory);
# palloc'd memory only at the edges of PostgreSQL's blocks (memory contexts
# carve chunks out of big malloc'd blocks); libcurl, json-c, libyaml and zlib
# through the interceptors (memcpy, strlen, ...) and the ASan allocator.

# the build and its private PostgreSQL: test/asan/asan-build.sh
. "$ROOT/test/asan/asan-build.sh"

if ! asan_setup_pg || ! asan_build; then
    add 0 1 "ASan+UBSan build"
else
    echo "-- ASan+UBSan build installed into $asan_root (build $(( $(date +%s) - asan_started )) s)"
    asan_tap_started=$(date +%s)
    su postgres -c "cd '$asan_tree' && PATH=$asan_bin:\$PATH PAIDB_TEST_SLOW=3 PAIDB_TEST_MEMORY_FACTOR=3 \
        PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
        PG_TEST_PORT_DIR=$PG_TEST_PORT_DIR prove -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl \
        -I test/t/lib $TAP_TESTS" > "$WORK/asan-tap.log" 2>&1
    rc=$?
    cat "$WORK/asan-tap.log"
    [ $rc = 0 ] || tap_failed_logs "$WORK/asan-tap.log" "$asan_tree"
    read -r p f < <(harness_counts "$WORK/asan-tap.log" $rc)
    add "$p" "$f" "TAP under ASan+UBSan"
    [ "$f" = 0 ] || tap_failures "$WORK/asan-tap.log"

    # every report is a failure, wherever it was written
    reports=0
    for f in "$ASAN_LOGS"/*; do
        [ -s "$f" ] || continue
        reports=$((reports + 1))
        echo "--- sanitizer report $f"; head -80 "$f"
    done
    in_logs=$(grep -lE 'runtime error:|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer' \
        "$asan_tree"/tmp_check/log/*.log 2>/dev/null)
    for f in $in_logs; do
        reports=$((reports + 1))
        echo "--- sanitizer lines in $f"
        grep -E -A30 'runtime error:|AddressSanitizer|UndefinedBehaviorSanitizer' "$f" | head -80
    done
    if [ $reports = 0 ]; then add 1 0 "sanitizer reports (none)"; else add 0 "$reports" "sanitizer reports"; fi
    echo "-- ASan+UBSan TAP run: $(( $(date +%s) - asan_tap_started )) s"
fi
