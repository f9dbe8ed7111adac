SET client_min_messages = warning;
-- Helpers of test/bench/queries.sh.
CREATE SCHEMA IF NOT EXISTS bench;

-- p50 and p99 in ms of `runs` executions of a query after one warm-up run
-- (planning included, as for a client's simple query), and what it
-- returned: the value of a one-row result (a count), else the row count.
CREATE OR REPLACE FUNCTION bench.time_query(q text, runs int DEFAULT 11,
    OUT p50 numeric, OUT p99 numeric, OUT rows text)
LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    ts float8[] := '{}';
    n bigint;
    v text;
BEGIN
    EXECUTE 'SELECT count(*), min(x::text) FROM (' || q || ') x' INTO n, v;
    rows := CASE WHEN n = 1 THEN v ELSE n::text END;
    FOR i IN 1 .. runs LOOP
        t0 := clock_timestamp();
        EXECUTE q;
        ts := ts || extract(epoch FROM clock_timestamp() - t0) * 1000;
    END LOOP;
    SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 2),
           round(percentile_cont(0.99) WITHIN GROUP (ORDER BY x)::numeric, 2)
      INTO p50, p99 FROM unnest(ts) x;
END $$;

-- Whether the openpai rewrites change a query's plan (i.e. fire for it).
CREATE OR REPLACE FUNCTION bench.rewritten(q text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    line text;
    rewritten text := '';
    written text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP rewritten := rewritten || line || E'\n'; END LOOP;
    PERFORM set_config('paidb.openpai_count_rewrite', 'off', true);
    PERFORM set_config('paidb.openpai_tag_rewrite', 'off', true);
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP written := written || line || E'\n'; END LOOP;
    PERFORM set_config('paidb.openpai_count_rewrite', 'on', true);
    PERFORM set_config('paidb.openpai_tag_rewrite', 'on', true);
    RETURN rewritten <> written;
END $$;
