# Version 0.1 is released: a database created with 0.1 and updated with
# ALTER EXTENSION paidb UPDATE must end up with exactly the schema of a fresh
# CREATE EXTENSION paidb CASCADE, and keep its data.  Compares pg_dump --schema-only
# of the two databases, and the rows written before the update.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('schema_upgrade');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('postgres', 'CREATE DATABASE upgraded');
$node->safe_psql('fresh', 'CREATE EXTENSION paidb CASCADE');
$node->safe_psql('upgraded', "CREATE EXTENSION paidb VERSION '0.1' CASCADE");

# Data written by 0.1: jobs in several states, a retried attempt, a tag.
my $data_sql = q{
SELECT paidb.put_framework_request(pg_catalog.jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', pg_catalog.jsonb_build_object('name', 'upjob' || i),
    'spec', '{"executionType": "Start"}'::jsonb), '2020-08-01 00:00:00+00'::timestamptz + i * interval '1 minute')
  FROM pg_catalog.generate_series(1, 20) i;
SELECT paidb.apply_watch_event('MODIFIED', pg_catalog.jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', pg_catalog.jsonb_build_object('name', 'upjob1', 'resourceVersion', (6 + a)::text,
                                            'annotations', '{"requestGeneration": "1"}'::jsonb),
  'spec', '{"executionType": "Start"}'::jsonb,
  'status', pg_catalog.jsonb_build_object('state', 'AttemptRunning',
     'attemptStatus', pg_catalog.jsonb_build_object('id', a, 'completionStatus', null, 'taskRoleStatuses', '[]'::jsonb),
     'retryPolicyStatus', pg_catalog.jsonb_build_object('totalRetriedCount', a, 'accountableRetriedCount', a, 'retryDelaySec', 0))))
  FROM pg_catalog.generate_series(0, 1) a;
SELECT paidb.stop_framework('upjob2');
INSERT INTO paidb.tag (framework_name, name) VALUES ('upjob3', 'important'), ('upjob11', 'team-a'),
  ('gone-job', 'stale');
INSERT INTO paidb.installation (key, value) VALUES ('initial_import_done', '1234'),
  ('watch_source.frameworks', '00c0ffee00c0ffee'), ('watch_source.events', '00c0ffee00c0ffee');
INSERT INTO paidb.watch_state (watcher, resource_version, listed_at) VALUES ('frameworks', '1234', pg_catalog.now());
-- orphans as 0.1 queued them, hostile names too (SPEC §8: 0.2 drops those)
INSERT INTO paidb.orphan (name, uid) VALUES ('uporphan1', 'u1'), ('.', 'u2'), ('..', 'u3'),
  (pg_catalog.repeat('a', 10000), 'u4');
UPDATE paidb.framework SET archived = true WHERE name = 'upjob4';
UPDATE paidb.framework SET user_name = 'bob', virtual_cluster = 'vc' || (length(name) % 2) WHERE name LIKE 'upjob1%';
};
$node->safe_psql('upgraded', $data_sql);
# (f.snapshot: the column up to 0.2, the function paidb.snapshot(f) from 0.3)
my $data_query = q{SET search_path = paidb, pg_catalog;
  SELECT pg_catalog.md5(pg_catalog.string_agg(f::text, ',' ORDER BY name)) FROM
  (SELECT name, state, sub_state, request_generation, request_synced, submission_time, retries, f.snapshot
     FROM paidb.framework f) f};
my $history_query = q{SELECT pg_catalog.string_agg(uid || ' ' || framework_name || ' ' || attempt_index, ',' ORDER BY uid)
  FROM paidb.framework_history};
# (0.2 drops the tags of jobs that are not there, as OpenPAI's foreign key did)
my $tag_query = q{SELECT pg_catalog.string_agg(framework_name || ' ' || name, ',' ORDER BY framework_name, name)
  FROM paidb.tag t WHERE EXISTS (SELECT 1 FROM paidb.framework f WHERE f.name = t.framework_name)};
my @before = map { $node->safe_psql('upgraded', $_) } $data_query, $history_query, $tag_query;
is($node->safe_psql('upgraded', 'SELECT count(*) FROM paidb.framework'), '20', '0.1 holds the jobs');
isnt($before[1], '', '0.1 holds the retried attempt');

$node->safe_psql('upgraded', 'ALTER EXTENSION paidb UPDATE');
is($node->safe_psql('upgraded', "SELECT extversion FROM pg_extension WHERE extname = 'paidb'"),
	$node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'paidb'"),
	'the updated database is at the default version');
isnt($node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'paidb'"), '0.1',
	'the default version is not 0.1');

# The update leaves the snapshots where 0.2 stored them (snapshot_0_2) and
# the retention worker packs them in batches afterwards (this server runs
# without it; CALL paidb.convert_snapshots() does the same).  Meanwhile
# every snapshot reads the same, and a write stores its row packed.
my $unpacked_query = q{SELECT count(*) FROM paidb.framework WHERE snapshot_packed IS NULL};
is($node->safe_psql('upgraded', $unpacked_query), '20', 'the update itself packs no snapshot');
is($node->safe_psql('upgraded', $data_query), $before[0], 'unconverted rows read the same through paidb.snapshot(f)');
is($node->safe_psql('upgraded', $history_query), $before[1], 'and their history');
convert_snapshots('upgraded');
is($node->safe_psql('upgraded', q{SELECT count(*) FROM pg_attribute WHERE attrelid IN
    ('paidb.framework'::regclass, 'paidb.framework_history'::regclass) AND attname = 'snapshot_0_2' AND NOT attisdropped}),
	'0', 'the conversion drops 0.2\'s columns at its end');

# The schemas, dumped the same way, are equal line for line.
sub convert_snapshots
{
	my ($db) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db, 'CALL paidb.convert_snapshots(7)');
	is($ret, 0, "CALL paidb.convert_snapshots() in $db") or diag($stderr);
}

sub schema_dump
{
	my ($db) = @_;
	my ($stdout, $stderr);
	# --binary-upgrade is the one mode in which pg_dump prints an
	# extension's member objects (each followed by ALTER EXTENSION ... ADD)
	IPC::Run::run([ 'pg_dump', '--schema-only', '--binary-upgrade', '-d', $node->connstr($db) ],
		'>', \$stdout, '2>', \$stderr)
	  or die "pg_dump $db failed: $stderr";
	# comments, object ids, the database's own name and psql's \restrict keys
	# (random per dump) differ by nature
	return join("\n", grep { !/^--/ && !/binary_upgrade_set_next|binary_upgrade_set_record_init_privs/
		  && !/relfrozenxid|^WHERE oid = |^UPDATE pg_catalog\.pg_class$/
		  && !/^\\(un)?restrict / && !/DATABASE|^\\connect/ && $_ ne '' } split /\n/, $stdout);
}
my ($fresh, $upgraded) = (schema_dump('fresh'), schema_dump('upgraded'));
ok(length($fresh) > 1000, 'the fresh schema dump is not empty');
# On a difference, show only the lines that differ.
my @f = split /\n/, $fresh;
my @u = split /\n/, $upgraded;
my %in_fresh = map { $_ => 1 } @f;
my %in_upgraded = map { $_ => 1 } @u;
my @only_fresh = grep { !$in_upgraded{$_} } @f;
my @only_upgraded = grep { !$in_fresh{$_} } @u;
ok($upgraded eq $fresh, 'upgraded schema equals a fresh install')
  or diag("only in the fresh install:\n  " . join("\n  ", @only_fresh)
	  . "\nonly in the upgraded database:\n  " . join("\n  ", @only_upgraded)
	  . (@only_fresh || @only_upgraded ? '' : "\n(the same lines in another order)"));

# Catalog facts pg_dump does not print for extension members: ACLs, column
# grants, function settings (SECURITY DEFINER search_path).
my $catalog = q{
SELECT pg_catalog.string_agg(x, E'\n' ORDER BY x) FROM (
  SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') AS x
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname LIKE 'paidb%'
  UNION ALL
  SELECT 'col ' || c.relname || '.' || a.attname || ' ' || coalesce(a.attacl::text, '')
    FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname LIKE 'paidb%' AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'fn ' || p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '') || ' '
         || p.prosecdef::text || ' ' || coalesce(p.proconfig::text, '')
    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname LIKE 'paidb%') s};
is($node->safe_psql('upgraded', $catalog), $node->safe_psql('fresh', $catalog),
	'privileges and function settings are the same too');

# The data written by 0.1 is all there.
my @after = map { $node->safe_psql('upgraded', $_) } $data_query, $history_query, $tag_query;
is_deeply(\@after, \@before, 'the jobs, their history and tags are kept by the update');
is($node->safe_psql('upgraded', q{SELECT count(*) FROM paidb.tag WHERE framework_name = 'gone-job'}), '0',
	'the update drops a tag whose job is not in paidb.framework');
# each tag carries its job's submission time and user (upjob11's user was
# changed after it was tagged)
is($node->safe_psql('upgraded', q{SELECT string_agg(t.framework_name || ' ' || coalesce(t.job_user_name, '-'), ','
    ORDER BY t.framework_name) FROM paidb.tag t JOIN paidb.framework f ON f.name = t.framework_name
   WHERE t.job_submission_time = f.submission_time AND t.job_user_name IS NOT DISTINCT FROM f.user_name}),
	'upjob11 bob,upjob3 -', 'the tags carry their jobs\' submission time and user');

# The first-run import of 0.1 is carried over to its target, and the watch
# position is kept: an upgraded database neither imports again nor re-lists.
is($node->safe_psql('upgraded', q{SELECT value FROM paidb.installation WHERE key = 'initial_import_done'}),
	'00c0ffee00c0ffee', 'the import 0.1 recorded belongs to the target it watched');
is($node->safe_psql('upgraded', q{SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	'1234', 'the watch position is kept');
# Orphans: the one a framework could be is kept, the hostile names are gone.
is($node->safe_psql('upgraded', 'SELECT string_agg(name, \',\' ORDER BY name) FROM paidb.orphan'),
	'uporphan1', 'the update drops queued orphans whose names no framework can have');
# §10: the job list and the counts are built from the existing rows.
my $summary_cols = q{name, job_name, user_name, execution_type, submission_time, creation_time,
  launch_time, virtual_cluster, total_gpu_number, total_task_number, total_task_role_number,
  job_priority, retries, retry_delay_time, platform_retries, resource_retries, user_retries,
  completion_time, app_exit_code, sub_state, state, archived};
is($node->safe_psql('upgraded', qq{SELECT count(*) FROM (
  (SELECT $summary_cols FROM paidb.framework EXCEPT SELECT * FROM paidb.job_summary)
  UNION ALL (SELECT * FROM paidb.job_summary EXCEPT SELECT $summary_cols FROM paidb.framework)) e}),
	'0', 'the upgrade built paidb.job_summary from every job');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM paidb.job_summary'), '20', 'all 20 jobs are listed');
is($node->safe_psql('upgraded', q{SELECT string_agg(s, ', ' ORDER BY s) FROM (SELECT coalesce(user_name, '-') || ' ' || coalesce(virtual_cluster, '-')
    || ' ' || state || ' ' || archived || ' ' || n AS s FROM (
  SELECT user_name, virtual_cluster, state, archived, sum(n) AS n FROM paidb.job_counts GROUP BY 1, 2, 3, 4) c) t}),
	$node->safe_psql('upgraded', q{SELECT string_agg(s, ', ' ORDER BY s) FROM (SELECT coalesce(user_name, '-') || ' ' || coalesce(virtual_cluster, '-')
    || ' ' || state || ' ' || archived || ' ' || n AS s FROM (
  SELECT user_name, virtual_cluster, state, archived, count(*) AS n FROM paidb.framework GROUP BY 1, 2, 3, 4) c) t}),
	'the upgrade counted the existing jobs');
is($node->safe_psql('upgraded', 'SELECT sum(n) FROM paidb.job_counts WHERE NOT archived'), '19',
	'the archived job is not in the default count');

# And 0.2 works on the upgraded data.
is($node->safe_psql('upgraded', q{SELECT request_generation || ' ' || changed FROM paidb.stop_framework('upjob3')}),
	'2 true', 'an upgraded job can be stopped');

# Version 0.2 is released too: a database at 0.2, with paidb_openpai, updated
# to 0.3 equals a fresh 0.3 install of both, and keeps its data.  Its keyword
# indexes are missing (as where pg_trgm was not installed under 0.2) and a
# job row was deleted directly, leaving its tag (0.2 had no foreign key).
$node->safe_psql('postgres', 'CREATE DATABASE fresh_both');
$node->safe_psql('postgres', 'CREATE DATABASE from02');
$node->safe_psql('fresh_both', 'CREATE EXTENSION paidb CASCADE; CREATE EXTENSION paidb_openpai');
$node->safe_psql('from02', "CREATE EXTENSION paidb VERSION '0.2' CASCADE; CREATE EXTENSION paidb_openpai VERSION '0.2'");
is($node->safe_psql('from02', q{SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname)
    FROM pg_extension WHERE extname LIKE 'paidb%'}), 'paidb 0.2,paidb_openpai 0.2', 'a 0.2 database');
# (0.2 refuses a tag without its job, and orphans no framework could be)
(my $data_sql_02 = $data_sql) =~ s/,\s*\('gone-job', 'stale'\)//;
$data_sql_02 =~ s/\('uporphan1', 'u1'\),.*?'u4'\);/('uporphan1', 'u1');/s;
$node->safe_psql('from02', $data_sql_02);
$node->safe_psql('from02', q{
DROP INDEX paidb.job_summary_user_name_trgm_idx, paidb.job_summary_job_name_trgm_idx,
    paidb.job_summary_virtual_cluster_trgm_idx;
INSERT INTO paidb.tag (framework_name, name) VALUES ('upjob5', 'left-behind');
DELETE FROM paidb.framework WHERE name = 'upjob5';
});
is($node->safe_psql('from02', q{SELECT count(*) FROM paidb.tag WHERE framework_name = 'upjob5'}), '1',
	'0.2 let a job row go without its tag');
# what rest-server reads: the snapshots through paidb_openpai's views (0.3
# stores them packed; the views read them back)
my $openpai_query = q{SELECT md5(string_agg(name || ' ' || snapshot, ',' ORDER BY name)) || ' '
    || (SELECT md5(string_agg(uid || ' ' || snapshot, ',' ORDER BY uid)) FROM openpai.framework_history)
  FROM openpai.frameworks};
my @before02 = map { $node->safe_psql('from02', $_) } $data_query, $history_query, $tag_query, $openpai_query;
isnt($before02[3], '', '0.2 shows snapshots through openpai.frameworks');
is($node->psql('from02', 'ALTER EXTENSION paidb UPDATE; ALTER EXTENSION paidb_openpai UPDATE'), 0, 'ALTER EXTENSION ... UPDATE from 0.2');
is_deeply([ map { $node->safe_psql('from02', $_) } $data_query, $history_query, $openpai_query ],
	[ @before02[0, 1, 3] ], 'before the conversion, paidb and openpai\'s views read every snapshot as 0.2 did');
# a write to an unconverted row packs it (and the conversion keeps what it wrote)
is($node->safe_psql('from02', q{SELECT changed FROM paidb.stop_framework('upjob6');
    SELECT snapshot_packed IS NOT NULL FROM paidb.framework WHERE name = 'upjob6'}), "t\nt",
	'a write to an unconverted row stores it packed');
my $stopped = $node->safe_psql('from02', q{SELECT paidb.snapshot(f)::text FROM paidb.framework f WHERE name = 'upjob6'});
like($stopped, qr/"executionType": "Stop"/, 'and reads back what it wrote');
# what the conversion must keep: 0.2's rows and the write
@before02 = map { $node->safe_psql('from02', $_) } $data_query, $history_query, $tag_query, $openpai_query;
convert_snapshots('from02');
is($node->safe_psql('from02', q{SELECT paidb.snapshot(f)::text FROM paidb.framework f WHERE name = 'upjob6'}),
	$stopped, 'the conversion keeps what a write stored meanwhile');
is($node->safe_psql('from02', q{SELECT count(*) FROM paidb.tag WHERE framework_name = 'upjob5'}), '0',
	'the update drops the tag without its job');
is($node->safe_psql('from02', q{SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname)
    FROM pg_extension WHERE extname LIKE 'paidb%'}), 'paidb 0.3,paidb_openpai 0.3', 'both at 0.3');
($fresh, $upgraded) = (schema_dump('fresh_both'), schema_dump('from02'));
ok($upgraded eq $fresh, '0.2 updated to 0.3 equals a fresh 0.3 install (paidb and paidb_openpai)')
  or do {
	my %f = map { $_ => 1 } split /\n/, $fresh;
	my %u = map { $_ => 1 } split /\n/, $upgraded;
	diag("only in the fresh install:\n  " . join("\n  ", grep { !$u{$_} } split /\n/, $fresh)
		  . "\nonly in the updated database:\n  " . join("\n  ", grep { !$f{$_} } split /\n/, $upgraded));
  };
(my $catalog_all = $catalog) =~ s/LIKE 'paidb%'/~ '^(paidb|openpai)'/g;
is($node->safe_psql('from02', $catalog_all), $node->safe_psql('fresh_both', $catalog_all),
	'privileges and function settings are the same after 0.2 -> 0.3');
is_deeply([ map { $node->safe_psql('from02', $_) } $data_query, $history_query, $tag_query, $openpai_query ], \@before02,
	'the jobs, their history and tags are kept by the update from 0.2');
is($node->safe_psql('from02', q{SELECT count(*) FROM pg_indexes WHERE schemaname = 'paidb' AND indexname LIKE '%trgm%'}),
	'3', 'the update made the keyword indexes');
# the foreign key: deleting a job row deletes its tags
$node->safe_psql('from02', q{DELETE FROM paidb.framework WHERE name = 'upjob3'});
is($node->safe_psql('from02', q{SELECT count(*) FROM paidb.tag WHERE framework_name = 'upjob3'}), '0',
	'after the update a job row takes its tags with it');

$node->stop;
done_testing();
