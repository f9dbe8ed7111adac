# Retention turned off or raised by a reload in the middle of a cycle
# (SPEC §10 "Decisions": it takes effect before the worker's next batch;
# issue 17 item 4).
#
#   * 400 expired jobs (completed 200 days ago, gone from the API server),
#     batch size 1, each delete slowed by a trigger so that a cycle lasts
#     well over a minute;
#   * paidb.retention = 90d: the worker deletes; turned off (0) by a reload
#     mid-cycle: the worker logs that it stopped, and from that line on not
#     one more job is deleted (the line is written before the next batch
#     would start, so it is the synchronisation point, not a sleep);
#   * on again, then raised to 400d mid-cycle: the same, with its own line.
#
# event_retention keeps its default (30d): the worker went on when only
# paidb.retention was turned off, and stopped only when both were.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake();
my $node = PaidbTest::start_node('retention_reload', $fake, retain_mode => 'off',
	conf => "paidb.retention_interval = '200ms'\npaidb.retention_batch_size = 1\n");

# 400 completed jobs that the API server has deleted, completed 200 days ago
# (one transaction: the sync worker never sees them undeleted).
$node->safe_psql('postgres', q{
BEGIN;
CREATE TEMP TABLE fw AS
  SELECT i, jsonb_build_object(
    'metadata', jsonb_build_object('name', 'old' || i, 'resourceVersion', '10',
                                   'creationTimestamp', '2020-01-01T00:00:00Z'),
    'status', jsonb_build_object('state', 'Completed',
       'completionTime', to_char((now() - interval '200 days') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
       'attemptStatus', jsonb_build_object('id', 0, 'completionStatus', jsonb_build_object('code', 0)))) AS o
    FROM generate_series(1, 400) i;
SELECT paidb.import_frameworks(jsonb_agg(o)) FROM fw;
SELECT count(*) FROM fw, paidb.apply_watch_event('DELETED', jsonb_set(o, '{metadata,resourceVersion}', '"11"'));
COMMIT;
-- each delete takes 50 ms, so a batch (and the pause after it) is slow
CREATE FUNCTION slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.05); RETURN OLD; END $$;
CREATE TRIGGER slow_delete BEFORE DELETE ON paidb.framework FOR EACH ROW EXECUTE FUNCTION slow_delete();
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework
    WHERE api_server_deleted AND sub_state = 'Completed' AND completion_time < now() - interval '199 days'}),
	'400', '400 jobs completed 200 days ago and gone from the API server');

my $jobs = q{SELECT count(*) FROM paidb.framework};

# Set paidb.retention by a reload; returns the log offset before it.
sub set_retention
{
	my ($value) = @_;
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.retention = '$value'; SELECT pg_reload_conf();");
	return $offset;
}

# The number of jobs stays $n while the worker would have run several
# batches (each at least 50 ms plus a pause of at least 150 ms).
sub stays
{
	my ($n, $what) = @_;
	for (1 .. 10)
	{
		usleep(200_000);
		my $now = $node->safe_psql('postgres', $jobs);
		return is($now, $n, $what) if $now ne $n;
	}
	return is($node->safe_psql('postgres', $jobs), $n, $what);
}

# ---------------------------------------------------------------- turned off
set_retention('90d');
ok(poll($node, "SELECT ($jobs) <= 395"), 'paidb.retention = 90d: the worker deletes expired jobs');
my $offset = set_retention('0');
ok(wait_log($node, qr/LOG:\s+paidb retention stopped deleting jobs: paidb\.retention was turned off by a reload/, $offset),
	'turned off mid-cycle: the worker logs that it stopped');
my $left = $node->safe_psql('postgres', $jobs);
cmp_ok($left, '>', 300, "it stopped well before the end of the cycle ($left jobs left)");
stays($left, 'no job is deleted after that line');
ok(poll($node, q{SELECT state LIKE 'idle%' FROM paidb.status() WHERE worker = 'retention'}),
	'the worker is idle');
stays($left, 'nor in the next cycles');

# ---------------------------------------------------------------- raised
set_retention('90d');
ok(poll($node, "SELECT ($jobs) <= $left - 5"), 'on again: the worker deletes again');
$offset = set_retention('400d');
ok(wait_log($node, qr/LOG:\s+paidb retention stopped deleting jobs completed less than 34560000 seconds ago: paidb\.retention was raised from 7776000 seconds by a reload/, $offset),
	'raised mid-cycle: the worker logs that it stopped');
$left = $node->safe_psql('postgres', $jobs);
cmp_ok($left, '>', 0, "jobs are left ($left)");
stays($left, 'no job is deleted after that line');
ok(poll($node, q{SELECT state LIKE 'idle%' FROM paidb.status() WHERE worker = 'retention'}),
	'the worker is idle');
stays($left, 'nor in the next cycles');

$node->stop;
done_testing();
