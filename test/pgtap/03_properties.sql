-- pgTAP: properties of RFC 7396 merge patch over generated documents, and
-- of the write merger's work list.  Deterministic: the generator is seeded.
BEGIN;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
\i test/bench/plpgsql_merge_patch.sql
SELECT plan(28);

-- A random JSON value: objects over a small key set (so patches hit
-- existing keys), arrays, scalars, and nulls in patches.
CREATE FUNCTION pg_temp.rand_json(depth int, with_nulls boolean) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r float8 := random();
    obj jsonb := '{}';
    n int;
BEGIN
    IF depth <= 0 OR r < 0.3 THEN
        r := random();
        RETURN CASE
            WHEN with_nulls AND r < 0.15 THEN 'null'::jsonb
            WHEN r < 0.35 THEN to_jsonb((random() * 1000)::int)
            WHEN r < 0.55 THEN to_jsonb(md5(random()::text))
            WHEN r < 0.65 THEN to_jsonb(random() < 0.5)
            WHEN r < 0.75 THEN jsonb_build_array(1, 'x', jsonb_build_object('k', 1))
            WHEN r < 0.8 THEN '12345678901234567890.123456789'::jsonb
            ELSE to_jsonb('ключ ' || (random() * 10)::int)
        END;
    END IF;
    n := (random() * 4)::int;
    FOR i IN 1..n LOOP
        obj := obj || jsonb_build_object(
            (ARRAY['a', 'b', 'c', 'd', 'é', 'spec', 'metadata'])[1 + (random() * 6)::int],
            pg_temp.rand_json(depth - 1, with_nulls));
    END LOOP;
    RETURN obj;
END $$;

SELECT setseed(0.42);
CREATE TEMP TABLE cases AS
  SELECT i, pg_temp.rand_json(4, false) AS t, pg_temp.rand_json(4, true) AS p,
         pg_temp.rand_json(4, false) AS q
    FROM generate_series(1, 400) i;
CREATE TEMP TABLE results AS
  SELECT i, t, p, q, paidb.jsonb_merge_patch(t, p) AS r, paidb.jsonb_merge_patch(t, q) AS rq FROM cases;

SELECT is((SELECT count(*)::int FROM results WHERE r IS DISTINCT FROM bench.plpgsql_merge_patch(t, p)), 0,
          'agrees with a plain RFC 7396 implementation on 400 generated pairs');
SELECT is((SELECT count(*)::int FROM results WHERE paidb.jsonb_merge_patch(r, p) IS DISTINCT FROM r), 0,
          'applying the same patch twice changes nothing more (idempotent)');
SELECT is((SELECT count(*)::int FROM results WHERE jsonb_typeof(q) = 'object' AND NOT (rq @> q)), 0,
          'a patch without nulls is contained in the result');
SELECT is((SELECT count(*)::int FROM results, jsonb_each(p) e
            WHERE jsonb_typeof(p) = 'object' AND e.value = 'null' AND r ? e.key), 0,
          'members patched with null are gone');
SELECT is((SELECT count(*)::int FROM results, jsonb_each(t) e
            WHERE jsonb_typeof(p) = 'object' AND jsonb_typeof(t) = 'object' AND NOT p ? e.key
              AND r -> e.key IS DISTINCT FROM e.value), 0,
          'members the patch does not name are untouched');
SELECT is((SELECT count(*)::int FROM results WHERE jsonb_typeof(p) <> 'object' AND r <> p), 0,
          'a patch that is not an object replaces the target');
SELECT is((SELECT count(*)::int FROM results WHERE jsonb_typeof(t) = 'object' AND paidb.jsonb_merge_patch(t, '{}') <> t), 0,
          'the empty patch leaves objects unchanged');
SELECT is((SELECT count(*)::int FROM results
            WHERE jsonb_typeof(p) = 'object' AND jsonb_typeof(q) = 'object'
              AND paidb.jsonb_merge_patch(paidb.jsonb_merge_patch(t, q), p)
                  IS DISTINCT FROM bench.plpgsql_merge_patch(bench.plpgsql_merge_patch(t, q), p)), 0,
          'sequences of patches agree with the reference');

-- The write merger: for generated patches of a job, the stored request is
-- the merge patch of the previous one and generations count the changes.
SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "propjob", "labels": {"a": "1"}}, "spec": {"executionType": "Start"}}') \g /dev/null
CREATE TEMP TABLE patches AS
  SELECT i, jsonb_build_object('spec', pg_temp.rand_json(2, true), 'metadata', jsonb_build_object('labels', pg_temp.rand_json(1, true))) AS p
    FROM generate_series(1, 60) i;
CREATE TEMP TABLE applied (i int, changed boolean, expected_changed boolean, ok boolean);
DO $$
DECLARE
    rec record;
    before jsonb;
    expect jsonb;
    res record;
BEGIN
    FOR rec IN SELECT * FROM patches ORDER BY i LOOP
        SELECT paidb.snapshot(f) - 'status' INTO before FROM paidb.framework f WHERE name = 'propjob';
        expect := paidb.jsonb_merge_patch(before, rec.p);
        BEGIN
            SELECT * INTO res FROM paidb.patch_framework_request('propjob', rec.p);
            INSERT INTO applied SELECT rec.i, res.changed,
                (expect #- '{metadata,annotations,requestGeneration}') IS DISTINCT FROM (before #- '{metadata,annotations,requestGeneration}'),
                (SELECT (paidb.snapshot(framework) - 'status') #- '{metadata,annotations,requestGeneration}'
                        = expect #- '{metadata,annotations,requestGeneration}' FROM paidb.framework WHERE name = 'propjob');
        EXCEPTION WHEN invalid_parameter_value THEN
            -- patches that make labels or spec a non-object are refused, nothing stored
            INSERT INTO applied SELECT rec.i, NULL, NULL,
                (SELECT paidb.snapshot(framework) - 'status' = before FROM paidb.framework WHERE name = 'propjob');
        END;
    END LOOP;
END $$;
SELECT is((SELECT count(*)::int FROM applied WHERE NOT ok), 0, 'every stored request is the merge patch of the one before (or unchanged when refused)');
SELECT is((SELECT count(*)::int FROM applied WHERE changed IS DISTINCT FROM expected_changed AND changed IS NOT NULL), 0,
          'changed is reported exactly when the request changed');
SELECT is((SELECT request_generation FROM paidb.framework WHERE name = 'propjob'),
          1 + (SELECT count(*) FROM applied WHERE changed),
          'the generation counts the effective changes');

-- Packed snapshots (src/snapshot_pack.c): what is stored reads back equal,
-- with the config annotation left out exactly when it equals job_config.
CREATE TEMP TABLE packs AS
  SELECT i, d,
         E'protocolVersion: 2\nname: "job ' || i || E'"\ntaskRoles:\n  w:\n    commands: [\'echo \\\\ ключ\']\n' AS c
    FROM (SELECT i, jsonb_build_object('r', pg_temp.rand_json(5, true), 's', E'quote " backslash \\ tab \t nl \n ' || i,
                 'n', (i * 1.5)::numeric, 'big', '1e300'::jsonb) AS d
            FROM generate_series(1, 300) i) g;
SELECT is((SELECT count(*)::int FROM packs WHERE paidb.unpack_snapshot(paidb.pack_snapshot(d)) IS DISTINCT FROM d),
          0, 'a packed snapshot unpacks to the same jsonb');
-- paidb's own scanner parses packed text (src/json_scan.c): with one-letter
-- escapes (above), without any ("s" left out), and with \u escapes, which it
-- leaves to PostgreSQL's parser (a control character in "s")
SELECT is((SELECT count(*)::int FROM packs
            WHERE paidb.unpack_snapshot(paidb.pack_snapshot(d - 's')) IS DISTINCT FROM d - 's'
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d || jsonb_build_object('s', chr(1) || i || chr(31))))
                  IS DISTINCT FROM d || jsonb_build_object('s', chr(1) || i || chr(31))
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d - 's' || jsonb_build_object('metadata',
                      jsonb_build_object('annotations', jsonb_build_object('config', c)))), c)
                  IS DISTINCT FROM d - 's' || jsonb_build_object('metadata',
                      jsonb_build_object('annotations', jsonb_build_object('config', c)))),
          0, 'snapshots without escapes or with \u escapes unpack to the same jsonb');
-- decoys: "metadata" and "annotations" objects at other depths and in arrays
UPDATE packs SET d = jsonb_set(d || jsonb_build_object(
         'metadata', jsonb_build_object('name', 'job' || i, 'labels', pg_temp.rand_json(3, true),
             'metadata', jsonb_build_object('annotations', jsonb_build_object('x', i)),
             'annotations', jsonb_build_object('a', pg_temp.rand_json(3, true),
                 'annotations', jsonb_build_object('metadata', i))),
         'zz', jsonb_build_array(jsonb_build_object('metadata', jsonb_build_object('annotations', '{}'::jsonb)))),
       '{metadata,annotations,config}', to_jsonb(c));
SELECT is((SELECT count(*)::int FROM packs
            WHERE paidb.unpack_snapshot(paidb.pack_snapshot(d, c), c) IS DISTINCT FROM d), 0,
          'with the row''s job config, the config annotation reads back too');
SELECT is((SELECT count(*)::int FROM packs
            WHERE get_byte(paidb.pack_snapshot(d, c), 1) <> 1
               OR length(paidb.pack_snapshot(d, c)) >= length(paidb.pack_snapshot(d))), 0,
          'the config annotation equal to job_config is left out (flag 1, fewer bytes)');
SELECT is((SELECT count(*)::int FROM packs
            WHERE get_byte(paidb.pack_snapshot(d, c || 'x'), 1) <> 0
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d, c || 'x'), NULL) IS DISTINCT FROM d), 0,
          'a config annotation other than job_config stays in the packed snapshot');
SELECT throws_ok($$SELECT paidb.unpack_snapshot('\x00'::bytea)$$, 'XX001', NULL,
                 'a packed snapshot of no known format is refused as corrupted');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(substr(paidb.pack_snapshot(d), 1, 12)) FROM packs WHERE i = 1$$,
                 'XX001', NULL, 'a truncated packed snapshot is refused as corrupted');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(paidb.pack_snapshot(d, c), NULL) FROM packs WHERE i = 1$$,
                 'XX001', NULL, 'a packed snapshot without its config, read without job_config, is refused');
-- Format 2 (lz4), as a job row stores a framework that has not completed;
-- format 1 (zstd) once it has, and by default (history).
SELECT is((SELECT count(*)::int FROM packs
            WHERE get_byte(paidb.pack_snapshot(d, c, true), 0) <> 2
               OR get_byte(paidb.pack_snapshot(d, c, true), 1) <> 1
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d, c, true), c) IS DISTINCT FROM d
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d, c || 'x', true), NULL) IS DISTINCT FROM d
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d - 's' || jsonb_build_object('s', chr(1) || i), NULL, true))
                  IS DISTINCT FROM d - 's' || jsonb_build_object('s', chr(1) || i)), 0,
          'as a job row stores it (format 2), a snapshot unpacks to the same jsonb, with and without its config');
SELECT is((SELECT count(*)::int FROM packs
            WHERE get_byte(paidb.pack_snapshot(d || '{"status": {"state": "Completed"}}', c, true), 0) <> 1
               OR get_byte(paidb.pack_snapshot(d || '{"status": {"state": "AttemptRunning"}}', c, true), 0) <> 2
               OR get_byte(paidb.pack_snapshot(d, c), 0) <> 1
               OR paidb.unpack_snapshot(paidb.pack_snapshot(d || '{"status": {"state": "Completed"}}', c, true), c)
                  IS DISTINCT FROM d || '{"status": {"state": "Completed"}}'), 0,
          'a completed framework''s row, and history, are packed in format 1');
-- a live job's large snapshot (a 1,000-task job's): format 1, which keeps half the bytes
SELECT is((SELECT count(*)::int FROM packs,
                  LATERAL (SELECT d || jsonb_build_object('status', jsonb_build_object('state', 'AttemptRunning',
                             'tasks', (SELECT jsonb_agg(jsonb_build_object('index', t, 'state', 'TaskAttemptRunning'))
                                         FROM generate_series(1, 400) t))) AS big) b
            WHERE i <= 20 AND (get_byte(paidb.pack_snapshot(big, c, true), 0) <> 1
                               OR paidb.unpack_snapshot(paidb.pack_snapshot(big, c, true), c) IS DISTINCT FROM big)), 0,
          'a job row whose text is over 16 kB is packed in format 1 while it lives');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(substr(paidb.pack_snapshot(d, NULL, true), 1, 5)) FROM packs WHERE i = 1$$,
                 'XX001', NULL, 'format 2 shorter than its length field is refused as corrupted');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(substr(paidb.pack_snapshot(d, NULL, true), 1, 40)) FROM packs WHERE i = 1$$,
                 'XX001', NULL, 'a truncated format 2 block is refused as corrupted');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(overlay(p PLACING '\x00000040'::bytea FROM 3 FOR 4))
                     FROM (SELECT paidb.pack_snapshot(d, NULL, true) p FROM packs WHERE i = 1) x$$,
                 'XX001', NULL, 'format 2 whose length field claims more than 1 GB is refused as corrupted');
SELECT throws_ok($$SELECT paidb.unpack_snapshot(overlay(p PLACING set_byte(substr(p, 3, 1), 0, get_byte(p, 2) + 1) FROM 3 FOR 1))
                     FROM (SELECT paidb.pack_snapshot(d, NULL, true) p FROM packs WHERE i = 1) x$$,
                 'XX001', NULL, 'format 2 whose length field says one byte more than its block holds is refused');

-- The work list is an index scan (partial index) when most jobs are synced.
SELECT paidb.import_frameworks(jsonb_agg(jsonb_build_object('metadata', jsonb_build_object('name', 'imp' || i, 'resourceVersion', i::text),
         'status', jsonb_build_object('state', 'AttemptRunning')))) FROM generate_series(1, 5000) i \g /dev/null
ANALYZE paidb.framework;
CREATE FUNCTION pg_temp.work_list_plan() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    l text;
    plan text := '';
BEGIN
    -- as src/worker_sync.c's claim writes it (SYNC_WORK_LIST)
    FOR l IN EXPLAIN SELECT name FROM paidb.framework
              WHERE cluster = 'default' AND moving_from IS NULL
                AND NOT api_server_deleted AND (NOT request_synced OR sub_state = 'Completed')
                AND (NOT request_synced OR state IN ('SUCCEEDED', 'FAILED', 'STOPPED'))
                AND COALESCE(next_sync_at, '-infinity'::timestamptz) <= now()
              ORDER BY COALESCE(next_sync_at, '-infinity'::timestamptz), name LIMIT 32 LOOP
        plan := plan || l || E'\n';
    END LOOP;
    RETURN plan;
END $$;
SELECT matches(pg_temp.work_list_plan(), 'framework_needs_sync_idx',
               'the sync worker''s work list is an index scan of the partial index');
-- The table's name check accepts exactly the names SPEC §2's pattern does:
-- ^[a-z0-9]{1,63}$, checked directly against candidates at and around its
-- edges (lengths 0, 1, 63, 64; characters beside the allowed ranges,
-- non-ASCII letters, a trailing newline).
CREATE FUNCTION pg_temp.name_check_accepts(n text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        INSERT INTO paidb.framework (name, submission_time, snapshot_packed, request_generation)
        VALUES (n, now(), paidb.pack_snapshot('{}'), 1);
        RAISE EXCEPTION USING ERRCODE = 'P0004';    -- undo the row
    EXCEPTION
        WHEN check_violation THEN RETURN false;
        WHEN assert_failure THEN RETURN true;
    END;
END $$;
CREATE TEMP TABLE name_candidates AS
SELECT DISTINCT c FROM (
    SELECT repeat('a', len) || tail AS c
      FROM generate_series(0, 64) len,
           unnest(ARRAY['', '0', '9', 'z', 'A', 'Z', '-', '.', '_', '/', ':', '`', '{', '@', '[',
                        'é', 'ж', ' ', E'\n', E'\t']) tail
    UNION ALL
    SELECT substr(md5(i::text) || md5((i + 1)::text), 1, 1 + i % 70) FROM generate_series(1, 300) i
    UNION ALL
    SELECT upper(substr(md5(i::text), 1, 5)) FROM generate_series(1, 20) i
) s;
SELECT is((SELECT count(*) FROM name_candidates
            WHERE pg_temp.name_check_accepts(c) IS DISTINCT FROM (c ~ '^[a-z0-9]{1,63}$')),
          0::bigint, 'the name check accepts exactly the names matching ^[a-z0-9]{1,63}$');

SELECT * FROM finish();
ROLLBACK;
