-- Bad input is refused with its SQLSTATE and a message a rest-server
-- developer can act on, and nothing is stored (SPEC §3).
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE sql; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT count(*) AS frameworks_before FROM paidb.framework;

-- not an object
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('[1, 2]')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('"job"')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(NULL)$$);
-- no name, or a name of the wrong type
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"spec": {}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": 42}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": "job"}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "a", "annotations": []}}')$$);
-- names the API server would refuse
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "my-job"}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "Job1"}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": ""}}')$$);
SELECT pg_temp.try(format($f$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "%s"}}')$f$, repeat('a', 64)));
SELECT pg_temp.try(format($f$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "%s"}}')$f$, repeat('a', 63)));
-- too large
SET paidb.max_request_bytes = '2kB';
SELECT pg_temp.try(format($f$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "big"}, "spec": {"x": "%s"}}')$f$, repeat('x', 3000)));
RESET paidb.max_request_bytes;
-- add-ons that are not objects, or unknown
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "addon1"}}', now(), '[]')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "addon1"}}', now(), '{"dockerSecretDef": "secret"}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "addon1"}}', now(), '{"dockerSecret": {}}')$$);
-- unknown event types; objects without a name
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('BOOKMARK', '{"metadata": {"name": "a"}}')$$);
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('added', '{"metadata": {"name": "a"}}')$$);
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {}}')$$);
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('ADDED', '[]')$$);
-- patches: unknown framework, renaming, not an object, making the request invalid
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('ghost', '{"spec": {}}')$$);
SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "patchme"}, "spec": {"executionType": "Start"}}');
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('patchme', '{"metadata": {"name": "other"}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('patchme', '{"metadata": {"name": null}}')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('patchme', '"Stop"')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('patchme', '{"metadata": {"labels": "x"}}')$$);
-- import: not an array nor a list
SELECT pg_temp.try($$SELECT paidb.import_frameworks('{"kind": "Framework"}')$$);
SELECT pg_temp.try($$SELECT paidb.import_frameworks('[1]')$$);
-- history: snapshots without a name or an attempt
SELECT pg_temp.try($$SELECT paidb.record_history('{"status": {"attemptStatus": {"id": 0}}}')$$);

-- nothing but the one valid job was stored, and it is unchanged
SELECT name, request_generation, paidb.snapshot(framework)->'spec' AS spec FROM paidb.framework;
SELECT count(*) AS orphans, (SELECT count(*) FROM paidb.framework_history) AS history FROM paidb.orphan;
