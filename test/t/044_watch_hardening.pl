# The watchers against an API server that sends what it should not (SPEC §8,
# issue 8): a changed target (namespace, by reload and by restart) is a first
# run, so its frameworks are imported and never deleted as orphans; a LIST
# whose items is not an array (or not objects, or without a decimal
# resourceVersion) fails instead of reconciling every job as gone; watch
# events of an unknown type, with an object that is not one, or without a
# name are skipped with a WARNING and counted, without restarting the watch;
# an object over paidb.max_object_bytes is skipped by name, by the watch and
# by a LIST, while the watch goes on past it and the watcher's memory stays
# bounded, and so is an event whose taskRoleStatusesCompressed inflates
# beyond it (a gzip bomb); a server that answers every watch with 410 is
# listed with a backoff, not hundreds of times a second; and a new API
# server (paidb.k8s_api_server by reload) is a first run like a new
# namespace.
use strict;
use warnings;
use IO::Compress::Gzip qw(gzip $GzipError);
use JSON::PP;
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use KubeFake;
use PaidbTest;

my $fake = PaidbTest::start_fake(
	args => [ '--namespace', 'nsb,nsc', '--max-object-bytes', '40000000',
		'--max-body-bytes', '50000000' ]);
my $node = PaidbTest::start_node('watch_hardening', $fake, retain_mode => 'off',
	resync_interval => '2s', watch_timeout => '20s', restart_after_crash => 'off');

my $FW = '/apis/frameworkcontroller.microsoft.com/v1/namespaces';

# Create a framework directly in the API server (not through paidb), running
# until stopped; returns the HTTP status.  Options: spec_filler, fake (another
# API server than $fake).
sub create_direct
{
	my ($ns, $name, %o) = @_;
	my $fw = bare_framework($name, annotations => { 'kube-fake/run-seconds' => 'inf' });
	$fw->{spec}{filler} = $o{spec_filler} if defined $o{spec_filler};
	my ($code) = ($o{fake} // $fake)->api(POST => "$FW/$ns/frameworks", $fw);
	return $code;
}

# Whether a framework exists in the API server ($fake, or the one given).
sub exists_direct
{
	my ($ns, $name, $server) = @_;
	my ($code) = ($server // $fake)->api(GET => "$FW/$ns/frameworks/$name");
	return $code == 200;
}

# The framework watcher's errors and last_error in status().
sub watcher_status
{
	my ($worker) = @_;
	my ($errors, $err, $state) = split /\|/, query($node,
		"SELECT errors, coalesce(last_error, ''), state FROM paidb.status() WHERE worker = '"
		  . ($worker // 'framework watcher') . "'"), 3;
	return { errors => $errors, last_error => $err // '', state => $state // '' };
}

# Make the framework watcher LIST again: its next watch is answered with 410
# Gone (in the stream, as an API server does), then its watch is cut.
# (Compacting the history instead races: a framework written between the
# compaction and the cut gives the watcher a resourceVersion at or past the
# compaction, and its next watch is valid.)
sub force_relist
{
	$fake->fault(verb => 'watch', resource => 'frameworks', status => 410, inStream => 'true', count => 1);
	$fake->cut_watches('reset', 'frameworks');
}

# ---- 1. a new namespace by reload is a first run: imported, not deleted
for my $n (1 .. 2)
{
	is(create_direct('nsb', "nsbjob$n"), 201, "framework nsbjob$n is created in namespace nsb behind paidb's back");
}
my $off = -s $node->logfile;
$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.k8s_namespace = 'nsb'");
$node->reload;
ok(poll($node, q{SELECT count(*) = 2 AND bool_and(request_synced) AND bool_and(namespace = 'nsb')
            FROM paidb.framework WHERE name LIKE 'nsbjob%'}),
	'after a reload to namespace nsb its frameworks are imported as synced jobs');
ok(poll($node, q{SELECT value IS NOT NULL FROM paidb.installation WHERE key = 'initial_import_done'}),
	'the import is recorded');
ok(wait_log($node, qr/importing existing frameworks/, $off), 'the watcher said it imports the new target');
ok(poll($node, q{SELECT count(*) = 2 FROM paidb.framework WHERE name LIKE 'nsbjob%' AND state = 'RUNNING'}),
	'the imported jobs follow the API server (RUNNING)');
is(query($node, q{SELECT count(*) FROM paidb.orphan WHERE name LIKE 'nsbjob%'}), '0',
	'no framework of the new namespace was taken for an orphan');
ok(wait_for_workers($node), 'the watchers watch the new namespace');
ok(exists_direct('nsb', 'nsbjob1') && exists_direct('nsb', 'nsbjob2'),
	'the frameworks of the new namespace are still in the API server');

# ---- 2. a new namespace across a restart is a first run too
for my $n (1 .. 2)
{
	is(create_direct('nsc', "nscjob$n"), 201, "framework nscjob$n is created in namespace nsc");
}
# (written now, read only at the start: no reload in between)
$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.k8s_namespace = 'nsc'");
$node->stop;
$off = -s $node->logfile;
my $restarted = $off;
$node->start;
ok(poll($node, q{SELECT count(*) = 2 AND bool_and(request_synced) AND bool_and(namespace = 'nsc')
            FROM paidb.framework WHERE name LIKE 'nscjob%'}),
	'after a restart in namespace nsc its frameworks are imported as synced jobs');
ok(wait_log($node, qr/not the one imported from, importing its frameworks/, $off),
	'the watcher said the stored import belongs to another target');
ok(wait_for_workers($node), 'the workers run again');
is(query($node, q{SELECT count(*) FROM paidb.orphan WHERE name LIKE 'nscjob%'}), '0',
	'no framework of namespace nsc was taken for an orphan');
ok(poll($node, q{SELECT count(*) = 2 FROM paidb.framework WHERE name LIKE 'nscjob%' AND state = 'RUNNING'}),
	'the jobs of namespace nsc run');
ok(exists_direct('nsc', 'nscjob1') && exists_direct('nsc', 'nscjob2'),
	'and they are still in the API server');

# The jobs that must survive every malformed LIST below untouched.
my $kept = q{SELECT count(*) = 2 AND bool_and(request_synced) AND bool_and(NOT api_server_deleted)
               AND bool_and(state = 'RUNNING') FROM paidb.framework WHERE name LIKE 'nscjob%'};

# ---- 3. malformed LISTs fail; nothing is reconciled as gone
my @bad_lists = (
	[ 'items is an object', '{"kind":"FrameworkList","apiVersion":"frameworkcontroller.microsoft.com/v1","metadata":{"resourceVersion":"999999"},"items":{}}',
		qr/"items" is not an array/ ],
	[ 'an item is not an object', '{"kind":"FrameworkList","metadata":{"resourceVersion":"999999"},"items":[1]}',
		qr/an item is not a JSON object/ ],
	[ 'an item has no name', '{"kind":"FrameworkList","metadata":{"resourceVersion":"999999"},"items":[{"metadata":{}}]}',
		qr/item 1 has no metadata.name/ ],
	[ 'no resourceVersion', '{"kind":"FrameworkList","metadata":{},"items":[]}',
		qr/no metadata.resourceVersion/ ],
	[ 'a non-decimal resourceVersion', '{"kind":"FrameworkList","metadata":{"resourceVersion":"abc"},"items":[]}',
		qr/resourceVersion "abc", which is not a decimal number/ ],
);
for my $case (@bad_lists)
{
	my ($what, $body, $re) = @$case;
	my $lists = fake_counter($fake, 'list frameworks');
	my $errors = watcher_status()->{errors};
	$off = -s $node->logfile;
	$fake->fault(verb => 'list', resource => 'frameworks', action => 'body', body => $body, count => -1);
	force_relist();
	ok(wait_until(sub { fake_counter($fake, 'list frameworks') >= $lists + 2 }),
		"$what: the watcher tried the LIST (twice)");
	ok(wait_log($node, $re, $off), "$what: the failure is logged");
	cmp_ok(watcher_status()->{errors}, '>', $errors, "$what: counted in status()");
	ok(poll($node, $kept, 't', 5), "$what: the running jobs are not reset");
	unlike(log_since($node, $off), qr/no longer in the API server/, "$what: nothing was reconciled as gone");
	$fake->clear_faults;
	ok(poll($node, q{SELECT state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
		"$what: the watcher recovers once the LIST is sane");
}
ok(poll($node, $kept), 'the jobs are still running and synced');

# ---- 4. odd watch events are skipped with a WARNING, the watch is not broken
{
	my $errors = watcher_status()->{errors};
	$off = -s $node->logfile;
	my $body = join("\n",
		'{"type":"SURPRISE","object":{"metadata":{"name":"nscjob1","resourceVersion":"1"}}}',
		'{"type":"MODIFIED","object":"a string"}',
		'{"type":"MODIFIED","object":{"metadata":{}}}',
		'{"object":{"metadata":{"name":"nscjob1"}}}',
		'{"type":"MODIFIED","object":{"metadata":{"name":"' . ('a' x 10000) . '"}}}',
		'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"xyz"}}}') . "\n";
	$fake->fault(verb => 'watch', resource => 'frameworks', action => 'body', body => $body, count => 1);
	$fake->cut_watches('end', 'frameworks');
	ok(wait_log($node, qr/skipped frameworks "nscjob1" from the API server: a SURPRISE event: the event type is unknown/, $off),
		'an unknown event type is skipped with a WARNING naming the object');
	ok(wait_log($node, qr/skipped frameworks "\(no name\)" from the API server: a MODIFIED event: its object is not a JSON object/, $off),
		'an event whose object is not an object is skipped');
	ok(wait_log($node, qr/a MODIFIED event: its object has no metadata.name/, $off),
		'an event without a name is skipped');
	ok(wait_log($node, qr/the event has no type/, $off), 'an event without a type is skipped');
	ok(wait_log($node, qr/its object has a metadata.name of more than 1 kB/, $off),
		'an event with a 10,000-character name is skipped');
	ok(wait_log($node, qr/resourceVersion "xyz" of a BOOKMARK event is not a decimal number/, $off),
		'a non-decimal bookmark is not adopted');
	cmp_ok(watcher_status()->{errors}, '>=', $errors + 6, 'each is counted in status()');
	my $log = log_since($node, $off);
	unlike($log, qr/invalid JSON in watch stream|without type or object/, 'none is taken for a broken stream');
	isnt(query($node, q{SELECT resource_version FROM paidb.watch_state WHERE watcher = 'frameworks'}), 'xyz',
		'the stored position is not the bad bookmark');
	ok(poll($node, q{SELECT state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
		'the watcher watches on');
}

# ---- 5. an object over paidb.max_object_bytes is skipped, the watch goes on
$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.max_object_bytes = '1MB'");
$node->reload;
ok(poll($node, q{SELECT current_setting('paidb.max_object_bytes') = '1MB'}), 'paidb.max_object_bytes is 1MB');
my $wpid = worker_pid($node, 'framework watcher');

# Resident memory of a process, in kB: (RssAnon, VmHWM).
sub memory_kb
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/status") or return (0, 0);
	my ($anon, $hwm) = (0, 0);
	while (<$fh>)
	{
		$anon = $1 if /^RssAnon:\s+(\d+)/;
		$hwm = $1 if /^VmHWM:\s+(\d+)/;
	}
	close($fh);
	return ($anon, $hwm);
}
my ($anon_before, $hwm_before) = memory_kb($wpid);
# ASan's shadow memory and quarantine multiply a process's memory (90_asan.sh)
my $mem_factor = $ENV{PAIDB_TEST_MEMORY_FACTOR} // 1;
{
	$off = -s $node->logfile;
	my $errors = watcher_status()->{errors};
	is(create_direct('nsc', 'hugejob', spec_filler => 'x' x (20 * 1024 * 1024)), 201,
		'a framework of 20 MB is created in the API server');
	ok(wait_log($node, qr/skipped frameworks "hugejob" from the API server: the object of its ADDED event has \d+ bytes, more than paidb.max_object_bytes/, $off),
		'the watcher skips it with a WARNING naming it');
	cmp_ok(watcher_status()->{errors}, '>', $errors, 'counted in status()');
	my $name = job_name('bob', 'after-huge');
	submit($node, job_request($name, run_seconds => 'inf'));
	ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$name'"),
		'a job submitted after it is watched to RUNNING: the watch went on past it');
	is(worker_pid($node, 'framework watcher'), $wpid, 'the framework watcher did not restart');
	my ($anon, $hwm) = memory_kb($wpid);
	cmp_ok($hwm - $hwm_before, '<', 16 * 1024 * $mem_factor,
		"the framework watcher's peak memory grew by less than 16 MB (VmHWM $hwm_before -> $hwm kB)");
	cmp_ok($anon, '<', 64 * 1024 * $mem_factor, "its private memory stays small (RssAnon $anon kB)");

	# a LIST that holds it: skipped by name, not reconciled, the list completes
	$off = -s $node->logfile;
	force_relist();
	ok(wait_log($node, qr/skipped frameworks "hugejob" from the API server: the listed object has \d+ bytes/, $off),
		'a LIST skips it with a WARNING naming it');
	ok(wait_log($node, qr/listed \d+ frameworks in \d+ pages/, $off), 'and the LIST completes');
	ok(poll($node, $kept), 'the other jobs are untouched');
	is(query($node, q{SELECT count(*) FROM paidb.orphan WHERE name = 'hugejob'}), '0',
		'the skipped object is not taken for an orphan');
	ok(exists_direct('nsc', 'hugejob'), 'and it is not deleted');
	($anon, $hwm) = memory_kb($wpid);
	cmp_ok($hwm - $hwm_before, '<', 16 * 1024 * $mem_factor, "peak memory still bounded after the LIST (VmHWM $hwm kB)");
	$fake->api(DELETE => "$FW/nsc/frameworks/hugejob");
}

# ---- 5b. a gzip bomb in taskRoleStatusesCompressed is refused like an oversized object
{
	# 16 MB of JSON (an empty array padded with blanks) in 16 kB of gzip,
	# base64 as FrameworkController sends it; the limit is still 1 MB
	my $json_text = '[' . (' ' x (16 * 1024 * 1024)) . ']';
	my $gz;
	gzip(\$json_text => \$gz, -Level => 9) or die "gzip: $GzipError";
	my $bomb = encode_base64($gz, '');
	cmp_ok(length($bomb), '<', 64 * 1024, 'the bomb is small (' . length($bomb) . ' bytes of base64)');

	my ($rc, $out, $err) = $node->psql('postgres',
		qq{SELECT paidb.decompress_snapshot('{"status": {"attemptStatus": {"taskRoleStatusesCompressed": "$bomb"}}}')});
	like($err, qr/taskRoleStatusesCompressed decompresses to more than paidb.max_object_bytes \(1048576 bytes\)/,
		'decompress_snapshot refuses to inflate it beyond paidb.max_object_bytes');

	# a MODIFIED event of a running job whose statuses are the bomb
	my ($code, $obj) = $fake->api(GET => "$FW/nsc/frameworks/nscjob1");
	is($code, 200, 'nscjob1 is read from the API server');
	$obj->{status}{attemptStatus}{taskRoleStatuses} = undef;
	$obj->{status}{attemptStatus}{taskRoleStatusesCompressed} = $bomb;
	my $errors = watcher_status()->{errors};
	my $wpid2 = worker_pid($node, 'framework watcher');
	$off = -s $node->logfile;
	$fake->fault(verb => 'watch', resource => 'frameworks', action => 'body', count => 1,
		body => encode_json({ type => 'MODIFIED', object => $obj }) . "\n");
	$fake->cut_watches('end', 'frameworks');
	ok(wait_log($node, qr/WARNING:  paidb framework watcher skipped the MODIFIED event of "nscjob1": taskRoleStatusesCompressed decompresses to more than paidb.max_object_bytes/, $off),
		'the event is skipped with a WARNING naming the framework');
	my $st = watcher_status();
	cmp_ok($st->{errors}, '>', $errors, 'counted in status()');
	like($st->{last_error}, qr/"nscjob1": taskRoleStatusesCompressed decompresses to more than/,
		'status() says which object and why');
	ok(poll($node, q{SELECT state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
		'the watcher watches on');
	is(worker_pid($node, 'framework watcher'), $wpid2, 'the framework watcher did not restart');
	is(query($node, q{SELECT count(*) FROM paidb.framework f WHERE name = 'nscjob1'
	                    AND paidb.snapshot(f)->'status'->'attemptStatus' ? 'taskRoleStatusesCompressed'}), '0',
		'nothing of the bomb was stored');
	ok(poll($node, $kept), 'the job is untouched');
}

# ---- 6. every watch answered with 410: LISTs back off
{
	$fake->fault(verb => 'watch', resource => 'frameworks', status => 410, inStream => 'true', count => -1);
	force_relist();
	my $lists = fake_counter($fake, 'list frameworks');
	my $t0 = time();
	usleep(6_000_000);
	my $n = fake_counter($fake, 'list frameworks') - $lists;
	my $secs = time() - $t0;
	cmp_ok($n, '<=', 8, sprintf('a 410 on every watch: %d LISTs in %.1f s (backoff 0.8 s doubling)', $n, $secs));
	cmp_ok($n, '>=', 2, 'but the watcher does keep trying');
	like(watcher_status()->{last_error}, qr/410 Gone \d+ times in a row/, 'status() tells why it waits');
	$fake->clear_faults;
	ok(poll($node, q{SELECT state = 'watching' FROM paidb.status() WHERE worker = 'framework watcher'}),
		'the watcher watches again once the server is sane');
}

# ---- 7. a new API server by reload is a first run: imported, not deleted
# (SPEC §8: the import belongs to the target, API server URL and namespace;
# retain mode is off, so an orphan would be deleted)
{
	my $fake2 = PaidbTest::start_fake(args => [ '--namespace', 'nsc' ]);
	for my $n (1 .. 2)
	{
		is(create_direct('nsc', "srvjob$n", fake => $fake2), 201,
			"framework srvjob$n is created in the second API server");
	}
	$off = -s $node->logfile;
	my $url2 = $fake2->url;
	$node->safe_psql('postgres', "ALTER SYSTEM SET paidb.k8s_api_server = '$url2'");
	$node->reload;
	ok(poll($node, "SELECT current_setting('paidb.k8s_api_server') = '$url2'"), 'paidb.k8s_api_server is the second fake');
	ok(poll($node, q{SELECT count(*) = 2 AND bool_and(request_synced) AND bool_and(namespace = 'nsc')
	            FROM paidb.framework WHERE name LIKE 'srvjob%'}),
		'after a reload to another API server its frameworks are imported as synced jobs');
	ok(wait_log($node, qr/framework watcher: the API server or namespace changed, listing frameworks again/, $off),
		'the watcher noticed the new API server');
	ok(wait_log($node, qr/importing existing frameworks/, $off), 'and imports its frameworks');
	ok(poll($node, q{SELECT count(*) = 2 FROM paidb.framework WHERE name LIKE 'srvjob%' AND state = 'RUNNING'}),
		'the imported jobs follow the new API server (RUNNING)');
	ok($fake2->wait_for_watches(2, $PaidbTest::WAIT), 'both watchers watch the new API server');
	# the sync worker works on against the new API server before we look
	# for deletes (an orphan would have been deleted by now)
	my $name = job_name('bob', 'after-switch');
	submit($node, job_request($name, run_seconds => 'inf'));
	ok(poll($node, "SELECT state = 'RUNNING' AND request_synced FROM paidb.framework WHERE name = '$name'"),
		'a job submitted after the switch runs in the new API server');
	ok(exists_direct('nsc', $name, $fake2), 'it was created there');
	is(query($node, q{SELECT count(*) FROM paidb.orphan WHERE name LIKE 'srvjob%'}), '0',
		'no framework of the new API server was taken for an orphan');
	is($fake2->counters->{requests}{'delete frameworks'} // 0, 0, 'no framework was deleted in it');
	ok(exists_direct('nsc', 'srvjob1', $fake2) && exists_direct('nsc', 'srvjob2', $fake2),
		'its frameworks are still there');
	$fake2->stop;
}

# ---- no crash, no restart of a worker
unlike(log_since($node, $restarted), qr/background worker "paidb [a-z ]+" \(PID \d+\) exited/,
	'no paidb worker exited since the restart');
is(join("\n", crash_lines($node)), '', 'no process crashed');

$node->stop;
$fake->stop;
done_testing();
