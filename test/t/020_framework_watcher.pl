# The framework watcher (SPEC §6) against kube-fake: the first run adopts
# what the API server already holds (over several LIST pages), events move
# jobs through their states, the resourceVersion is stored and a restart
# resumes the watch without listing, bookmarks advance it, a stream cut in
# the middle of an event loses nothing, 410 Gone makes it LIST again and
# reconcile what disappeared, and with retain mode off an unknown framework
# becomes an orphan.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use HTTP::Tiny;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# How long any single condition may take to become true.
my $WAIT = $PostgreSQL::Test::Utils::timeout_default;

# ---------------------------------------------------------------- kube-fake
my $fake_bin = abs_path(dirname(__FILE__) . '/../kube-fake/kube-fake');
my $http = HTTP::Tiny->new(timeout => 30);
my $FW = '/apis/frameworkcontroller.microsoft.com/v1/namespaces/default/frameworks';
my %fake;

# Poll a Perl condition until it is true or $secs pass; returns its value.
sub wait_until
{
	my ($cond, $secs) = @_;
	my $deadline = time() + ($secs // $WAIT);
	while (1)
	{
		my $v = $cond->();
		return $v if $v;
		return 0 if time() > $deadline;
		usleep(50_000);
	}
}

# Start kube-fake with extra arguments; remembers its port and directory.
sub start_fake
{
	my @args = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $port_file = "$dir/port";
	$fake{dir} = $dir;
	$fake{h} = IPC::Run::start(
		[ $fake_bin, '--port', '0', '--port-file', $port_file,
		  '--log', "$dir/requests.log", @args ],
		'<', \undef, '>', "$dir/stdout.log", '2>', "$dir/stderr.log");
	wait_until(sub { -s $port_file }, 30)
	  or BAIL_OUT('kube-fake did not start: ' . slurp_file("$dir/stderr.log"));
	my $port = slurp_file($port_file);
	$port =~ s/\s+//g;
	$fake{url} = "http://127.0.0.1:$port";
}

# One JSON request to kube-fake: (HTTP status, decoded body or undef).
sub api
{
	my ($method, $path, $body, $ctype) = @_;
	my %opt = (headers => { 'Accept' => 'application/json' });
	if (defined $body)
	{
		$opt{headers}{'Content-Type'} = $ctype // 'application/json';
		$opt{content} = ref $body ? encode_json($body) : $body;
	}
	my $r = $http->request($method, "$fake{url}$path", \%opt);
	my $doc = eval { decode_json($r->{content}) };
	return ($r->{status}, $doc);
}

# A request counter of kube-fake ("list frameworks", "watch frameworks").
sub counter
{
	my ($key) = @_;
	my ($code, $c) = api('GET', '/_fake/counters');
	die "kube-fake counters: HTTP $code" unless $code == 200;
	return $c->{requests}{$key} // 0;
}

# The current resourceVersion of kube-fake.
sub fake_rv
{
	my ($code, $d) = api('GET', '/_fake/rv');
	die "kube-fake rv: HTTP $code" unless $code == 200;
	return $d->{resourceVersion};
}

# A framework request (what put_framework_request stores and the sync
# worker would create), with extra annotations for the simulated controller.
sub framework
{
	my ($name, %ann) = @_;
	return {
		apiVersion => 'frameworkcontroller.microsoft.com/v1',
		kind => 'Framework',
		metadata => {
			name => $name,
			labels => { userName => 'alice', virtualCluster => 'default' },
			annotations => { requestGeneration => '1', %ann },
		},
		spec => {
			executionType => 'Start',
			retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => 0 },
			taskRoles => [
				{
					name => 'worker',
					taskNumber => 1,
					task => {
						retryPolicy => { fancyRetryPolicy => JSON::PP::false, maxRetryCount => 0 },
						pod => { spec => { containers => [ { name => 'worker', image => 'busybox' } ] } },
					},
				}
			],
		},
	};
}

# Create a framework in kube-fake (409: the sync worker was first, fine).
sub create_in_fake
{
	my ($obj) = @_;
	my ($code, $doc) = api('POST', $FW, $obj);
	die "creating framework $obj->{metadata}{name} in kube-fake: HTTP $code "
	  . encode_json($doc // {})
	  unless $code == 201 || $code == 409;
	return $code;
}

# Delete a framework in kube-fake bypassing faults on the "delete" verb
# (a deletecollection by name), as if someone removed it behind our back.
sub delete_in_fake
{
	my ($name) = @_;
	my ($code) = api('DELETE', "$FW?fieldSelector=metadata.name%3D$name");
	die "deleting framework $name in kube-fake: HTTP $code" unless $code == 200;
}

# Add a fault rule to kube-fake.
sub add_fault
{
	my (%rule) = @_;
	my ($code) = api('POST', '/_fake/faults', \%rule);
	die "adding a fault: HTTP $code" unless $code == 200;
}

END
{
	if ($fake{h})
	{
		$fake{h}->signal('TERM');
		eval { $fake{h}->finish; };
	}
}

# ---------------------------------------------------------------- the test
start_fake('--simulate-controller', '--bookmark-interval', '0.5');

# Five frameworks exist before paidb does; they run until stopped.
for my $i (1 .. 5)
{
	create_in_fake(framework("adopt$i", 'kube-fake/run-seconds' => '-1'));
}
ok(wait_until(sub {
	my ($c, $l) = api('GET', $FW);
	my @running = grep { ($_->{status}{state} // '') eq 'AttemptRunning' } @{ $l->{items} };
	return @running == 5;
}), 'the five frameworks run in kube-fake');

my $node = PostgreSQL::Test::Cluster->new('framework_watcher');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'paidb'
paidb.database = 'postgres'
paidb.k8s_api_server = '$fake{url}'
paidb.k8s_namespace = 'default'
paidb.watch_timeout = '3s'
paidb.list_page_size = 2
paidb.resync_interval = '2s'
paidb.retain_mode = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION paidb');

# Poll a query until it returns the expected output (default 't').
sub poll
{
	my ($query, $expected) = @_;
	return $node->poll_query_until('postgres', $query, $expected);
}

# The framework watcher's pid from paidb.status().
sub watcher_pid
{
	return $node->safe_psql('postgres',
		q{SELECT coalesce(pid, 0) FROM paidb.status() WHERE worker = 'framework watcher'});
}

# Wait until the server log after $offset matches $re (true if it did).
sub wait_log
{
	my ($re, $offset) = @_;
	return wait_until(sub { slurp_file($node->logfile, $offset) =~ $re });
}

# ---- 1. the first run adopts what is there, over several LIST pages
ok(poll(q{SELECT count(*) = 5 AND bool_and(request_synced) AND bool_and(NOT api_server_deleted)
            FROM paidb.framework WHERE name LIKE 'adopt%'}),
	'the initial import adopted the five frameworks as synced jobs');
ok(poll(q{SELECT count(*) = 5 FROM paidb.framework WHERE name LIKE 'adopt%' AND state = 'RUNNING'}),
	'the adopted jobs are RUNNING');
is($node->safe_psql('postgres', 'SELECT count(*) FROM paidb.orphan'), '0',
	'no adopted framework is an orphan');
cmp_ok(counter('list frameworks'), '>=', 3, 'the import listed several pages of 2');
ok(poll(q{SELECT EXISTS (SELECT 1 FROM paidb.installation WHERE key = 'initial_import_done')}),
	'the initial import is recorded');
ok(poll(q{SELECT resource_version IS NOT NULL AND listed_at IS NOT NULL
            FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	'the resourceVersion of the list is stored');

# ---- 2. bookmarks advance the stored resourceVersion
# A write that is no framework moves the API server's resourceVersion; only
# a bookmark can bring it to the framework watcher.
my ($code) = api('POST', '/api/v1/namespaces/default/secrets',
	{ metadata => { name => 'bump' }, data => {} });
is($code, 201, 'a secret is created in kube-fake');
my $bumped = fake_rv();
ok(poll(qq{SELECT resource_version::bigint >= $bumped FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	"a bookmark advanced the stored resourceVersion to $bumped");
is($node->safe_psql('postgres', qq{SELECT count(*) FROM paidb.framework WHERE resource_version >= $bumped}),
	'0', 'no framework event carried that resourceVersion');

# ---- 3. a submitted job goes WAITING -> RUNNING -> SUCCEEDED
my $life = framework('life1', 'kube-fake/run-seconds' => '3', 'kube-fake/step-seconds' => '0.2');
my $life_json = encode_json($life);
# (seen inside the submitting transaction: a sync worker may be quick)
is($node->safe_psql('postgres', qq{
	BEGIN;
	SELECT count(*) FROM paidb.put_framework_request('$life_json');
	SELECT state || ' ' || request_synced FROM paidb.framework WHERE name = 'life1';
	COMMIT;}),
	"1\nWAITING false", 'a new job is WAITING and not synced');
create_in_fake($life);
ok(poll(q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'life1'}), 'the job becomes RUNNING');
ok(poll(q{SELECT state = 'SUCCEEDED' AND request_synced FROM paidb.framework WHERE name = 'life1'}),
	'the job becomes SUCCEEDED and its request is synced');

# ---- 4. a restart resumes the watch from the stored resourceVersion
my $lists = counter('list frameworks');
my $watches = counter('watch frameworks');
my $old_pid = watcher_pid();
my $offset = -s $node->logfile;
ok($node->safe_psql('postgres', "SELECT pg_terminate_backend($old_pid)") eq 't',
	'the framework watcher is terminated');
ok(poll(qq{SELECT pid IS NOT NULL AND pid <> $old_pid FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher restarts');
ok(wait_log(qr/resuming the watch of frameworks at resourceVersion "\d+"/, $offset),
	'it resumes from the stored resourceVersion');
ok(wait_until(sub { counter('watch frameworks') > $watches }), 'it watches again');
is(counter('list frameworks'), $lists, 'without listing again');

# ---- 5. a stream cut in the middle of an event loses nothing
# kube-fake cuts a watch in the middle of the next event it sends; a watch
# that ends first is not cut, so try until the watcher reports a cut.
my ($cut_seen, $patched_rv) = (0, 0);
for my $try (1 .. 5)
{
	wait_until(sub {
		my ($c, $w) = api('GET', '/_fake/watches');
		return grep { $_->{resource} eq 'frameworks' } @{ $w->{watches} // [] };
	});
	my ($cut_code, $cut) = api('POST', '/_fake/watches/cut', { mode => 'mid-event', resource => 'frameworks' });
	next unless $cut_code == 200 && $cut->{cut} >= 1;
	my ($patch_code, $patched) = api('PATCH', "$FW/adopt2", { metadata => { labels => { cut => "try$try" } } },
		'application/merge-patch+json');
	die "patching adopt2: HTTP $patch_code" unless $patch_code == 200;
	$patched_rv = $patched->{metadata}{resourceVersion};
	$cut_seen = wait_until(sub {
		$node->safe_psql('postgres',
			q{SELECT last_error LIKE 'WATCH frameworks cut%' FROM paidb.status() WHERE worker = 'framework watcher'}) eq 't';
	}, 30);
	last if $cut_seen;
}
ok($cut_seen, 'the watcher saw a watch cut in the middle of an event');
ok(poll(qq{SELECT resource_version = $patched_rv FROM paidb.framework WHERE name = 'adopt2'}),
	'the event that was cut is applied after all');
my $cut1 = framework('cut1', 'kube-fake/run-seconds' => '0.5');
my $cut1_json = encode_json($cut1);
$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$cut1_json')});
create_in_fake($cut1);
ok(poll(q{SELECT state = 'SUCCEEDED' AND request_synced FROM paidb.framework WHERE name = 'cut1'}),
	'a job submitted afterwards reaches SUCCEEDED');

# ---- 6. 410 Gone: LIST again, and reconcile what disappeared meanwhile
# done2 completes while the watcher sees it; a fault keeps a sync worker from
# deleting it itself, so it is still in the API server afterwards.
add_fault(status => 500, verb => 'delete', resource => 'frameworks', name => 'done2', count => -1);
my $done2 = framework('done2', 'kube-fake/run-seconds' => '0.2');
my $done2_json = encode_json($done2);
$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$done2_json')});
create_in_fake($done2);
ok(poll(q{SELECT state = 'SUCCEEDED' AND NOT api_server_deleted FROM paidb.framework WHERE name = 'done2'}),
	'done2 completed and is known as completed');

# Now the watcher is kept out for a while: the open watch is reset and the
# next four fail (with its backoff, that is about ten seconds; the fault
# expires by itself, so the one on done2 stays).
$lists = counter('list frameworks');
add_fault(status => 500, verb => 'watch', resource => 'frameworks', count => 4);
api('POST', '/_fake/watches/cut', { mode => 'reset', resource => 'frameworks' });
ok(poll(q{SELECT last_error LIKE 'WATCH frameworks failed%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the watcher cannot watch');
$offset = -s $node->logfile;
my $stored = $node->safe_psql('postgres', q{SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'});

# Behind its back: a running and a completed framework disappear, and the
# history is compacted so the stored resourceVersion is too old.
delete_in_fake('adopt1');
delete_in_fake('done2');
my ($compact_code, $compacted) = api('POST', '/_fake/compact', {});
is($compact_code, 200, 'kube-fake compacted its history');
cmp_ok($compacted->{compactedResourceVersion}, '>', $stored, 'the stored resourceVersion is now too old');
is(counter('list frameworks'), $lists, 'the watcher did not list meanwhile');

ok(wait_log(qr/resourceVersion "\d+" of frameworks is too old, listing again/, $offset),
	'410 Gone makes the watcher list again');
ok(wait_until(sub { counter('list frameworks') > $lists }), 'it sent a new LIST');
ok(wait_log(qr/framework "adopt1" is no longer in the API server \(reset\)/, $offset),
	'the running framework that disappeared got a DELETED event and was reset');
ok(poll(q{SELECT NOT api_server_deleted FROM paidb.framework WHERE name = 'adopt1'}),
	'the running framework is not marked deleted');
ok(wait_log(qr/framework "done2" is no longer in the API server \(deleted\)/, $offset),
	'the completed framework that disappeared got a DELETED event');
ok(poll(q{SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = 'done2'}),
	'the completed framework is marked deleted and keeps its state');
ok(poll(q{SELECT count(*) = 4 FROM paidb.framework
           WHERE name IN ('adopt2', 'adopt3', 'adopt4', 'adopt5') AND NOT api_server_deleted AND state = 'RUNNING'}),
	'the frameworks still listed are untouched');
ok(poll(qq{SELECT resource_version::bigint >= $compacted->{compactedResourceVersion}
            FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	'the new list resourceVersion is stored');

# ---- 7. retain mode off: a framework only the API server has is an orphan
$node->safe_psql('postgres', q{ALTER SYSTEM SET paidb.retain_mode = off});
$node->safe_psql('postgres', q{SELECT pg_reload_conf()});
ok(poll(q{SHOW paidb.retain_mode}, 'off'), 'retain mode is off');
# a sync worker would delete the orphan at once: keep it for the check
add_fault(status => 500, verb => 'delete', resource => 'frameworks', name => 'stranger1', count => -1);
create_in_fake(framework('stranger1', 'kube-fake/run-seconds' => '-1'));
ok(poll(q{SELECT count(*) = 1 FROM paidb.orphan WHERE name = 'stranger1'}),
	'a framework created directly in the API server is queued as an orphan');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name = 'stranger1'}),
	'0', 'and is not adopted as a job');

# Count the framework watcher's exits in the server log.
sub watcher_exits
{
	my @exits = (slurp_file($node->logfile)
		  =~ /background worker "paidb framework watcher" \(PID \d+\) exited with exit code/g);
	return scalar(@exits);
}

# Until now it exited once, when it was terminated.
is(watcher_exits(), 1, 'the framework watcher exited only when it was terminated');

# ---- 8. one bad event is skipped; the others of its batch are applied
# A trigger makes every update of poison1 by the framework watcher fail.
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.poison() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.name = 'poison1' AND
		   (SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid()) = 'paidb framework watcher' THEN
			RAISE EXCEPTION 'poisoned framework' USING ERRCODE = current_setting('test.poison_code', true);
		END IF;
		RETURN NEW;
	END $$;
	ALTER DATABASE postgres SET test.poison_code = '22023';
	CREATE TRIGGER poison BEFORE UPDATE ON paidb.framework FOR EACH ROW EXECUTE FUNCTION public.poison();
});
# the watcher's session must see the setting: restart it
my $pid = watcher_pid();
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(poll(qq{SELECT pid IS NOT NULL AND pid <> $pid AND state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher runs again');
my $exits = watcher_exits();
$pid = watcher_pid();
$offset = -s $node->logfile;

# both are created while the watch is held back, so they arrive together
add_fault(status => 500, verb => 'watch', resource => 'frameworks', count => -1);
api('POST', '/_fake/watches/cut', { mode => 'reset', resource => 'frameworks' });
ok(poll(q{SELECT last_error LIKE 'WATCH frameworks failed%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the watch is held back');
for my $name ('poison1', 'fine1')
{
	my $obj = framework($name, 'kube-fake/run-seconds' => '-1');
	my $json = encode_json($obj);
	$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$json')});
	create_in_fake($obj);
}
ok(wait_until(sub {
	my ($c, $l) = api('GET', $FW);
	my @running = grep { ($_->{status}{state} // '') eq 'AttemptRunning' && $_->{metadata}{name} =~ /^(poison1|fine1)$/ }
	  @{ $l->{items} };
	return @running == 2;
}), 'both run in kube-fake');
api('DELETE', '/_fake/faults');
ok(poll(q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'fine1'}),
	'the good framework is applied');
ok(wait_log(qr/WARNING:  paidb framework watcher skipped the (ADDED|MODIFIED) event of "poison1": poisoned framework/, $offset),
	'the bad event is logged with the framework name and skipped');
is($node->safe_psql('postgres', q{SELECT state FROM paidb.framework WHERE name = 'poison1'}),
	'WAITING', 'the bad framework was not updated');
ok(poll(q{SELECT errors > 0 AND last_error LIKE '%poison1%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'status() counts and shows the skipped event');
is(watcher_pid(), $pid, 'the framework watcher did not exit');
is(watcher_exits(), $exits, 'nor restart');

# ---- 9. a failure of the system, not of the event, loses nothing
# (lock_not_available: the worker exits, restarts, and the event is retried)
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET test.poison_code = '55P03'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(poll(qq{SELECT pid IS NOT NULL AND pid <> $pid FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher runs again');
$exits = watcher_exits();
my ($patch_code) = api('PATCH', "$FW/poison1", { metadata => { labels => { touched => 'yes' } } },
	'application/merge-patch+json');
is($patch_code, 200, 'poison1 is modified in kube-fake');
ok(wait_until(sub { watcher_exits() > $exits }), 'the watcher exits on a system failure instead of skipping');
$node->safe_psql('postgres', q{DROP TRIGGER poison ON paidb.framework});
ok(poll(q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'poison1'}),
	'once the failure is gone the event is applied after all');

unlike(slurp_file($node->logfile), qr/TRAP:|terminated by signal/, 'no process crashed');

$node->stop;
done_testing();
