# The framework watcher (SPEC §6) against kube-fake: the first run adopts
# what the API server already holds (over several LIST pages), events move
# jobs through their states, the resourceVersion is stored and a restart
# resumes the watch without listing, bookmarks advance it, a stream cut in
# the middle of an event loses nothing, 410 Gone makes it LIST again and
# reconcile what disappeared, and with retain mode off an unknown framework
# becomes an orphan.
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

# A framework request (what put_framework_request stores and the sync
# worker would create), with extra annotations for the simulated controller.
sub framework
{
	my ($name, %ann) = @_;
	return bare_framework($name, annotations => { requestGeneration => '1', %ann });
}

# ---------------------------------------------------------------- the test
my $fake = KubeFake->start(dir => PostgreSQL::Test::Utils::tempdir, simulate_controller => 1,
	bookmark_interval => 0.5);

# Create a framework in kube-fake (409: the sync worker was first, fine), as
# the sync worker would: with paidb's label (SPEC §8), else whichever of the
# two comes second finds a framework that is not paidb's.
sub create_in_fake
{
	my ($obj) = @_;
	$obj->{metadata}{labels}{'paidb.io/framework'} = $obj->{metadata}{name};
	my ($code, $doc) = $fake->api(POST => fw_path(), $obj);
	die "creating framework $obj->{metadata}{name} in kube-fake: HTTP $code "
	  . (ref $doc ? encode_json($doc) : $doc // '')
	  unless $code == 201 || $code == 409;
	return $code;
}

# Delete a framework in kube-fake bypassing faults on the "delete" verb
# (a deletecollection by name), as if someone removed it behind our back.
sub delete_in_fake
{
	my ($name) = @_;
	my $code = fake_delete_directly($fake, $name);
	die "deleting framework $name in kube-fake: HTTP $code" unless $code == 200;
}

# Five frameworks exist before paidb does; they run until stopped.
for my $i (1 .. 5)
{
	create_in_fake(framework("adopt$i", 'kube-fake/run-seconds' => '-1'));
}
ok(wait_until(sub {
	my ($c, $l) = $fake->api(GET => fw_path());
	my @running = grep { ($_->{status}{state} // '') eq 'AttemptRunning' } @{ $l->{items} };
	return @running == 5;
}), 'the five frameworks run in kube-fake');

my $node = PaidbTest::new_node('framework_watcher', $fake, watch_timeout => '3s',
	resync_interval => '2s', retain_mode => 'on', restart_after_crash => 'off',
	conf => "paidb.list_page_size = 2\n");

# ---- 1. the first run adopts what is there, over several LIST pages
ok(poll($node, q{SELECT count(*) = 5 AND bool_and(request_synced) AND bool_and(NOT api_server_deleted)
            FROM paidb.framework WHERE name LIKE 'adopt%'}),
	'the initial import adopted the five frameworks as synced jobs');
ok(poll($node, q{SELECT count(*) = 5 FROM paidb.framework WHERE name LIKE 'adopt%' AND state = 'RUNNING'}),
	'the adopted jobs are RUNNING');
is($node->safe_psql('postgres', 'SELECT count(*) FROM paidb.orphan'), '0',
	'no adopted framework is an orphan');
cmp_ok(fake_counter($fake, 'list frameworks'), '>=', 3, 'the import listed several pages of 2');
ok(poll($node, q{SELECT EXISTS (SELECT 1 FROM paidb.installation WHERE key = 'initial_import_done')}),
	'the initial import is recorded');
ok(poll($node, q{SELECT resource_version IS NOT NULL AND listed_at IS NOT NULL
            FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	'the resourceVersion of the list is stored');

# ---- 2. bookmarks advance the stored resourceVersion
# A write that is no framework moves the API server's resourceVersion; only
# a bookmark can bring it to the framework watcher.
my ($code) = $fake->api(POST => '/api/v1/namespaces/default/secrets',
	{ metadata => { name => 'bump' }, data => {} });
is($code, 201, 'a secret is created in kube-fake');
my $bumped = $fake->resource_version;
ok(poll($node, qq{SELECT resource_version::bigint >= $bumped FROM paidb.watch_state WHERE watcher = 'frameworks'}),
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
ok(poll($node, q{SELECT state = 'RUNNING' FROM paidb.framework WHERE name = 'life1'}), 'the job becomes RUNNING');
ok(poll($node, q{SELECT state = 'SUCCEEDED' AND request_synced FROM paidb.framework WHERE name = 'life1'}),
	'the job becomes SUCCEEDED and its request is synced');

# ---- 4. a restart resumes the watch from the stored resourceVersion
my $lists = fake_counter($fake, 'list frameworks');
my $watches = fake_counter($fake, 'watch frameworks');
my $old_pid = worker_pid($node, 'framework watcher');
my $offset = -s $node->logfile;
ok($node->safe_psql('postgres', "SELECT pg_terminate_backend($old_pid)") eq 't',
	'the framework watcher is terminated');
ok(poll($node, qq{SELECT pid IS NOT NULL AND pid <> $old_pid FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher restarts');
ok(wait_log($node, qr/resuming the watch of frameworks at resourceVersion "\d+"/, $offset),
	'it resumes from the stored resourceVersion');
ok(wait_until(sub { fake_counter($fake, 'watch frameworks') > $watches }), 'it watches again');
is(fake_counter($fake, 'list frameworks'), $lists, 'without listing again');

# ---- 5. a stream cut in the middle of an event loses nothing
# kube-fake cuts a watch in the middle of the next event it sends; a watch
# that ends first is not cut, so try until the watcher reports a cut.
my ($cut_seen, $patched_rv) = (0, 0);
for my $try (1 .. 5)
{
	wait_until(sub { fake_watches($fake, 'frameworks') });
	next unless $fake->cut_watches('mid-event', 'frameworks') >= 1;
	my ($patch_code, $patched) = $fake->api(PATCH => fw_path('adopt2'), { metadata => { labels => { cut => "try$try" } } },
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
ok(poll($node, qq{SELECT resource_version = $patched_rv FROM paidb.framework WHERE name = 'adopt2'}),
	'the event that was cut is applied after all');

# A watched object's own spec never reaches the stored snapshot (the watcher
# leaves it out of its parse): a spec changed behind paidb's back is not
# taken in, while the event itself is (its resourceVersion and status).
my ($spec_code, $spec_patched) = $fake->api(PATCH => fw_path('adopt2'),
	{ spec => { paidbForeignMember => 'changed in the API server' } }, 'application/merge-patch+json');
die "patching adopt2's spec: HTTP $spec_code" unless $spec_code == 200;
my $spec_rv = $spec_patched->{metadata}{resourceVersion};
ok(poll($node, qq{SELECT resource_version = $spec_rv FROM paidb.framework WHERE name = 'adopt2'}),
	'an event changing only the spec is applied');
is($node->safe_psql('postgres', q{SELECT (s->'spec' ? 'paidbForeignMember')::text || ' ' || (s->'status'->>'state')
    || ' ' || (s->'metadata'->>'resourceVersion')
    FROM (SELECT paidb.snapshot(f) s FROM paidb.framework f WHERE name = 'adopt2') x}),
	"false AttemptRunning $spec_rv", 'the stored snapshot keeps its own spec, and the event\'s status and metadata');
my $cut1 = framework('cut1', 'kube-fake/run-seconds' => '0.5');
my $cut1_json = encode_json($cut1);
$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$cut1_json')});
create_in_fake($cut1);
ok(poll($node, q{SELECT state = 'SUCCEEDED' AND request_synced FROM paidb.framework WHERE name = 'cut1'}),
	'a job submitted afterwards reaches SUCCEEDED');

# ---- 6. 410 Gone: LIST again, and reconcile what disappeared meanwhile
# done2 completes while the watcher sees it; a fault keeps a sync worker from
# deleting it itself, so it is still in the API server afterwards.
$fake->fault(status => 500, verb => 'delete', resource => 'frameworks', name => 'done2', count => -1);
my $done2 = framework('done2', 'kube-fake/run-seconds' => '0.2');
my $done2_json = encode_json($done2);
$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$done2_json')});
create_in_fake($done2);
ok(poll($node, q{SELECT state = 'SUCCEEDED' AND NOT api_server_deleted FROM paidb.framework WHERE name = 'done2'}),
	'done2 completed and is known as completed');

# Now the watcher is kept out for a while: the open watch is reset and the
# next four fail (with its backoff, that is about ten seconds; the fault
# expires by itself, so the one on done2 stays).
$lists = fake_counter($fake, 'list frameworks');
$fake->fault(status => 500, verb => 'watch', resource => 'frameworks', count => 4);
$fake->cut_watches('reset', 'frameworks');
ok(poll($node, q{SELECT last_error LIKE 'WATCH frameworks failed%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the watcher cannot watch');
$offset = -s $node->logfile;
my $stored = $node->safe_psql('postgres', q{SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'});

# The rows of the frameworks that will not change meanwhile, as they are now.
my $rows_before = $node->safe_psql('postgres', q{SELECT string_agg(name || ':' || xmin, ',' ORDER BY name)
    FROM paidb.framework WHERE name IN ('adopt3', 'adopt4', 'adopt5')});

# Behind its back: a running and a completed framework disappear, one more
# changes, and the history is compacted so the stored resourceVersion is too old.
delete_in_fake('adopt1');
delete_in_fake('done2');
my ($relabel_code, $relabelled) = $fake->api(PATCH => fw_path('adopt2'), { metadata => { labels => { outage => 'yes' } } },
	'application/merge-patch+json');
die "patching adopt2: HTTP $relabel_code" unless $relabel_code == 200;
my $relabelled_rv = $relabelled->{metadata}{resourceVersion};
my $compacted = eval { $fake->compact };
ok($compacted, 'kube-fake compacted its history') or diag($@);
cmp_ok($compacted->{compactedResourceVersion}, '>', $stored, 'the stored resourceVersion is now too old');
is(fake_counter($fake, 'list frameworks'), $lists, 'the watcher did not list meanwhile');

ok(wait_log($node, qr/resourceVersion "\d+" of frameworks is too old, listing again/, $offset),
	'410 Gone makes the watcher list again');
ok(wait_until(sub { fake_counter($fake, 'list frameworks') > $lists }), 'it sent a new LIST');
ok(wait_log($node, qr/framework "adopt1" is no longer in the API server \(reset\)/, $offset),
	'the running framework that disappeared got a DELETED event and was reset');
ok(poll($node, q{SELECT NOT api_server_deleted FROM paidb.framework WHERE name = 'adopt1'}),
	'the running framework is not marked deleted');
ok(wait_log($node, qr/framework "done2" is no longer in the API server \(deleted\)/, $offset),
	'the completed framework that disappeared got a DELETED event');
ok(poll($node, q{SELECT api_server_deleted AND state = 'SUCCEEDED' FROM paidb.framework WHERE name = 'done2'}),
	'the completed framework is marked deleted and keeps its state');
ok(poll($node, q{SELECT count(*) = 4 FROM paidb.framework
           WHERE name IN ('adopt2', 'adopt3', 'adopt4', 'adopt5') AND NOT api_server_deleted AND state = 'RUNNING'}),
	'the frameworks still listed are untouched');
ok(poll($node, qq{SELECT resource_version::bigint >= $compacted->{compactedResourceVersion}
            FROM paidb.watch_state WHERE watcher = 'frameworks'}),
	'the new list resourceVersion is stored');
# issue 19: a re-list applies only what changed
ok(poll($node, qq{SELECT resource_version = $relabelled_rv FROM paidb.framework WHERE name = 'adopt2'}),
	'the framework changed meanwhile is applied from the list');
is($node->safe_psql('postgres', q{SELECT string_agg(name || ':' || xmin, ',' ORDER BY name)
    FROM paidb.framework WHERE name IN ('adopt3', 'adopt4', 'adopt5')}), $rows_before,
	'the frameworks listed unchanged are not applied again (their rows are not rewritten)');
ok(wait_log($node, qr/listed \d+ frameworks in \d+ pages at resourceVersion "\d+"\n.*DETAIL:  3 of them were unchanged since they were last applied/, $offset),
	'the log says how many listed frameworks were unchanged');

# ---- 7. retain mode off: a framework only the API server has is an orphan
$node->safe_psql('postgres', q{ALTER SYSTEM SET paidb.retain_mode = off});
$node->safe_psql('postgres', q{SELECT pg_reload_conf()});
ok(poll($node, q{SHOW paidb.retain_mode}, 'off'), 'retain mode is off');
# a sync worker would delete the orphan at once: keep it for the check
$fake->fault(status => 500, verb => 'delete', resource => 'frameworks', name => 'stranger1', count => -1);
create_in_fake(framework('stranger1', 'kube-fake/run-seconds' => '-1'));
ok(poll($node, q{SELECT count(*) = 1 FROM paidb.orphan WHERE name = 'stranger1'}),
	'a framework created directly in the API server is queued as an orphan');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name = 'stranger1'}),
	'0', 'and is not adopted as a job');

# Until now it exited once, when it was terminated.
is(worker_exits($node, 'framework watcher'), 1, 'the framework watcher exited only when it was terminated');

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
my $pid = worker_pid($node, 'framework watcher');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(poll($node, qq{SELECT pid IS NOT NULL AND pid <> $pid AND state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher runs again');
my $exits = worker_exits($node, 'framework watcher');
$pid = worker_pid($node, 'framework watcher');
$offset = -s $node->logfile;

# both are created while the watch is held back, so they arrive together
$fake->fault(status => 500, verb => 'watch', resource => 'frameworks', count => -1);
$fake->cut_watches('reset', 'frameworks');
ok(poll($node, q{SELECT last_error LIKE 'WATCH frameworks failed%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the watch is held back');
for my $name ('poison1', 'fine1')
{
	my $obj = framework($name, 'kube-fake/run-seconds' => '-1');
	my $json = encode_json($obj);
	$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$json')});
	create_in_fake($obj);
}
ok(wait_until(sub {
	my ($c, $l) = $fake->api(GET => fw_path());
	my @running = grep { ($_->{status}{state} // '') eq 'AttemptRunning' && $_->{metadata}{name} =~ /^(poison1|fine1)$/ }
	  @{ $l->{items} };
	return @running == 2;
}), 'both run in kube-fake');
$fake->clear_faults;
ok(poll($node, q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'fine1'}),
	'the good framework is applied');
ok(wait_log($node, qr/WARNING:  paidb framework watcher skipped the (ADDED|MODIFIED) event of "poison1": poisoned framework/, $offset),
	'the bad event is logged with the framework name and skipped');
is($node->safe_psql('postgres', q{SELECT state FROM paidb.framework WHERE name = 'poison1'}),
	'WAITING', 'the bad framework was not updated');
ok(poll($node, q{SELECT errors > 0 AND last_error LIKE '%poison1%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'status() counts and shows the skipped event');
is(worker_pid($node, 'framework watcher'), $pid, 'the framework watcher did not exit');
is(worker_exits($node, 'framework watcher'), $exits, 'nor restart');

# ---- 9. a failure of the system, not of the event, loses nothing
# (lock_not_available: the worker exits, restarts, and the event is retried)
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET test.poison_code = '55P03'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
ok(poll($node, qq{SELECT pid IS NOT NULL AND pid <> $pid FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the framework watcher runs again');
$exits = worker_exits($node, 'framework watcher');
my ($patch_code) = $fake->api(PATCH => fw_path('poison1'), { metadata => { labels => { touched => 'yes' } } },
	'application/merge-patch+json');
is($patch_code, 200, 'poison1 is modified in kube-fake');
ok(wait_until(sub { worker_exits($node, 'framework watcher') > $exits }), 'the watcher exits on a system failure instead of skipping');
$node->safe_psql('postgres', q{DROP TRIGGER poison ON paidb.framework});
ok(poll($node, q{SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = 'poison1'}),
	'once the failure is gone the event is applied after all');

# ---- 10. a held-back stream of many jobs' events is applied together
# The watcher reads a run's rows with one statement and writes them with
# one (issue 19); a job with several events in the run has them applied in
# order, each seeing the one before: every job ends at its last event.
$fake->fault(status => 500, verb => 'watch', resource => 'frameworks', count => -1);
$fake->cut_watches('reset', 'frameworks');
ok(poll($node, q{SELECT last_error LIKE 'WATCH frameworks failed%' FROM paidb.status() WHERE worker = 'framework watcher'}),
	'the watch is held back again');
my @many = map { "many$_" } 1 .. 6;
for my $name (@many)
{
	my $obj = framework($name, 'kube-fake/run-seconds' => '0.4', 'kube-fake/step-seconds' => '0.1');
	my $json = encode_json($obj);
	$node->safe_psql('postgres', qq{SELECT * FROM paidb.put_framework_request('$json')});
	create_in_fake($obj);
}
# As a sync failure's backoff leaves them: not due before 2100.  A batch
# that completes a job must make it due at once (its update's flag bits).
$node->safe_psql('postgres', q{UPDATE paidb.framework SET next_sync_at = '2100-01-01' WHERE name LIKE 'many_'});
my %rv_in_fake;
ok(wait_until(sub {
	my ($c, $l) = $fake->api(GET => fw_path());
	%rv_in_fake = map { $_->{metadata}{name} => $_->{metadata}{resourceVersion} }
	  grep { ($_->{status}{state} // '') eq 'Completed' && $_->{metadata}{name} =~ /^many\d$/ } @{ $l->{items} };
	return keys %rv_in_fake == @many;
}), 'all of them complete in kube-fake while the watch is held back');
$fake->clear_faults;
ok(poll($node, q{SELECT count(*) = 6 FROM paidb.framework WHERE name LIKE 'many_' AND state = 'SUCCEEDED' AND request_synced}),
	'each job is applied up to its completion');
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.framework WHERE name LIKE 'many_' AND next_sync_at = '2100-01-01'}),
	'0', 'and each completion, written with the batch, made its job due for the sync worker at once');
# (the sync worker may change a completed framework again afterwards: at
# least the completion's resourceVersion, never an earlier event's)
my %stored = split /[=\s]+/, $node->safe_psql('postgres',
	q{SELECT string_agg(name || '=' || resource_version, ' ' ORDER BY name) FROM paidb.framework WHERE name LIKE 'many_'});
is(join(' ', map { "$_=" . (($stored{$_} // 0) >= $rv_in_fake{$_} ? 'ok' : "$stored{$_}<$rv_in_fake{$_}") } sort keys %rv_in_fake),
	join(' ', map { "$_=ok" } sort keys %rv_in_fake),
	"each stores its completion's resourceVersion or a later one");
is($node->safe_psql('postgres', q{SELECT count(*) FROM paidb.job_summary WHERE name LIKE 'many_' AND state = 'SUCCEEDED'}),
	'6', 'and the job list shows every one completed');
# The batch's job-list changes are held and written with one statement,
# their count deltas summed by key (src/job_list.c): the list and the
# counts must still equal paidb.framework's rows, in one snapshot.
is($node->safe_psql('postgres', job_summary_errors_sql()), '0', 'every listed row equals its framework row');
is($node->safe_psql('postgres', job_count_errors_sql()), '0', 'and the counts equal count(*) of every group');

unlike(slurp_file($node->logfile), qr/TRAP:|terminated by signal/, 'no process crashed');

$node->stop;
done_testing();
