# The whole move of an OpenPAI cluster onto paidb (SPEC §9, docs/openpai.md),
# against kube-fake with its simulated frameworkcontroller:
#
#   * OpenPAI's state: jobs running in the API server (one in its second
#     attempt with retry history, one without a requestGeneration annotation
#     whose task will be retried), one completed but not yet deleted by
#     OpenPAI's poller; in OpenPAI's tables (test/t/data/openpai-tables.sql,
#     as its Sequelize models create them) those jobs as OpenPAI's watcher
#     stored them, plus a submitted job not yet created, finished and
#     deleted jobs with history and tags, and rows it cannot take (a
#     64-character name, an unparsable snapshot);
#   * the runbook's step: CREATE EXTENSION paidb CASCADE, paidb_openpai and the
#     import in one transaction, so the workers' first run comes after it;
#   * every job is listed as before (state, retries, times, tags, history),
#     before and after the workers' first run;
#   * the running jobs finish normally, the submitted one is created once,
#     the completed one is deleted as the poller would have; the fake saw no
#     other create, and no job was reset; its request log shows each job
#     that was in the API server deleted once, after it completed, none
#     deleted in the workers' first run, no DELETE of the jobs OpenPAI had
#     deleted, and no PUT or PATCH of any imported job;
#   * a second import changes nothing; bad input (a schema that is not
#     OpenPAI's, two imports at once) is refused and changes nothing.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use File::Basename qw(dirname);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

my $json = JSON::PP->new->canonical->allow_nonref;
my $fake = PaidbTest::start_fake(args => [ '--run-seconds', '4' ]);
my $node = PaidbTest::new_node('openpai_migration', $fake, no_extension => 1);

# ---------------------------------------------------------------- OpenPAI's cluster

my %job = map { $_ => job_name('alice', $_) } qw(running1 running2 retried completed waiting done failed);

# The fake's request log: the requests on one framework (by its path, or a
# deletecollection naming it in a selector) with method $method_re, as
# fake_request_times gives them ({start, end, method, target, code}).
sub fw_requests
{
	my ($name, $method_re) = @_;
	return grep {
		$_->{method} =~ $method_re
		  && $_->{target} =~ m{/frameworks(?:/\Q$name\E(?:[/?]|$)|\?.*\Q$name\E)}
	} @{ fake_request_times($fake) };
}

# "name: method@start" of each logged request on the named jobs, for a diagnostic.
sub show_requests
{
	my ($method_re, @names) = @_;
	return join(', ', map { my $n = $_; map { "$n: $_->{method}\@$_->{start}" } fw_requests($n, $method_re) } @names);
}

# Created in the API server as OpenPAI's write-merger did.
sub create_in_fake
{
	my ($req) = @_;
	my ($code) = $fake->api(POST => fw_path(), $req);
	die "create $req->{metadata}{name}: $code" unless $code == 201;
	return;
}

sub fake_state
{
	my ($name) = @_;
	my $fw = fake_framework($fake, $name) or return '';
	my $st = $fw->{status} // {};
	return ($st->{state} // '') . '/' . ($st->{attemptStatus}{id} // '');
}

my $retried_req = job_request($job{retried}, max_retry => 3, exit_codes => '1,1,0',
	annotations => { requestGeneration => '1' });
create_in_fake($retried_req);
ok(wait_until(sub { fake_state($job{retried}) eq 'AttemptRunning/1' }),
	'OpenPAI: a job is running its second attempt');
my $r1 = job_request($job{running1}, annotations => { requestGeneration => '1' });
create_in_fake($r1);
# an older OpenPAI's request: no requestGeneration annotation; its task will be retried
my $r2 = job_request($job{running2}, annotations => { 'kube-fake/task-retries' => '1' });
create_in_fake($r2);
create_in_fake(job_request($job{completed}, run_seconds => '0.1', annotations => { requestGeneration => '1' }));
ok(wait_until(sub {
	fake_state($job{running1}) eq 'AttemptRunning/0' && fake_state($job{running2}) eq 'AttemptRunning/0'
	  && fake_state($job{completed}) eq 'Completed/0' }),
	'OpenPAI: two more jobs run, one has completed');
$fake->admin(POST => '/_fake/controller/pause');
my %creates_before = map { $_ => fake_creates($fake, $job{$_}) } qw(running1 running2 retried completed);

# OpenPAI's database: its tables, and the jobs as its watcher stored them.
my $ddl = slurp_file(dirname(__FILE__) . '/data/openpai-tables.sql');
$node->safe_psql('postgres', $ddl);

sub openpai_row
{
	my ($name, $snapshot, %o) = @_;
	my $snap = sql_json($snapshot) . '::text';
	my $synced = $o{synced} // 'true';
	my $deleted = $o{deleted} // 'false';
	my $archived = $o{archived} // 'false';
	my $sub = $o{submitted} // '2026-03-01 08:00:00+00';
	$node->safe_psql('postgres', qq{
INSERT INTO opai.frameworks ("insertedAt", name, namespace, "jobName", "userName", "virtualCluster", "jobConfig",
    "executionType", "submissionTime", "completionTime", "launchTime", "creationTime", retries, "subState", state,
    snapshot, "requestSynced", "apiServerDeleted", archived, "configSecretDef", "dockerSecretDef",
    "notificationAtRunning", "notifiedAtRunning", "notifiedAtRetried", "updatedAt")
SELECT '$sub', '$name', 'default', s #>> '{metadata,annotations,jobName}', s #>> '{metadata,labels,userName}',
    s #>> '{metadata,labels,virtualCluster}', s #>> '{metadata,annotations,config}', s #>> '{spec,executionType}',
    '$sub', (s #>> '{status,completionTime}')::timestamptz,
    COALESCE(s #>> '{status,runTime}', s #>> '{status,completionTime}')::timestamptz,
    (s #>> '{status,startTime}')::timestamptz,
    (s #>> '{status,retryPolicyStatus,totalRetriedCount}')::int, s #>> '{status,state}',
    CASE WHEN s #>> '{status,state}' IN ('AttemptCreationPending', 'AttemptCreationRequested', 'AttemptPreparing')
              THEN 'WAITING'
         WHEN s #>> '{status,state}' = 'Completed' THEN
              CASE (s #>> '{status,attemptStatus,completionStatus,code}')::int WHEN 0 THEN 'SUCCEEDED'
                   WHEN -210 THEN 'STOPPED' WHEN -220 THEN 'STOPPED' ELSE 'FAILED' END
         WHEN s #>> '{status,state}' IS NULL THEN 'UNKNOWN' ELSE 'RUNNING' END,
    $snap, $synced, $deleted, $archived, CASE WHEN $deleted THEN '' END, CASE WHEN $deleted THEN '' END,
    NULL, NULL, NULL, '2026-03-01 09:00:00+00'
  FROM (SELECT ${snap}::jsonb AS s) x});
	return;
}

for my $k (qw(running1 running2 retried completed))
{
	openpai_row($job{$k}, fake_framework($fake, $job{$k}));
}
# the attempt before the current one, as fluentd recorded it
my $attempt0 = fake_framework($fake, $job{retried});
$attempt0->{status}{attemptStatus}{id} = 0;
$attempt0->{status}{state} = 'AttemptCompleted';
$attempt0->{status}{attemptStatus}{completionStatus} = { code => 1, phrase => 'ContainerUnrecognizedFailed' };
$node->safe_psql('postgres', qq{INSERT INTO opai.framework_history VALUES ('2026-03-01 08:30:00+00',
	md5('$job{retried}+0+retry'), '$job{retried}', 0, 'retry', } . sql_json($attempt0) . qq{::text, '2026-03-01 08:30:00+00')});

# Submitted to OpenPAI, not created yet: the pending status.
my $waiting = job_request($job{waiting}, run_seconds => '0.3', annotations => { requestGeneration => '1' });
$waiting->{status} = { state => 'AttemptCreationPending', attemptStatus => { completionStatus => undef, taskRoleStatuses => [] },
	retryPolicyStatus => { retryDelaySec => undef, totalRetriedCount => 0, accountableRetriedCount => 0 } };
openpai_row($job{waiting}, $waiting, synced => 'false');
# Finished long ago and deleted from the API server: succeeded after a retry (with history), failed.
for my $k (qw(done failed))
{
	my $fw = job_request($job{$k}, annotations => { requestGeneration => '1' });
	$fw->{metadata}{resourceVersion} = '900';
	$fw->{status} = { state => 'Completed', startTime => '2026-02-01T00:00:00Z', runTime => '2026-02-01T00:01:00Z',
		completionTime => '2026-02-01T01:00:00Z',
		retryPolicyStatus => { totalRetriedCount => ($k eq 'done' ? 1 : 0), accountableRetriedCount => 0 },
		attemptStatus => { id => ($k eq 'done' ? 1 : 0), completionStatus => { code => ($k eq 'done' ? 0 : 1) },
			taskRoleStatuses => [] } };
	openpai_row($job{$k}, $fw, deleted => 'true', archived => ($k eq 'failed' ? 'true' : 'false'),
		submitted => '2026-02-01 00:00:00+00');
}
$node->safe_psql('postgres', <<"SQL");
INSERT INTO opai.framework_history VALUES (NULL, md5('$job{done}+0+retry'), '$job{done}', 0, 'retry',
    '{"metadata": {"name": "$job{done}"}, "status": {"state": "AttemptCompleted", "attemptStatus": {"id": 0}}}',
    '2026-02-01 00:30:00+00');
INSERT INTO opai.tags VALUES (NULL, md5('alice~running1+important'), '$job{running1}', 'important', now()),
                             (NULL, md5('alice~done+paper'), '$job{done}', 'paper', now());
INSERT INTO opai.framework_events VALUES (NULL, 'ev-openpai-1', '$job{running1}', NULL, 'taskrole', NULL, 0,
    'Normal', 'Started', 'Started container', now(), now(), 1, 'kubelet', 'node-0', '{}', now());
-- rows paidb cannot take
INSERT INTO opai.frameworks (name, "submissionTime", snapshot, "requestSynced", "apiServerDeleted", "updatedAt")
VALUES (repeat('a', 64), '2026-01-01', '{"metadata": {"name": "' || repeat('a', 64) || '"}}', true, true, now()),
       ('unparsable', '2026-01-01', '{"metadata": {"name": "unpars', true, true, now());
SQL

# ---------------------------------------------------------------- bad input first

is($node->psql('postgres', q{SELECT * FROM openpai.import_database('opai')}), 3,
	'no paidb_openpai yet: the import does not exist');
$node->safe_psql('postgres', 'CREATE SCHEMA notopenpai; CREATE TABLE notopenpai.frameworks (name text)');

# ---------------------------------------------------------------- the move

# The same listing as OpenPAI's, field by field.
my $listing_diff = q{
SELECT string_agg(o.name || ' ' || c.col, ', ' ORDER BY o.name, c.col)
  FROM opai.frameworks o JOIN openpai.frameworks p USING (name),
  LATERAL (VALUES ('state', o.state IS DISTINCT FROM p.state),
                  ('subState', o."subState" IS DISTINCT FROM p."subState"),
                  ('retries', o.retries IS DISTINCT FROM p.retries),
                  ('jobName', o."jobName" IS DISTINCT FROM p."jobName"),
                  ('userName', o."userName" IS DISTINCT FROM p."userName"),
                  ('submissionTime', o."submissionTime" IS DISTINCT FROM p."submissionTime"),
                  ('launchTime', o."launchTime" IS DISTINCT FROM p."launchTime"),
                  ('completionTime', o."completionTime" IS DISTINCT FROM p."completionTime"),
                  ('requestSynced', o."requestSynced" IS DISTINCT FROM p."requestSynced"),
                  ('apiServerDeleted', o."apiServerDeleted" IS DISTINCT FROM p."apiServerDeleted"),
                  ('archived', o.archived IS DISTINCT FROM p.archived),
                  ('insertedAt', o."insertedAt" IS DISTINCT FROM p."insertedAt"),
                  ('status', o.snapshot::jsonb -> 'status' IS DISTINCT FROM p.snapshot::jsonb -> 'status')) c(col, differs)
 WHERE c.differs};

# The runbook's step, in one transaction: the workers start when it commits.
my $result = $node->safe_psql('postgres', qq{
BEGIN;
CREATE EXTENSION paidb CASCADE;
CREATE EXTENSION paidb_openpai;
SELECT relation || ' ' || imported || ' ' || skipped FROM openpai.import_database('opai');
SELECT 'differences: ' || coalesce(($listing_diff), 'none');
COMMIT;});
my @lines = split /\n/, $result;
is(pop @lines, 'differences: none', 'every job is listed as OpenPAI listed it');
is(join("\n", @lines), join("\n", 'frameworks 7 2', 'framework_history 2 0', 'task_history 0 0', 'pods 0 0',
		'framework_events 1 0', 'pod_events 0 0', 'tags 2 0'),
	'import: 7 jobs, their history, events and tags; the two bad rows skipped');
like(query($node, q{SELECT string_agg(reason, '; ' ORDER BY key) FROM openpai.import_rejects}),
	qr/^name is not a valid framework name \(at most 63 lower-case letters and digits, 64 characters here\); snapshot is not valid JSON: /,
	'the rejected rows are listed with the reason');

is(query($node, q{SELECT count(*) FROM openpai.frameworks}), '7', 'seven jobs listed');
is(query($node, qq{SELECT string_agg(t."frameworkName" || ':' || t.name, ',' ORDER BY t.name) FROM openpai.tags t}),
	"$job{running1}:important,$job{done}:paper", 'the tags are there');
is(query($node, qq{SELECT string_agg("frameworkName" || ':' || "attemptIndex" || ':' || (uid = md5("frameworkName" || '+' || "attemptIndex" || '+retry'))::text,
	',' ORDER BY "frameworkName", "attemptIndex") FROM openpai.framework_history}),
	join(',', sort("$job{retried}:0:true", "$job{done}:0:true")), 'the history is there, under its uids');

# The workers' first run: the jobs are still the same, nothing created or deleted.
ok(wait_for_workers($node), 'the workers run after the import');
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.watch_state WHERE watcher = 'frameworks' AND resource_version IS NOT NULL}),
	'the framework watcher has listed');
is(query($node, $listing_diff . " AND o.name <> '$job{waiting}' AND o.name <> '$job{completed}'"), '',
	'after the first run, the running jobs are still listed as before');
is(join(',', map { fake_creates($fake, $job{$_}) - $creates_before{$_} } qw(running1 running2 retried completed)),
	'0,0,0,0', 'no job that was in the API server was created again');
# The controller is paused: the running jobs cannot have finished yet.
is(show_requests(qr/^DELETE$/, map { $job{$_} } qw(running1 running2 retried)), '',
	'the fake saw no DELETE of a running imported job in the first run');

# Let the cluster go on.
$fake->admin(POST => '/_fake/controller/resume');
for my $k (qw(running1 running2 retried waiting))
{
	ok(poll($node, "SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$job{$k}'"),
		"$k finishes normally");
}
ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$job{completed}'"),
	'the completed job is deleted from the API server, as the poller would have');
is(col($node, $job{retried}, 'retries'), '2', 'the retried job kept counting its retries');
is(query($node, qq{SELECT string_agg(attempt_index || ':' || (uid = md5(framework_name || '+' || attempt_index || '+retry'))::text,
	',' ORDER BY attempt_index) FROM paidb.framework_history WHERE framework_name = '$job{retried}'}),
	'0:true,1:true', 'its history: the imported attempt 0 and the new attempt 1, each once');
is(query($node, qq{SELECT count(*) FROM paidb.task_history WHERE framework_name = '$job{running2}' AND task_attempt_index = 0}),
	'1', 'the task retried after the move is in task_history');
ok(poll($node, "SELECT bool_and(api_server_deleted) FROM paidb.framework"), 'every finished job is cleaned up');
is(join(',', map { fake_creates($fake, $job{$_}) - $creates_before{$_} } qw(running1 running2 retried completed)),
	'0,0,0,0', 'still no job that was in the API server was created again');
is(fake_creates($fake, $job{waiting}), 1, 'the job OpenPAI had not created yet was created once');
is(fake_creates($fake, $job{done}) + fake_creates($fake, $job{failed}), 0, 'deleted jobs were not created');
# From the fake's request log: each job that was in the API server is
# deleted once, after it completed (its completionTime has whole seconds);
# the jobs OpenPAI had already deleted get no DELETE; no imported job's
# request is replaced (PUT) or patched (PATCH), i.e. none was reset.
for my $k (qw(running1 running2 retried completed))
{
	my $done_at = col($node, $job{$k}, 'extract(epoch FROM completion_time)');
	my @del = fw_requests($job{$k}, qr/^DELETE$/);
	ok(@del == 1 && $done_at ne '' && $del[0]{start} >= $done_at,
		"$k: one DELETE, after it completed") or diag("completed at $done_at; " . show_requests(qr/^DELETE$/, $job{$k}));
}
is(show_requests(qr/^DELETE$/, $job{done}, $job{failed}), '', 'the jobs OpenPAI had deleted got no DELETE');
is(show_requests(qr/^(?:PUT|PATCH)$/, map { $job{$_} } qw(running1 running2 retried completed done failed)), '',
	'no imported job was replaced or patched in the API server (none reset)');
my $log = slurp_file($node->logfile);
unlike($log, qr/queued to be created again/, 'no job was reset');
is(query($node, qq{SELECT submission_time FROM paidb.framework WHERE name = '$job{running1}'}),
	'2026-03-01 08:00:00+00', "the submission time is OpenPAI's, not the API server's");
is(query($node, q{SELECT string_agg(framework_name || ':' || name, ',' ORDER BY name) FROM paidb.tag}),
	"$job{running1}:important,$job{done}:paper", 'the tags stayed');

# ---------------------------------------------------------------- a second import

my $tables_hash = q{SELECT md5(
	(SELECT coalesce(string_agg(f::text, ',' ORDER BY name), '') FROM paidb.framework f) ||
	(SELECT coalesce(string_agg(h::text, ',' ORDER BY uid), '') FROM paidb.framework_history h) ||
	(SELECT coalesce(string_agg(t::text, ',' ORDER BY uid), '') FROM paidb.task_history t) ||
	(SELECT coalesce(string_agg(t::text, ',' ORDER BY uid), '') FROM paidb.tag t) ||
	(SELECT coalesce(string_agg(e::text, ',' ORDER BY uid), '') FROM paidb.framework_event e) ||
	(SELECT coalesce(string_agg(r::text, ',' ORDER BY relation, key), '') FROM openpai.import_rejects r))};
# one snapshot for both hashes: the workers' own changes meanwhile are not seen
my $again = $node->safe_psql('postgres', qq{
BEGIN ISOLATION LEVEL REPEATABLE READ;
$tables_hash;
SELECT string_agg(relation || ' ' || imported, ',') FROM openpai.import_database('opai');
$tables_hash;
COMMIT;});
my ($h1, $counts, $h2) = split /\n/, $again;
is($counts, 'frameworks 0,framework_history 0,task_history 0,pods 0,framework_events 0,pod_events 0,tags 0',
	'a second import imports nothing');
is($h2, $h1, 'and changes nothing');

# ---------------------------------------------------------------- bad input

my ($ret, $out, $err) = (0, '', '');
my $before = query($node, $tables_hash);
$ret = $node->psql('postgres', q{SELECT * FROM openpai.import_database('notopenpai')}, stderr => \$err);
isnt($ret, 0, 'a schema that is not OpenPAI\'s is refused');
like($err, qr/schema "notopenpai" is not an OpenPAI database: it has no table/, '... with a clear error');
my $bg = $node->background_psql('postgres', on_error_stop => 0);
$bg->query_safe(q{SET client_min_messages = warning; BEGIN; SELECT count(*) FROM openpai.import_database('opai')});
$ret = $node->psql('postgres', q{SELECT * FROM openpai.import_database('opai')}, stderr => \$err);
isnt($ret, 0, 'a second import while one runs is refused');
like($err, qr/another openpai.import_database is running/, '... with a clear error');
$bg->query_safe('ROLLBACK');
$bg->quit;
is(query($node, $tables_hash), $before, 'and nothing changed');

done_testing();
