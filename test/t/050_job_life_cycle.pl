# Job counts, archive, delete and retention on a real server with the
# workers and the fake API server (SPEC §10, docs/queries.md).
#
#   * a property test: while pgbench submits jobs (which the fake's
#     controller runs, completes and paidb deletes from the API server:
#     watch events), archives and un-archives random jobs and deletes
#     random finished ones, and the retention worker deletes expired jobs,
#     paidb.job_counts equals count(*) per group in every snapshot sampled,
#     and at the end;
#   * retention deletes exactly the expired rows: every job it deleted was
#     completed, gone from the API server and older than paidb.retention
#     (checked by a trigger that logs each deleted row), a job the API
#     server still has is never deleted, events older than
#     paidb.event_retention go and younger ones stay;
#   * status() has a fourth row, the retention worker, with what it did.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake();
my $node = PaidbTest::start_node('job_life_cycle', $fake, retain_mode => 'off',
	conf => "paidb.retention = '2s'\npaidb.retention_interval = '300ms'\npaidb.retention_batch_size = 5\n");

ok(poll($node, q{SELECT pid IS NOT NULL AND state LIKE 'idle%' FROM paidb.status() WHERE worker = 'retention'}),
	'the retention worker runs and says it is idle');

# rest-server's counts through openpai.frameworks, answered from the counts
# (rewritten) and by counting the jobs, in one snapshot; the first must have
# been rewritten.
$node->safe_psql('postgres', 'CREATE EXTENSION paidb_openpai');
my @view_filters = ('', q{WHERE "userName" IN ('keep', 'u0')},
	q{WHERE state IN ('RUNNING', 'WAITING') AND NOT archived},
	q{WHERE ("jobPriority" IS NULL OR "jobPriority" IN ('prod'))});
# (each its own statement: the rewrite applies to a top-level statement)
my $view_count_sql = join("\n", map { qq{SELECT count(*) FROM openpai.frameworks AS "framework" $_;} } @view_filters);
my $view_counts = qq{BEGIN ISOLATION LEVEL REPEATABLE READ;
$view_count_sql
\\echo --
SET LOCAL paidb.openpai_count_rewrite = off;
$view_count_sql
COMMIT;};
like($node->safe_psql('postgres', qq{EXPLAIN (COSTS OFF) SELECT count(*) FROM openpai.frameworks AS "framework" $view_filters[1]}),
	qr/job_count/, 'a count through openpai.frameworks reads the counts');

# Every row the retention worker (or delete_job) removes, as it was.
$node->safe_psql('postgres', q{
CREATE TABLE deleted_log (name text, sub_state text, api_server_deleted boolean,
                          completion_time timestamptz, deleted_at timestamptz, backend_type text);
CREATE FUNCTION log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.deleted_log VALUES (OLD.name, OLD.sub_state, OLD.api_server_deleted,
    OLD.completion_time, clock_timestamp(),
    (SELECT backend_type FROM pg_catalog.pg_stat_activity WHERE pid = pg_backend_pid()));
  RETURN OLD;
END $$;
CREATE TRIGGER log_delete BEFORE DELETE ON paidb.framework FOR EACH ROW EXECUTE FUNCTION log_delete();
});

# A job the API server keeps running all along: never deleted.
my $held = job_name('keep', 'held');
submit($node, job_request($held, user => 'keep', hold_state => 'AttemptRunning'));
ok(poll($node, "SELECT state = 'RUNNING' FROM paidb.framework WHERE name = '$held'"), 'the held job runs');

# The counts disagree with count(*) in these groups; the job list with
# paidb.framework in these rows.
my $count_errors = job_count_errors_sql();
my $summary_errors = job_summary_errors_sql();

my %scripts = (
	submit => q{
\set u random(1, 5)
SELECT name FROM paidb.put_framework_request(jsonb_build_object(
  'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
  'metadata', jsonb_build_object('name', 'c' || md5(random()::text || clock_timestamp()::text),
     'labels', jsonb_build_object('userName', 'u' || :u, 'virtualCluster', 'vc' || (:u % 2)),
     'annotations', jsonb_build_object('jobName', 'j', 'kube-fake/run-seconds', '0.2',
        'config', CASE WHEN :u % 3 = 0 THEN '' ELSE E'extras:\n  hivedScheduler:\n    jobPriorityClass: p' || :u || E'\n' END)),
  'spec', jsonb_build_object('executionType', 'Start',
     'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 1)))));
},
	archive => q{
DO $$ BEGIN
  PERFORM paidb.archive_job(name, random() < 0.6)
     FROM (SELECT name FROM paidb.framework WHERE user_name <> 'keep' ORDER BY random() LIMIT 1) s;
EXCEPTION WHEN no_data_found THEN NULL;
END $$;
},
	delete => q{
DO $$ BEGIN
  PERFORM paidb.delete_job(name)
     FROM (SELECT name FROM paidb.framework WHERE api_server_deleted AND sub_state = 'Completed'
            ORDER BY random() LIMIT 1) s;
EXCEPTION WHEN no_data_found THEN NULL;
END $$;
});
my %files;
for my $name (keys %scripts)
{
	my $file = $node->basedir . "/$name.sql";
	open my $fh, '>', $file or die $!;
	print $fh $scripts{$name};
	close $fh;
	$files{$name} = $file;
}

# ---------------------------------------------------------------- counts under concurrency
# 4 clients for 10 s at 40 transactions/s in all (the fake runs each job).
my ($stdout, $stderr) = ('', '');
my $bench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '10', '-R', '40',
	  '-f', "$files{submit}\@6", '-f', "$files{archive}\@3", '-f', "$files{delete}\@1",
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$stdout, '2>', \$stderr);
my ($samples, $bad, $bad_summary, $bad_view) = (0, 0, 0, 0);
my $deadline = time() + 60;
while ($bench->pumpable && time() < $deadline)
{
	my $e = $node->safe_psql('postgres', $count_errors);
	$samples++;
	$bad++ if $e ne '0';
	$bad_summary++ if $node->safe_psql('postgres', $summary_errors) ne '0';
	my ($with, $without) = split /\n--\n/, $node->safe_psql('postgres', $view_counts);
	$bad_view++ if $with ne $without;
	usleep(200_000);
	$bench->pump_nb;
}
$bench->finish;
like($stdout, qr/number of failed transactions: 0 /, 'pgbench: no failed transaction') or diag($stderr);
cmp_ok($samples, '>=', 10, "the counts were sampled during the load ($samples times)");
is($bad, 0, 'the counts equalled count(*) in every sample');
is($bad_summary, 0, 'the job list equalled paidb.framework in every sample');
is($bad_view, 0, 'counts through openpai.frameworks, rewritten, equalled the same counts not rewritten in every sample');

my $submitted = $node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework} ) +
  $node->safe_psql('postgres', q{SELECT count(*) FROM deleted_log});
cmp_ok($submitted, '>', 100, "enough jobs were submitted ($submitted)");

# Wait until the jobs are done and the retention worker has caught up.
ok(poll($node, q{SELECT count(*) = 0 FROM paidb.framework
                  WHERE user_name <> 'keep' AND NOT (api_server_deleted AND completion_time < now() - interval '2 s')}, 't', 120),
	'every submitted job completed and was deleted from the API server');
ok(poll($node, q{SELECT count(*) = 1 FROM paidb.framework}, 't', 60),
	'the retention worker deleted every expired job; the held one is left');
is($node->safe_psql('postgres', $count_errors), '0', 'the counts equal count(*) at the end');
is($node->safe_psql('postgres', $summary_errors), '0', 'the job list equals paidb.framework at the end');
is($node->safe_psql('postgres', q{SELECT sum(n) FROM paidb.job_counts}), '1', 'the counts say one job');
ok(poll($node, q{SELECT count(*) = 0 FROM paidb.job_count_delta}), 'the worker compacted every count delta');

# ---------------------------------------------------------------- exactly the expired rows
my $retention_deleted = $node->safe_psql('postgres',
	q{SELECT count(*) FROM deleted_log WHERE backend_type = 'paidb retention'});
cmp_ok($retention_deleted, '>', 20, "the retention worker deleted jobs ($retention_deleted)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM deleted_log
    WHERE NOT (sub_state = 'Completed' AND api_server_deleted)}),
	'0', 'every deleted job was completed and gone from the API server');
is($node->safe_psql('postgres', q{SELECT count(*) FROM deleted_log
    WHERE backend_type = 'paidb retention' AND NOT completion_time < deleted_at - interval '2 s'}),
	'0', 'every job the retention worker deleted was older than paidb.retention');
is($node->safe_psql('postgres', "SELECT count(*) FROM deleted_log WHERE name = '$held'"), '0',
	'the job the API server has was never deleted');
ok(fake_framework($fake, $held), 'and it still runs in the API server');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.tag t WHERE NOT EXISTS
    (SELECT 1 FROM paidb.framework f WHERE f.name = t.framework_name)}), '0', 'no tag outlived its job');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework_event t WHERE NOT EXISTS
    (SELECT 1 FROM paidb.framework f WHERE f.name = t.framework_name)}), '0', 'no event outlived its job');

# Events: older than paidb.event_retention go, younger ones stay.
$node->safe_psql('postgres', qq{
INSERT INTO paidb.framework_event (uid, framework_name, type, last_timestamp, updated_at) VALUES
  ('ev-old', '$held', 'Normal', now(), now() - interval '2 hours'),
  ('ev-young', '$held', 'Normal', now() - interval '2 days', now());
});
$node->append_conf('postgresql.conf', "paidb.event_retention = '1h'\n");
$node->reload;
ok(poll($node, q{SELECT count(*) = 0 FROM paidb.framework_event WHERE uid = 'ev-old'}),
	'an event older than paidb.event_retention is deleted');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework_event WHERE uid = 'ev-young'}), '1',
	'a younger one stays');

# ---------------------------------------------------------------- status()
my $st = $node->safe_psql('postgres',
	q{SELECT events_applied > 20, errors, state FROM paidb.status() WHERE worker = 'retention'});
like($st, qr/^t\|0\|idle; last run deleted \d+ jobs, \d+ events$/, "status() shows what retention did ($st)");

$node->stop;
done_testing();
