# End-to-end "Test Jobs" of OpenPAI's database-controller test plan (the
# seed's "End-to-end Test / Test Jobs"), against kube-fake with its simulated
# frameworkcontroller:
#
#   * a job with simple output (exit 0): WAITING -> RUNNING -> SUCCEEDED, then
#     deleted from the API server, api_server_deleted, add-ons cleared;
#     its pods' events land in paidb.framework_event;
#   * stop a job that would run forever: STOPPING -> STOPPED, exit code -210;
#   * exit 1 with maxRetryCount 10: FAILED after 11 attempts, the retry
#     history (attempts 0..9, once each, with their completion status);
#   * a job with a docker secret, one with a priority class, one with a
#     config (and user extension) secret: the add-ons exist in the API
#     server as given, secrets owned by the framework, the job succeeds;
#   * a bulk job of 1,000 tasks (the fake compresses the task role statuses;
#     paidb stores them decompressed) and the same with 50 retries (50
#     history rows of 1,000 task statuses each), both SUCCEEDED.
#
# Jobs whose add-ons or compressed statuses are checked in the API server
# are held in AttemptRunning by kube-fake's `kube-fake/hold-state`
# annotation and released through paidb itself (patch_framework_request
# changes the annotation: a new generation that the sync worker patches
# onto the framework), so nothing depends on timing.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use KubeFake;
use PaidbTest;

my $t0 = time();
my $fake = PaidbTest::start_fake();
my $node = PaidbTest::start_node('e2e_jobs', $fake, state_log => 1);

my $SNAP_TASKS = q{paidb.snapshot(f)->'status'->'attemptStatus'->'taskRoleStatuses'->0->'taskStatuses'};

# An Opaque (or typed) Secret definition as rest-server would send it.
sub secret_def
{
	my ($name, $type, %data) = @_;
	return {
		apiVersion => 'v1',
		kind => 'Secret',
		metadata => { name => $name, namespace => 'default' },
		type => $type,
		data => { map { $_ => encode_base64($data{$_}, '') } keys %data },
	};
}

# Whether an object in the fake has an ownerReference to framework $fw (an object).
sub owned_by
{
	my ($obj, $fw) = @_;
	return 0 unless $obj && $fw;
	return scalar grep {
		($_->{kind} // '') eq 'Framework'
		  && ($_->{name} // '') eq $fw->{metadata}{name}
		  && ($_->{uid} // '') eq $fw->{metadata}{uid}
	} @{ $obj->{metadata}{ownerReferences} // [] };
}

# Release a job held by kube-fake/hold-state, through paidb: a new request
# generation that the sync worker merge-patches onto the framework.
sub release
{
	my ($name) = @_;
	return query($node, qq{SELECT request_generation || ' ' || changed FROM paidb.patch_framework_request('$name',
		'{"metadata": {"annotations": {"kube-fake/hold-state": "released"}}}')});
}

# Wait until a completed job has been deleted from the API server and
# marked so, with its add-on definitions cleared.
sub deleted_ok
{
	my ($name, $what) = @_;
	ok(poll($node, "SELECT api_server_deleted FROM paidb.framework WHERE name = '$name'"),
		"$what: api_server_deleted becomes true");
	ok(!defined fake_framework($fake, $name), "$what: the framework is gone from the API server");
	is(col($node, $name, 'num_nonnulls(config_secret_def, user_extension_secret_def, priority_class_def, '
		  . 'docker_secret_def, token_secret_def)'),
		'0', "$what: the add-on definitions are cleared");
}

# ============================================================ simple, stop, retries
# Three jobs at once: they run side by side in the fake.
my $simple = job_name('alice', 'simple-output');
my $stopme = job_name('alice', 'sleep-1h');
my $retry = job_name('bob', 'exit-1-retry-10');
my $token_secret = "$simple-token";

my $r = submit($node,
	job_request($simple, job => 'simple-output', exit_codes => '0', run_seconds => '1'),
	add_ons => { tokenSecretDef => secret_def($token_secret, 'Opaque', token => 's3cr3t') });
is("$r->{name} $r->{request_generation} $r->{created} $r->{changed}", "$simple 1 t t",
	'simple job: submitted as a new job, generation 1');
submit($node, job_request($stopme, job => 'sleep-1h', run_seconds => 'inf'));
submit($node, job_request($retry, user => 'bob', job => 'exit-1-retry-10', exit_codes => '1',
	max_retry => 10, run_seconds => '0.1', step_seconds => '0.02'));

# ---- A job with simple output
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$simple'", 'SUCCEEDED'),
	'simple job: SUCCEEDED');
is(state_path($node, $simple), 'WAITING RUNNING SUCCEEDED', 'simple job: went WAITING -> RUNNING -> SUCCEEDED');
is(col($node, $simple, q{concat_ws('|', sub_state, app_exit_code, request_synced, retries, total_task_number,
		user_name, job_name, virtual_cluster, completion_time IS NOT NULL, launch_time IS NOT NULL,
		paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'phrase')}),
	'Completed|0|t|0|1|alice|simple-output|default|t|t|Succeeded',
	'simple job: exit code 0, synced, columns derived from the snapshot');
deleted_ok($simple, 'simple job');
ok(wait_until(sub { !defined fake_object($fake, "/api/v1/namespaces/default/secrets/$token_secret") }),
	'simple job: its token secret went with the framework (owner reference)');
is(fake_creates($fake, $simple), 1, 'simple job: created once in the API server');

# ---- Pod events of the job land in paidb.framework_event
ok(poll($node, qq{SELECT string_agg(DISTINCT reason, ',' ORDER BY reason) FROM paidb.framework_event
                  WHERE framework_name = '$simple'}, 'Scheduled,Started'),
	'simple job: the Scheduled and Started events of its pod are recorded');
is(query($node, qq{SELECT string_agg(DISTINCT concat_ws('|', taskrole_name, task_index, type, pod_uid IS NOT NULL), ',')
                   FROM paidb.framework_event WHERE framework_name = '$simple'}),
	'taskrole|0|Normal|t', 'simple job: the events name the task role, the index and the pod');

# ---- Stop a job
ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$stopme'"),
	'long job: RUNNING');
is(query($node, "SELECT request_generation || ' ' || changed FROM paidb.stop_framework('$stopme')"),
	'2 true', 'long job: stop_framework makes generation 2');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$stopme'", 'STOPPED'), 'long job: STOPPED');
is(state_path($node, $stopme), 'WAITING RUNNING STOPPING STOPPED', 'long job: went through STOPPING');
is(col($node, $stopme, q{concat_ws('|', app_exit_code, execution_type, request_generation, request_synced,
		paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'phrase')}),
	'-210|Stop|2|t|StopFrameworkRequested', 'long job: exit code -210, the stop is synced');
deleted_ok($stopme, 'long job');

# ---- Job with retries: exit 1, maxRetryCount 10
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$retry'", 'FAILED'), 'retry job: FAILED');
is(col($node, $retry, q{concat_ws('|', app_exit_code, retries, user_retries, platform_retries,
		paidb.snapshot(f)->'status'->'attemptStatus'->>'id')}),
	'1|10|10|0|10', 'retry job: exit code 1 after 10 retries (11 attempts)');
# "The job retry history can be viewed": one row per retried attempt, ordered.
my $history = query($node, qq{
	SELECT attempt_index, uid, history_type,
	       (paidb.snapshot(f)->'status'->'attemptStatus'->>'id'),
	       paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'code',
	       paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'phrase'
	  FROM paidb.framework_history f WHERE framework_name = '$retry' ORDER BY attempt_index, uid});
note("retry history of $retry:\n$history");
my $expected = join("\n", map { join('|', $_, md5_hex("$retry+$_+retry"), 'retry', $_, 1, 'ContainerUnrecognizedFailed') } 0 .. 9);
is($history, $expected,
	'retry job: the history has attempts 0..9 exactly once each, OpenPAI uids, each with its completion status');
deleted_ok($retry, 'retry job');
ok(poll($node, "SELECT count(*) FROM paidb.framework_history WHERE framework_name = '$retry'", '10'),
	'retry job: the history stays after the framework is deleted');

# ============================================================ add-ons
my $docker = job_name('carol', 'docker-secret');
my $prio = job_name('carol', 'priority-class');
my $conf = job_name('carol', 'config-secret');
my %addon_job = ($docker => 'docker secret job', $prio => 'priority class job', $conf => 'config secret job');

my $regcred = "$docker-regcred";
my $dockercfg = '{"auths":{"registry.example.com":{"username":"carol","password":"pw","auth":"Y2Fyb2w6cHc="}}}';
my $docker_def = secret_def($regcred, 'kubernetes.io/dockerconfigjson', '.dockerconfigjson' => $dockercfg);
submit($node, job_request($docker, user => 'carol', job => 'docker-secret', hold_state => 'AttemptRunning',
		pod_spec_extra => { imagePullSecrets => [ { name => $regcred } ] }),
	add_ons => { dockerSecretDef => $docker_def });

my $pc_name = "$prio-priority";
my $pc_def = {
	apiVersion => 'scheduling.k8s.io/v1',
	kind => 'PriorityClass',
	metadata => { name => $pc_name },
	value => 1000,
	globalDefault => JSON::PP::false,
	preemptionPolicy => 'PreemptLowerPriority',
	description => 'priority class of an OpenPAI job',
};
my $prio_config = "protocolVersion: 2\nname: priority-class\ntype: job\n"
  . "extras:\n  hivedScheduler:\n    jobPriorityClass: prod\n";
submit($node, job_request($prio, user => 'carol', job => 'priority-class', hold_state => 'AttemptRunning',
		config => $prio_config, pod_spec_extra => { priorityClassName => $pc_name }),
	add_ons => { priorityClassDef => $pc_def });

my $cfg_secret = "$conf-configcred";
my $ext_secret = "$conf-userextcred";
my $cfg_def = secret_def($cfg_secret, 'Opaque',
	'config.yaml' => "db:\n  password: hunter2\n", 'token' => 'abc123');
my $ext_def = secret_def($ext_secret, 'Opaque', 'ssh-key' => "ssh-rsa AAAAB3Nza carol\n");
submit($node, job_request($conf, user => 'carol', job => 'config-secret', hold_state => 'AttemptRunning'),
	add_ons => { configSecretDef => $cfg_def, userExtensionSecretDef => $ext_def });

is(col($node, $prio, 'job_priority'), 'prod',
	'priority class job: job_priority comes from extras.hivedScheduler.jobPriorityClass');

for my $n ($docker, $prio, $conf)
{
	ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$n'"),
		"$addon_job{$n}: RUNNING (held)");
}

# ---- Job with docker secret
my $fw = fake_framework($fake, $docker);
my $sec;
ok(wait_until(sub { $sec = fake_object($fake, "/api/v1/namespaces/default/secrets/$regcred"); owned_by($sec, $fw) }),
	'docker secret job: the docker secret exists and is owned by the framework');
is_deeply([ $sec->{type}, $sec->{data} ], [ $docker_def->{type}, $docker_def->{data} ],
	'docker secret job: the secret holds the docker auth as given');

# ---- Job with priority class
my $pc = fake_object($fake, "/apis/scheduling.k8s.io/v1/priorityclasses/$pc_name");
ok($pc, 'priority class job: the PriorityClass exists in the API server');
is_deeply([ map { $pc->{$_} } qw(value preemptionPolicy description) ],
	[ 1000, 'PreemptLowerPriority', 'priority class of an OpenPAI job' ],
	'priority class job: the PriorityClass is as given');
is(fake_framework($fake, $prio)->{spec}{taskRoles}[0]{task}{pod}{spec}{priorityClassName}, $pc_name,
	'priority class job: the pods ask for it');

# ---- Job with secret (config secret and user extension secret)
$fw = fake_framework($fake, $conf);
for my $pair ([ $cfg_secret, $cfg_def ], [ $ext_secret, $ext_def ])
{
	my ($sname, $def) = @$pair;
	ok(wait_until(sub { $sec = fake_object($fake, "/api/v1/namespaces/default/secrets/$sname"); owned_by($sec, $fw) }),
		"config secret job: secret $sname exists and is owned by the framework");
	is_deeply($sec->{data}, $def->{data}, "config secret job: secret $sname holds the content given");
}

# ---- release the three; they succeed and are cleaned up
for my $n ($docker, $prio, $conf)
{
	is(release($n), '2 true', "$addon_job{$n}: released by a new request generation");
}
for my $n ($docker, $prio, $conf)
{
	ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$n'", 'SUCCEEDED'), "$addon_job{$n}: SUCCEEDED");
	is(col($node, $n, 'request_generation || request_synced::text'), '2true', "$addon_job{$n}: generation 2 is synced");
	deleted_ok($n, $addon_job{$n});
}
for my $s ($regcred, $cfg_secret, $ext_secret)
{
	ok(wait_until(sub { !defined fake_object($fake, "/api/v1/namespaces/default/secrets/$s") }),
		"secret $s was deleted with its framework");
}
ok(wait_until(sub { !defined fake_object($fake, "/apis/scheduling.k8s.io/v1/priorityclasses/$pc_name") }),
	'the priority class was deleted after its job');
is(fake_creates($fake, $_, 'secrets'), 1, "secret $_ was created once") for ($regcred, $cfg_secret, $ext_secret);
is(fake_creates($fake, $pc_name, 'priorityclasses'), 1, 'the priority class was created once');

# ============================================================ bulk job
my $bulk = job_name('dave', 'bulk-1000');
submit($node, job_request($bulk, user => 'dave', job => 'bulk-1000', hold_state => 'AttemptRunning',
	task_roles => [ [ 'worker', 1000 ] ]));
is(col($node, $bulk, 'total_task_number'), '1000', 'bulk job: 1000 tasks');
ok(poll($node, qq{SELECT state = 'RUNNING' AND request_synced
                         AND jsonb_array_length($SNAP_TASKS) = 1000
                         AND (SELECT count(*) FROM jsonb_array_elements($SNAP_TASKS) t
                               WHERE t->>'state' = 'AttemptRunning') = 1000
                    FROM paidb.framework f WHERE name = '$bulk'}),
	'bulk job: RUNNING with 1000 running task statuses in the snapshot');
my $att = fake_framework($fake, $bulk)->{status}{attemptStatus};
ok(!defined $att->{taskRoleStatuses} && length($att->{taskRoleStatusesCompressed} // '') > 0,
	'bulk job: the API server holds the task role statuses compressed');
is(col($node, $bulk, q{coalesce(paidb.snapshot(f)->'status'->'attemptStatus'->>'taskRoleStatusesCompressed', '<none>')}), '<none>',
	'bulk job: the snapshot holds them decompressed only');
is(release($bulk), '2 true', 'bulk job: released');
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$bulk'", 'SUCCEEDED'), 'bulk job: SUCCEEDED');
is(col($node, $bulk, qq{(SELECT count(*) FROM jsonb_array_elements($SNAP_TASKS) t
                   WHERE t->>'state' = 'Completed' AND t->'attemptStatus'->'completionStatus'->>'code' = '0')}),
	'1000', 'bulk job: 1000 completed task statuses with exit code 0');
ok(poll($node, qq{SELECT count(DISTINCT task_index) FROM paidb.framework_event WHERE framework_name = '$bulk'}, '10'),
	'bulk job: the pod events of its first 10 tasks are recorded');
deleted_ok($bulk, 'bulk job');

# ============================================================ bulk job with retries
# 50 failed attempts, then one that succeeds: maxRetryCount 50 allows it.
my $bulkr = job_name('dave', 'bulk-1000-retry-50');
my $t_bulkr = time();
submit($node, job_request($bulkr, user => 'dave', job => 'bulk-1000-retry-50', max_retry => 50,
	exit_codes => join(',', (1) x 50, 0), run_seconds => '0.05', step_seconds => '0.01',
	task_roles => [ [ 'worker', 1000 ] ]));
ok(poll($node, "SELECT state FROM paidb.framework WHERE name = '$bulkr'", 'SUCCEEDED', 150),
	'bulk retry job: SUCCEEDED');
note(sprintf('bulk retry job took %.1f s', time() - $t_bulkr));
is(col($node, $bulkr, qq{concat_ws('|', app_exit_code, retries, paidb.snapshot(f)->'status'->'attemptStatus'->>'id',
		jsonb_array_length($SNAP_TASKS))}),
	'0|50|50|1000', 'bulk retry job: succeeded in attempt 50 after 50 retries, 1000 tasks');
my $hist = query($node, qq{
	SELECT attempt_index || '|' || uid || '|' || history_type || '|' || (paidb.snapshot(f)->'status'->'attemptStatus'->>'id')
	       || '|' || (paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'code')
	  FROM paidb.framework_history f WHERE framework_name = '$bulkr' ORDER BY attempt_index, uid});
is($hist, join("\n", map { "$_|" . md5_hex("$bulkr+$_+retry") . "|retry|$_|1" } 0 .. 49),
	'bulk retry job: the history has attempts 0..49 exactly once each, each failed with code 1');
is(query($node, qq{
	SELECT count(*) FROM paidb.framework_history f
	 WHERE framework_name = '$bulkr'
	   AND jsonb_array_length($SNAP_TASKS) = 1000
	   AND coalesce(paidb.snapshot(f)->'status'->'attemptStatus'->>'taskRoleStatusesCompressed', '') = ''
	   AND (SELECT count(*) FROM jsonb_array_elements($SNAP_TASKS) t WHERE t->>'state' = 'Completed') = 1000}),
	'50', 'bulk retry job: every history row holds 1000 decompressed, completed task statuses');
note("retry history of $bulkr (first rows):\n" . query($node, qq{
	SELECT attempt_index, paidb.snapshot(f)->'status'->'attemptStatus'->'completionStatus'->>'phrase',
	       jsonb_array_length($SNAP_TASKS) AS tasks
	  FROM paidb.framework_history f WHERE framework_name = '$bulkr' ORDER BY attempt_index LIMIT 3}));
deleted_ok($bulkr, 'bulk retry job');

# ============================================================ the end
is(query($node, q{SELECT count(*) FROM paidb.framework WHERE NOT api_server_deleted}), '0',
	'every job ended and was cleaned up');
is(join("\n", crash_lines($node)), '', 'no paidb process crashed');
note(sprintf('030_e2e_jobs took %.1f s', time() - $t0));
$node->stop;
done_testing();
