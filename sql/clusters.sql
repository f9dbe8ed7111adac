-- Many clusters from one database (SPEC §11), in SQL: placement in the
-- submitting transaction, refusals that store nothing, cordon and removal,
-- moving a waiting job, and what a watch event of another placement does.
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE sql; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE FUNCTION pg_temp.job(name text, vc text DEFAULT 'default') RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('metadata', jsonb_build_object('name', name,
         'labels', jsonb_build_object('virtualCluster', vc, 'userName', 'alice')),
       'spec', jsonb_build_object('executionType', 'Start'))
$$;
-- a watched framework of a job, with a status
CREATE FUNCTION pg_temp.watched(name text, rv int, state text, placement text DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS $$
SELECT jsonb_build_object('metadata', jsonb_build_object('name', name, 'namespace', 'default',
         'uid', 'uid-' || name, 'resourceVersion', rv::text,
         'labels', CASE WHEN placement IS NULL THEN '{}'::jsonb
                        ELSE jsonb_build_object('paidb.io/placement', placement) END,
         'annotations', jsonb_build_object('requestGeneration', '1')),
       'spec', jsonb_build_object('executionType', 'Start'),
       'status', jsonb_build_object('state', state,
         'attemptStatus', jsonb_build_object('id', 0,
           'completionStatus', CASE WHEN state = 'Completed'
             THEN jsonb_build_object('code', 0, 'phrase', 'Succeeded', 'type', jsonb_build_object('name', 'Succeeded'))
             END)))
$$;

-- the default cluster: 0.2's single API server
SELECT name, api_server, namespace, retain_mode, state FROM paidb.cluster;
INSERT INTO paidb.cluster (name, api_server, namespace) VALUES
    ('gpu-b', 'https://b.example:6443', 'pai-b'),
    ('gpu-c', 'http://c.example:8080', NULL);
INSERT INTO paidb.virtual_cluster_placement VALUES ('vc-c', 'gpu-c');

-- placement: by argument, by virtual cluster, by default
SELECT name, created FROM paidb.put_framework_request(pg_temp.job('byarg'), now(), '{}', 'gpu-b');
SELECT name, created FROM paidb.put_framework_request(pg_temp.job('byvc', 'vc-c'));
SELECT name, created FROM paidb.put_framework_request(pg_temp.job('bydefault'));
SET paidb.default_cluster = 'gpu-b';
SELECT name, created FROM paidb.put_framework_request(pg_temp.job('bysetting'));
RESET paidb.default_cluster;
-- the argument wins over the virtual cluster
SELECT name, created FROM paidb.put_framework_request(pg_temp.job('argwins', 'vc-c'), now(), '{}', 'default');
SELECT name, cluster, placement, moving_from, namespace FROM paidb.framework ORDER BY name;

-- refusals store nothing
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('nosuch'), now(), '{}', 'gpu-x')$$);
SET paidb.default_cluster = 'gpu-x';
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('nosuch2'))$$);
RESET paidb.default_cluster;
UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'gpu-c';
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('cordoned', 'vc-c'))$$);
-- a cordoned cluster's jobs still change
SELECT changed FROM paidb.put_framework_request(pg_temp.job('byvc', 'vc-c') || '{"spec": {"executionType": "Stop"}}');
UPDATE paidb.cluster SET state = 'active' WHERE name = 'gpu-c';
-- changing a job's request never moves it
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('byarg'), now(), '{}', 'gpu-c')$$);
SELECT changed FROM paidb.put_framework_request(pg_temp.job('byarg'), now(), '{}', 'gpu-b');
SELECT count(*) AS stored_refused FROM paidb.framework WHERE name IN ('nosuch', 'nosuch2', 'cordoned');

-- add-ons live in the job's cluster's namespace
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('wrongns'), now(),
    '{"configSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "default"}}}', 'gpu-b')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('rightns'), now(),
    '{"configSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "pai-b"}}}', 'gpu-b')$$);
SELECT name, cluster, namespace FROM paidb.framework WHERE name IN ('wrongns', 'rightns');

-- moving a waiting job
SELECT pg_temp.try($$SELECT paidb.move_job('nosuch', 'gpu-c')$$);
SELECT pg_temp.try($$SELECT paidb.move_job('bydefault', 'gpu-x')$$);
UPDATE paidb.cluster SET state = 'cordoned' WHERE name = 'gpu-c';
SELECT pg_temp.try($$SELECT paidb.move_job('bydefault', 'gpu-c')$$);
UPDATE paidb.cluster SET state = 'active' WHERE name = 'gpu-c';
SELECT paidb.move_job('bydefault', 'default') AS moved_to_where_it_is;
-- its add-on's namespace does not fit gpu-c's (the default setting's)
SELECT pg_temp.try($$SELECT paidb.move_job('rightns', 'gpu-c')$$);
SELECT paidb.move_job('bydefault', 'gpu-c') AS moved;
SELECT name, cluster, placement, moving_from, request_synced, state, sent_generation
  FROM paidb.framework WHERE name = 'bydefault';
-- not again before the old cluster confirms
SELECT pg_temp.try($$SELECT paidb.move_job('bydefault', 'gpu-b')$$);
-- force: at once, the old copy queued for deletion in the old cluster, and said so
SELECT paidb.move_job('bysetting', 'default', force => true) AS moved;
SELECT name, cluster, placement, moving_from FROM paidb.framework WHERE name = 'bysetting';
SELECT cluster, name FROM paidb.orphan;
SELECT framework_name, type, reason, message FROM paidb.framework_event WHERE reason = 'MovedUnconfirmed';

-- a job that may have started does not move, force or not
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.watched('argwins', 5, 'AttemptRunning'));
SELECT state FROM paidb.framework WHERE name = 'argwins';
SELECT pg_temp.try($$SELECT paidb.move_job('argwins', 'gpu-b', true)$$);

-- a framework of another placement never changes the job, and is queued for deletion
SELECT placement FROM paidb.framework WHERE name = 'bysetting';
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.watched('bysetting', 7, 'AttemptRunning', '1'));
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.watched('bysetting', 8, 'AttemptRunning', 'x'));
SELECT state, resource_version FROM paidb.framework WHERE name = 'bysetting';
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.watched('bysetting', 9, 'AttemptRunning', '2'));
SELECT state, resource_version FROM paidb.framework WHERE name = 'bysetting';

-- removing a cluster: refused while it has a live job, then allowed
SELECT pg_temp.try($$SELECT paidb.remove_cluster('gpu-x')$$);
SELECT pg_temp.try($$SELECT paidb.remove_cluster('gpu-b')$$);
SELECT name FROM paidb.framework WHERE cluster = 'gpu-b' ORDER BY name;
SELECT paidb.apply_watch_event('MODIFIED', pg_temp.watched(n, 20, 'Completed'))
  FROM unnest(ARRAY['byarg', 'rightns']) n;
SELECT pg_temp.try($$SELECT paidb.remove_cluster('gpu-b')$$);
SELECT paidb.apply_watch_event('DELETED', pg_temp.watched(n, 21, 'Completed'))
  FROM unnest(ARRAY['byarg', 'rightns']) n;
SELECT paidb.remove_cluster('gpu-b');
SELECT name, state FROM paidb.cluster ORDER BY name;
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request(pg_temp.job('late'), now(), '{}', 'gpu-b')$$);
-- the row goes only when no job refers to it
SELECT pg_temp.try($$DELETE FROM paidb.cluster WHERE name = 'gpu-b'$$);

-- what cluster_status shows without workers
SELECT cluster, state, jobs, unsynced, moving_out, workers FROM paidb.cluster_status ORDER BY cluster;
DROP EXTENSION paidb;
