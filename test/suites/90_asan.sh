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

asan_root=${PAIDB_ASAN_PG_ROOT:-$WORK/asan-pg}
asan_bin=$asan_root/usr/lib/postgresql/15/bin
asan_tree=$WORK/asan-build
ASAN_LOGS=$WORK/asan-logs
asan_lib=$(gcc -print-file-name=libasan.so)
asan_started=$(date +%s)

# Private copy of PostgreSQL for the ASan build, postgres wrapped
asan_setup_pg() {
    if [ ! -x "$asan_bin/postgres.bin" ]; then
        PAIDB_PG_ROOT=$asan_root PG_BIN=$asan_bin paidb_private_pg || return 1
        mv "$asan_bin/postgres" "$asan_bin/postgres.bin" || return 1
    fi
    rm -rf "$ASAN_LOGS" && mkdir -p "$ASAN_LOGS" && chown postgres "$ASAN_LOGS"
    # see the shim's comment: without it the server hangs at start-up
    gcc -shared -fPIC -O2 -Wall -o "$asan_bin/../lib/paidb_asan_init_shim.so" \
        "$ROOT/test/asan/init_shim.c" -ldl || return 1
    cat > "$asan_bin/postgres" <<EOF
#!/bin/bash
# paidb's ASan suite: the uninstrumented server with the ASan runtime preloaded.
# exec -a keeps this wrapper as the server's own path, so postmaster.opts (and
# so pg_ctl restart) starts it through the wrapper again.
LD_PRELOAD=$asan_lib:$(cd "$asan_bin/../lib" && pwd)/paidb_asan_init_shim.so\${LD_PRELOAD:+:\$LD_PRELOAD}
ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:quarantine_size_mb=16:log_path=$ASAN_LOGS/asan:log_exe_name=1:detect_stack_use_after_return=0
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$ASAN_LOGS/ubsan
export LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
exec -a "\$0" "\$(dirname "\$0")/postgres.bin" "\$@"
EOF
    chmod 755 "$asan_bin/postgres"
}

# Build paidb and the test module with the sanitizers into the private copy
asan_build() {
    rm -rf "$asan_tree" && mkdir -p "$asan_tree" || return 1
    tar -C "$ROOT" --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
        --exclude=results --exclude=tmp_check -cf - . | tar -C "$asan_tree" -xf - || return 1
    make -C "$asan_tree" -s asan >/dev/null 2>"$WORK/asan-build.log" ||
        { cat "$WORK/asan-build.log"; return 1; }
    make -C "$asan_tree" -s asan-install DESTDIR="$asan_root" >/dev/null || return 1
    # the instrumented library really is the one installed
    ldd "$asan_root$(pg_config --pkglibdir)/paidb.so" | grep -q libasan ||
        { echo "the installed paidb.so is not instrumented" >&2; return 1; }
    chown -R postgres "$asan_tree"
}

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
