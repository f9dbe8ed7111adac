# test/asan/asan-build.sh — paidb built with AddressSanitizer + UBSan
# (`make asan`) into its own private copy of PostgreSQL whose bin/postgres
# preloads the ASan runtime (see test/suites/90_asan.sh).  Sourced by
# test/suites/90_asan.sh and test/suites/90_asan_sqlsmith.sh; needs $ROOT,
# $WORK and test/lib/common.sh.  asan_setup_pg && asan_build make it;
# ASAN_BUILT=1 once done in this run.

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
    ASAN_BUILT=1
}

