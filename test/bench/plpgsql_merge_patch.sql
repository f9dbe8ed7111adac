-- A plain, straightforward RFC 7396 merge patch in PL/pgSQL: the baseline
-- paidb.jsonb_merge_patch is measured against (test/bench/merge_patch_bench.sh).
-- Lives in the scratch schema "bench"; not part of the extension.

CREATE SCHEMA IF NOT EXISTS bench;

CREATE OR REPLACE FUNCTION bench.plpgsql_merge_patch(target jsonb, patch jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT
AS $$
DECLARE
    result jsonb;
    member record;
BEGIN
    -- A patch that is not an object replaces the target.
    IF pg_catalog.jsonb_typeof(patch) <> 'object' THEN
        RETURN patch;
    END IF;

    -- A target that is not an object is treated as {}.
    IF pg_catalog.jsonb_typeof(target) = 'object' THEN
        result := target;
    ELSE
        result := '{}';
    END IF;

    FOR member IN SELECT key, value FROM pg_catalog.jsonb_each(patch) LOOP
        IF pg_catalog.jsonb_typeof(member.value) = 'null' THEN
            result := result - member.key;
        ELSE
            result := result || pg_catalog.jsonb_build_object(member.key,
                bench.plpgsql_merge_patch(COALESCE(result -> member.key, 'null'::jsonb),
                                          member.value));
        END IF;
    END LOOP;

    RETURN result;
END
$$;
