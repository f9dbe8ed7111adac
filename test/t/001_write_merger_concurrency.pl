# Concurrency of the write merger (issue: every read-modify-write of a
# framework happens under its row lock).  Many pgbench clients patch one
# framework while others apply watch events to it and others submit the same
# new job; afterwards no update may be lost, the generation must equal the
# number of effective changes, and nobody may have failed with a unique
# violation or a deadlock.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('concurrency');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 40\n");
$node->start;
$node->safe_psql('postgres', q{
    CREATE EXTENSION paidb CASCADE;
    CREATE SEQUENCE patch_seq;
    CREATE SEQUENCE rv_seq START 1000;
    SELECT * FROM paidb.put_framework_request(
      '{"metadata": {"name": "cjob", "labels": {"userName": "u"}}, "spec": {"executionType": "Start"}}');
});

my $patch = <<'EOS';
SELECT * FROM paidb.patch_framework_request('cjob',
  jsonb_build_object('metadata', jsonb_build_object('labels',
    jsonb_build_object('k' || nextval('patch_seq'), 'v'))));
EOS
my $event = <<'EOS';
SELECT paidb.apply_watch_event('MODIFIED', jsonb_build_object(
  'metadata', jsonb_build_object('name', 'cjob', 'resourceVersion', v::text,
                                 'annotations', jsonb_build_object('requestGeneration', '1')),
  'status', jsonb_build_object('state', 'AttemptRunning',
     'attemptStatus', jsonb_build_object('id', v / 50, 'completionStatus', NULL),
     'retryPolicyStatus', jsonb_build_object('totalRetriedCount', v / 50, 'accountableRetriedCount', 0))))
FROM nextval('rv_seq') v;
EOS
my $submit = <<'EOS';
\set n random(1, 20)
SELECT * FROM paidb.put_framework_request(jsonb_build_object('metadata',
  jsonb_build_object('name', 'same' || :n), 'spec', jsonb_build_object('executionType', 'Start')));
EOS

my %scripts = ('patch' => $patch, 'event' => $event, 'submit' => $submit);
my %files;
for my $name (keys %scripts)
{
    my $file = $node->basedir . "/$name.sql";
    open my $fh, '>', $file or die $!;
    print $fh $scripts{$name};
    close $fh;
    $files{$name} = $file;
}

# 12 clients, 4 seconds: patches, watch events and duplicate submissions mixed.
my ($stdout, $stderr);
my $ok = IPC::Run::run(
    [ 'pgbench', '-n', '-c', '12', '-j', '4', '-T', '4',
      '-f', "$files{patch}\@5", '-f', "$files{event}\@3", '-f', "$files{submit}\@2",
      '-h', $node->host, '-p', $node->port, 'postgres' ],
    '>', \$stdout, '2>', \$stderr);
ok($ok, 'pgbench finished without a failed client') or diag($stderr);
unlike($stderr, qr/deadlock|duplicate key|unique/i, 'no deadlock and no unique violation');
like($stdout, qr/number of failed transactions: 0 /, 'no failed transaction');

my $patches = $node->safe_psql('postgres', 'SELECT last_value FROM patch_seq');
cmp_ok($patches, '>', 50, "enough concurrent patches ran ($patches)");

# every patch added a distinct label: all of them must be there
my $labels = $node->safe_psql('postgres', q{
    SELECT count(*) FROM paidb.framework f, jsonb_object_keys(paidb.snapshot(f)->'metadata'->'labels') k
     WHERE name = 'cjob' AND k LIKE 'k%'});
is($labels, $patches, 'no patch was lost');
my $generation = $node->safe_psql('postgres',
    q{SELECT request_generation FROM paidb.framework WHERE name = 'cjob'});
is($generation, $patches + 1, 'generation = 1 + number of effective changes');
is($node->safe_psql('postgres', q{SELECT paidb.snapshot(f)->'metadata'->'annotations'->>'requestGeneration' FROM paidb.framework f WHERE name = 'cjob'}),
   $generation, 'the stored request carries its generation');

# the watch events raced with the patches; the stored status is from the newest event
my ($maxrv, $rv, $attempt) = split /\|/, $node->safe_psql('postgres', q{
    SELECT (SELECT last_value FROM rv_seq), resource_version,
           (paidb.snapshot(f)->'status'->'attemptStatus'->>'id')::int FROM paidb.framework f WHERE name = 'cjob'});
cmp_ok($rv, '<=', $maxrv, 'resource version is one that was sent');
is($attempt, int($rv / 50), 'the stored status belongs to the stored resource version');
my ($hist, $dups, $beyond) = split /\|/, $node->safe_psql('postgres', qq{
    SELECT count(*), count(*) - count(DISTINCT attempt_index), count(*) FILTER (WHERE attempt_index >= $attempt)
      FROM paidb.framework_history WHERE framework_name = 'cjob'});
is($dups, 0, 'each retried attempt appears once in the history');
is($beyond, 0, 'no history for the current attempt or later');

# duplicate submissions: each name exists once, at generation 1
my ($names, $gens) = split /\|/, $node->safe_psql('postgres',
    q{SELECT count(*), max(request_generation) FROM paidb.framework WHERE name LIKE 'same%'});
cmp_ok($names, '>=', 1, 'duplicate submissions created the jobs');
is($gens, 1, 'a duplicated submission never changes a job');

$node->stop;
done_testing();
