# test/suites/70_fuzz.sh — libFuzzer on paidb's parsers and mergers, inside
# a backend, for a fixed time per target; sourced by test/run-tests.sh.
#
# paidb.so is built by clang with coverage, ASan and UBSan and with
# test/fuzz/paidb_fuzz.c linked in (`make fuzz`), installed into its own
# private copy of PostgreSQL, and each target runs in a single-user backend
# (`postgres --single`) with clang's ASan runtime preloaded: first every
# input of test/fuzz/corpus/TARGET (seeds from real streams and fixtures, and
# every input a fuzzer ever found: the regression tests), then mutations for
# $PAIDB_FUZZ_SECONDS (default 20) seconds.  A target fails on a crash, a
# sanitizer report, a broken property or a timeout; libFuzzer's artifact is
# printed and kept in $WORK/fuzz-artifacts (copy it into the corpus as
# crash-NAME to keep it as a regression test).  Each target prints its
# executions per second and coverage (cov: edges, ft: features).

fuzz_seconds=${PAIDB_FUZZ_SECONDS:-20}
fuzz_targets=${PAIDB_FUZZ_TARGETS:-merge_patch snapshot job_config watch_event watch_stream list_stream json_text packed}
fuzz_root=${PAIDB_FUZZ_PG_ROOT:-$WORK/fuzz-pg}
fuzz_bin=$fuzz_root/usr/lib/postgresql/15/bin
fuzz_tree=$WORK/fuzz-build
fuzz_data=$WORK/fuzz-data
fuzz_started=$(date +%s)

# clang and its runtimes (libFuzzer, ASan) are only needed here
fuzz_setup() {
    PAIDB_DEBS="clang libclang-rt-14-dev" paidb_install_packages >/dev/null || return 1
    fuzz_asan_rt=$(clang -print-resource-dir)/lib/linux/libclang_rt.asan-x86_64.so
    [ -f "$fuzz_asan_rt" ] || { echo "no $fuzz_asan_rt" >&2; return 1; }
    PAIDB_PG_ROOT=$fuzz_root PG_BIN=$fuzz_bin paidb_private_pg || return 1
    rm -rf "$fuzz_tree" && mkdir -p "$fuzz_tree" || return 1
    tar -C "$ROOT" --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
        --exclude=results --exclude=tmp_check -cf - . | tar -C "$fuzz_tree" -xf - || return 1
    make -C "$fuzz_tree" -s fuzz >"$WORK/fuzz-build.log" 2>&1 || { cat "$WORK/fuzz-build.log"; return 1; }
    make -C "$fuzz_tree" -s fuzz-install DESTDIR="$fuzz_root" >/dev/null 2>&1 || return 1
    gcc -shared -fPIC -O2 -Wall -o "$fuzz_bin/../lib/paidb_asan_init_shim.so" \
        "$ROOT/test/asan/init_shim.c" -ldl || return 1
    rm -rf "$fuzz_data" "$WORK/fuzz-artifacts" "$WORK/fuzz-corpus"
    mkdir -p "$WORK/fuzz-artifacts" "$WORK/fuzz-corpus"
    chown -R postgres "$fuzz_tree" "$WORK/fuzz-artifacts" "$WORK/fuzz-corpus"
    su postgres -c "$fuzz_bin/initdb -D '$fuzz_data' -A trust -U postgres >/dev/null" || return 1
    # the extension, the fuzz entry point, and the frameworks watch events update
    {
        echo "CREATE EXTENSION paidb CASCADE;"
        echo "CREATE FUNCTION paidb_fuzz_run(text, text[]) RETURNS int AS '\$libdir/paidb', 'paidb_fuzz_run' LANGUAGE C;"
        echo "SELECT paidb.import_frameworks(\$fz\$$(cat "$ROOT/test/fuzz/corpus/watch_event.setup.json")\$fz\$::jsonb);"
    } > "$WORK/fuzz-setup.sql"
    fuzz_single < "$WORK/fuzz-setup.sql" > "$WORK/fuzz-setup.log" 2>&1 || { cat "$WORK/fuzz-setup.log"; return 1; }
    grep -q "ERROR" "$WORK/fuzz-setup.log" && { cat "$WORK/fuzz-setup.log"; return 1; }
    return 0
}

# A single-user backend on the fuzz database, ASan preloaded, SQL on stdin
fuzz_single() {
    su postgres -c "LD_PRELOAD='$fuzz_asan_rt:$fuzz_bin/../lib/paidb_asan_init_shim.so' \
        ASAN_OPTIONS='detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=0' \
        UBSAN_OPTIONS='print_stacktrace=1:halt_on_error=1' \
        '$fuzz_bin/postgres' --single -D '$fuzz_data' -c log_min_messages=fatal \
        -c client_min_messages=error postgres"
}

# One target: corpus replay, then mutations; prints its figures
fuzz_run() {
    local t=$1 log=$WORK/fuzz-$1.log rc dict=json
    [ "$t" = job_config ] && dict=yaml
    mkdir -p "$WORK/fuzz-corpus/$t" && chown postgres "$WORK/fuzz-corpus/$t"
    echo "SELECT paidb_fuzz_run('$t', ARRAY['-max_total_time=$fuzz_seconds', '-print_final_stats=1', \
'-timeout=20', '-rss_limit_mb=1536', '-handle_usr1=0', '-handle_usr2=0', '-reload=0', \
'-dict=$ROOT/test/fuzz/dict/$dict.dict', '-artifact_prefix=$WORK/fuzz-artifacts/$t-', '$WORK/fuzz-corpus/$t', '$ROOT/test/fuzz/corpus/$t']);" |
        fuzz_single > "$log" 2>&1
    rc=$?
    local done_line runs eps
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    local seeds
    seeds=$(ls "$ROOT/test/fuzz/corpus/$t" | wc -l)
    if [ $rc = 0 ] && [ -n "$done_line" ] && ! grep -qE 'ERROR: (AddressSanitizer|libFuzzer)|runtime error:|property violated' "$log"; then
        echo "   $t: ${runs:-?} runs in ${fuzz_seconds} s, ${eps:-?} exec/s, $seeds inputs in the corpus; $(echo "$done_line" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9a-zA-Z]+')"
        return 0
    fi
    echo "   $t: FAILED (exit $rc)"
    grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED|RELOAD)' "$log" | tail -60
    local a
    for a in "$WORK/fuzz-artifacts/$t-"*; do
        [ -f "$a" ] || continue
        echo "   artifact $a ($(stat -c %s "$a") bytes):"; head -c 600 "$a" | od -c | head -12
    done
    return 1
}

if ! fuzz_setup; then
    add 0 1 "fuzz build"
else
    echo "-- fuzz build installed into $fuzz_root ($(( $(date +%s) - fuzz_started )) s)"
    fuzz_passed=0 fuzz_failed=0
    for t in $fuzz_targets; do
        if fuzz_run "$t"; then fuzz_passed=$((fuzz_passed + 1)); else fuzz_failed=$((fuzz_failed + 1)); fi
    done
    add $fuzz_passed $fuzz_failed "fuzz targets"
    echo "-- fuzzing: $(( $(date +%s) - fuzz_started )) s in all"
fi
