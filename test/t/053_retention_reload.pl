# Retention obeys a reload before its next batch (SPEC §10, issue 17):
# turning paidb.retention off, or raising it, in the middle of a cycle
# stops the deletions the old setting allowed.
#
# 400 expired jobs (completed, gone from the API server) and batches of
# one: a cycle needs at least 400 pauses of 20 ms, so a reload made as soon
# as the first deletions are seen always lands in the middle of it.  The
# worker logs the change when it takes it; the counts are compared from
# that line on, so no sleep decides the outcome.
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
	conf => "paidb.retention = 0\npaidb.retention_interval = '200ms'\npaidb.retention_batch_size = 1\n");

# $n jobs completed $age ago, gone from the API server, named $prefix<i>.
sub expired_jobs
{
	my ($prefix, $n, $age) = @_;
	# one transaction: the sync worker never sees them unsynced
	$node->safe_psql('postgres', qq{
BEGIN;
SELECT count(*) FROM generate_series(1, $n) i, paidb.put_framework_request(jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', jsonb_build_object('name', '$prefix' || i),
    'spec', '{"executionType": "Start"}'::jsonb), now() - interval '$age' - interval '1 hour');
UPDATE paidb.framework SET request_synced = true, api_server_deleted = true, sub_state = 'Completed',
       state = 'SUCCEEDED', completion_time = now() - interval '$age'
 WHERE name LIKE '$prefix%';
COMMIT;});
}

sub jobs_left
{
	my ($prefix) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM paidb.framework WHERE name LIKE '$prefix%'");
}

sub set_retention
{
	my ($value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.retention = '$value'; SELECT pg_reload_conf()");
}

# 1. Turned off mid-cycle: the deleting stops before the next batch.
expired_jobs('off', 400, '3 days');
is(jobs_left('off'), '400', '400 expired jobs');
my $offset = -s $node->logfile;
set_retention('1d');
ok(PaidbTest::wait_until(sub { jobs_left('off') < 400 }), 'retention starts deleting them');
set_retention('0');
ok(PaidbTest::wait_log($node, qr/paidb retention: settings changed during a cycle/, $offset),
	'the worker logs that the settings changed during its cycle');
like(PaidbTest::log_since($node, $offset), qr/paidb\.retention = 0 s/, 'and that retention is now off');
my $left = jobs_left('off');
cmp_ok($left, '>', 0, "jobs were left when retention was turned off ($left)");
# a few more cycles' time: nothing else goes
usleep(1_500_000);
is(jobs_left('off'), $left, 'no job is deleted after the worker took the reload');

# 2. Raised mid-cycle: only what the new setting allows goes on.
expired_jobs('young', 200, '3 days');
expired_jobs('old', 200, '30 days');
$offset = -s $node->logfile;
set_retention('1d');
ok(PaidbTest::wait_until(sub { jobs_left('old') < 200 }), 'retention deletes the oldest first');
set_retention('10d');
ok(PaidbTest::wait_log($node, qr/paidb\.retention = 864000 s/, $offset),
	'the worker takes the raised setting');
my $young = jobs_left('young');
ok(PaidbTest::wait_until(sub { jobs_left('old') == 0 }), 'the jobs older than the new setting still go');
is(jobs_left('young'), $young, 'no job younger than the new setting is deleted after the reload');
is($young, '200', 'none of them was deleted at all (the oldest go first)');
is(jobs_left('off'), $left, 'the jobs kept by part 1 are younger than the new setting too');

$node->stop;
done_testing();
