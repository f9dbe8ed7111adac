# The update from 0.2 packs the stored snapshots in batches, after
# ALTER EXTENSION paidb UPDATE, beside the writes (issue 19; docs/operations.md
# "From 0.2 to 0.3"):
#
#   * a database at 0.2 (made by this build's scripts; the 0.3 library
#     writes 0.2's schema as it does during a live update) with 2,000 jobs
#     and 200 attempts of history;
#   * three pgbench clients patch the jobs (each its own jobs, each patch
#     numbered, its number recorded in the same transaction) and submit
#     new ones, before and during the update, and until the conversion is
#     half done (so that rows they wrote unconverted are not written again);
#   * the update packs nothing; the retention worker packs every row in
#     batches while the clients go on -- a trigger slows each packed row by
#     3 ms so that the conversion lasts long enough to be seen half done --
#     and then drops 0.2's columns;
#   * afterwards every job holds its last patch, every untouched job and
#     attempt its 0.2 snapshot, every new job is there, and the clients
#     never failed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use PaidbTest;

my $jobs = 2000;
# nobody listens on port 9: the sync worker's creates fail and back off
my $node = PaidbTest::new_node('snapshot_conversion', undef, no_extension => 1,
	url => 'http://127.0.0.1:9', conf => "paidb.retention_interval = '1h'\nlog_statement = 'none'\n");
$node->safe_psql('postgres', q{CREATE EXTENSION paidb VERSION '0.2' CASCADE});

$node->safe_psql('postgres', qq{
SELECT paidb.put_framework_request(jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', jsonb_build_object('name', 'cj' || i,
        'labels', jsonb_build_object('userName', 'u' || (i % 7), 'virtualCluster', 'vc' || (i % 3)),
        'annotations', jsonb_build_object('jobName', 'job' || i, 'config', 'name: job' || i || E'\\ntype: job\\n')),
    'spec', jsonb_build_object('executionType', 'Start', 'taskRoles', jsonb_build_array(
        jsonb_build_object('name', 'worker', 'taskNumber', 1 + i % 4)))), now() - i * interval '1 s')
  FROM generate_series(1, $jobs) i;
INSERT INTO paidb.framework_history (uid, framework_name, attempt_index, history_type, snapshot)
SELECT md5('cj' || i || '+0+retry'), 'cj' || i, 0, 'retry', snapshot || '{"status": {"state": "AttemptCompleted"}}'
  FROM paidb.framework f, generate_series(1, 200) i WHERE f.name = 'cj' || i;
CREATE TABLE public.before AS SELECT name, md5(snapshot::text) AS md5 FROM paidb.framework;
CREATE TABLE public.history_before AS SELECT uid, md5(snapshot::text) AS md5 FROM paidb.framework_history;
CREATE TABLE public.patched (name text, seq bigint);
CREATE TABLE public.submitted (name text);
CREATE SEQUENCE public.seq;
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'paidb'}), '0.2', 'a database at 0.2');

# each client patches the jobs i with i % 3 = its id, so the last patch of a
# job is the one with the highest number; every tenth transaction submits
my $script = $node->basedir . '/writes.sql';
PostgreSQL::Test::Utils::append_to_file($script, qq{\\set i random(0, @{[ int($jobs / 3) - 1 ]}) * 3 + :client_id + 1
\\set submit random(1, 10)
BEGIN;
SELECT nextval('public.seq') AS seq \\gset
SELECT changed FROM paidb.patch_framework_request('cj' || :i,
    jsonb_build_object('metadata', jsonb_build_object('annotations', jsonb_build_object('seq', :seq::text))));
INSERT INTO public.patched VALUES ('cj' || :i, :seq);
END;
\\if :submit = 1
BEGIN;
SELECT paidb.put_framework_request(jsonb_build_object('metadata', jsonb_build_object('name', 'new' || :seq),
    'spec', '{"executionType": "Start"}'::jsonb));
INSERT INTO public.submitted VALUES ('new' || :seq);
END;
\\endif
});
my ($pgb_out, $pgb_err) = ('', '');
my $pgbench = IPC::Run::start(
	[ $node->installed_command('pgbench'), '-n', '-c', '3', '-T', '600', '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$pgb_out, '2>', \$pgb_err);
ok(PaidbTest::poll($node, 'SELECT count(*) > 50 FROM public.patched', 't'), 'the clients write to 0.2');

# slow each packed row (only the conversion nulls snapshot_0_2)
$node->safe_psql('postgres', q{
CREATE FUNCTION public.slow_pack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(OLD) ? 'snapshot_0_2' AND to_jsonb(OLD)->'snapshot_0_2' <> 'null'
       AND to_jsonb(NEW)->'snapshot_0_2' = 'null' THEN
        PERFORM pg_sleep(0.003);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER slow_pack BEFORE UPDATE ON paidb.framework FOR EACH ROW EXECUTE FUNCTION public.slow_pack();
});

my $log_offset = -s $node->logfile;
my $t = time();
# The update, held open: checked in its own transaction (the retention
# worker starts within 2 s of the commit), and a submission made meanwhile
# waits for it and then succeeds, through the function the update replaced.
my $updater = $node->background_psql('postgres');
$updater->query_safe('BEGIN');
$updater->query_safe('ALTER EXTENSION paidb UPDATE');
is($updater->query_safe(q{SELECT count(*) FILTER (WHERE snapshot_packed IS NULL) = count(*) FROM paidb.framework}),
	't', 'ALTER EXTENSION paidb UPDATE packs no snapshot itself');
is($updater->query_safe(q{SELECT bool_or(convalidated) FROM pg_constraint
     WHERE conname IN ('framework_cluster_fkey', 'framework_moving_from_fkey', 'tag_framework_name_fkey',
                       'framework_placement_check', 'framework_name_valid')}),
	'f', 'and validates no foreign key or check itself');
is($updater->query_safe(q{SELECT string_agg(i, ',' ORDER BY i) FROM unnest(ARRAY['framework_cluster_idx',
    'framework_moving_from_idx', 'framework_needs_sync_idx', 'job_summary_user_name_idx', 'framework_expired_idx',
    'framework_needs_sync_0_2_idx', 'job_summary_user_name_0_2_idx', 'framework_expired_0_2_idx']) i
    WHERE to_regclass('paidb.' || i) IS NOT NULL}),
	'framework_expired_0_2_idx,framework_needs_sync_0_2_idx,job_summary_user_name_0_2_idx',
	'and builds none of its new indexes: 0.2\'s serve');
my ($w_out, $w_err) = ('', '');
my $waiter = IPC::Run::start(
	[ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres'), '-c',
	  q{SELECT name FROM paidb.put_framework_request('{"metadata": {"name": "waited1"}, "spec": {"executionType": "Start"}}')} ],
	'>', \$w_out, '2>', \$w_err);
ok(PaidbTest::poll($node, q{SELECT count(*) > 0 FROM pg_stat_activity
    WHERE wait_event_type = 'Lock' AND query LIKE '%waited1%' AND pid <> pg_backend_pid()}, 't'),
	'a submission waits for the update');
$updater->query_safe('COMMIT');
$updater->quit;
my $update_s = time() - $t;
$waiter->finish;
is("$w_out|$w_err", "waited1\n|", 'and succeeds once it commits');
my $unpacked = q{SELECT count(*) FROM paidb.framework WHERE snapshot_packed IS NULL};

# half done: some rows packed, some not, and the clients still commit
ok(PaidbTest::poll($node, "SELECT count(*) BETWEEN 1 AND $jobs - 500 FROM paidb.framework WHERE snapshot_packed IS NULL", 't'),
	'the retention worker packs the rows in batches');
my $writes = $node->safe_psql('postgres', 'SELECT count(*) FROM public.patched');
ok(PaidbTest::poll($node, "SELECT count(*) > $writes + 20 FROM public.patched", 't', 10),
	'the clients go on writing during the conversion');
cmp_ok($node->safe_psql('postgres', $unpacked), '>', 0, 'while rows are still to pack');
# The clients stop here, half-way: the rows they wrote and the conversion
# has not reached yet are packed by their write, and must keep it.  (Had
# they gone on, a later write would hide a lost one.)
my $written_unpacked = $node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework
    WHERE snapshot_packed IS NOT NULL AND snapshot_0_2 IS NOT NULL});
# (TERM: a harness run in the background may have SIGINT ignored)
$pgbench->signal('TERM');
$pgbench->finish;
unlike($pgb_err, qr/error|aborted in command/i, 'pgbench: no client failed') or diag($pgb_err);
cmp_ok($written_unpacked, '>', 0, 'the clients wrote rows the conversion had not reached yet');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework f JOIN public.before b USING (name)
    WHERE f.name NOT IN (SELECT name FROM public.patched) AND md5(paidb.snapshot(f)::text) <> b.md5}), '0',
	'half-way, every untouched job reads as 0.2 stored it');

ok(PaidbTest::poll($node, q{SELECT count(*) FROM pg_attribute WHERE attrelid IN ('paidb.framework'::regclass,
    'paidb.framework_history'::regclass) AND attname = 'snapshot_0_2' AND NOT attisdropped}, '0', 120),
	'the conversion ends: 0.2\'s columns are dropped');
like(PaidbTest::log_since($node, $log_offset), qr/paidb converted the \d+ snapshots stored by paidb 0\.2 in [\d.]+ s/,
	'and the worker logged it');
note("update took ${update_s} s");


is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE snapshot_packed IS NULL}), '0',
	'every row is packed');
is($node->safe_psql('postgres', q{SELECT count(*) FROM (SELECT name, max(seq) AS seq FROM public.patched GROUP BY name) p
    JOIN paidb.framework f USING (name)
   WHERE paidb.snapshot(f) #>> '{metadata,annotations,seq}' IS DISTINCT FROM p.seq::text}), '0',
	'every patched job holds its last patch');
cmp_ok($node->safe_psql('postgres', 'SELECT count(DISTINCT name) FROM public.patched'), '>', 100, 'many jobs were patched');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework f JOIN public.before b USING (name)
    WHERE f.name NOT IN (SELECT name FROM public.patched) AND md5(paidb.snapshot(f)::text) <> b.md5}), '0',
	'every untouched job holds its 0.2 snapshot');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.before b WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = b.name)}),
	'0', 'no job is lost');
is($node->safe_psql('postgres', q{SELECT count(*) FROM public.submitted s WHERE NOT EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = s.name)}),
	'0', 'every job submitted meanwhile is there');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework_history h JOIN public.history_before b USING (uid)
    WHERE md5(paidb.snapshot(h)::text) = b.md5}), '200', 'every attempt holds its 0.2 snapshot');
is($node->safe_psql('postgres', q{SELECT string_agg(conname || ' ' || convalidated, ', ' ORDER BY conname) FROM pg_constraint
    WHERE conname IN ('framework_cluster_fkey', 'framework_moving_from_fkey', 'tag_framework_name_fkey',
                      'framework_placement_check', 'framework_name_valid')}),
	'framework_cluster_fkey true, framework_moving_from_fkey true, framework_name_valid true, framework_placement_check true, tag_framework_name_fkey true',
	'the foreign keys the update added unvalidated are validated');
like(PaidbTest::log_since($node, $log_offset), qr/paidb ran "CREATE INDEX CONCURRENTLY framework_needs_sync_idx ON/,
	'the retention worker built the new indexes CONCURRENTLY');
is($node->safe_psql('postgres', q{SELECT string_agg(c.relname || ' ' || i.indisvalid, ',' ORDER BY c.relname)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
   WHERE c.relname IN ('framework_cluster_idx', 'framework_moving_from_idx', 'framework_needs_sync_idx',
                       'job_summary_user_name_idx', 'framework_expired_idx', 'framework_needs_sync_0_2_idx',
                       'job_summary_user_name_0_2_idx', 'framework_expired_0_2_idx')}),
	'framework_cluster_idx true,framework_expired_idx true,framework_moving_from_idx true,framework_needs_sync_idx true,job_summary_user_name_idx true',
	'the new indexes are valid, and 0.2\'s are dropped');
is($node->safe_psql('postgres', q{SELECT attnotnull FROM pg_attribute WHERE attrelid = 'paidb.framework'::regclass AND attname = 'snapshot_packed'}),
	't', 'snapshot_packed is NOT NULL');

is(join("\n", PaidbTest::crash_lines($node)), '', 'no paidb process crashed');
done_testing();
