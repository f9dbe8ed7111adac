#!/usr/bin/env bash
# test/bench/upgrade.sh — the upgrade from release 0.2 (commit acb8bb9) to
# this tree at scale and under load (issue 19: "the upgrade from 0.2 converts
# existing rows in batches without a long exclusive lock": its time, and the
# longest lock wait a concurrent submission saw, at a million jobs).  A 0.2
# database in a private PostgreSQL copy (pg_trgm, paidb, paidb_openpai) gets
# BENCH_UPGRADE_JOBS jobs: 2,000 put and taken through their watch events by
# 0.2 itself (every 10th retried once, so a framework_history row; every 50th
# still running), the rest copies of them under new names.  The server
# restarts on this tree's library (docs/operations.md, "From 0.2 to 0.3"),
# workers on, its API server refusing connections, while pgbench submits new
# jobs (4 clients) and updates running ones' status (1 client): a baseline
# (this library, the 0.2 schema), the update (both ALTER EXTENSIONs in one
# transaction; a call it fails aborts its pgbench client), then the background
# conversion until paidb.framework.snapshot_0_2 is gone (0 s if the update
# converted everything).  Prints, labelled: each phase's time, calls/s and
# p50/max latency (phase: the one a call started in), the longest wait (the
# max latency during the update and the conversion; beside it the server log's
# longest lock wait, failed calls too), the update's slowest statements
# (WARNING marks added to the installed copy of its scripts), and ok/MISMATCH
# for the job and history counts and a 1,000-job sample's snapshots and
# history read through openpai.frameworks before and after.  Can run alone;
# not part of make bench.  Run as root.
#
#   BENCH_UPGRADE_JOBS (1000000)   jobs in the 0.2 database (20000: a quick run)
#   BENCH_UPGRADE_RATE (100)       submissions/s offered, 4 clients (0: unthrottled)
#   BENCH_UPGRADE_UPDATE_RATE (20) status updates/s of running jobs, 1 client (0: none)
#   BENCH_UPGRADE_BASELINE (5)     seconds of load before the update
#   BENCH_UPGRADE_TIMEOUT (3600)   seconds to wait for the background conversion
#   BENCH_UPGRADE_KEEP             if set: keep the work directory (logs, data; server stopped)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RELEASE=acb8bb9
. "$ROOT/test/lib/common.sh"
. "$ROOT/test/bench/lib.sh"
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
JOBS=${BENCH_UPGRADE_JOBS:-1000000}
RATE=${BENCH_UPGRADE_RATE:-100}
URATE=${BENCH_UPGRADE_UPDATE_RATE:-20}
BASELINE=${BENCH_UPGRADE_BASELINE:-5}
TIMEOUT=${BENCH_UPGRADE_TIMEOUT:-3600}
SEEDS=$((JOBS < 2000 ? JOBS : 2000))
CHUNK=50000
git -C "$ROOT" cat-file -e "$RELEASE^{commit}" 2>/dev/null || { echo "SKIP: commit $RELEASE is not in $ROOT"; exit 0; }
paidb_install_packages >/dev/null || exit 1

W=$(mktemp -d /tmp/paidb-upgrade.XXXXXX)
chmod 755 "$W"; chown postgres "$W"; mkdir "$W/lat"
PAIDB_PG_ROOT=$W/root
PG_BIN=$PAIDB_PG_ROOT/usr/lib/postgresql/15/bin
EXT=$PAIDB_PG_ROOT/usr/share/postgresql/15/extension
cleanup() {    # the loads end within 5 s of $W/stop
    touch "$W/stop"; wait; [ -d "$W/pg" ] && paidb_stop_pg "$W/pg"
    if [ -n "${BENCH_UPGRADE_KEEP:-}" ]; then echo "kept $W (server stopped)"; else rm -rf "$W"; fi
}
trap cleanup EXIT
q() { "$PG_BIN/psql" -X -At -v ON_ERROR_STOP=1 -c "$1"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }

# ------------------------------------------------------------------ builds
echo "== upgrade 0.2 ($RELEASE) -> this tree at $JOBS jobs"
mkdir -p "$W/src-0.2" "$W/src-now" && git -C "$ROOT" archive "$RELEASE" | tar -x -C "$W/src-0.2" || exit 1
# this tree as it is now (untracked sources too), without build products
(cd "$ROOT" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -x -C "$W/src-now"
paidb_private_pg || exit 1
for s in 0.2 now; do nice make -C "$W/src-$s" -s -j2 >/dev/null 2>"$W/make-$s.err" || { echo "build of $s failed:" >&2; cat "$W/make-$s.err" >&2; exit 1; }; done
make -C "$W/src-0.2" -s install DESTDIR="$PAIDB_PG_ROOT" >/dev/null || exit 1

# ------------------------------------------------------------------ the 0.2 database
export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=postgres
PORT=$(paidb_free_port)
paidb_start_pg "$W/pg" "$PORT" "fsync = on" "shared_buffers = '512MB'" "max_connections = 50" \
    "max_wal_size = '4GB'" "shared_preload_libraries = 'paidb'" "paidb.enabled = off" \
    "paidb.k8s_api_server = 'http://127.0.0.1:9'" "log_lock_waits = on" "deadlock_timeout = '100ms'" \
    "log_line_prefix = '%m [%p] %a: '" || exit 1
export PGPORT=$PORT
t0=$(now)
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -v seeds="$SEEDS" -c "CREATE EXTENSION pg_trgm" -c "CREATE EXTENSION paidb VERSION '0.2'" \
    -c "CREATE EXTENSION paidb_openpai VERSION '0.2'" -f "$ROOT/test/bench/fixtures.sql" -f - >/dev/null <<'SQL' || { echo "populate: seeds failed" >&2; exit 1; }
CREATE TABLE bench.seed (i int PRIMARY KEY, name text NOT NULL);
CREATE SEQUENCE bench.rv START 100;
-- attempt a of job n in state st (completed with exit code `code` if set), as the framework watcher sees it
CREATE FUNCTION bench.event(n text, a int, st text, code int) RETURNS jsonb LANGUAGE sql AS $f$
SELECT jsonb_build_object('apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', n, 'namespace', 'default', 'uid', md5('uid' || n),
     'resourceVersion', nextval('bench.rv')::text, 'annotations', jsonb_build_object('requestGeneration', '1')),
  'status', jsonb_build_object('state', st, 'startTime', '2020-08-01T10:00:00Z',
     'transitionTime', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
     'completionTime', CASE WHEN st = 'Completed' THEN '2020-08-01T12:00:00Z' END,
     'retryPolicyStatus', jsonb_build_object('totalRetriedCount', a, 'accountableRetriedCount', a, 'retryDelaySec', null),
     'attemptStatus', jsonb_build_object('id', a, 'startTime', '2020-08-01T10:00:00Z', 'instanceUID', a || '_' || md5(n),
        'configMapName', n || '-attempt', 'completionStatus', CASE WHEN code IS NOT NULL THEN jsonb_build_object(
           'code', code, 'phrase', CASE code WHEN 0 THEN 'Succeeded' ELSE 'Failed' END, 'diagnostics', 'exit code ' || code,
           'type', jsonb_build_object('name', CASE code WHEN 0 THEN 'Succeeded' ELSE 'Failed' END, 'attributes', '["Permanent"]'::jsonb)) END,
        'taskRoleStatuses', jsonb_build_array(jsonb_build_object('name', 'worker', 'podGracefulDeletionTimeoutSec', 1800,
           'taskStatuses', (SELECT jsonb_agg(jsonb_build_object('index', k, 'instanceUID', a || '_' || md5(n || k),
               'state', CASE WHEN code IS NULL THEN 'TaskAttemptRunning' ELSE 'Completed' END, 'startTime', '2020-08-01T10:00:00Z',
               'retryPolicyStatus', jsonb_build_object('totalRetriedCount', 0, 'accountableRetriedCount', 0),
               'attemptStatus', jsonb_build_object('id', 0, 'podName', n || '-worker-' || k, 'podUID', md5('pod' || a || n || k),
                  'podNodeName', 'node-' || k, 'podIP', '10.0.0.' || k, 'podHostIP', '192.168.0.' || k,
                  'completionStatus', CASE WHEN code IS NOT NULL THEN jsonb_build_object('code', code, 'phrase', 'x') END)) ORDER BY k)
             FROM generate_series(0, 3) k))))))
$f$;
INSERT INTO bench.seed SELECT i, md5('seed' || i) FROM generate_series(0, :seeds - 1) i;
SELECT count(*) FROM bench.seed s, bench.template, paidb.put_framework_request(
  replace(replace(replace(t, '__name__', s.name), 'alice', 'user' || s.i % 37), 'mnist-train', 'train-' || s.i % 101)::jsonb,
  now() - s.i * interval '97 seconds');
SELECT count(paidb.apply_watch_event('MODIFIED', bench.event(name, 0, 'AttemptRunning', NULL))) FROM bench.seed;
SELECT count(paidb.apply_watch_event('MODIFIED', bench.event(name, 0, 'AttemptCompleted', 1))) FROM bench.seed WHERE i % 10 = 5;
SELECT count(paidb.apply_watch_event('MODIFIED', bench.event(name, 1, 'AttemptRunning', NULL))) FROM bench.seed WHERE i % 10 = 5;
SELECT count(paidb.apply_watch_event('MODIFIED', bench.event(name, (i % 10 = 5)::int, 'Completed', (i % 7 = 0)::int)))
  FROM bench.seed WHERE i % 50 <> 0;
SELECT count(paidb.apply_watch_event('DELETED', bench.event(name, (i % 10 = 5)::int, 'Completed', (i % 7 = 0)::int)))
  FROM bench.seed WHERE i % 50 <> 0;
-- jobs [a, b) as copies of the seeds: the name replaced everywhere, times shifted by an hour per round
CREATE FUNCTION bench.copy_jobs(a int, b int) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE cols text; fcols text; s int := (SELECT count(*) FROM bench.seed);
    c text := 'SELECT j, md5(''job'' || j) AS n, (j / $3) * interval ''1 hour'' AS shift FROM generate_series($1, $2 - 1) j';
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum), string_agg('f.' || quote_ident(attname), ', ' ORDER BY attnum)
      INTO cols, fcols FROM pg_attribute
     WHERE attrelid = 'paidb.framework'::regclass AND attnum > 0 AND NOT attisdropped
       AND attname NOT IN ('name', 'snapshot', 'submission_time', 'creation_time', 'launch_time', 'completion_time');
    EXECUTE format('INSERT INTO paidb.framework (name, snapshot, submission_time, creation_time, launch_time, completion_time, %s)
        SELECT c.n, replace(f.snapshot::text, f.name, c.n)::jsonb, f.submission_time - c.shift, f.creation_time - c.shift,
               f.launch_time - c.shift, f.completion_time - c.shift, %s
          FROM (%s) c JOIN bench.seed s ON s.i = c.j %% $3 JOIN paidb.framework f ON f.name = s.name', cols, fcols, c) USING a, b, s;
    EXECUTE format('INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, history_type, snapshot, inserted_at, updated_at)
        SELECT paidb.history_uid(c.n, h.attempt_index, h.history_type), c.n, h.attempt_index, h.history_type,
               replace(h.snapshot::text, h.framework_name, c.n)::jsonb, h.inserted_at, h.updated_at
          FROM (%s) c JOIN bench.seed s ON s.i = c.j %% $3 JOIN paidb.framework_history h ON h.framework_name = s.name', c) USING a, b, s;
END $f$;
SQL
echo "populate: $SEEDS seed jobs (put + watch events) in $(since "$t0") s"
t1=$(now)
for ((a = SEEDS; a < JOBS; a += CHUNK)); do
    b=$((a + CHUNK < JOBS ? a + CHUNK : JOBS))
    q "SELECT bench.copy_jobs($a, $b)" >/dev/null || { echo "populate: copy_jobs($a, $b) failed" >&2; exit 1; }
done
echo "populate: $((JOBS - SEEDS)) copies in $(since "$t1") s; $JOBS jobs in $(since "$t0") s"
t1=$(now)
q "SELECT paidb.compact_job_counts()" >/dev/null
"$PG_BIN/psql" -X -q -c "VACUUM ANALYZE" || exit 1
echo "populate: VACUUM ANALYZE in $(since "$t1") s"
sizes() { q "SELECT format('size %s: %s: total %s (heap %s, TOAST %s), %s rows', '$1', relname, pg_size_pretty(pg_total_relation_size(oid)),
    pg_size_pretty(pg_relation_size(oid)), pg_size_pretty(pg_relation_size(NULLIF(reltoastrelid, 0))), reltuples::bigint) FROM pg_class
    WHERE oid IN ('paidb.framework'::regclass, 'paidb.framework_history'::regclass, 'paidb.job_summary'::regclass) ORDER BY relname"; }
sizes before
q "CREATE TABLE bench.sample AS SELECT name FROM paidb.framework WHERE sub_state = 'Completed' ORDER BY md5(name || 'x') LIMIT 1000;
   CREATE TABLE bench.running AS SELECT row_number() OVER () AS i, name FROM paidb.framework WHERE state = 'RUNNING';
   ALTER TABLE bench.running ADD PRIMARY KEY (i)" >/dev/null || exit 1
NRUN=$(q "SELECT count(*) FROM bench.running")
check() {   # jobs not submitted by the load (those are 'p...'), and the sample
    q "SELECT (SELECT count(*) FROM paidb.framework WHERE name NOT LIKE 'p%') || ' jobs, ' || (SELECT count(*) FROM paidb.job_summary
        WHERE name NOT LIKE 'p%') || ' in the job list, ' || (SELECT count(*) FROM paidb.framework_history) || ' history rows, sample '
        || (SELECT md5(string_agg(f.name || '=' || f.snapshot, ',' ORDER BY f.name)) FROM openpai.frameworks f JOIN bench.sample USING (name)) || ' '
        || (SELECT md5(string_agg(h.uid || '=' || h.snapshot, ',' ORDER BY h.uid)) FROM openpai.framework_history h JOIN bench.sample s ON s.name = h.\"frameworkName\")"
}
BEFORE=$(check)
paidb_stop_pg "$W/pg"

# ------------------------------------------------------------------ this tree, under load
make -C "$W/src-now" -s install DESTDIR="$PAIDB_PG_ROOT" >/dev/null || exit 1
echo "installed: $(grep -h '^default_version' "$EXT/paidb.control")"
# WARNING marks (an extension script sends no NOTICE) between the statements of the installed copy of the update scripts
for f in paidb paidb_openpai; do
    python3 - "$EXT/$f--0.2--0.3.sql" "$f" "$W/labels" <<'PY' || exit 1
import re, sys
path, tag, labels = sys.argv[1:4]
src, dollar = open(path).read(), re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
mark = lambda k: ("\nDO $bench_mark$ BEGIN RAISE WARNING 'bench-mark % %', '%s:%d', extract(epoch FROM clock_timestamp()); "
                  "END $bench_mark$;\n").replace("%s:%d", "%s:%d" % (tag, k))
out, lab, start, pos, state = [mark(0)], [], 0, 0, None
while pos < len(src):    # split at each ";" outside comments, quotes and dollar quotes
    c, m = src[pos], dollar.match(src, pos)
    if state is None and src[pos:pos + 2] in ("--", "/*"):
        state = src[pos:pos + 2]; pos += 1
    elif state is None and c == "\\" and src[pos - 1:pos] in ("", "\n"):     # \echo ... \quit
        pos = src.find("\n", pos) % (len(src) + 1) - 1
    elif state is None and c in "'\"":
        state = c
    elif state is None and m and not re.match(r"\w", src[pos - 1:pos] or " "):
        state = m.group(0); pos += len(state) - 1
    elif state is None and c == ";":
        words = [l.strip() for l in src[start:pos].split("\n") if l.strip() and not l.strip().startswith(("--", "\\"))]
        lab.append("%s:%d\t%s" % (tag, len(lab) + 1, " ".join(words[:2])[:110]))
        out += [src[start:pos + 1], mark(len(lab))]; start = pos + 1
    elif state == c or state == "--" and c == "\n" or state == "/*" and src[pos - 1:pos + 1] == "*/":
        state = None
    elif state and state[0] == "$" and src.startswith(state, pos):
        pos += len(state) - 1; state = None
    pos += 1
open(path, "w").write("".join(out) + src[start:])
open(labels, "a").write("\n".join(lab) + "\n")
PY
done
echo "paidb.enabled = on" >> "$W/pg/postgresql.conf"
su postgres -c "$PG_BIN/pg_ctl -D '$W/pg' -l '$W/pg.log' -w -t 120 start >/dev/null" || { tail -20 "$W/pg.log"; exit 1; }
bench_put_sql > "$W/put.sql"
cat > "$W/status.sql" <<EOS
\set r random(1, $NRUN)
SELECT paidb.apply_watch_event('MODIFIED', bench.event(name, 0, 'AttemptRunning', NULL)) FROM bench.running WHERE i = :r;
EOS
# load NAME SCRIPT CLIENTS RATE: pgbench runs of 5 s back to back until $W/stop, each call's latency logged
load() {
    local i=0 r=()
    [ "$4" != 0 ] && r=(-R "$4")
    while [ ! -e "$W/stop" ]; do
        i=$((i + 1))
        nice "$PG_BIN/pgbench" -n -c "$3" -j $(($3 > 1 ? 2 : 1)) -T 5 "${r[@]}" -l --log-prefix="$W/lat/$1.$i" -f "$2" postgres >>"$W/$1.out" 2>&1
    done
}
T0=$(now)
load put "$W/put.sql" 4 "$RATE" &
[ "$URATE" != 0 ] && [ "$NRUN" -gt 0 ] && { load status "$W/status.sql" 1 "$URATE" & }
sleep "$BASELINE"
T1=$(now)
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -c "BEGIN" -c "ALTER EXTENSION paidb UPDATE" -c "ALTER EXTENSION paidb_openpai UPDATE" \
    -c "COMMIT" 2>"$W/update.err" || { cat "$W/update.err" >&2; exit 1; }
T2=$(now)
echo "update: ALTER EXTENSION paidb UPDATE; ALTER EXTENSION paidb_openpai UPDATE (one transaction) in $(since "$T1") s; now $(q "SELECT extversion FROM pg_extension WHERE extname = 'paidb'")"
grep -v "bench-mark" "$W/update.err" | sed 's/^/  update says: /'
left() { q "SELECT count(*) FROM pg_attribute WHERE attrelid = 'paidb.framework'::regclass AND attname = 'snapshot_0_2' AND NOT attisdropped"; }
last=$T2
while [ "$(left)" != 0 ]; do
    awk -v t="$(since "$T2")" -v m="$TIMEOUT" 'BEGIN {exit !(t > m)}' && { echo "conversion: NOT finished within $TIMEOUT s"; break; }
    awk -v t="$(since "$last")" 'BEGIN {exit !(t >= 30)}' && { last=$(now); echo "conversion: $(since "$T2") s, $(PGOPTIONS="-c statement_timeout=20s" \
        q "SELECT count(*) FROM paidb.framework WHERE snapshot_packed IS NULL" 2>/dev/null || echo "?") rows of paidb.framework not packed; retention worker: $(
        q "SELECT state FROM paidb.status() WHERE worker LIKE '%retention%'" 2>/dev/null)"; }
    sleep 1
done
T3=$(now)
sleep 2
touch "$W/stop"; wait
AFTER=$(check)
sizes after

# ------------------------------------------------------------------ report
dt() { awk -v a="$1" -v b="$2" -v f="${3:-%.1f}" 'BEGIN {printf f, b - a}'; }
# stats NAME: "phase n p50_ms max_ms" of its calls by the phase each started in (the first second left out)
stats() {
    cat "$W"/lat/"$1".* 2>/dev/null | awk -v a="$T0" -v b="$T1" -v c="$T2" -v d="$T3" '
        {ex = ($3 - (NF >= 7 ? $7 : 0)) / 1000; st = $5 + $6 / 1e6 - ex / 1000     # $7: schedule lag (-R)
         p = (st < a + 1) ? "" : (st < b) ? "base" : (st < c) ? "update" : (st < d) ? "conv" : ""
         if (p != "") print p, ex}' | sort -k1,1 -k2,2n |
        awk '{v[$1, ++n[$1]] = $2} END {for (p in n) printf "%s %d %.1f %.1f\n", p, n[p], v[p, int((n[p] + 1) / 2)], v[p, n[p]]}'
}
report() {   # report LABEL NAME
    local s
    s=$(stats "$2")
    get() { awk -v p="$1" -v f="$2" '$1 == p {print $f}' <<<"$s"; }
    rate() { awk -v n="$(get "$1" 2)" -v a="$2" -v b="$3" 'BEGIN {if (n == "" || b - a <= 0) print "-"; else printf "%.1f", n / (b - a)}'; }
    echo "$1s/s: before $(rate base "$(dt -1 "$T0" %.6f)" "$T1"), during the update $(rate update "$T1" "$T2"), during the conversion $(rate conv "$T2" "$T3")"
    echo "$1 latency p50/max ms: before $(get base 3)/$(get base 4), during the update $(get update 3)/$(get update 4), during the conversion $(get conv 3)/$(get conv 4)"
    awk -v u="$(get update 4)" -v c="$(get conv 4)" -v p="$(get base 3)" -v n="$1" 'BEGIN {m = (u + 0 > c + 0) ? u : c;
        printf "longest wait a %s saw: %.1f ms (max latency during the update and the conversion; %.1f ms more than the baseline p50)\n", n, m, m - p}'
    echo "$1 errors (client aborted, the call not in the figures above): $(grep -c "aborted in command" "$W/$2.out")$(grep -m1 "aborted in command" "$W/$2.out" | sed 's/.*aborted in command [0-9]* query [0-9]*: /; first: /')"
}
echo
echo "jobs: $JOBS ($SEEDS seeds; $NRUN running, updated by the status client)"
echo "update (ALTER EXTENSION) seconds: $(dt "$T1" "$T2" %.2f)"
echo "background conversion seconds: $(dt "$T2" "$T3")$(awk -v n="$JOBS" -v t="$(dt "$T2" "$T3")" 'BEGIN {if (t > 0) printf " (%.0f jobs/s)", n / t}')"
grep -o 'paidb ran "CREATE INDEX[^ ]* [^ ]*[^"]*" in [0-9.]* s' "$W/pg.log" | sed -E 's/^paidb ran "(CREATE INDEX [A-Z]* ?[a-z_]+)[^"]*"/  after the update: \1 built/'
report submission put
[ -e "$W/status.out" ] && report "status update" status
# a logged wait is followed by its statement: the longest of each kind, aborted calls included
echo "longest lock wait in the server log (log_lock_waits: waits of 100 ms or more): $(awk -v rels="$(q "SELECT string_agg(oid || '=' || oid::regclass, ' ')
        FROM pg_class WHERE relnamespace = 'paidb'::regnamespace")" 'BEGIN {n = split(rels, a, " "); for (i = 1; i <= n; i++) {split(a[i], kv, "="); r[kv[1]] = kv[2]}}
    /pgbench: LOG: .* acquired .* after [0-9.]* ms/ {ms = $(NF - 1); sub(/.* acquired /, ""); sub(/ of database.*| after.*/, ""); l = $0; next}
    ms != "" && /pgbench: STATEMENT:/ {k = /put_framework_request/ ? "submission" : "status update"
        if (ms + 0 > m[k] + 0) {m[k] = ms; split(l, w, " "); what[k] = w[1] " on " ((w[4] in r) ? r[w[4]] : w[3] " " w[4])}; ms = ""}
    END {for (k in m) printf "%s%s %.1f ms (%s)", (s++ ? "; " : ""), k, m[k], what[k]; if (!s) printf "none"}' "$W/pg.log")"
echo "slowest statements of the update (ms):"
grep -o "bench-mark [^ ]* [0-9.]*" "$W/update.err" | awk 'NR == FNR {lab[$1] = substr($0, length($1) + 2); next}
    {split($2, a, ":"); if (a[2] > 0 && (a[1] ":" a[2] - 1) in t) printf "%8.0f  %s  %s\n", ($3 - t[a[1] ":" a[2] - 1]) * 1000, $2, lab[$2]; t[$2] = $3}' \
    "$W/labels" - | sort -rn | head -8
printf 'correctness: before: %s\ncorrectness: after:  %s\ncorrectness: %s\n' "$BEFORE" "$AFTER" "$([ "$BEFORE" = "$AFTER" ] && echo ok || echo MISMATCH)"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
