# The framework watcher and the sync worker under load take rows in one
# order (issue 8: they once deadlocked, "applying listed frameworks" against
# "recording outcomes"): hundreds of jobs complete and are deleted (the sync
# worker records outcomes in batches) while orphans are queued and deleted
# and the watcher is made to LIST again and again (a compaction and a cut
# every half second, with small pages), while every delete fails for 25 s
# so that each round of the sync worker records a retry row after row.  No deadlock is detected, no worker
# exits, and every job ends deleted from the API server.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake(args => [ '--history-size', '200000' ]);
my $node = PaidbTest::start_node('lock_order', $fake, retain_mode => 'off',
	resync_interval => '1s', restart_after_crash => 'off',
	conf => "paidb.list_page_size = 25\nlog_lock_waits = on\ndeadlock_timeout = '100ms'\n");
my $FW = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks';

# Orphans: frameworks the database does not know, created behind its back.
for my $i (1 .. 200)
{
	my $fw = bare_framework(sprintf('orph%03d', $i), annotations => { 'kube-fake/run-seconds' => 'inf' });
	$fake->api(POST => $FW, $fw);
}
# Every delete fails for a while: the sync worker records a retry for every
# job and orphan, row after row, in each round.
$fake->fault(verb => 'delete', resource => 'frameworks', status => 500, count => -1);
# Jobs that complete at once, so the sync worker deletes them.
$node->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 400) i,
  LATERAL paidb.put_framework_request(jsonb_build_object(
    'apiVersion', 'frameworkcontroller.microsoft.com/v1', 'kind', 'Framework',
    'metadata', jsonb_build_object('name', 'lojob' || i,
        'annotations', jsonb_build_object('kube-fake/run-seconds', '0.1')),
    'spec', jsonb_build_object('executionType', 'Start',
        'taskRoles', jsonb_build_array(jsonb_build_object('name', 'worker', 'taskNumber', 1,
            'task', jsonb_build_object('pod', jsonb_build_object('spec', jsonb_build_object(
                'containers', jsonb_build_array(jsonb_build_object('name', 'w', 'image', 'busybox'))))))))))});

# LIST again and again while that goes on.
my $deadline = time() + 25;
my $t0 = time();
my $n = 0;
while (time() < $deadline)
{
	$n++;
	$fake->api(POST => '/api/v1/namespaces/default/secrets', { metadata => { name => "lobump$n" }, data => {} });
	$fake->compact;
	$fake->cut_watches('reset', 'frameworks');
	usleep(500_000);
}
$fake->clear_faults;
my $lists = fake_counter($fake, 'list frameworks');
cmp_ok($lists, '>=', 10, "the framework watcher listed $lists times during the load");
ok(poll($node, q{SELECT count(*) = 400 FROM paidb.framework WHERE name LIKE 'lojob%' AND api_server_deleted}, 't', 120),
	'every job completed and was deleted from the API server');
my $log = log_since($node);
unlike($log, qr/deadlock detected/, 'no deadlock was detected');
unlike($log, qr/background worker "paidb [a-z ]+" \(PID \d+\) exited/, 'no paidb worker exited');
my @waits = ($log =~ /(process \d+ still waiting for \S+ on [^\n]*)/g);
note('lock waits longer than 100 ms: ' . scalar(@waits));

$node->stop;
$fake->stop;
done_testing();
