-- Add-on definitions and watched names are checked before anything is
-- stored (SPEC §8): each slot takes one kind, a DNS-1123 subdomain name,
-- and no namespace but paidb.k8s_namespace.  A refused call stores nothing.
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
\pset tuples_only on
\pset format unaligned
-- the error with its detail: the detail says what is wrong
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN EXECUTE sql; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN SQLSTATE || ': ' || SQLERRM || coalesce(E'\n' || nullif(d, ''), '');
END $$;
-- put a job with one add-on (slot, definition as jsonb text)
CREATE FUNCTION pg_temp.put(slot text, def text) RETURNS text LANGUAGE sql AS $$
SELECT pg_temp.try(format($f$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "addonjob"}}', now(), %L)$f$,
                          jsonb_build_object(slot, def::jsonb)))
$$;
SHOW paidb.k8s_namespace;

-- the issue's reproduction: "." in kube-system, a priority class ".."
SELECT pg_temp.put('configSecretDef', '{"kind": "Secret", "metadata": {"name": ".", "namespace": "kube-system"}}');
SELECT pg_temp.put('configSecretDef', '{"kind": "Secret", "metadata": {"name": "ok", "namespace": "kube-system"}}');
SELECT pg_temp.put('priorityClassDef', '{"kind": "PriorityClass", "metadata": {"name": ".."}}');
-- names: empty, dots, slashes, upper case, too long, not a string, missing
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": ""}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": "a..b"}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": "a/b"}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": "%2e%2e"}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": "Regcred"}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": "-regcred"}}');
SELECT pg_temp.put('dockerSecretDef', format('{"metadata": {"name": "%s"}}', repeat('a', 254)));
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"name": 7}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": {"generateName": "regcred-"}}');
SELECT pg_temp.put('dockerSecretDef', '{"metadata": "regcred"}');
-- kinds: each slot has one
SELECT pg_temp.put('configSecretDef', '{"kind": "ConfigMap", "metadata": {"name": "cfg"}}');
SELECT pg_temp.put('configSecretDef', '{"apiVersion": "apps/v1", "kind": "Secret", "metadata": {"name": "cfg"}}');
SELECT pg_temp.put('priorityClassDef', '{"kind": "Secret", "metadata": {"name": "prio"}}');
SELECT pg_temp.put('priorityClassDef', '{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PriorityClass", "metadata": {"name": "prio"}}');
SELECT pg_temp.put('priorityClassDef', '{"kind": "PriorityClass", "metadata": {"name": "prio", "namespace": "default"}}');
SELECT pg_temp.put('tokenSecretDef', '{"kind": ["Secret"], "metadata": {"name": "tok"}}');
-- nothing was stored
SELECT count(*) AS frameworks FROM paidb.framework;

-- the accepted forms: kind/apiVersion absent or the slot's, namespace absent or paidb's
SELECT pg_temp.put('configSecretDef', '{"metadata": {"name": "addonjob-config.v1"}}');
SELECT name FROM paidb.framework;
SELECT pg_temp.try($$SELECT * FROM paidb.put_framework_request('{"metadata": {"name": "addonjob2"}}', now(),
  '{"configSecretDef": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c", "namespace": "default"}},
    "priorityClassDef": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 10},
    "tokenSecretDef": null}')$$);
SELECT name, config_secret_def->'metadata'->>'name' AS config, priority_class_def->'metadata'->>'name' AS priority,
       token_secret_def IS NULL AS no_token
  FROM paidb.framework ORDER BY name;

-- watched frameworks with names no framework can have: an error, never an orphan
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "."}}')$$);
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": ".."}}')$$);
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "my-job"}}')$$);
SELECT pg_temp.try(format($f$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "%s"}}')$f$, repeat('a', 10000)));
SELECT pg_temp.try(format($f$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "%s"}}')$f$, repeat('a', 64)));
SELECT pg_temp.try($$SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "realorphan", "uid": "u1"}}')$$);
SELECT name, uid FROM paidb.orphan;
