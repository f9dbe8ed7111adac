-- paidb.jsonb_merge_patch: RFC 7396 JSON merge patch on binary jsonb.
-- (quietly: the extension may be there already, e.g. after the init test)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS paidb CASCADE;
RESET client_min_messages;

-- Runs a statement and says how it ended: 'ok' or 'SQLSTATE: message'.
CREATE FUNCTION pg_temp.outcome(query text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE query;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- The function's declared properties are part of the contract.
SELECT provolatile, proisstrict, proparallel
FROM pg_proc WHERE oid = 'paidb.jsonb_merge_patch(jsonb, jsonb)'::regprocedure;

-- RFC 7396 Appendix A: every example, with the result the RFC gives.
SELECT n, target, patch, paidb.jsonb_merge_patch(target, patch) AS result,
       paidb.jsonb_merge_patch(target, patch) = rfc AS as_rfc
FROM (VALUES
    (1,  '{"a":"b"}'::jsonb,         '{"a":"c"}'::jsonb,                 '{"a":"c"}'::jsonb),
    (2,  '{"a":"b"}',                '{"b":"c"}',                        '{"a":"b","b":"c"}'),
    (3,  '{"a":"b"}',                '{"a":null}',                       '{}'),
    (4,  '{"a":"b","b":"c"}',        '{"a":null}',                       '{"b":"c"}'),
    (5,  '{"a":["b"]}',              '{"a":"c"}',                        '{"a":"c"}'),
    (6,  '{"a":"c"}',                '{"a":["b"]}',                      '{"a":["b"]}'),
    (7,  '{"a":{"b":"c"}}',          '{"a":{"b":"d","c":null}}',         '{"a":{"b":"d"}}'),
    (8,  '{"a":[{"b":"c"}]}',        '{"a":[1]}',                        '{"a":[1]}'),
    (9,  '["a","b"]',                '["c","d"]',                        '["c","d"]'),
    (10, '{"a":"b"}',                '["c"]',                            '["c"]'),
    (11, '{"a":"foo"}',              'null',                             'null'),
    (12, '{"a":"foo"}',              '"bar"',                            '"bar"'),
    (13, '{"e":null}',               '{"a":1}',                          '{"e":null,"a":1}'),
    (14, '[1,2]',                    '{"a":"b","c":null}',               '{"a":"b"}'),
    (15, '{}',                       '{"a":{"bb":{"ccc":null}}}',        '{"a":{"bb":{}}}')
) AS appendix_a(n, target, patch, rfc)
ORDER BY n;

-- RFC 7396 section 3: the worked example.
SELECT jsonb_pretty(paidb.jsonb_merge_patch(
    '{"title": "Goodbye!",
      "author": {"givenName": "John", "familyName": "Doe"},
      "tags": ["example", "sample"],
      "content": "This will be unchanged"}',
    '{"title": "Hello!",
      "phoneNumber": "+01-555-555-5555",
      "author": {"familyName": null},
      "tags": ["example"]}'));

-- Empty patch: an object target is unchanged, anything else becomes {}.
SELECT paidb.jsonb_merge_patch('{"a":1,"b":{"c":[1,2]}}', '{}') AS object_target,
       paidb.jsonb_merge_patch('[1,2]', '{}') AS array_target,
       paidb.jsonb_merge_patch('"s"', '{}') AS string_target,
       paidb.jsonb_merge_patch('null', '{}') AS null_target;

-- SQL NULL in gives SQL NULL out (STRICT); JSON null is a target like any other.
SELECT paidb.jsonb_merge_patch(NULL, '{"a":1}') IS NULL AS null_target,
       paidb.jsonb_merge_patch('{"a":1}', NULL) IS NULL AS null_patch;
SELECT paidb.jsonb_merge_patch('null', '{"a":1,"b":null,"c":{"d":null,"e":2}}') AS json_null_target,
       paidb.jsonb_merge_patch('null', 'null') AS json_null_both;

-- Scalars at the top level.
SELECT paidb.jsonb_merge_patch('1', '{"a":1}') AS number_target,
       paidb.jsonb_merge_patch('{"a":1}', '2') AS number_patch,
       paidb.jsonb_merge_patch('"x"', 'true') AS boolean_patch,
       paidb.jsonb_merge_patch('true', '"y"') AS string_patch,
       paidb.jsonb_merge_patch('{"a":1}', '[]') AS empty_array_patch;

-- Deleting members that are not there; objects under absent keys are created
-- with their nulls stripped, at every depth.
SELECT paidb.jsonb_merge_patch('{"a":{"b":1}}',
    '{"a":{"x":{"y":null}},"q":{"r":null,"s":{"t":null,"u":0}},"z":null}');
-- A patch member that is an object merges into a scalar or array by replacing it.
SELECT paidb.jsonb_merge_patch('{"a":1,"b":[1,2],"c":"s"}',
    '{"a":{"x":1},"b":{"y":null},"c":{}}');

-- Arrays are replaced, never merged; nulls inside arrays are values.
SELECT paidb.jsonb_merge_patch('{"a":[1,2,3],"b":[{"c":1}]}',
    '{"a":[4],"b":[{"c":null,"d":2}],"e":[null]}');

-- Duplicate keys: jsonb keeps the last one, so this patch deletes "a".
SELECT paidb.jsonb_merge_patch('{"a":1,"b":2}', '{"a":3,"a":null}');

-- jsonb orders keys by length, then bytes; the merge keeps that order.
SELECT paidb.jsonb_merge_patch('{"aa":1,"b":2,"ccc":3}', '{"ab":4,"c":5,"a":0,"b":null}');

-- Unicode keys and values.
SELECT paidb.jsonb_merge_patch('{"日本":"東京","é":1,"ключ":{"значение":"старое"}}',
    '{"é":null,"ключ":{"значение":"новое","ü":"ß"},"😀":"smile"}');

-- Numbers are kept exactly, from the target and from the patch.
SELECT r -> 'big' AS big, r -> 'keep' AS keep, r -> 'scale' AS scale, r -> 'added' AS added,
       r -> 'huge' = '1e400' AS huge_kept, r -> 'tiny' = '1e-400' AS tiny_kept,
       r -> 'huge' = '1e399' AS huge_differs
FROM (SELECT paidb.jsonb_merge_patch(
    '{"big":123456789012345678901234567890,"huge":1e400,"scale":1.50,"keep":-0.000001}',
    '{"added":98765432109876543210.0123456789,"tiny":1e-400,"scale":2.500}') AS r) AS s;

-- An object of more than 32 members (jsonb stores an offset every 32 entries).
WITH t AS (
    SELECT jsonb_object_agg('k' || i, i) AS target FROM generate_series(1, 100) i
), r AS (
    SELECT paidb.jsonb_merge_patch(target,
        '{"k3":null,"k50":null,"k100":"hundred","k101":{"x":null,"y":1},"k7":[7]}') AS result,
        target
    FROM t
)
SELECT result = (target - 'k3' - 'k50'
                 || '{"k100":"hundred","k101":{"y":1},"k7":[7]}') AS as_expected,
       (SELECT count(*) FROM jsonb_object_keys(result)) AS members
FROM r;

-- The result is jsonb exactly as PostgreSQL would have encoded it: compare the
-- raw bytes with those of the same value re-read from text.  (The cast shows
-- jsonb's bytes as bytea; it is rolled back.)
BEGIN;
CREATE CAST (jsonb AS bytea) WITHOUT FUNCTION;
SELECT n, r::bytea = (r::text::jsonb)::bytea AS canonical
FROM (SELECT n, paidb.jsonb_merge_patch(t, p) AS r FROM (VALUES
    (1, '{"a":"xyz","n":1.5,"o":{"p":[1,"q",{"r":2}]},"s":"t"}'::jsonb,
        '{"a":"x","o":{"p2":3.25}}'::jsonb),
    (2, '{"s1":"a","s2":"ab","s3":"abc","n1":1,"n2":2,"o1":{"x":1},"a1":[1]}',
        '{"s2":null,"t":"abcde","n3":3.333}'),
    (3, '{"a":{"b":{"c":{"d":[{"e":1.0}]}}}}', '{"a":{"b":{"c":{"f":"g"}}}}'),
    (4, '{}', '{"a":{"b":null,"c":{"d":null}},"e":1e400}')
) AS v(n, t, p)) AS s
ORDER BY n;
WITH t AS (SELECT jsonb_object_agg('key' || i, jsonb_build_object('v', i, 's', repeat('x', i % 7)))
                  AS target FROM generate_series(1, 200) i)
SELECT r::bytea = (r::text::jsonb)::bytea AS canonical_large
FROM (SELECT paidb.jsonb_merge_patch(target, '{"key5":{"v":null,"w":true},"key77":null,"new":"n"}') AS r
      FROM t) AS s;
ROLLBACK;

-- A stored (TOAST-compressed) target, and a stored result read back.
CREATE TEMP TABLE mp_stored (id int, doc jsonb);
INSERT INTO mp_stored
SELECT 1, jsonb_build_object('spec', jsonb_build_object('executionType', 'Start'),
                             'items', jsonb_agg(jsonb_build_object('i', i, 'name', 'item-' || i)))
FROM generate_series(1, 5000) i;
SELECT pg_column_size(doc) < octet_length(doc::text) AS compressed FROM mp_stored;
INSERT INTO mp_stored
SELECT 2, paidb.jsonb_merge_patch(doc, '{"spec":{"executionType":"Stop"},"items":null,"n":1}')
FROM mp_stored WHERE id = 1;
SELECT id, doc -> 'spec' ->> 'executionType' AS execution_type,
       jsonb_array_length(doc -> 'items') AS items, doc -> 'n' AS n
FROM mp_stored ORDER BY id;
SELECT paidb.jsonb_merge_patch(doc, '{"spec":{"executionType":"Stop"}}')
       = doc || '{"spec":{"executionType":"Stop"}}' AS same_as_concat,
       jsonb_path_query_first(paidb.jsonb_merge_patch(doc, '{"spec":{"x":1}}'),
                              '$.items[4999].name') AS last_item
FROM mp_stored WHERE id = 1;

-- Deep documents are fine: 1,000 levels in the target and in the patch.
CREATE TEMP TABLE mp_deep AS
SELECT (repeat('{"a":', 1000) || '{"x":1,"y":2}' || repeat('}', 1000))::jsonb AS target,
       (repeat('{"a":', 1000) || '{"y":null,"z":3}' || repeat('}', 1000))::jsonb AS patch;
SELECT paidb.jsonb_merge_patch(target, patch) #> array_fill('a'::text, ARRAY[1000]) AS bottom
FROM mp_deep;

-- Runaway nesting fails with 54001 (stack depth) instead of crashing.  A
-- document 100,000 levels deep is already refused by jsonb's input ...
SELECT pg_temp.outcome($$SELECT paidb.jsonb_merge_patch('{}',
    (repeat('{"a":', 100000) || '1' || repeat('}', 100000))::jsonb)$$);
-- ... and one that jsonb accepts is refused by the merge when the stack runs
-- out (a small max_stack_depth stands in for a huge document here).
CREATE TEMP TABLE mp_runaway AS
SELECT (repeat('{"a":', 10000) || '1' || repeat('}', 10000))::jsonb AS doc;
SET max_stack_depth = '100kB';
SELECT pg_temp.outcome($$SELECT paidb.jsonb_merge_patch('{}', doc) FROM mp_runaway$$);
SELECT pg_temp.outcome($$SELECT paidb.jsonb_merge_patch(doc, doc) FROM mp_runaway$$);
RESET max_stack_depth;
-- A deep target under a shallow patch is copied, not walked.
SET max_stack_depth = '100kB';
SELECT paidb.jsonb_merge_patch(doc, '{"b":2}') - 'a' AS shallow_patch_on_deep_target
FROM mp_runaway;
RESET max_stack_depth;
