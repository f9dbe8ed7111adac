-- paidb.history_uid and paidb.record_history: the attempt history of frameworks.
-- (quietly: the extension may be there already, e.g. after the init test)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS paidb CASCADE;
RESET client_min_messages;

-- Runs a statement and says how it ended: 'ok' or 'SQLSTATE: message'.
CREATE FUNCTION pg_temp.outcome(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE query;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM
        || COALESCE(' DETAIL: ' || NULLIF(detail, ''), '')
        || COALESCE(' HINT: ' || NULLIF(hint, ''), '');
END
$$;

-- A framework snapshot as the API server returns it (trimmed).
CREATE FUNCTION pg_temp.snap(name text, attempt int, completion jsonb, transition_time text)
RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'apiVersion', 'frameworkcontroller.microsoft.com/v1',
        'kind', 'Framework',
        'metadata', jsonb_build_object('name', name, 'namespace', 'default'),
        'spec', jsonb_build_object('executionType', 'Start'),
        'status', jsonb_build_object(
            'state', CASE WHEN completion IS NULL THEN 'AttemptRunning' ELSE 'AttemptCompleted' END,
            'transitionTime', transition_time,
            'attemptStatus', jsonb_build_object('id', attempt, 'completionStatus', completion),
            'retryPolicyStatus', jsonb_build_object('totalRetriedCount', attempt)))
$$;

-- What a history row holds, in short.
CREATE FUNCTION pg_temp.history(name text)
RETURNS TABLE (attempt_index int, history_type text, state text, transition_time text,
               completion_code jsonb)
LANGUAGE sql AS $$
    SELECT attempt_index, history_type, paidb.snapshot(framework_history) #>> '{status,state}',
           paidb.snapshot(framework_history) #>> '{status,transitionTime}',
           paidb.snapshot(framework_history) #> '{status,attemptStatus,completionStatus,code}'
    FROM paidb.framework_history WHERE framework_name = name
    ORDER BY attempt_index, history_type
$$;

-- history_uid is md5('<name>+<attempt>+<type>'), byte for byte.
SELECT name, attempt, type, paidb.history_uid(name, attempt, type) AS uid,
       paidb.history_uid(name, attempt, type) = md5(name || '+' || attempt || '+' || type) AS is_md5
FROM (VALUES ('job1', 0, 'retry'),
             ('job1', 1, 'retry'),
             ('abcdef0123456789abcdef0123456789', 12, 'retry'),
             ('job1', -1, 'retry'),
             ('job1', 2147483647, 'stop'),
             ('', 0, ''),
             ('任务', 3, 'retry'),
             ('jöb+1', 0, 'ré+try')) AS v(name, attempt, type);
SELECT paidb.history_uid('job1', 0) = paidb.history_uid('job1', 0, 'retry') AS default_type_is_retry;
SELECT paidb.history_uid(NULL, 0) IS NULL AS strict;

-- A first snapshot is inserted; the uid comes back.
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T08:00:00Z'))
       = paidb.history_uid('hista', 0, 'retry') AS uid_returned;
SELECT uid = paidb.history_uid(framework_name, attempt_index, history_type) AS uid_ok,
       framework_name, attempt_index, history_type
FROM paidb.framework_history WHERE framework_name = 'hista';
SELECT * FROM pg_temp.history('hista');

-- The same snapshot again changes nothing: same row version, same updated_at.
CREATE TEMP TABLE hist_before AS
SELECT xmin::text AS row_xmin, updated_at FROM paidb.framework_history WHERE framework_name = 'hista';
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T08:00:00Z'))
       = paidb.history_uid('hista', 0) AS uid_returned;
SELECT h.xmin::text = b.row_xmin AS row_untouched, h.updated_at = b.updated_at AS updated_at_unchanged
FROM paidb.framework_history h, hist_before b WHERE h.framework_name = 'hista';
SELECT count(*) AS rows FROM paidb.framework_history WHERE framework_name = 'hista';

-- A later transitionTime wins over an earlier one of the same kind.
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T08:05:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
SELECT h.updated_at > b.updated_at AS updated_at_moved
FROM paidb.framework_history h, hist_before b WHERE h.framework_name = 'hista';
-- ... and an earlier one does not replace it.
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T08:01:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
-- Times are compared as timestamps, not as text: 09:00+02:00 is 07:00Z.
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T09:00:00+02:00')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2020-07-01T10:05:00.5+02:00')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');

-- A completed attempt beats a running one, even with an earlier transitionTime ...
SELECT paidb.record_history(pg_temp.snap('hista', 0,
    '{"code":-210,"phrase":"FrameworkStopped","type":{"name":"Failed","attributes":[]}}',
    '2020-07-01T07:00:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
-- ... a running one never replaces a completed one, however late ...
SELECT paidb.record_history(pg_temp.snap('hista', 0, NULL, '2030-01-01T00:00:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
-- ... and between two completed ones the later wins.
SELECT paidb.record_history(pg_temp.snap('hista', 0,
    '{"code":0,"phrase":"Succeeded","type":{"name":"Succeeded","attributes":[]}}',
    '2020-07-01T07:30:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');
SELECT paidb.record_history(pg_temp.snap('hista', 0,
    '{"code":1,"phrase":"Failed","type":{"name":"Failed","attributes":[]}}',
    '2020-07-01T07:29:59Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('hista');

-- A snapshot without transitionTime ranks below one with it; equal ranks keep the row.
SELECT paidb.record_history(pg_temp.snap('histb', 0, NULL, NULL)) IS NOT NULL AS recorded;
SELECT paidb.record_history(pg_temp.snap('histb', 0, NULL, NULL) || '{"spec":{"executionType":"Stop"}}')
       IS NOT NULL AS recorded;
SELECT paidb.snapshot(framework_history) #>> '{spec,executionType}' AS first_kept FROM paidb.framework_history
WHERE framework_name = 'histb';
SELECT paidb.record_history(pg_temp.snap('histb', 0, NULL, '2020-07-01T08:00:00Z')) IS NOT NULL AS recorded;
SELECT paidb.record_history(pg_temp.snap('histb', 0, NULL, NULL)) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('histb');
-- completionStatus null is no completion.
SELECT paidb.record_history(pg_temp.snap('histb', 0, 'null', '2020-07-01T07:00:00Z')) IS NOT NULL AS recorded;
SELECT * FROM pg_temp.history('histb');

-- Two attempts are two rows; another history type is another row.
SELECT paidb.record_history(pg_temp.snap('histb', 1, NULL, '2020-07-02T08:00:00Z'))
       = paidb.history_uid('histb', 1) AS uid_returned;
SELECT paidb.record_history(pg_temp.snap('histb', 1, NULL, '2020-07-02T08:00:00Z'), 'stop')
       = paidb.history_uid('histb', 1, 'stop') AS uid_returned;
SELECT * FROM pg_temp.history('histb');

-- An attempt index written 2.0 is attempt 2.
SELECT paidb.record_history(jsonb_set(pg_temp.snap('histb', 0, NULL, NULL),
                                      '{status,attemptStatus,id}', '2.0'))
       = paidb.history_uid('histb', 2) AS uid_returned;

-- Bad input is refused with 22023 and nothing is stored.
SELECT pg_temp.outcome(q) FROM (VALUES
    ($$SELECT paidb.record_history('[1,2]')$$),
    ($$SELECT paidb.record_history('"framework"')$$),
    ($$SELECT paidb.record_history('{"status":{"attemptStatus":{"id":0}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":"histc","status":{"attemptStatus":{"id":0}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":7},"status":{"attemptStatus":{"id":0}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":""},"status":{"attemptStatus":{"id":0}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"},"status":{"attemptStatus":{"id":null}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"},"status":{"attemptStatus":{"id":"0"}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"},"status":{"attemptStatus":{"id":-1}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"},"status":{"attemptStatus":{"id":1.5}}}')$$),
    ($$SELECT paidb.record_history('{"metadata":{"name":"histc"},"status":{"attemptStatus":{"id":3000000000}}}')$$),
    ($$SELECT paidb.record_history(pg_temp.snap('histc', 0, NULL, 'yesterday-ish'))$$),
    ($$SELECT paidb.record_history(pg_temp.snap('histc', 0, NULL, NULL) || '{"status":{"transitionTime":5,"attemptStatus":{"id":0}}}')$$),
    ($$SELECT paidb.record_history(pg_temp.snap('histc', 0, NULL, NULL), '')$$)
) AS v(q);
SELECT count(*) AS stored FROM paidb.framework_history WHERE framework_name = 'histc';
SELECT paidb.record_history(NULL) IS NULL AS strict;

-- paidb_writer may record history (the function is SECURITY DEFINER) but not
-- write the table itself.
SET ROLE paidb_writer;
SELECT paidb.record_history(pg_temp.snap('histd', 0, NULL, '2020-07-01T08:00:00Z'))
       = paidb.history_uid('histd', 0) AS writer_records;
SELECT pg_temp.outcome($$DELETE FROM paidb.framework_history WHERE framework_name = 'histd'$$);
RESET ROLE;

-- It works under any search_path.
SET search_path = pg_temp;
SELECT paidb.record_history(paidb.jsonb_merge_patch(pg_temp.snap('histd', 0, NULL, NULL),
                                                    '{"status":{"transitionTime":"2020-07-01T09:00:00Z"}}'))
       = paidb.history_uid('histd', 0) AS any_search_path;
RESET search_path;
SELECT * FROM pg_temp.history('histd');

DELETE FROM paidb.framework_history WHERE framework_name IN ('hista', 'histb', 'histc', 'histd');
