# The event watcher (SPEC §6) against kube-fake: core v1 Events about task
# pods "<framework>-<task role>-<index>" land in paidb.framework_event with
# the right columns (old-style and new-style events), an updated event
# updates its row, a deleted one keeps it, events about anything else are
# ignored, and a restart resumes the watch without listing again.
use strict;
use warnings;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use KubeFake;
use PaidbTest;

# How long any single condition may take to become true.
$PaidbTest::WAIT = $PostgreSQL::Test::Utils::timeout_default;

# ---------------------------------------------------------------- kube-fake
my $EV = '/api/v1/namespaces/default/events';
my $fake = KubeFake->start(dir => PostgreSQL::Test::Utils::tempdir, bookmark_interval => 0.5,
	args => [ '--namespace', 'other' ]);

# Create an event in kube-fake (namespace default unless given); returns the stored object.
sub create_event
{
	my ($ev, $ns) = @_;
	$ns //= 'default';
	$ev->{metadata}{namespace} = $ns;
	$ev->{involvedObject}{namespace} = $ns;
	my ($code, $doc) = $fake->api(POST => "/api/v1/namespaces/$ns/events", $ev);
	die "creating event $ev->{metadata}{name}: HTTP $code " . (ref $doc ? encode_json($doc) : $doc // '')
	  unless $code == 201;
	return $doc;
}

# An old-style event (source, firstTimestamp, lastTimestamp, count) about an object.
sub pod_event
{
	my ($name, $kind, $object, %more) = @_;
	return {
		metadata => { name => $name },
		involvedObject => {
			kind => $kind, namespace => 'default', name => $object,
			uid => "uid-of-$object", apiVersion => 'v1',
		},
		reason => 'FailedScheduling',
		message => '0/16 nodes are available: 16 Insufficient nvidia.com/gpu.',
		type => 'Warning',
		source => { component => 'default-scheduler', host => 'node-3' },
		firstTimestamp => '2020-09-29T09:46:42Z',
		lastTimestamp => '2020-09-29T09:46:42Z',
		count => 1,
		%more,
	};
}

# ---------------------------------------------------------------- the test

my $fw = '399af21acb5befd015d4c45f6c7c1eb9';

# An event that exists before paidb does: the first LIST brings it.
my $early = create_event(pod_event('early.1', 'Pod', "$fw-worker-0", reason => 'Scheduled',
	type => 'Normal', message => 'Successfully assigned'));

my $node = PaidbTest::new_node('event_watcher', $fake, watch_timeout => '3s',
	resync_interval => '2s', retain_mode => 'on', restart_after_crash => 'off',
	conf => "paidb.list_page_size = 2\n");

# One row of framework_event as "col|col|..." (psql -At).
sub event_row
{
	my ($uid) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT framework_name, pod_uid, taskrole_name, task_name, task_index, type, reason, message,
		       to_char(first_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
		       to_char(last_timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'),
		       count, source_component, source_host, event->'metadata'->>'name'
		  FROM paidb.framework_event WHERE uid = '$uid'});
}

# ---- 1. the first LIST brings existing events
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$early->{metadata}{uid}'}),
	'an event that existed before is listed into framework_event');
ok(poll($node, q{SELECT resource_version IS NOT NULL FROM paidb.watch_state WHERE watcher = 'events'}),
	'the event watcher stored its resourceVersion');
ok(poll($node, q{SELECT state = 'watching' FROM paidb.status() WHERE worker = 'event watcher'}),
	'the event watcher is watching');

# ---- 2. an event about a task pod lands with the right columns
my $e1 = create_event(pod_event('sched.1', 'Pod', "$fw-worker-3"));
my $uid1 = $e1->{metadata}{uid};
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$uid1'}), 'the pod event is stored');
is(event_row($uid1),
	"$fw|uid-of-$fw-worker-3|worker|$fw-worker-3|3|Warning|FailedScheduling|"
	  . '0/16 nodes are available: 16 Insufficient nvidia.com/gpu.|'
	  . '2020-09-29 09:46:42|2020-09-29 09:46:42|1|default-scheduler|node-3|sched.1',
	'every column is taken from the event');

# ---- 3. the same event seen again (count 2) updates its row
my ($code) = $fake->api(PATCH => "$EV/sched.1",
	{ count => 2, lastTimestamp => '2020-09-29T09:55:53Z' }, 'application/merge-patch+json');
is($code, 200, 'the event is updated in kube-fake');
ok(poll($node, qq{SELECT count = 2 AND last_timestamp = '2020-09-29 09:55:53+00' AND updated_at > inserted_at
             AND first_timestamp = '2020-09-29 09:46:42+00'
            FROM paidb.framework_event WHERE uid = '$uid1'}),
	'the row is updated: count 2, new last timestamp, updated_at moved');

# ---- 4. a new-style event (eventTime, series, reporting*) and a task role with dashes
my $e2 = create_event({
	metadata => { name => 'new.1' },
	involvedObject => { kind => 'Pod', namespace => 'default', name => "$fw-ps-server-12", uid => 'pod-12' },
	reason => 'BackOff', message => 'Back-off restarting failed container', type => 'Warning',
	eventTime => '2020-10-01T10:00:00.123456Z',
	series => { count => 3, lastObservedTime => '2020-10-01T10:05:00.000000Z' },
	reportingComponent => 'kubelet', reportingInstance => 'node-7',
	action => 'Restarting',
});
my $uid2 = $e2->{metadata}{uid};
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$uid2'}), 'the new-style event is stored');
is(event_row($uid2),
	"$fw|pod-12|ps-server|$fw-ps-server-12|12|Warning|BackOff|Back-off restarting failed container|"
	  . '2020-10-01 10:00:00|2020-10-01 10:05:00|3|kubelet|node-7|new.1',
	'eventTime, series and reporting* fill the columns');

# ---- 5. events about anything else are ignored
create_event(pod_event('node.1', 'Node', "$fw-worker-0"));
create_event(pod_event('short.1', 'Pod', 'abc-worker-0'));
create_event(pod_event('upper.1', 'Pod', uc($fw) . '-worker-0'));
create_event(pod_event('noindex.1', 'Pod', "$fw-worker"));
create_event(pod_event('norole.1', 'Pod', "$fw--0"));
create_event(pod_event('letters.1', 'Pod', "$fw-worker-x1"));
# events are applied in order: once this one is in, the others were seen
my $marker = create_event(pod_event('marker.1', 'Pod', "$fw-worker-1"));
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$marker->{metadata}{uid}'}),
	'a later pod event is stored');
is($node->safe_psql('postgres', q{SELECT string_agg(event->'metadata'->>'name', ',' ORDER BY event->'metadata'->>'name')
                                   FROM paidb.framework_event}),
	'early.1,marker.1,new.1,sched.1', 'events about other objects are ignored');
is($node->safe_psql('postgres', q{SELECT errors FROM paidb.status() WHERE worker = 'event watcher'}),
	'0', 'ignored events are not errors');

# ---- 6. a deleted (expired) event keeps its row
($code) = $fake->api(DELETE => "$EV/sched.1");
is($code, 200, 'the event is deleted in kube-fake');
my $marker2 = create_event(pod_event('marker.2', 'Pod', "$fw-worker-2"));
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$marker2->{metadata}{uid}'}),
	'a later pod event is stored');
is($node->safe_psql('postgres', qq{SELECT count FROM paidb.framework_event WHERE uid = '$uid1'}),
	'2', 'the deleted event keeps its row');

# ---- 7. a restart resumes the watch from the stored resourceVersion
my $lists = fake_counter($fake, 'list events');
my $watches = fake_counter($fake, 'watch events');
my $old_pid = $node->safe_psql('postgres', q{SELECT pid FROM paidb.status() WHERE worker = 'event watcher'});
my $offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old_pid)"), 't', 'the event watcher is terminated');
my $late = create_event(pod_event('late.1', 'Pod', "$fw-worker-4"));
ok(poll($node, qq{SELECT pid IS NOT NULL AND pid <> $old_pid FROM paidb.status() WHERE worker = 'event watcher'}),
	'the event watcher restarts');
ok(wait_log($node, qr/resuming the watch of events at resourceVersion "\d+"/, $offset),
	'it resumes from the stored resourceVersion');
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$late->{metadata}{uid}'}),
	'an event created while it was down is stored');
cmp_ok(fake_counter($fake, 'watch events'), '>', $watches, 'it watches again');
is(fake_counter($fake, 'list events'), $lists, 'without listing again');
ok(poll($node, q{SELECT resource_version::bigint >= (SELECT (event->'metadata'->>'resourceVersion')::bigint
                                               FROM paidb.framework_event WHERE task_name LIKE '%-worker-4')
            FROM paidb.watch_state WHERE watcher = 'events'}),
	'the stored resourceVersion moved past it');

# ---- 8. another namespace (SIGHUP): the watcher lists that one and follows it
$lists = fake_counter($fake, 'list events');
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER SYSTEM SET paidb.k8s_namespace = 'other'});
$node->safe_psql('postgres', q{SELECT pg_reload_conf()});
ok(wait_log($node, qr/paidb event watcher: the API server or namespace changed, listing events again/, $offset),
	'a new namespace makes the event watcher list again');
ok(wait_until(sub { fake_counter($fake, 'list events') > $lists }), 'it sent a new LIST');
create_event(pod_event('stale.1', 'Pod', "$fw-worker-6"), 'default');
my $other = create_event(pod_event('other.1', 'Pod', "$fw-worker-5"), 'other');
ok(poll($node, qq{SELECT count(*) = 1 FROM paidb.framework_event WHERE uid = '$other->{metadata}{uid}'}),
	'an event of the new namespace is stored');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework_event WHERE event->'metadata'->>'name' = 'stale.1'}),
	'0', 'the old namespace is no longer watched');

is(worker_exits($node, 'event watcher'), 1, 'the event watcher exited only when it was terminated');
unlike(log_since($node), qr/TRAP:|terminated by signal/, 'no process crashed');

$node->stop;
done_testing();
