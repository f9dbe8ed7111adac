-- paidb.framework_state: the job state of SPEC section 4.
-- (quietly: the extension may be there already, e.g. after the init test)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS paidb CASCADE;
RESET client_min_messages;

-- Not strict: a null exit code is meaningful.
SELECT provolatile, proisstrict, proparallel
FROM pg_proc WHERE oid = 'paidb.framework_state(text, integer)'::regprocedure;

\pset null '(null)'
-- Every sub state with the exit codes that matter, a plain failure code and null.
SELECT sub_state,
       paidb.framework_state(sub_state, 0)    AS "0",
       paidb.framework_state(sub_state, -210) AS "-210",
       paidb.framework_state(sub_state, -220) AS "-220",
       paidb.framework_state(sub_state, 1)    AS "1",
       paidb.framework_state(sub_state, NULL) AS "null"
FROM (VALUES (1, 'AttemptCreationPending'),
             (2, 'AttemptCreationRequested'),
             (3, 'AttemptPreparing'),
             (4, 'AttemptRunning'),
             (5, 'AttemptDeletionPending'),
             (6, 'AttemptDeletionRequested'),
             (7, 'AttemptDeleting'),
             (8, 'AttemptCompleted'),
             (9, 'Completed'),
             (10, 'Unknown'),
             (11, 'completed'),
             (12, ''),
             (13, NULL)) AS v(n, sub_state)
ORDER BY n;

-- Other failure codes of a completed framework are failures too.
SELECT code, paidb.framework_state('Completed', code) AS state
FROM unnest(ARRAY[-1100, -221, -211, -209, -200, -1, 2, 137, 2147483647]) AS code;
-- ... and while an attempt is being torn down they do not mean stopping.
SELECT code, paidb.framework_state('AttemptDeleting', code) AS state
FROM unnest(ARRAY[-1100, -221, -211, 0, 137]) AS code;
