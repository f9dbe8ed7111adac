# Task attempt history written by the framework watcher (SPEC §9), end to
# end: kube-fake's controller retries every task of a job twice
# (kube-fake/task-retries); each task's attempts 0 and 1 appear once in
# paidb.task_history, under OpenPAI's uid, as the rest-server's task
# attempt query reads them through openpai.task_history.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake();
my $node = PaidbTest::start_node('openpai_task_history', $fake);
$node->safe_psql('postgres', 'CREATE EXTENSION paidb_openpai');

my $name = job_name('alice', 'taskretries');
submit($node, job_request($name, task_roles => [ [ 'ps', 1 ], [ 'worker', 2 ] ],
	annotations => { 'kube-fake/task-retries' => '2' }));
ok(poll($node, "SELECT state = 'SUCCEEDED' FROM paidb.framework WHERE name = '$name'"),
	'the job whose tasks were retried succeeds');

# Each task instance: attempts 0 and 1 recorded (attempt 2 is the last one,
# in the framework's snapshot), once each.
my $rows = query($node, qq{SELECT taskrole_name || ':' || task_index || ':' || task_attempt_index
	FROM paidb.task_history WHERE framework_name = '$name' ORDER BY 1});
is($rows, join("\n", map { my $t = $_; map { "$t:$_" } (0, 1) } ('ps:0', 'worker:0', 'worker:1')),
	'attempts 0 and 1 of each of the three tasks are in task_history, once');
is(query($node, qq{SELECT count(*) FROM paidb.task_history
	WHERE uid <> md5(task_uid || '+' || task_attempt_index || '+' || history_type)}), '0',
	'every uid is md5(taskUid + attempt + type), as fluentd wrote it');
is(query($node, qq{SELECT count(DISTINCT pod_uid) FROM paidb.task_history WHERE framework_name = '$name'}), '6',
	'each recorded attempt has its own pod');

# The task uids are the instanceUIDs in the job's snapshot; the recorded
# attempts are the completed ones (code 200 from kube-fake).
is(query($node, qq{SELECT count(*) FROM paidb.task_history h
	WHERE h.framework_name = '$name' AND h.task_uid IN (
	  SELECT t->>'instanceUID' FROM paidb.framework f,
	    jsonb_array_elements(paidb.snapshot(f) #> '{status,attemptStatus,taskRoleStatuses}') r,
	    jsonb_array_elements(r->'taskStatuses') t WHERE f.name = '$name')}), '6',
	'task_uid is the task status instanceUID of the job');
is(query($node, qq{SELECT string_agg(DISTINCT (snapshot #>> '{status,attemptStatus,completionStatus,code}'), ',')
	FROM paidb.task_history WHERE framework_name = '$name'}), '200',
	'the recorded attempts carry their completion status');

# The rest-server's query (models/v2/task.js) through the view.
my $uid = query($node, qq{SELECT paidb.snapshot(f) #>> '{status,attemptStatus,taskRoleStatuses,1,taskStatuses,1,instanceUID}'
	FROM paidb.framework f WHERE name = '$name'});
is(query($node, qq{SET search_path = openpai;
	SELECT string_agg((("snapshot")::json #>> '{status,attemptStatus,id}'), ',' ORDER BY "taskAttemptIndex" DESC)
	  FROM "task_history" AS "task_history"
	 WHERE ("task_history"."taskUid" = '$uid' AND "task_history"."taskAttemptIndex" < 2)}), '1,0',
	'the task attempt query finds attempts 1 and 0 of worker 1');

# Applying the stored snapshot again (as a re-list does) records nothing new.
my $before = query($node, 'SELECT count(*) FROM paidb.task_history');
query($node, qq{SELECT paidb.apply_watch_event('MODIFIED', paidb.snapshot(f)) FROM paidb.framework f WHERE name = '$name'});
is(query($node, 'SELECT count(*) FROM paidb.task_history'), $before, 'the same events again record nothing new');

done_testing();
