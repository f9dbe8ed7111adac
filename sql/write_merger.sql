-- The write merger (SPEC §3, §5) and the seed's path tests that need no
-- API server: submit twice, stop, duplicated request, retain mode, changed
-- generation, deletions, retries and their history, a bulk job.
DROP EXTENSION IF EXISTS paidb CASCADE;
CREATE EXTENSION paidb CASCADE;
SET timezone = 'UTC';
CREATE FUNCTION pg_temp.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE sql; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE VIEW pg_temp.jobs AS
  SELECT name, request_generation AS gen, request_synced AS synced,
         api_server_deleted AS deleted, sub_state, state, resource_version AS rv,
         paidb.snapshot(framework)->'metadata'->'annotations'->>'requestGeneration' AS ann_gen
    FROM paidb.framework ORDER BY name;

CREATE TEMP TABLE req AS SELECT $json${"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
  "metadata": {"name": "job1", "labels": {"userName": "alice", "virtualCluster": "default"},
               "annotations": {"jobName": "job1", "totalGpuNumber": "1", "config": "extras:\n  hivedScheduler:\n    jobPriorityClass: prod\n"}},
  "spec": {"executionType": "Start", "retryPolicy": {"maxRetryCount": 10},
           "taskRoles": [{"name": "worker", "taskNumber": 1}]}}$json$::jsonb AS r;

-- Path test: submit a job (created, generation 1, not synced, pending status)
SELECT p.* FROM req, paidb.put_framework_request(r, '2020-08-01 10:00:00+00',
  '{"configSecretDef": {"kind": "Secret", "metadata": {"name": "job1-configcred"}},
    "dockerSecretDef": {"kind": "Secret", "metadata": {"name": "job1-regcred"}},
    "priorityClassDef": {"kind": "PriorityClass", "metadata": {"name": "job1-priority"}}}') p;
SELECT * FROM pg_temp.jobs;
SELECT submission_time, job_priority, config_secret_def->'metadata'->>'name' AS config_secret,
       docker_secret_def IS NOT NULL AS docker, token_secret_def IS NULL AS no_token,
       paidb.snapshot(framework)->'status' AS status
  FROM paidb.framework;

-- Submitting the same job twice: the second is a no-op, row untouched
CREATE TEMP TABLE before AS SELECT updated_at, xmin::text AS x FROM paidb.framework WHERE name = 'job1';
SELECT p.* FROM req, paidb.put_framework_request(r) p;
-- a duplicated request carrying another requestGeneration is still the same request
SELECT p.* FROM req, paidb.put_framework_request(jsonb_set(r, '{metadata,annotations,requestGeneration}', '"7"')) p;
SELECT f.updated_at = b.updated_at AS same_updated_at, f.xmin::text = b.x AS same_row_version
  FROM paidb.framework f, before b WHERE f.name = 'job1';

-- A changed request: generation + 1, not synced; add-ons for an existing job are ignored
SELECT p.* FROM req, paidb.put_framework_request(jsonb_set(r, '{spec,taskRoles,0,taskNumber}', '2'),
  now(), '{"tokenSecretDef": {"kind": "Secret", "metadata": {"name": "job1-token"}}}') p;
SELECT name, gen, synced, ann_gen FROM pg_temp.jobs;
SELECT total_task_number, token_secret_def IS NULL AS token_ignored FROM paidb.framework;

-- The API server confirms generation 2: synced
SELECT paidb.apply_watch_event('ADDED', '{"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
  "metadata": {"name": "job1", "uid": "u-1", "resourceVersion": "100", "creationTimestamp": "2020-08-01T10:00:01Z",
               "annotations": {"requestGeneration": "2"}},
  "spec": {"executionType": "Start", "taskRoles": [{"name": "someone-else", "taskNumber": 9}]},
  "status": {"state": "AttemptRunning", "runTime": "2020-08-01T10:00:05Z",
             "attemptStatus": {"id": 0, "completionStatus": null, "taskRoleStatuses": []},
             "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0, "retryDelaySec": null}}}');
SELECT * FROM pg_temp.jobs;
-- the request part stays ours; metadata the API server added is kept
SELECT paidb.snapshot(framework)->'spec'->'taskRoles' AS task_roles, paidb.snapshot(framework)->'metadata'->>'uid' AS uid,
       creation_time, launch_time FROM paidb.framework;

-- An older resourceVersion is stale and changes nothing
SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "job1", "resourceVersion": "99",
  "annotations": {"requestGeneration": "2"}}, "status": {"state": "AttemptCreationPending"}}');
SELECT name, sub_state, rv FROM pg_temp.jobs;
-- A resourceVersion beyond int64 (30 nines) is no version: the event is
-- applied, the stored resource version stays
SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "job1", "resourceVersion": "999999999999999999999999999999",
  "annotations": {"requestGeneration": "2"}}, "status": {"state": "AttemptRunning",
  "attemptStatus": {"id": 0}, "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0}}}');
SELECT name, sub_state, rv FROM pg_temp.jobs;

-- Path test: the generation changed in the API server -> request_synced = false
SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "job1", "resourceVersion": "101",
  "annotations": {"requestGeneration": "1"}}, "status": {"state": "AttemptRunning",
  "attemptStatus": {"id": 0}, "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0}}}');
SELECT name, gen, synced FROM pg_temp.jobs;
-- OpenPAI's misspelt MODIFED is accepted
SELECT paidb.apply_watch_event('MODIFED', '{"metadata": {"name": "job1", "resourceVersion": "102",
  "annotations": {"requestGeneration": "2"}}, "status": {"state": "AttemptRunning",
  "attemptStatus": {"id": 0}, "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0}}}');
SELECT name, gen, synced FROM pg_temp.jobs;

-- Stop a job: generation 3, the request says Stop
SELECT * FROM paidb.stop_framework('job1');
SELECT * FROM paidb.stop_framework('job1');
SELECT execution_type, gen, synced FROM paidb.framework JOIN pg_temp.jobs USING (name);
-- a patch never touches the status
SELECT * FROM paidb.patch_framework_request('job1', '{"status": {"state": "Completed"}, "metadata": {"labels": {"team": "x"}}}');
SELECT sub_state, paidb.snapshot(framework)->'metadata'->'labels' AS labels FROM paidb.framework;
-- Path test: stopping a job that does not exist is refused
SELECT pg_temp.try($$SELECT * FROM paidb.stop_framework('nosuchjob')$$);
SELECT pg_temp.try($$SELECT * FROM paidb.patch_framework_request('job1', '{"metadata": {"name": "other"}}')$$);

-- Retries: each retried attempt appears exactly once in the history
SELECT paidb.apply_watch_event('MODIFIED', format('{"metadata": {"name": "job1", "resourceVersion": "%s",
  "annotations": {"requestGeneration": "4"}}, "status": {"state": "%s", "transitionTime": "2020-08-01T10:%s:00Z",
  "attemptStatus": {"id": %s, "completionStatus": %s},
  "retryPolicyStatus": {"totalRetriedCount": %s, "accountableRetriedCount": %s}}}',
  200 + i, CASE WHEN i % 2 = 0 THEN 'AttemptRunning' ELSE 'AttemptCompleted' END,
  10 + i, i / 2, CASE WHEN i % 2 = 0 THEN 'null' ELSE '{"code": 1, "phrase": "ContainerFailed"}' END,
  i / 2, i / 2)::jsonb)
  FROM generate_series(0, 6) i;
SELECT attempt_index, history_type, uid = paidb.history_uid(framework_name, attempt_index) AS uid_ok,
       paidb.snapshot(framework_history)->'status'->>'state' AS state,
       paidb.snapshot(framework_history)->'status'->'attemptStatus'->'completionStatus'->>'code' AS code
  FROM paidb.framework_history WHERE framework_name = 'job1' ORDER BY attempt_index;
SELECT retries, user_retries, platform_retries, sub_state, state FROM paidb.framework WHERE name = 'job1';

-- DELETED of a running framework (deleted behind our back): reset and queued again
SELECT paidb.apply_watch_event('DELETED', '{"metadata": {"name": "job1", "resourceVersion": "300",
  "annotations": {"requestGeneration": "4"}}, "status": {"state": "AttemptRunning", "attemptStatus": {"id": 3}}}');
SELECT * FROM pg_temp.jobs;
SELECT paidb.snapshot(framework)->'status' AS status, sent_generation FROM paidb.framework;

-- Completed, then DELETED: api_server_deleted, add-on definitions (secrets) cleared
SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "job1", "resourceVersion": "301",
  "annotations": {"requestGeneration": "4"}}, "status": {"state": "Completed", "completionTime": "2020-08-01T11:00:00Z",
  "attemptStatus": {"id": 0, "completionStatus": {"code": 0, "phrase": "Succeeded"}},
  "retryPolicyStatus": {"totalRetriedCount": 0, "accountableRetriedCount": 0}}}');
SELECT name, synced, deleted, j.state, config_secret_def IS NOT NULL AS has_secret FROM paidb.framework JOIN pg_temp.jobs j USING (name);
SELECT paidb.apply_watch_event('DELETED', '{"metadata": {"name": "job1", "resourceVersion": "302",
  "annotations": {"requestGeneration": "4"}}, "status": {"state": "Completed",
  "attemptStatus": {"id": 0, "completionStatus": {"code": 0, "phrase": "Succeeded"}}}}');
SELECT name, deleted, j.state, completion_time,
       num_nonnulls(config_secret_def, user_extension_secret_def, priority_class_def,
                    docker_secret_def, token_secret_def) AS secrets_left
  FROM paidb.framework JOIN pg_temp.jobs j USING (name);

-- Path test: retain mode for a framework unknown to the database
SET paidb.retain_mode = on;
SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "stranger", "uid": "u-s", "resourceVersion": "400"}}');
SELECT count(*) AS queued FROM paidb.orphan;
SET paidb.retain_mode = off;
SELECT paidb.apply_watch_event('ADDED', '{"metadata": {"name": "stranger", "namespace": "default", "uid": "u-s", "resourceVersion": "400"}}');
SELECT name, namespace, uid, resource_version FROM paidb.orphan;
SELECT count(*) AS not_adopted FROM paidb.framework WHERE name = 'stranger';
SELECT paidb.apply_watch_event('DELETED', '{"metadata": {"name": "stranger", "resourceVersion": "401"}}');
SELECT count(*) AS queued FROM paidb.orphan;

-- import_frameworks: adopt what an API server lists, idempotently
SELECT paidb.import_frameworks('{"kind": "FrameworkList", "items": [
  {"apiVersion": "frameworkcontroller.microsoft.com/v1", "kind": "Framework",
   "metadata": {"name": "old1", "resourceVersion": "50", "creationTimestamp": "2020-07-01T00:00:00Z",
                "annotations": {"requestGeneration": "5"}},
   "spec": {"executionType": "Start", "taskRoles": []},
   "status": {"state": "AttemptRunning", "attemptStatus": {"id": 0}}},
  {"metadata": {"name": "old2", "resourceVersion": "51", "creationTimestamp": "2020-07-02T00:00:00Z"},
   "status": {"state": "Completed", "attemptStatus": {"id": 0, "completionStatus": {"code": -210}}}},
  {"metadata": {"name": "job1"}}]}');
SELECT paidb.import_frameworks('[{"metadata": {"name": "old1"}}, {"metadata": {"name": "old2"}}]');
SELECT name, gen, synced, ann_gen, sub_state, state, rv FROM pg_temp.jobs WHERE name LIKE 'old%';
SELECT name, submission_time FROM paidb.framework WHERE name LIKE 'old%' ORDER BY name;

-- A bulk job: 1,000 instances, 50 retries, statuses compressed by the controller
SELECT name, created FROM paidb.put_framework_request('{"metadata": {"name": "bulkjob"},
  "spec": {"executionType": "Start", "retryPolicy": {"maxRetryCount": 60}, "taskRoles": [{"name": "worker", "taskNumber": 1000}]}}');
SELECT count(*) FILTER (WHERE r IN ('updated', 'synced')) AS applied
  FROM generate_series(0, 50) a,
       paidb.apply_watch_event('MODIFIED', jsonb_build_object(
         'metadata', jsonb_build_object('name', 'bulkjob', 'resourceVersion', (1000 + a)::text,
                                        'annotations', jsonb_build_object('requestGeneration', '1')),
         'status', jsonb_build_object('state', 'AttemptRunning',
           'transitionTime', '2020-08-02T00:00:00Z',
           'attemptStatus', jsonb_build_object('id', a, 'completionStatus', NULL, 'taskRoleStatuses', NULL,
             'taskRoleStatusesCompressed', 'H4sIAAAAAAACA63dza5s11WA0Xe57SCdtebfmu6CoEcn9KI0nPgiTBI7sm8EUpR354IleABG95zatWfrU6lqjzV/89dPP3z7p8+fvvn0Hz/+9IfPP3361ac///jdP/307e8//+tf/vgPn//4+cv3P/7wL9//6fOPf/ny68+///RNf3z86tOXb3/+w6+/fPvlLz9//vnTN7/566fvf/ju839++ubrv37++uf/fr+///FPf/569efvvr7lt1++fP7Tn7/8csWnb76+/Lv/ee3XW/3zL3f/3V/++Id///F3f/fLFH/38fWi3//yBl9v/3/X/f7H776++ny98t9++vbnX27zw5dvv//h80//+O33f/x6s7/97W+/+t9xDhrnmHEuGueacQKNE2acROOkGafQOGXGaTROm3EGjTNmnIfGeWacReMsyqDK8lFdZmFGZT4qzQe1+ag4H1Tno/J8UJ+PCvRBhT4q0Qc1+qhIH1TpozJ9UKePCvVBpb6q1BeV+qpSX/UZmn2IRqW+qtQXlfqqUl9U6qtKfVGpryr1RaW+qtQXlfqqUl9U6qtKfVGpQ5U6UKlDlTpQqUOVOtT3HewLD1TqUKUOVOpQpQ5U6lClDlTqUKUOVOpQpQ5U6lClDlTqVKVOVOpUpU5U6lSlTlTqVKVO9d00+3IalTpVqROVOlWpE5U6VakTlTpVqROVOlWpE5W6VKkLlbpUqQuVulSpC5W6VKkLlbpUqUv9jsh+SESlLlXqQqUuVepCpS5V6kKlLlXqQqVuVepGpW5V6kalblXqRqVuVepGpW5V6kalblXqVs98sIc+UKlblbpRqVuVulGpW5W6UalHlXpQqUeVelCpR5V6UKlHlXpQqUeVelCpR5V6UKlHlXrU83nsAT1U6lGlHlTqUaUeVOqnSv1QqZ8q9UOlfqrUD5X6qVI/VOqnSv1QqZ8q9UOlfqrUD5X6qVI/9Sw1e5galfqpUj9U6lWlXlTqVaVeVOpVpV5U6lWlXlTqVaVeVOpVpV5U6lWlXlTqVaVeVOpVpV7lXhh8YfLF0RdlXz4YfvlQ+uWD8ZcP5V8+GID5UALmgxGYD2VgPhiC+VAK5oMxmA/lYD4YhPlQEuaDUZgPZWE+GIb5UPV2cNHJRUcXVb0dXmR60fFF5hcdYGSC0RFGZhgdYmSK0TFG5hgdZGSS0VFGZRkPw4xHacbDOOO5TJ47eq7qzUjjUabxMNR4lGo8jDUe5RoPg41HycbDaONRtvEw3HiUbjyMNx7lGw8DjkcJx8OI41HG8TDkeIKdHOKODlH1ZtDxKOl4GHU8yjoehh2P0o6HccejvONh4PEo8XgYeTzKPB6GHo9Sj4exx6Pc42Hw8Sj5eBh9PMlOfnJHP6l6M/54lH88DEAeJSAPI5BHGcjDEORRCvIwBnmUgzwMQh4lIQ+jkEdZyMMw5FEa8jAOeZSHPAxEnmIn97mj+1S9GYo8SkUexiKPcpGHwcijZORhNPIoG3kYjjxKRx7GI4/ykYcByaOE5GFE8igjeRiSPEpJHsYkT7OTV93Rq6rejEoeZSUPw5JHacnDuORRXvIwMHmUmDyMTB5lJg9Dk0epycPY5FFu8jA4eZScPIxOHmUnD8OTZ9jJ2e7obFVvBiiPEpSHEcqjDOVhiPIoRXkYozzKUR4GKY+SlIdRyqMs5WGY8ihNeRinPMpTHgYqjxKVh5HK89jmA7f6QNWbscqjXOVhsPIoWXkYrTzKVh6GK4/SlYfxyqN85WHA8ihheRixPMpYHoYsj1KWhzHLo5zlYdDyLNtc41bXsN01bnmN2l7DrOVV1vIya3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5D9s95paPqXoza3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlZXsj3eJItjnSrY50uyPd8khVb7c+ku2PdAsk2QZJt0KS7ZB0SyTZFkm3RpLtkXSLJNkmSbdKUlnLy6zlVdbyMmt5lbW8zFreYLt/3fJfVW9mLa+ylpdZy6us5WXW8ipreZm1vMpaXmYtr7KWl1nLq6zlZdbyKmt5mbW8ylpeZi2vspaXWcubbHe7W96u6s2s5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5lbW8zFpeZS0vs5ZXWcvLrOVV1vIya3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5lbW8zFpeZS0vs5ZXWcvLrOVV1vIya3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5lbW8zFpeZS0vs5ZXWcvLrOVV1vIya3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5lbW8zFpeZS0vs5ZXWcvLrOVV1vIya3mVtbzMWl5lLS+zlldZy8us5VXW8jJreZW1vMxaXmUtL7OWV1nLy6zlVdbyMmt5lbW8zFpeZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtg1nLUNYymLUMZS2DWctQ1jKYtQxlLYNZy1DWMpi1DGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLZNZy1TWMpm1TGUtk1nLVNYymbVMZS2TWctU1jKZtUxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2LWctS1rKYtSxlLYtZy1LWspi1LGUti1nLUtaymLUsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUtm1nLVtaymbVsZS2bWctW1rKZtWxlLZtZy1bWspm1bGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLYdZy1HWcpi1HGUth1nLUdZymLUcZS2HWctR1nKYtRxlLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtH7OWT1nLx6zlU9byMWv5lLV8zFo+ZS0fs5ZPWcvHrOVT1vIxa/mUtXzMWj5lLR+zlk9Zy8es5VPW8jFr+ZS1fMxaPmUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtVxlLZdZy1XWcpm1XGUtl1nLVdZymbVcZS2XWctV1nKZtdz/n7X87d9++19DQWFPpD0CAA=='),
           'retryPolicyStatus', jsonb_build_object('totalRetriedCount', a, 'accountableRetriedCount', a)))) r;
CREATE TEMP TABLE expected_statuses AS
  SELECT jsonb_build_array(jsonb_build_object('name', 'worker', 'podGracefulDeletionTimeoutSec', 600,
           'taskStatuses', jsonb_agg(jsonb_build_object('index', i, 'state', 'Completed',
             'attemptStatus', jsonb_build_object('id', 0, 'podName', 'bulkjob-worker-' || i,
               'completionStatus', jsonb_build_object('code', 1, 'phrase', 'ContainerFailed'))) ORDER BY i))) AS s
    FROM generate_series(0, 999) i;
SELECT count(*) AS history_rows, count(DISTINCT attempt_index) AS attempts,
       min(attempt_index), max(attempt_index),
       bool_and(paidb.snapshot(h)->'status'->'attemptStatus'->'taskRoleStatuses' = e.s) AS all_intact,
       bool_and(NOT (paidb.snapshot(h)->'status'->'attemptStatus' ? 'taskRoleStatusesCompressed')) AS none_compressed
  FROM paidb.framework_history h, expected_statuses e WHERE h.framework_name = 'bulkjob';
SELECT retries, paidb.snapshot(f)->'status'->'attemptStatus'->'taskRoleStatuses' = e.s AS current_intact,
       jsonb_array_length(paidb.snapshot(f)->'status'->'attemptStatus'->'taskRoleStatuses'->0->'taskStatuses') AS instances
  FROM paidb.framework f, expected_statuses e WHERE f.name = 'bulkjob';

-- Stop or Start of a completed job already gone from the API server: no
-- change (it could never be sent; request_synced would stay false for good)
SELECT name, created FROM paidb.put_framework_request('{"metadata": {"name": "done1"},
  "spec": {"executionType": "Start", "taskRoles": [{"name": "worker", "taskNumber": 1}]}}');
SELECT paidb.apply_watch_event('MODIFIED', '{"metadata": {"name": "done1", "resourceVersion": "500",
  "annotations": {"requestGeneration": "1"}}, "status": {"state": "Completed",
  "attemptStatus": {"id": 0, "completionStatus": {"code": 0, "phrase": "Succeeded"}}}}');
SELECT paidb.apply_watch_event('DELETED', '{"metadata": {"name": "done1", "resourceVersion": "501",
  "annotations": {"requestGeneration": "1"}}, "status": {"state": "Completed",
  "attemptStatus": {"id": 0, "completionStatus": {"code": 0, "phrase": "Succeeded"}}}}');
SELECT name, gen, synced, deleted, state FROM pg_temp.jobs WHERE name IN ('done1', 'job1') ORDER BY name;
-- Stop: stop_framework, patch, put
SELECT * FROM paidb.stop_framework('done1');
SELECT * FROM paidb.patch_framework_request('done1', '{"spec": {"executionType": "Stop"}}');
SELECT p.name, p.request_generation, p.created, p.changed
  FROM paidb.framework f, paidb.put_framework_request(jsonb_set(paidb.snapshot(f) - 'status', '{spec,executionType}', '"Stop"')) p
 WHERE f.name = 'done1';
-- Start of job1 (stopped before it completed): patch, put
SELECT * FROM paidb.patch_framework_request('job1', '{"spec": {"executionType": "Start"}}');
SELECT p.name, p.request_generation, p.created, p.changed
  FROM paidb.framework f, paidb.put_framework_request(jsonb_set(paidb.snapshot(f) - 'status', '{spec,executionType}', '"Start"')) p
 WHERE f.name = 'job1';
SELECT name, gen, synced, deleted, j.state, execution_type
  FROM pg_temp.jobs j JOIN paidb.framework USING (name) WHERE name IN ('done1', 'job1') ORDER BY name;
-- any other change to such a job is still stored (docs/design.md)
SELECT * FROM paidb.patch_framework_request('done1', '{"spec": {"executionType": "Stop", "retryPolicy": {"maxRetryCount": 1}}}');
SELECT name, gen, synced, deleted, execution_type FROM pg_temp.jobs JOIN paidb.framework USING (name) WHERE name = 'done1';

-- A session keeps what it last packed or read of each job
-- (paidb.snapshot_cache_size), and an entry answers only for the stored
-- bytes it was made from: another session's write and a rolled-back write
-- of its own are read from the row.  Each event below composes its
-- snapshot from the stored request, so a stale entry would show as a
-- wrong spec.marker.
SHOW paidb.snapshot_cache_size;
SELECT name FROM req, paidb.put_framework_request(jsonb_set(r, '{metadata,name}', '"cached1"'));
CREATE FUNCTION pg_temp.running(rv int) RETURNS text LANGUAGE sql AS $$
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'metadata', jsonb_build_object('name', 'cached1', 'resourceVersion', rv::text,
                                 'annotations', '{"requestGeneration": "1"}'::jsonb),
  'status', '{"state": "AttemptRunning", "attemptStatus": {"id": 0}}'::jsonb))
$$;
CREATE FUNCTION pg_temp.mark(m text) RETURNS void LANGUAGE sql AS $$
UPDATE paidb.framework f
   SET snapshot_packed = paidb.pack_snapshot(jsonb_set(paidb.snapshot(f), '{spec,marker}', to_jsonb(m)), job_config)
 WHERE name = 'cached1'
$$;
CREATE VIEW pg_temp.cached1 AS
  SELECT resource_version AS rv, paidb.snapshot(f)->'spec'->>'marker' AS marker,
         paidb.snapshot(f)->'status'->>'state' AS state
    FROM paidb.framework f WHERE name = 'cached1';
SELECT pg_temp.running(10);
SELECT pg_temp.running(11);
-- another session rewrote the row (as a superuser's UPDATE does here)
SELECT pg_temp.mark('by another session');
SELECT pg_temp.running(12);
SELECT * FROM pg_temp.cached1;
-- this session's own write, rolled back
BEGIN;
SELECT pg_temp.mark('rolled back');
SELECT pg_temp.running(13);
ROLLBACK;
SELECT pg_temp.running(14);
SELECT * FROM pg_temp.cached1;
-- the same with a budget too small for the entry, and with none
SET paidb.snapshot_cache_size = '8kB';
SELECT pg_temp.mark('small budget');
SELECT pg_temp.running(15);
SELECT * FROM pg_temp.cached1;
SET paidb.snapshot_cache_size = 0;
SELECT pg_temp.mark('no cache');
SELECT pg_temp.running(16);
SELECT * FROM pg_temp.cached1;
RESET paidb.snapshot_cache_size;
SELECT pg_temp.try($$SET paidb.snapshot_cache_size = -1$$);

-- A submission asks the primary key whether its name is taken before it
-- locks anything (a new name needs no row lock).  The same name earlier in
-- the same statement is taken: one job, the second submission a no-op, a
-- changed one a new generation, in the job list and its counts once; and a
-- second submission naming another cluster is refused as a change of an
-- existing job's cluster, not placed as a new job (the cluster unknown).
BEGIN;
SELECT i, p.name, p.request_generation, p.created, p.changed
  FROM req, generate_series(1, 2) i,
       paidb.put_framework_request(CASE WHEN i > 0 THEN jsonb_set(r, '{metadata,name}', '"twice1"') END) p
 ORDER BY i;
SELECT p.name, p.request_generation, p.created, p.changed
  FROM req, paidb.put_framework_request(jsonb_set(jsonb_set(r, '{metadata,name}', '"twice1"'),
                                                  '{spec,taskRoles,0,taskNumber}', '3')) p;
COMMIT;
SELECT (SELECT count(*) FROM paidb.framework WHERE name = 'twice1') AS jobs,
       (SELECT count(*) FROM paidb.job_summary WHERE name = 'twice1') AS listed,
       (SELECT total_task_number FROM paidb.job_summary WHERE name = 'twice1') AS tasks;
SELECT pg_temp.try($$SELECT p.created
  FROM req, (VALUES (1, 'default'), (2, 'nowhere')) v(i, c),
       paidb.put_framework_request(jsonb_set(r, '{metadata,name}', '"twice2"'), cluster => v.c) p$$);
SELECT count(*) AS twice2 FROM paidb.framework WHERE name = 'twice2';
-- deleted and submitted again in one transaction: a new job
BEGIN;
DELETE FROM paidb.framework WHERE name = 'twice1';
SELECT p.name, p.request_generation, p.created, p.changed
  FROM req, paidb.put_framework_request(jsonb_set(r, '{metadata,name}', '"twice1"')) p;
COMMIT;
SELECT name, gen, synced, state FROM pg_temp.jobs WHERE name = 'twice1';
SELECT sum(n) AS counted FROM paidb.job_counts WHERE user_name = 'alice';
SELECT count(*) AS listed FROM paidb.job_summary WHERE user_name = 'alice';
